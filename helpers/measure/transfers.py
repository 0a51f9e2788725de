"""Timing host<->device copies with CUDA events: the course's basic measurement.

A copy is timed on the GPU's own clock: an event is recorded on a stream before the copy
and another after it, and their difference is the time the device saw. Every measurement
warms up first (the first copy pays for lazy driver setup), repeats, and reports the median
and the minimum. Bandwidth is bytes / median time, in GB/s (1 GB = 1e9 bytes), the unit
NVIDIA's tools use, so the figures can be checked against an independent C program.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from helpers.core import gpu, validate
from helpers.core.errors import DeviceTimeoutError, InputError, InputTypeError
from helpers.core.progress import Progress
from helpers.measure.host_memory import HOST_KINDS, HostBuffer, check_nbytes

DIRECTIONS = ("h2d", "d2h")
MAX_REPS = 10_000
MEMCPY_KIND = {"h2d": 1, "d2h": 2}  # cudaMemcpyKind: cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


@dataclass(kw_only=True)
class TransferResult:
    """Repeated timings of one copy, with what was copied, how, and where."""

    direction: str
    host_kind: str
    nbytes: int
    times_s: list[float]
    warmup: int
    timer: str = "cuda-event"
    mode: str = "live"
    source: str = "this machine"
    extra: dict = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s))

    @property
    def min_s(self) -> float:
        return float(np.min(self.times_s))

    @property
    def bandwidth_gbps(self) -> float:
        """Bytes over the median time, in GB/s (1e9 bytes per second)."""
        return self.nbytes / self.median_s / 1e9

    @property
    def peak_gbps(self) -> float:
        """Bytes over the fastest repetition, in GB/s."""
        return self.nbytes / self.min_s / 1e9

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(median_s=self.median_s, min_s=self.min_s, bandwidth_gbps=self.bandwidth_gbps)
        return d

    def __repr__(self) -> str:
        return (f"<{self.direction} {self.host_kind} {self.nbytes} B: median {self.median_s * 1e6:.1f} us, "
                f"{self.bandwidth_gbps:.2f} GB/s over {len(self.times_s)} reps, {self.mode}>")


def wait_event(event, timeout_s: float, what: str = "GPU work") -> None:
    """Poll a CUDA event until it completes, raising DeviceTimeoutError after timeout_s.

    Polling (with a short sleep once it is clearly not instant) keeps the wait interruptible
    and bounded, where cudaEventSynchronize could block a notebook forever.
    """
    deadline = time.monotonic() + validate.seconds(timeout_s, "timeout_s")
    spins = 0
    while not event.done:
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"{what} did not finish within {timeout_s:.1f} s")
        spins += 1
        if spins > 1000:
            time.sleep(0.0002)


def time_copies(host_ptr: int, nbytes: int, direction: str, *, reps: int, warmup: int,
                timeout_s: float) -> list[float]:
    """Event-timed seconds of `reps` copies (after `warmup` untimed ones) of `nbytes` between the
    host memory at `host_ptr` and a fresh device buffer.

    Each copy is bracketed by two events on a private non-blocking stream and waited for before
    the next starts. Any host pointer works (pageable, pinned, registered, write-combined): the
    driver decides from the pointer whether it can DMA directly or must stage.
    """
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    dev = cp.cuda.memory.Memory(nbytes)  # unpooled: freed as soon as this function returns
    times: list[float] = []
    try:
        src, dst = (host_ptr, dev.ptr) if direction == "h2d" else (dev.ptr, host_ptr)
        for i in range(warmup + reps):
            start.record(stream)
            cp.cuda.runtime.memcpyAsync(dst, src, nbytes, MEMCPY_KIND[direction], stream.ptr)
            end.record(stream)
            wait_event(end, timeout_s, f"a {nbytes}-byte {direction} copy")
            if i >= warmup:
                times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    finally:
        stream.synchronize()
        del dev
    return times


def measure_copy(nbytes: int, direction: str = "h2d", host_kind: str = "pinned", *,
                 reps: int = 20, warmup: int = 3, timeout_s: float = 30.0) -> TransferResult:
    """Time `reps` copies of `nbytes` between a host buffer of `host_kind` and the GPU.

    Each repetition is bracketed by two events on a private non-blocking stream and waited
    for before the next starts, so every time is one whole copy as the device saw it.
    """
    validate.choice(direction, "direction", DIRECTIONS)
    validate.choice(host_kind, "host_kind", HOST_KINDS)
    validate.whole_number(reps, "reps", 1, MAX_REPS)
    validate.whole_number(warmup, "warmup", 0, MAX_REPS)
    validate.seconds(timeout_s, "timeout_s")
    n = check_nbytes(nbytes, f"{direction} copy", host=True, device=True)
    gpu.cupy()  # no GPU: a clear NoGPUError before any host memory is taken
    with HostBuffer(n, host_kind) as host:
        times = time_copies(host.ptr, n, direction, reps=reps, warmup=warmup, timeout_s=timeout_s)
    return TransferResult(direction=direction, host_kind=host_kind, nbytes=n, times_s=times, warmup=warmup)


def sweep(sizes: Iterable[int], directions: Iterable[str] = DIRECTIONS,
          host_kinds: Iterable[str] = ("pageable", "pinned"), *, reps: int | None = None,
          warmup: int = 3, progress: bool = True) -> list[TransferResult]:
    """Measure every (size, direction, host kind) combination; shows progress.

    With reps=None the repetition count adapts to the size (more for small, fast copies).
    """
    try:
        sizes, directions, host_kinds = list(sizes), list(directions), list(host_kinds)
    except TypeError as exc:
        raise InputTypeError(f"sweep needs lists of sizes, directions and host kinds ({exc})") from None
    for what, values in (("size", sizes), ("direction", directions), ("host kind", host_kinds)):
        if not values:
            raise InputError(f"sweep needs at least one {what}")
    for d in directions:
        validate.choice(d, "direction", DIRECTIONS)
    for k in host_kinds:
        validate.choice(k, "host_kind", HOST_KINDS)
    bar = Progress(len(sizes) * len(directions) * len(host_kinds), "copies") if progress else None
    out = []
    for kind in host_kinds:
        for d in directions:
            for n in sizes:
                r = reps if reps is not None else adaptive_reps(n)
                out.append(measure_copy(n, d, kind, reps=r, warmup=warmup))
                if bar:
                    bar.step(f"{kind} {d} {n} B")
    return out


def adaptive_reps(nbytes: int) -> int:
    """Repetitions for a size: 50 for small copies down to 10 for the largest."""
    return int(np.clip(50 * (1 << 20) / max(nbytes, 1), 10, 50))


def sweep_sizes(lo: int = 4, hi: int = 256 << 20) -> list[int]:
    """Powers of two from lo to hi bytes inclusive."""
    lo, hi = validate.byte_size(lo, "lo"), validate.byte_size(hi, "hi")
    if hi < lo:
        raise InputError(f"need lo <= hi, got lo={lo}, hi={hi}")
    # exact integer arithmetic: every power of two in [lo, hi] (log2 of a float rounds)
    sizes = [1 << k for k in range((lo - 1).bit_length(), hi.bit_length()) if lo <= 1 << k <= hi]
    if not sizes:
        raise InputError(f"there is no power of two from lo={lo} to hi={hi} bytes")
    return sizes


def results_to_series(results: list[TransferResult]) -> dict:
    """Group sweep results into JSON-friendly series keyed by (host kind, direction)."""
    series: dict[str, dict] = {}
    for r in results:
        s = series.setdefault(f"{r.host_kind}/{r.direction}", {
            "host_kind": r.host_kind, "direction": r.direction, "nbytes": [], "median_s": [],
            "min_s": [], "reps": []})
        s["nbytes"].append(r.nbytes)
        s["median_s"].append(r.median_s)
        s["min_s"].append(r.min_s)
        s["reps"].append(len(r.times_s))
    return {"timer": "cuda-event", "series": list(series.values())}
