"""Chapter 0's experiments: host<->device copies from pageable and pinned memory, timed with
CUDA events. `time_copy` is the measuring function the page shows (and the learner may change);
`transfers.large_copy` uses the course's shared primitives (helpers.measure.transfers).

`transfers.pinned_vs_pageable` sweeps powers of two from `lo` to `hi` bytes, each direction,
each host kind; Chapter 0 runs it at one size (lo = hi), Chapter 3 fits the copy-cost model to
the whole recorded sweep. `transfers.large_copy` keeps every repetition of a 256 MiB copy, for
Lab 2's benchmark and the recorder's cross-check.
"""

from __future__ import annotations

import math

import numpy as np

from helpers.core import gpu, validate
from helpers.core.errors import InputTypeError
from helpers.core.experiments import experiment
from helpers.core.gpu import cp, cupyx
from helpers.core.progress import Progress
from helpers.measure.transfers import (
    DIRECTIONS,
    TransferResult,
    adaptive_reps,
    measure_copy,
    results_to_series,
    sweep_sizes,
    wait_event,
)

SWEEP_LO, SWEEP_HI = 4, 256 << 20  # the recorded sweep: 4 B to 256 MiB
QUICK_HI = 16 << 20  # the recorder's smoke test stops at 16 MiB
MAX_SIZE = 1 << 30  # a learner's sweep may go to 1 GiB (host and device memory permitting)
HOST_KINDS = ("pageable", "pinned")


def time_copy(nbytes: int, direction: str, pinned: bool, repeats: int) -> list[float]:
    """Seconds per copy of `nbytes` between host memory and the GPU, timed on the GPU's clock."""
    host = cupyx.empty_pinned(nbytes, dtype=np.uint8) if pinned else np.ones(nbytes, dtype=np.uint8)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    rt = cp.cuda.runtime
    dst, src, kind = ((dev.data.ptr, host.ctypes.data, rt.memcpyHostToDevice) if direction == "h2d"
                      else (host.ctypes.data, dev.data.ptr, rt.memcpyDeviceToHost))
    stream = cp.cuda.Stream(non_blocking=True)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(3 + repeats):  # the first 3 copies warm up (driver set-up) and are dropped
        start.record(stream)
        rt.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
        end.record(stream)
        wait_event(end, timeout_s=30)  # like end.synchronize(), but gives up after 30 s
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)  # milliseconds -> seconds
    return times[3:]


def check_range(params: dict) -> None:
    """lo and hi together: a range that holds at least one power of two (checked before any run)."""
    sweep_sizes(params.get("lo", SWEEP_LO), params.get("hi", SWEEP_HI))


def checked_times(times, name: str, nbytes: int, direction: str) -> list[float]:
    """The seconds a copy-timing function returned, refused unless a non-empty list of positive
    finite numbers (a learner's changed function is told what it returned)."""
    what = f"{name}({nbytes}, {direction!r}, ...)"
    if isinstance(times, (str, bytes)) or not hasattr(times, "__len__") or len(times) == 0:
        raise InputTypeError(f"{what} must return a non-empty list of seconds, got {times!r:.80}")
    try:
        out = [float(t) for t in times]
    except (TypeError, ValueError):
        raise InputTypeError(f"{what} must return numbers (seconds), got {times!r:.80}") from None
    if not all(math.isfinite(t) and t > 0 for t in out):
        raise InputTypeError(f"{what} returned a time that is not a positive number of seconds: {out[:5]}")
    return out


@experiment("transfers.pinned_vs_pageable", chapter=0,
            title="Host<->device copy time vs size, pageable and pinned, 4 B to 256 MiB",
            params={"lo": validate.size(1, MAX_SIZE), "hi": validate.size(1, MAX_SIZE)},
            params_check=check_range)
def record_pinned_vs_pageable(quick: bool, lo: int = SWEEP_LO, hi: int = SWEEP_HI, code=time_copy) -> dict:
    """Median event-timed copy time of every power of two in [lo, hi] bytes, both directions,
    pageable and pinned, each measured by `code` (the page's time_copy; repetitions adapt to the
    size: more for small copies)."""
    sizes = sweep_sizes(lo, max(lo, min(hi, QUICK_HI)) if quick else hi)
    bar = Progress(len(sizes) * len(DIRECTIONS) * len(HOST_KINDS), "copies")
    results = []
    for kind in HOST_KINDS:
        for d in DIRECTIONS:
            for n in sizes:
                times = code(n, d, kind == "pinned", 5 if quick else adaptive_reps(n))
                results.append(TransferResult(direction=d, host_kind=kind, nbytes=n,
                                              times_s=checked_times(times, code.__name__, n, d), warmup=3))
                gpu.release_pools()  # hand each size's pinned and device buffers back before the next
                bar.step(f"{kind} {d} {n} B")
    return results_to_series(results)


@experiment("transfers.large_copy", chapter=0,
            title="256 MiB pinned copies, many repetitions (cross-checked against helpers/measure/bwcheck)")
def record_large_copy(quick: bool) -> dict:
    """Every repetition of a 256 MiB copy, per host kind and direction."""
    n = (16 << 20) if quick else (256 << 20)
    out = {}
    for kind in ("pinned", "pageable"):
        for d in DIRECTIONS:
            r = measure_copy(n, d, kind, reps=5 if quick else 30, warmup=3)
            out[f"{kind}/{d}"] = {"nbytes": n, "times_s": r.times_s, "bandwidth_gbps": r.bandwidth_gbps}
    return out
