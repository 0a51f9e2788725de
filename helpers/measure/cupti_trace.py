"""CUPTI activity records: the GPU's own account of which hardware channel ran each copy and
kernel, and when, in device nanoseconds. The course's one way to take them.

CUPTI (the CUDA Profiling Tools Interface) ships on PyPI as `cupti-python` (the bindings),
`nvidia-cuda-cupti` (libcupti itself) and `pyelftools` (without which `import cupti` fails).
Its Activity API hands back one record per copy, kernel or memset, carrying the stream it was
issued on, the channel (the hardware queue the driver pushed it into) and the channel's type
(compute or async copy engine). Chapter 7 reads the channels, Chapter 3b the overlap of two
copies, Chapter 9 the pipeline's timeline.

Use:

    if (why := cupti_trace.unavailable_reason()) is None:
        with cupti_trace.trace() as tr:
            ...                      # queue work; synchronize your streams before leaving
        tr.records                   # list of plain dicts, sorted by start

Activity collection is process-global in CUPTI: while a trace is open, work that *other
threads* of this process queue is recorded too and kept (the records carry their stream, so a
caller can filter). Only one trace may be open at a time; a second raises TraceBusyError.
Nothing here imports cupti at module import time, and `unavailable_reason()` never raises.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from helpers.core.errors import CourseError, InputError, NoGPUError, SkipExperiment

KINDS = ("memcpy", "kernel", "memset")
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "")
CHANNEL_TYPES = ("compute", "async_memcpy", "other")
RECORD_FIELDS = ("kind", "name", "copy", "bytes", "stream", "channel", "channel_type",
                 "start_ns", "end_ns", "correlation", "device")
BUFFER_BYTES = 8 << 20  # one activity buffer; CUPTI asks for more as it fills them
INSTALL_HINT = "pip install cupti-python nvidia-cuda-cupti pyelftools (`make lab` does it where a driver is found)"

_COPY_NAMES = {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP"}
_CHANNEL_NAMES = {"COMPUTE": "compute", "ASYNC_MEMCPY": "async_memcpy"}
_CHANNEL_VALUES = {1: "compute", 2: "async_memcpy"}  # CUpti_ChannelType, if the enum is absent


class CuptiUnavailableError(NoGPUError):
    """CUPTI cannot trace in this process; the message is unavailable_reason()'s sentence."""


class TraceBusyError(CourseError, RuntimeError):
    """A CUPTI trace is already open in this process (activity collection is process-global)."""


@dataclass
class Trace:
    """What one `trace()` window collected: `t0_ns` is cupti.get_timestamp() at entry (the
    records' clock), `records` is filled on exit, sorted by start."""

    t0_ns: int = 0
    records: list[dict] = field(default_factory=list)


class _State:
    """The process-wide pieces CUPTI's callbacks reach: the open trace's sink and a lock."""

    lock = threading.Lock()
    sink: list[dict] | None = None
    callbacks_registered = False


# ---------------------------------------------------------------- loading and availability


def wheel_libcupti(paths: Iterable[str]) -> str | None:
    """The libcupti shared library from the nvidia-cuda-cupti wheel under one of `paths`
    (site-packages folders): nvidia/cu13/lib (CUDA 13 wheels) or nvidia/cuda_cupti/lib (12)."""
    for base in paths:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib"):
            found = sorted(glob.glob(os.path.join(base, sub, "libcupti.so*")))
            if found:
                return found[0]
    return None


def _preload_libcupti() -> None:
    """Load the wheel's libcupti globally before `import cupti`, so the bindings find it by
    its soname without LD_LIBRARY_PATH. A failure is left for the import to report."""
    path = wheel_libcupti(sys.path)
    if path is not None:
        with contextlib.suppress(OSError):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def _load_cupti() -> ModuleType:
    """cupti.cupti, imported now (tests replace this function with a fake module)."""
    _preload_libcupti()
    return importlib.import_module("cupti.cupti")


def _gpu_reason() -> str | None:
    """Why no CUDA GPU is usable here, or None (the course's one GPU probe)."""
    from helpers.core import gpu

    p = gpu.probe()
    return None if p.usable else p.reason


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _error_text(exc: BaseException, cupti: ModuleType | None = None) -> str:
    """The exception as text, with CUPTI's result name when it carries only a status number
    (cupti-python's cuptiError(status))."""
    text = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
    status = getattr(exc, "status", exc.args[0] if exc.args else None)
    if cupti is not None and isinstance(status, int) and not isinstance(status, bool):
        with contextlib.suppress(Exception):
            text += f" (CUPTI_{cupti.Result(status).name})"
    return text


def _library_missing(text: str) -> bool:
    low = text.lower()
    return ("cupti" in low or "dynamiclib" in low) and any(
        w in low for w in ("not found", "cannot open", "no such file", "notfound", "failed to load"))


def refusal_sentence(exc: BaseException, cupti: ModuleType | None = None) -> str:
    """A learner's sentence for a CUPTI call that failed: libcupti missing, the driver refusing
    profiling to this user, or another refusal quoted."""
    text = _error_text(exc, cupti)
    if _library_missing(text):
        return f"libcupti was not found ({text}); {INSTALL_HINT}"
    if "INSUFFICIENT_PRIVILEGES" in text.upper():
        return ("the driver refuses CUPTI to this user (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): "
                "profiling is restricted to administrators on this machine "
                "(nvidia module option NVreg_RestrictProfilingToAdminUsers=1, usual on shared hubs)")
    return f"the driver refused CUPTI activity tracing ({text})"


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when CUPTI can trace here; otherwise a plain sentence saying why not. Never raises.

    Checked in the order a learner would fix them: the Python packages, a GPU and driver,
    libcupti, then a real (empty) activity window, which is where a driver that forbids
    profiling says so. Cached for the process, like the GPU probe.
    """
    if not _installed("cupti"):
        return f"cupti-python is not installed ({INSTALL_HINT})"
    if not _installed("elftools"):
        return f"pyelftools is missing, and cupti-python cannot be imported without it ({INSTALL_HINT})"
    try:
        why_no_gpu = _gpu_reason()
    except Exception as exc:  # noqa: BLE001 - a probe must answer, not raise
        why_no_gpu = f"{type(exc).__name__}: {exc}"
    if why_no_gpu is not None:
        return f"no usable CUDA GPU or driver here ({why_no_gpu})"
    try:
        cupti = _load_cupti()
    except Exception as exc:  # noqa: BLE001 - OSError, ImportError, RuntimeError from the loader
        text = _error_text(exc)
        if _library_missing(text):
            return f"libcupti was not found ({text}); {INSTALL_HINT}"
        return f"cupti-python cannot be imported ({text})"
    try:
        _empty_window(cupti)
    except Exception as exc:  # noqa: BLE001 - cupti's error class varies between releases
        return refusal_sentence(exc, cupti)
    return None


def _empty_window(cupti: ModuleType) -> None:
    """Open and close an activity window with no work: the call a refusing driver fails."""
    _ensure_callbacks(cupti)
    kind = cupti.ActivityKind.MEMCPY
    cupti.activity_enable(kind)
    try:
        cupti.activity_flush_all(1)
    finally:
        cupti.activity_disable(kind)


# ---------------------------------------------------------------- the trace window


def _ensure_callbacks(cupti: ModuleType) -> None:
    """Register the buffer callbacks once per process; they route records to the open trace."""
    if _State.callbacks_registered:
        return

    def requested():
        return BUFFER_BYTES, 0  # buffer size, no limit on records

    def completed(activities):
        sink = _State.sink
        for act in activities:
            rec = record_from_activity(act, cupti)
            if rec is not None and sink is not None:
                sink.append(rec)

    cupti.activity_register_callbacks(requested, completed)
    _State.callbacks_registered = True


def _kind_enums(cupti: ModuleType, kinds: Sequence[str]) -> list:
    if isinstance(kinds, str) or not kinds:
        raise InputError(f"kinds must be a non-empty list drawn from {KINDS}, not {kinds!r}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise InputError(f"unknown activity kind(s) {bad}: choose from {KINDS}")
    names = {"memcpy": "MEMCPY", "kernel": "CONCURRENT_KERNEL", "memset": "MEMSET"}
    return [getattr(cupti.ActivityKind, names[k]) for k in dict.fromkeys(kinds)]


def skip_unless_available() -> None:
    """For an experiment that needs CUPTI: SkipExperiment with unavailable_reason()'s sentence where CUPTI
    cannot trace (the recorder writes the skip, a page replays and says why); nothing where it can."""
    reason = unavailable_reason()
    if reason is not None:
        raise SkipExperiment(f"CUPTI cannot trace here: {reason}")


@contextlib.contextmanager
def trace(kinds: Sequence[str] = KINDS) -> Iterator[Trace]:
    """Collect CUPTI activity records of `kinds` while the block runs.

    The caller synchronizes its streams before leaving the block (work still running at the
    exit is not recorded). On exit the buffers are flushed, the kinds disabled and
    `Trace.records` filled, sorted by start. Raises CuptiUnavailableError (a NoGPUError) when
    CUPTI cannot trace here, TraceBusyError when another trace is open in this process.
    """
    reason = unavailable_reason()
    if reason is not None:
        raise CuptiUnavailableError(f"CUPTI cannot trace here: {reason}")
    if not _State.lock.acquire(blocking=False):
        raise TraceBusyError("a CUPTI trace is already open in this process; CUPTI's activity "
                             "collection is process-global, so traces cannot nest or run side by side")
    try:
        cupti = _load_cupti()
        enums = _kind_enums(cupti, kinds)
        _ensure_callbacks(cupti)
        yield from _window(cupti, enums)
    finally:
        _State.lock.release()


def _window(cupti: ModuleType, enums: list) -> Iterator[Trace]:
    """Enable, yield, flush, disable. The flush happens even when the block raised, so that
    an aborted window's records cannot reach the next trace's sink."""
    sink: list[dict] = []
    _State.sink = sink
    enabled: list = []
    flushed = False
    try:
        for kind in enums:
            cupti.activity_enable(kind)
            enabled.append(kind)
        tr = Trace(t0_ns=int(cupti.get_timestamp()))
        yield tr
        cupti.activity_flush_all(1)
        flushed = True
        tr.records = sorted(sink, key=lambda r: (r["start_ns"], r["end_ns"], r["correlation"]))
    finally:
        if not flushed:
            with contextlib.suppress(Exception):
                cupti.activity_flush_all(1)
        for kind in enabled:
            with contextlib.suppress(Exception):
                cupti.activity_disable(kind)
        _State.sink = None


# ---------------------------------------------------------------- records


def _enum_name(enum_cls, value) -> str | None:
    try:
        return str(enum_cls(int(value)).name).upper()
    except Exception:  # noqa: BLE001 - an enum value this cupti release does not name
        return None


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def record_from_activity(act, cupti: ModuleType) -> dict | None:
    """One CUPTI activity object as the course's plain record (RECORD_FIELDS), or None for a
    kind the course does not read. Copied out at once: the object lives in CUPTI's buffer."""
    kinds = cupti.ActivityKind
    kind = int(act.kind)
    if kind == int(kinds.MEMCPY):
        copy = _COPY_NAMES.get(_enum_name(cupti.ActivityMemcpyKind, act.copy_kind) or "", "")
        name, nbytes, label = f"memcpy {copy}".strip(), int(act.bytes), "memcpy"
    elif kind in (int(kinds.CONCURRENT_KERNEL), int(getattr(kinds, "KERNEL", -1))):
        copy, name, nbytes, label = "", _text(getattr(act, "name", "")), 0, "kernel"
    elif kind == int(kinds.MEMSET):
        copy, name, nbytes, label = "", "memset", int(act.bytes), "memset"
    else:
        return None
    ctype = getattr(act, "channel_type", 0)
    ch_name = _CHANNEL_NAMES.get(_enum_name(getattr(cupti, "ChannelType", int), ctype) or "")
    return {"kind": label, "name": name, "copy": copy, "bytes": nbytes,
            "stream": int(act.stream_id), "channel": int(getattr(act, "channel_id", 0)),
            "channel_type": ch_name or _CHANNEL_VALUES.get(int(ctype), "other"),
            "start_ns": int(act.start), "end_ns": int(act.end),
            "correlation": int(act.correlation_id), "device": int(act.device_id)}


def check_records(records) -> list[dict]:
    """The records, checked: a list of dicts with RECORD_FIELDS of the right types and
    end >= start. A recording or a learner's list that is not gets an InputError naming it."""
    if not isinstance(records, list | tuple):
        raise InputError(f"CUPTI records must be a list of dicts, not {type(records).__name__}")
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise InputError(f"CUPTI record {i} is a {type(rec).__name__}, not a dict")
        missing = [f for f in RECORD_FIELDS if f not in rec]
        if missing:
            raise InputError(f"CUPTI record {i} lacks {missing}")
        ints = ("bytes", "stream", "channel", "start_ns", "end_ns", "correlation", "device")
        if any(isinstance(rec[f], bool) or not isinstance(rec[f], int) for f in ints):
            raise InputError(f"CUPTI record {i}: {ints} must be whole numbers")
        if rec["kind"] not in KINDS or rec["copy"] not in COPY_KINDS \
                or rec["channel_type"] not in CHANNEL_TYPES:
            raise InputError(f"CUPTI record {i} has an unknown kind, copy or channel_type")
        if rec["end_ns"] < rec["start_ns"]:
            raise InputError(f"CUPTI record {i} ends before it starts")
    return list(records)


# ---------------------------------------------------------------- views (pure)


def lanes(records) -> list[dict]:
    """One lane per (channel_type, channel), ordered compute first then copy channels, each
    with its records in start order: what a per-channel timeline draws."""
    recs = check_records(records)
    order = {t: i for i, t in enumerate(CHANNEL_TYPES)}
    keys = sorted({(r["channel_type"], r["channel"]) for r in recs},
                  key=lambda k: (order[k[0]], k[1]))
    return [{"channel_type": t, "channel": c,
             "records": sorted((r for r in recs if (r["channel_type"], r["channel"]) == (t, c)),
                               key=lambda r: r["start_ns"])} for t, c in keys]


def channels_by_stream(records) -> dict[int, dict[str, list[int]]]:
    """{stream: {"kernel"/"HtoD"/"DtoH"/...: sorted channel ids}}: which channels each stream's
    work of each sort went to."""
    out: dict[int, dict[str, set[int]]] = {}
    for r in check_records(records):
        what = r["copy"] or r["kind"]
        out.setdefault(r["stream"], {}).setdefault(what, set()).add(r["channel"])
    return {s: {w: sorted(c) for w, c in sorted(d.items())} for s, d in sorted(out.items())}


def _interval(x) -> tuple[int, int]:
    if isinstance(x, Mapping):
        start, end = x["start_ns"], x["end_ns"]
    else:
        start, end = x
    if end < start:
        raise InputError(f"an interval ends before it starts: {start}..{end}")
    return int(start), int(end)


def overlap_ns(a, b) -> int:
    """Nanoseconds two intervals (records or (start, end) pairs) run at the same time."""
    (s1, e1), (s2, e2) = _interval(a), _interval(b)
    return max(0, min(e1, e2) - max(s1, s2))


def overlap(a, b) -> dict:
    """Overlap of two intervals: ns, and as a fraction of each one's own duration."""
    ns = overlap_ns(a, b)
    da, db = (e - s for s, e in (_interval(a), _interval(b)))
    return {"ns": ns, "frac_a": ns / da if da else 0.0, "frac_b": ns / db if db else 0.0}


def merged(intervals) -> list[tuple[int, int]]:
    """The union of intervals as disjoint (start, end) pairs in order."""
    out: list[list[int]] = []
    for s, e in sorted(_interval(x) for x in intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def set_overlap(set_a, set_b) -> dict:
    """Overlap of two sets of intervals (e.g. all of stream A's work and all of B's): the ns
    during which both sets have something running, and that as a fraction of each set's busy time."""
    ma, mb = merged(set_a), merged(set_b)
    ns = sum(overlap_ns(x, y) for x in ma for y in mb)
    busy_a, busy_b = (sum(e - s for s, e in m) for m in (ma, mb))
    return {"ns": ns, "frac_a": ns / busy_a if busy_a else 0.0,
            "frac_b": ns / busy_b if busy_b else 0.0}
