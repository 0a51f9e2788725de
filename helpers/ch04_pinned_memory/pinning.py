"""Pinning host memory: cudaHostAlloc vs cudaHostRegister, what each costs, and its limits.

Two ways to get page-locked memory the GPU's copy engines can DMA from:

- cudaHostAlloc: the CUDA library maps fresh memory (by default a shared anonymous mapping,
  listed as `/dev/zero (deleted)` in /proc/self/maps) and asks the NVIDIA module to pin it
  (`PinnedAlloc`). Write-combined memory is the exception: the module allocates those pages
  itself and maps them through /dev/nvidiactl (see host_mappings).
- cudaHostRegister: memory the process already has (an anonymous mmap, a file in /dev/shm,
  a NumPy buffer) is pinned in place (`Registration`). This answers source question 002's
  "can my mmapped region be used as if it were cudaMallocHost'ed?".

Both pins go through the module's OS-descriptor path (open-gpu-kernel-modules:
src/nvidia/arch/nvalloc/unix/src/escape.c, RmCreateOsDescriptor -> kernel-open/nvidia/
os-mlock.c, os_lock_user_pages -> the kernel's pin_user_pages), not mlock(2), so
RLIMIT_MEMLOCK is not what limits them: `memlock_probe` measures what really happens in a
child process with a lowered limit. `time_register` is the measuring function the chapter
shows (the default `code` of pinning.cost_vs_size).

Every wrapper is a context manager and frees in `close()` (also from `finally` blocks of the
experiments): pinned memory that leaks out of a cell stays locked until the kernel restarts.

A request that cannot work as asked (a misaligned or foreign pointer, an unknown flag, a size
that is not whole pages) raises PinRequestError, an InputError, before CUDA is touched; a
well-formed request the driver or the probe's child process fails raises PinningError.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile
import time

import numpy as np

from helpers.core import experiments, gpu, validate
from helpers.core.errors import CourseError, InputError, SystemInfoError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU
from helpers.core.gpu import cp
from helpers.core.progress import Progress
from helpers.core.resources import Closing
from helpers.measure.host_memory import check_nbytes, host_array, pinned_bytes_of_process
from helpers.measure.sysinfo import fmt_bytes

PAGE = mmap.PAGESIZE

# cudaHostAlloc flags (cuda_runtime_api.h: cudaHostAllocDefault, ...Portable, ...Mapped, ...WriteCombined)
ALLOC_FLAGS = {"default": 0, "portable": 1, "mapped": 2, "write_combined": 4}
# cudaHostRegister flags (cudaHostRegisterDefault, ...Portable, ...Mapped, ...IoMemory, ...ReadOnly)
REGISTER_FLAGS = {"default": 0, "portable": 1, "mapped": 2, "io_memory": 4, "read_only": 8}
REGION_KINDS = ("anonymous-private", "anonymous-shared", "dev-shm-file", "disk-file")


class PinRequestError(InputError):
    """A pinning request that cannot work as asked: a misaligned, foreign or unpinned pointer, a
    size that is not whole pages, a size that was not measured. Raised before CUDA is called."""


class PinningError(CourseError):
    """A well-formed pinning request failed: the driver said no, or the probe's child process
    failed or ran out of time."""


def _flags(names: tuple[str, ...] | str, table: dict[str, int], what: str) -> int:
    names = (names,) if isinstance(names, str) else tuple(names)
    value = 0
    for n in names:
        value |= table[validate.choice(n, f"{what} flag", table)]
    return value


def whole_pages(nbytes: int, what: str) -> int:
    """`nbytes` if it is a whole number of pages, else PinRequestError (pinning works on pages)."""
    if nbytes % PAGE:
        raise PinRequestError(f"{what}: size {nbytes} is not a whole number of {PAGE}-byte pages")
    return nbytes


def page_sizes(lo: int, hi: int) -> validate.Validator:
    """A parameter validator: a byte size in [lo, hi] that is a whole number of pages."""
    return validate.Rule(lambda v, what: whole_pages(validate.byte_size(v, what, lo, hi), what),
                         f"a byte size from {lo} to {hi} that is a whole number of pages")


def cuda_error_name(exc: BaseException) -> str:
    """'cudaErrorInvalidValue' from a CuPy CUDARuntimeError (or the exception's first words)."""
    text = str(exc).strip()
    return text.split(":")[0] if text.startswith("cudaError") else f"{type(exc).__name__}: {text[:120]}"


# ---------------------------------------------------------------------------- validation

def mapped_ranges(maps: str = "/proc/self/maps") -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, path) of every mapping of this process, from /proc/self/maps."""
    out = []
    with open(maps) as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""))
    return out


def check_region(ptr, nbytes, *, maps: str = "/proc/self/maps") -> tuple[int, int]:
    """Validate a region for cudaHostRegister; return (ptr, nbytes) or raise.

    A pointer or size of the wrong kind raises InputTypeError, a non-positive one InputError,
    and everything below PinRequestError.

    The course insists on what the driver would otherwise round silently: a page-aligned
    start and a whole number of pages (pinning works on pages, so an unaligned request pins
    its neighbours too), and a range this process really has mapped readable (a foreign or
    freed pointer is refused here, with its address, instead of by an opaque CUDA error).
    """
    ptr = validate.whole_number(ptr, "register: the address", lo=1)
    n = validate.byte_size(nbytes, "register: size")
    if ptr % PAGE:
        raise PinRequestError(f"register: address {ptr:#x} is not page-aligned ({PAGE}-byte pages); "
                              f"the driver pins whole pages, so start at {ptr - ptr % PAGE:#x} or use mmap")
    whole_pages(n, "register")
    pos, end = ptr, ptr + n
    for lo, hi, perms, _ in sorted(mapped_ranges(maps)):
        if hi <= pos or lo > pos:
            continue
        if "r" not in perms:
            raise PinRequestError(f"register: {pos:#x} lies in a mapping without read permission ({perms})")
        pos = hi
        if pos >= end:
            return ptr, n
    raise PinRequestError(f"register: {pos:#x} (in {ptr:#x}..{end:#x}) is not mapped in this process; "
                          "the pointer is foreign or was freed")


def is_pinned(ptr: int) -> bool:
    """True when CUDA regards this address as page-locked host memory (cudaPointerGetAttributes)."""
    cp = gpu.cupy()
    try:
        attrs = cp.cuda.runtime.pointerGetAttributes(int(ptr))
    except cp.cuda.runtime.CUDARuntimeError:
        return False
    return int(attrs.type) == int(cp.cuda.runtime.memoryTypeHost)


def device_pointer(ptr: int) -> int:
    """The address a kernel uses for pinned host memory at `ptr` (cudaHostGetDevicePointer's answer).

    On 64-bit Linux with unified addressing it is the host address itself; asking CUDA keeps
    the helper honest where that does not hold.
    """
    cp = gpu.cupy()
    try:
        attrs = cp.cuda.runtime.pointerGetAttributes(int(ptr))
    except cp.cuda.runtime.CUDARuntimeError as exc:
        raise PinRequestError(f"{ptr:#x} is not memory CUDA knows ({cuda_error_name(exc)})") from None
    if int(attrs.type) != int(cp.cuda.runtime.memoryTypeHost) or not attrs.devicePointer:
        raise PinRequestError(f"{ptr:#x} is not pinned, mapped host memory; allocate it with "
                           "PinnedAlloc(..., flags='mapped') or register it with flags='mapped'")
    return int(attrs.devicePointer)


# ---------------------------------------------------------------------------- allocations

class PinnedAlloc(Closing):
    """cudaHostAlloc'ed memory (`flags`: default, portable, mapped, write_combined), freed by close()."""

    def __init__(self, nbytes: int, flags: tuple[str, ...] | str = "default", *, fill: int | None = 0) -> None:
        self.nbytes = check_nbytes(nbytes, "cudaHostAlloc")
        self.flags = _flags(flags, ALLOC_FLAGS, "cudaHostAlloc")
        cp = gpu.cupy()
        self.ptr = None
        try:
            self.ptr = int(cp.cuda.runtime.hostAlloc(self.nbytes, self.flags))
        except cp.cuda.runtime.CUDARuntimeError as exc:
            raise PinningError(f"cudaHostAlloc of {fmt_bytes(self.nbytes)} failed: {exc}") from None
        self.array = host_array(self.ptr, self.nbytes)
        if fill is not None:
            self.array.fill(fill)

    def close(self) -> None:
        """cudaFreeHost now (idempotent)."""
        if self.ptr is not None:
            self.array = None
            gpu.cupy().cuda.runtime.freeHost(self.ptr)
            self.ptr = None


class Region(Closing):
    """An mmap'd host region of one kind (see REGION_KINDS), as a process might already have one.

    - anonymous-private / anonymous-shared: mmap(MAP_ANONYMOUS) memory;
    - dev-shm-file: a file in /dev/shm (tmpfs, shared memory between processes) mapped MAP_SHARED;
    - disk-file: a file in `directory` (default: the system temp dir) mapped MAP_SHARED.
    `read_only=True` maps it PROT_READ. The file, if any, is deleted by close().
    """

    def __init__(self, nbytes: int, kind: str = "anonymous-private", *, read_only: bool = False,
                 directory: str | None = None) -> None:
        validate.choice(kind, "region kind", REGION_KINDS)
        self.nbytes = whole_pages(check_nbytes(nbytes, f"{kind} region"), f"{kind} region")
        self.kind, self.read_only, self.path = kind, read_only, None
        prot = mmap.PROT_READ | (0 if read_only else mmap.PROT_WRITE)
        if kind.startswith("anonymous"):
            share = mmap.MAP_SHARED if kind == "anonymous-shared" else mmap.MAP_PRIVATE
            self._mmap = mmap.mmap(-1, self.nbytes, flags=share | mmap.MAP_ANONYMOUS, prot=prot)
        else:
            where = "/dev/shm" if kind == "dev-shm-file" else (directory or tempfile.gettempdir())
            if not os.path.isdir(where):
                cls = PinRequestError if directory else SystemInfoError
                raise cls(f"{kind}: {where} does not exist on this machine")
            fd, self.path = tempfile.mkstemp(prefix="course-pin-", dir=where)
            try:
                os.ftruncate(fd, self.nbytes)
                if read_only:  # give a read-only mapping data to read
                    os.pwrite(fd, b"\xa5" * PAGE, 0)
                self._mmap = mmap.mmap(fd, self.nbytes, flags=mmap.MAP_SHARED, prot=prot)
            finally:
                os.close(fd)
        self.array = np.frombuffer(self._mmap, dtype=np.uint8)
        if not read_only:
            self.array.fill(0xA5)  # touch every page, so pinning does not also pay first-touch faults
        self.ptr = int(self.array.ctypes.data)

    @property
    def filesystem(self) -> str:
        """The filesystem type behind the region ('anonymous' for anonymous memory)."""
        return filesystem_of(self.path) if self.path else "anonymous"

    def close(self) -> None:
        self.array = None
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass
            self._mmap = None
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.path = None


def filesystem_of(path: str, mountinfo: str = "/proc/self/mountinfo") -> str:
    """Filesystem type of the mount holding `path` (longest mount-point prefix)."""
    path = os.path.realpath(path)
    best, fstype = "", "unknown"
    with open(mountinfo) as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mnt = left.split()[4]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, right.split()[0]
    return fstype


class Registration(Closing):
    """cudaHostRegister of an existing region, undone by close() (cudaHostUnregister)."""

    def __init__(self, ptr: int, nbytes: int, flags: tuple[str, ...] | str = "default") -> None:
        self.ptr, self.nbytes = check_region(ptr, nbytes)
        check_nbytes(self.nbytes, "cudaHostRegister")
        self.flags = _flags(flags, REGISTER_FLAGS, "cudaHostRegister")
        cp = gpu.cupy()
        self._live = False
        try:
            cp.cuda.runtime.hostRegister(self.ptr, self.nbytes, self.flags)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            raise PinningError(f"cudaHostRegister of {fmt_bytes(self.nbytes)} at {self.ptr:#x} "
                               f"failed: {exc}") from None
        self._live = True

    def close(self) -> None:
        if self._live:
            self._live = False
            gpu.cupy().cuda.runtime.hostUnregister(self.ptr)


def raw_register_outcome(ptr: int, nbytes: int, flags: int = 0) -> str:
    """Call cudaHostRegister with no course checks and undo it: 'ok' or the CUDA error's name.

    Used by the experiment to show what the driver itself answers to requests the helpers
    refuse (an unaligned pointer, a freed one).
    """
    cp = gpu.cupy()
    try:
        cp.cuda.runtime.hostRegister(int(ptr), int(nbytes), int(flags))
    except cp.cuda.runtime.CUDARuntimeError as exc:
        return cuda_error_name(exc)
    cp.cuda.runtime.hostUnregister(int(ptr))
    return "ok"


# ---------------------------------------------------------------------------- cost of pinning

_libc = None


def _mlock(ptr: int, n: int, lock: bool) -> int:
    """mlock/munlock through libc; returns 0 or the errno."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        for fn in (_libc.mlock, _libc.munlock):
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int
    rc = (_libc.mlock if lock else _libc.munlock)(ctypes.c_void_p(ptr), ctypes.c_size_t(n))
    return 0 if rc == 0 else ctypes.get_errno()


def time_register(nbytes: int, repeats: int) -> dict:
    """Median seconds to pin (cudaHostRegister) and unpin (cudaHostUnregister) `nbytes` of
    memory the process already has: an anonymous mmap whose pages exist before the pin."""
    # MAP_POPULATE: the kernel faults every page in now (registering pins pages that exist, it does
    # not fault them in), at once rather than one write per page from here
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
    pages = np.frombuffer(region, dtype=np.uint8)
    pin, unpin = [], []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            cp.cuda.runtime.hostRegister(pages.ctypes.data, nbytes, 0)  # 0: cudaHostRegisterDefault
            t1 = time.perf_counter()
            cp.cuda.runtime.hostUnregister(pages.ctypes.data)
            pin.append(t1 - t0)
            unpin.append(time.perf_counter() - t1)
    finally:
        del pages
        region.close()
    return {"register": float(np.median(pin)), "unregister": float(np.median(unpin))}


def pin_cost(nbytes: int, reps: int = 3, code=time_register) -> dict:
    """Seconds for each step of pinning `nbytes` both ways, median of `reps`.

    alloc / free: cudaHostAlloc and cudaFreeHost of fresh memory;
    register / unregister: `code` (time_register: cudaHostRegister and cudaHostUnregister of a
    populated anonymous mmap); touch: first touch of a new anonymous mmap (page faults: what the
    process pays before it even has memory to register); mlock / munlock: the kernel's own
    page locking of the same kind of region, for comparison (None with the errno when the
    limit forbids it).
    """
    n = check_nbytes(nbytes, "pin cost")
    reps = validate.whole_number(reps, "reps", 1, 100)
    rt = gpu.cupy().cuda.runtime
    steps = {k: [] for k in ("alloc", "free", "touch", "mlock", "munlock")}
    mlock_error = None
    for _ in range(reps):
        ptr = None
        try:
            t0 = time.perf_counter()
            ptr = rt.hostAlloc(n, 0)
            t1 = time.perf_counter()
            rt.freeHost(ptr)
            ptr = None
            t2 = time.perf_counter()
        finally:
            if ptr is not None:
                rt.freeHost(ptr)
        steps["alloc"].append(t1 - t0)
        steps["free"].append(t2 - t1)
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        a = np.frombuffer(m, dtype=np.uint8)
        try:
            t0 = time.perf_counter()
            a[::PAGE] = 1
            steps["touch"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            err = _mlock(a.ctypes.data, n, True)
            t1 = time.perf_counter()
            if err:
                mlock_error = os.strerror(err)
            else:
                _mlock(a.ctypes.data, n, False)
                steps["mlock"].append(t1 - t0)
                steps["munlock"].append(time.perf_counter() - t1)
        finally:
            del a
            m.close()
    out = {k: (float(np.median(v)) if v else None) for k, v in steps.items()}
    out.update(code(n, reps))
    out.update(nbytes=n, reps=reps, mlock_error=mlock_error)
    return out


LARGEST_COST_SIZE = 4 << 30


def cost_sizes(quick: bool, largest: int = LARGEST_COST_SIZE) -> list[int]:
    """4 KiB to `largest` (4 GiB) in steps of 4x (to 64 MiB at most when quick)."""
    hi = min(largest, 64 << 20) if quick else largest
    return [4096 << (2 * k) for k in range(20) if (4096 << (2 * k)) <= hi]


def reps_for(nbytes: int) -> int:
    """Repetitions per size: 7 below 64 MiB, 3 to 1 GiB, one at 1 GiB and above. A pin of 1 GiB
    or more takes 50 ms to seconds, so the clock's resolution and one-off jitter no longer move it:
    on the H100 (2026-11-21, two repetitions each) the per-byte cost of every step at 1 GiB and at
    4 GiB agreed within 3%, so a second repetition bought nothing for its 8 s."""
    return 1 if nbytes >= (1 << 30) else 3 if nbytes >= (64 << 20) else 7


@experiments.experiment("pinning.cost_vs_size", chapter=4, needs=(GPU,),
                        title="Time to pin and unpin 4 KiB..4 GiB: cudaHostAlloc/FreeHost, "
                              "cudaHostRegister/Unregister, mlock/munlock",
                        params={"largest": validate.size(PAGE, LARGEST_COST_SIZE)})
def record_cost_vs_size(quick: bool, largest: int = LARGEST_COST_SIZE, code=time_register) -> dict:
    sizes = cost_sizes(quick, largest)
    bar = Progress(len(sizes), "pin/unpin sizes")
    rows, skipped = [], {}
    for n in sizes:
        try:
            check_nbytes(n, "pin cost")
        except InputError as exc:  # too large for this machine's free memory: say so, go on
            skipped[str(n)] = str(exc)
            bar.step(f"{fmt_bytes(n)} skipped")
            continue
        reps = 1 if quick else reps_for(n)
        rows.append(pin_cost(n, reps, code))
        bar.step(fmt_bytes(n))
    return {"rows": rows, "skipped": skipped, "page_size": PAGE,
            "locked_after": pinned_bytes_of_process()}


# ---------------------------------------------------------------------------- copies from a pointer

def time_copy(host_ptr: int, nbytes: int, direction: str = "h2d", *, reps: int = 5,
              warmup: int = 1, timeout_s: float = 30.0) -> float:
    """Median seconds of `reps` event-timed copies between host memory at `host_ptr` and the GPU.

    Works for any host pointer (pageable, registered, cudaHostAlloc'ed, write-combined): the
    driver decides from the pointer whether it can DMA directly or must stage.
    """
    from helpers.measure.transfers import time_copies

    validate.choice(direction, "direction", ("h2d", "d2h"))
    gpu.cupy()
    return float(np.median(time_copies(host_ptr, int(nbytes), direction, reps=reps, warmup=warmup,
                                       timeout_s=timeout_s)))


# ---------------------------------------------------------------------------- can my region be pinned?

def _register_case(region: Region, flags: str, n: int) -> dict:
    """Register one region, record what CUDA says and how fast it then copies; always unregisters."""
    case = {"kind": region.kind, "filesystem": region.filesystem, "read_only": region.read_only,
            "flags": flags, "pinned_before": is_pinned(region.ptr)}
    try:
        reg = Registration(region.ptr, n, flags)
    except PinningError as exc:  # the driver refused this region: that is the outcome
        reason = str(exc).split("failed: ")[-1]
        case.update(outcome=reason.split(":")[0] if reason.startswith("cudaError") else reason,
                    h2d_s=None)
        return case
    try:
        case["outcome"] = "ok"
        case["pinned_during"] = is_pinned(region.ptr)
        try:
            case["device_pointer_is_host_address"] = device_pointer(region.ptr) == region.ptr
        except PinRequestError:
            case["device_pointer_is_host_address"] = None
        case["h2d_s"] = time_copy(region.ptr, n, "h2d")
    finally:
        reg.close()
    case["pinned_after"] = is_pinned(region.ptr)
    return case


def driver_answers(n: int = 1 << 20) -> dict:
    """What cudaHostRegister itself answers to requests the course's helpers refuse first."""
    cp = gpu.cupy()
    out = {}
    raw = np.empty(n + 2 * PAGE, dtype=np.uint8)  # malloc'ed by NumPy: no page alignment promised
    base = raw.ctypes.data
    out["unaligned (malloc'ed NumPy buffer + 8 B)"] = raw_register_outcome(base + 8 - base % 8, n)
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ptr = np.frombuffer(m, dtype=np.uint8).ctypes.data
    m.close()
    out["unmapped (an mmap already munmap'ed)"] = raw_register_outcome(ptr, n)
    with Region(n) as r:
        cp.cuda.runtime.hostRegister(r.ptr, n, 0)
        try:
            out["the same region registered twice"] = raw_register_outcome(r.ptr, n)
        finally:
            cp.cuda.runtime.hostUnregister(r.ptr)
        try:
            cp.cuda.runtime.hostUnregister(r.ptr)
            out["unregister of a region never registered"] = "ok"
        except cp.cuda.runtime.CUDARuntimeError as exc:
            out["unregister of a region never registered"] = cuda_error_name(exc)
    del raw
    return out


REGISTER_SIZE = 256 << 20


@experiments.experiment("pinning.register_regions", chapter=4, needs=(GPU,),
                        title="cudaHostRegister of anonymous, /dev/shm and file-backed mmaps: "
                              "outcome and copy speed vs pageable and cudaHostAlloc",
                        params={"nbytes": page_sizes(PAGE, 1 << 30)})
def record_register_regions(quick: bool, nbytes: int = REGISTER_SIZE) -> dict:
    n = min(nbytes, 4 << 20) if quick else nbytes
    cases = []
    bar = Progress(len(REGION_KINDS) + 4, "regions")
    with Region(n) as r:
        pageable_s = time_copy(r.ptr, n, "h2d")
    bar.step("pageable")
    with PinnedAlloc(n) as p:
        alloc_s = time_copy(p.ptr, n, "h2d")
    bar.step("cudaHostAlloc")
    for kind in REGION_KINDS:
        with Region(n, kind) as r:
            cases.append(_register_case(r, "default", n))
        bar.step(kind)
    for flags in ("default", "read_only"):
        with Region(n, "dev-shm-file", read_only=True) as r:
            cases.append(_register_case(r, flags, n))
        bar.step(f"read-only mapping, {flags}")
    return {"nbytes": n, "pageable_h2d_s": pageable_s, "hostalloc_h2d_s": alloc_s, "cases": cases,
            "driver_answers": driver_answers(), "locked_after": pinned_bytes_of_process()}


# ---------------------------------------------------------------------------- figures, tables, verdicts

STEP_LABEL = {"alloc": "cudaHostAlloc", "free": "cudaFreeHost", "touch": "first touch of a new mmap",
              "register": "cudaHostRegister", "unregister": "cudaHostUnregister",
              "mlock": "mlock(2)", "munlock": "munlock(2)"}


def cost_figure(ev: Evidence):
    """Time of each pinning step vs size, log-log, in microseconds (ev: pinning.cost_vs_size)."""
    import plotly.graph_objects as go

    from helpers.presentation import figures

    rows = ev.require()["rows"]
    fig = go.Figure()
    dash = {"free": "dot", "unregister": "dot", "munlock": "dot", "touch": "dash"}
    for step, label in STEP_LABEL.items():
        pts = [(r["nbytes"], r[step] * 1e6) for r in rows if r.get(step) is not None]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], name=label, mode="lines+markers",
                            line={"dash": dash.get(step, "solid")})
    fig.update_layout(title="What pinning and unpinning cost, by size", yaxis={"type": "log", "title": "time (µs, log scale)"},
                      legend={"orientation": "h", "y": -0.3})
    figures.log_size_axis(fig, "buffer size")
    return figures.CourseFigure(fig, ev.parts)


def row_at(data: dict, nbytes: int) -> dict:
    """The pin-cost row of exactly `nbytes` (PinRequestError if that size was not measured)."""
    for r in data["rows"]:
        if r["nbytes"] == nbytes:
            return r
    raise PinRequestError(f"no pin-cost measurement at {nbytes} bytes; have {[r['nbytes'] for r in data['rows']]}")


def cost_rows(data: dict) -> list[tuple]:
    """(size, alloc, free, register, unregister, mlock ms; register GB/s) per measured size."""
    def ms(v):
        return "—" if v is None else f"{v * 1e3:.3f}"
    return [(fmt_bytes(r["nbytes"]), ms(r["alloc"]), ms(r["free"]), ms(r["register"]), ms(r["unregister"]),
             ms(r["mlock"]), f"{r['nbytes'] / r['register'] / 1e9:.1f}") for r in data["rows"]]


def cost_summary(data: dict) -> str:
    """Fixed cost (smallest size) and rate (largest size) of each way to pin, from the numbers."""
    small, big = data["rows"][0], data["rows"][-1]
    out = [f"smallest size ({fmt_bytes(small['nbytes'])}): cudaHostAlloc+cudaFreeHost "
           f"{(small['alloc'] + small['free']) * 1e6:.0f} µs, cudaHostRegister+Unregister "
           f"{(small['register'] + small['unregister']) * 1e6:.0f} µs"]
    for name, a, b in (("cudaHostAlloc + cudaFreeHost", "alloc", "free"),
                       ("cudaHostRegister + cudaHostUnregister", "register", "unregister"),
                       ("mlock + munlock", "mlock", "munlock")):
        if big.get(a) is not None:
            t = big[a] + big[b]
            out.append(f"{fmt_bytes(big['nbytes'])}: {name} {t * 1e3:.1f} ms = {big['nbytes'] / t / 1e9:.1f} GB/s pinned")
    return "\n".join(out)


def register_rows(data: dict) -> list[tuple]:
    """(region, filesystem, flags, outcome, pinned during/after, H2D GB/s) per case."""
    n = data["nbytes"]
    rows = [("pageable (not registered)", "anonymous", "—", "—", "no", f"{n / data['pageable_h2d_s'] / 1e9:.1f}"),
            ("cudaHostAlloc", "—", "default", "ok", "yes", f"{n / data['hostalloc_h2d_s'] / 1e9:.1f}")]
    for c in data["cases"]:
        name = c["kind"] + (", mapped read-only" if c["read_only"] else "")
        pinned = ("yes" if c.get("pinned_during") else "no") + (" → no after unregister" if c.get("outcome") == "ok"
                                                               and not c.get("pinned_after") else "")
        bw = "—" if c.get("h2d_s") is None else f"{n / c['h2d_s'] / 1e9:.1f}"
        rows.append((name, c["filesystem"], c["flags"], c["outcome"], pinned, bw))
    return rows


# What the course's check_region does with each request driver_answers records, and why it may be
# stricter than the driver. The module itself accepts only page-aligned addresses (RmCreateOsDescriptor
# in src/nvidia/arch/nvalloc/unix/src/escape.c returns NV_ERR_NOT_SUPPORTED otherwise), so an
# unaligned cudaHostRegister that the driver answers "ok" was rounded out to whole pages by libcuda
# before the ioctl (inferred: libcuda is closed source).
HELPER_STANCE = {
    "unaligned": ("refuses", "libcuda must have rounded the range out to whole pages, since the NVIDIA module accepts "
                             "only page-aligned addresses; so the pages around the buffer are pinned too, with "
                             "whatever else shares them; the helper refuses so that what is pinned is exactly what you "
                             "asked for"),
    "unmapped": ("refuses", "the range is not mapped in this process: the helper names the address instead of an "
                            "opaque CUDA error"),
    "registered twice": ("leaves it to the driver", "CUDA tracks registrations itself"),
    "never registered": ("leaves it to the driver", "CUDA tracks registrations itself"),
}


def helper_vs_driver(driver_answers: dict) -> list[str]:
    """One line per recorded driver answer: what the course's helper does with the same request, and
    whether it is stricter than the driver (it is, where the driver said "ok" and the helper refuses)."""
    lines = []
    for what, answer in driver_answers.items():
        key = next((k for k in HELPER_STANCE if k in what), None)
        if key is None:
            lines.append(f"{what}: driver {answer}")
            continue
        stance, why = HELPER_STANCE[key]
        stricter = stance == "refuses" and answer == "ok"
        verdict = "the helper is stricter than the driver" if stricter else f"the helper {stance}"
        lines.append(f"{what}: driver {answer}; {verdict} — {why}.")
    return lines


REGISTERED_SAME = 0.10  # registered vs cudaHostAlloc copy bandwidth: "as fast" within ±10 %


def register_verdict(data: dict) -> str:
    """Source question 002's question — can an existing mmapped region be treated as pinned? — from the cases."""
    n = data["nbytes"]
    alloc_bw, page_bw = n / data["hostalloc_h2d_s"], n / data["pageable_h2d_s"]
    lines, ratios = [], []
    for c in data["cases"]:
        name = c["kind"] + (" (read-only mapping, flags=" + c["flags"] + ")" if c["read_only"] else "")
        if c["outcome"] != "ok":
            lines.append(f"{name}: NO — cudaHostRegister answered {c['outcome']}")
            continue
        bw = n / c["h2d_s"]
        lines.append(f"{name}: yes — copies at {bw / 1e9:.1f} GB/s = {bw / alloc_bw:.2f}x cudaHostAlloc memory, "
                     f"{bw / page_bw:.2f}x the same memory unregistered")
        ratios.append(bw / alloc_bw)
    if ratios:
        lo, hi = min(ratios), max(ratios)
        same = 1 - REGISTERED_SAME <= lo and hi <= 1 + REGISTERED_SAME
        lines.append(f"registered memory copies at {lo:.2f}x..{hi:.2f}x the speed of cudaHostAlloc memory: "
                     + (f"as fast, within ±{REGISTERED_SAME:.0%}" if same else
                        f"not within ±{REGISTERED_SAME:.0%} of it in every case (each is the median of a few copies "
                        "timed one case after another, so a change in the link's or the host's load between cases "
                        "shows up here too)"))
    return "\n".join(lines)


def cost_beside(here: Evidence, ref: Evidence, nbytes: int = 1 << 30) -> list[str]:
    """Pinning 1 GiB (cudaHostRegister, cudaHostAlloc) measured now beside the reference's; pinning is CPU work
    in the kernel, so a difference is named with the host's likely causes (replay: the recorded values)."""
    from helpers.presentation import beside

    mine, theirs = row_at(here.require(), nbytes), row_at(ref.require(), nbytes)
    return [beside.sentence(f"{call} of {fmt_bytes(nbytes)}", "ms", here, beside.Value(mine[key] * 1e3), ref,
                            beside.Value(theirs[key] * 1e3), "driver")
            for key, call in (("register", "cudaHostRegister"), ("alloc", "cudaHostAlloc"))]
