"""Copy engines vs SMs: the same bytes moved by a DMA engine, or by a kernel's threads reading
(or writing) mapped pinned host memory themselves.

A copy engine turns one copy into a stream of large PCIe requests with many in flight. A kernel
can move host data too: its threads load from (or store to) mapped pinned host memory, and every
warp's access becomes PCIe reads or writes of its own. Chapter 3 times both, both directions, a
range of sizes; the functions below are shown on the page and run by the recorder. Numba is used
for both, so without a GPU they run (for correctness only) on Numba's CUDA simulator.
"""

from __future__ import annotations

import statistics

import numpy as np
import plotly.graph_objects as go

from helpers.core import config, gpu
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cuda
from helpers.measure.transfers import DIRECTIONS
from helpers.presentation import figures

SIZES = (64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20)
QUICK_SIZES = (64 << 10, 1 << 20, 4 << 20)
THREADS = 256
sm_copy = gpu.KernelOnFirstUse("helpers.ch03_dma_and_copy_engines._copy_kernel", "sm_copy")


class StreamGate:
    """A stream for Numba work plus the chapter's gate (copy_engines.Gate) that holds it.

        with gate:          # the stream is held: nothing queued on it runs yet
            ...queue copies or kernels and events on gate.stream...
        # on leaving, the gate opens, the work runs back to back, and this waits for it

    Python's call time (tens of microseconds a call) then happens while the GPU waits, so the
    events around each piece of work time the device alone. On Numba's CUDA simulator there is
    no gate (no CuPy): the stream simply runs, which is enough for correctness."""

    def __init__(self, timeout_s: float = 5.0) -> None:
        self._gate = self._cp_stream = None
        if config.numba_simulator_on():
            self.stream = cuda.stream()
            return
        from helpers.ch03_dma_and_copy_engines.copy_engines import Gate

        self._cp_stream = gpu.cupy().cuda.Stream(non_blocking=True)
        self.stream = cuda.external_stream(self._cp_stream.ptr)
        self._gate = Gate(timeout_s)

    def __enter__(self) -> StreamGate:
        if self._gate is not None:
            self._gate.block(self._cp_stream)
        return self

    def __exit__(self, *exc) -> None:
        if self._gate is not None:
            self._gate.release()
        self.stream.synchronize()  # bounded: the gate opens by itself after its timeout
        if self._gate is not None:
            self._gate.check()  # GateTimeoutError: the work ran before it was all queued

    def close(self) -> None:
        if self._gate is not None:
            self._gate.close()
            self._gate = None


def time_engine_copy(host, dev, direction: str, reps: int, gate) -> list[float]:
    """Seconds per copy made by a copy engine, device time only. Numba's copy_to_device /
    copy_to_host of a pinned buffer on a stream is one cuMemcpyAsync, which the driver hands to a
    DMA engine. The copies are queued behind the gate, an event after each, so each copy's time is
    the gap between two events on the GPU, with none of Python's call time in it."""
    def copy():
        if direction == "h2d":
            dev.copy_to_device(host, stream=gate.stream)
        else:
            dev.copy_to_host(host, stream=gate.stream)

    copy()  # warm-up, not gated
    gate.stream.synchronize()
    events = [cuda.event() for _ in range(reps + 1)]
    with gate:
        events[0].record(gate.stream)
        for e in events[1:]:
            copy()
            e.record(gate.stream)
    return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(reps)]  # ms -> s


def time_kernel_copy(host, dev, direction: str, reps: int, blocks: int, gate) -> list[float]:
    """Seconds per copy made by the SMs, device time only: a kernel's threads read (h2d) or write
    (d2h) the mapped pinned host buffer themselves, 8 bytes per thread per step of a grid-stride
    loop (sm_copy). Timed exactly as time_engine_copy: launches queued behind the gate, an event after each."""
    dst, src = (dev, host) if direction == "h2d" else (host, dev)
    launch = sm_copy[blocks, 256, gate.stream]
    launch(dst, src)  # warms up (and compiles, once per process), not gated
    gate.stream.synchronize()
    events = [cuda.event() for _ in range(reps + 1)]
    with gate:
        events[0].record(gate.stream)
        for e in events[1:]:
            launch(dst, src)
            e.record(gate.stream)
    return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(reps)]  # ms -> s


def blocks_for_gpu() -> int:
    """Eight blocks of THREADS per SM: enough loads in flight to keep the link busy."""
    return 8 * int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def _sweep(run_one, sizes, reps: int) -> dict:
    rows = []
    for d in DIRECTIONS:
        for n in sizes:
            times = run_one(n, d, reps)
            med = statistics.median(times)
            rows.append({"direction": d, "nbytes": n, "median_s": med, "gbps": n / med / 1e9 if med > 0 else None,
                         "times_s": times})
    return {"sizes": list(sizes), "reps": reps, "rows": rows}


TIMING = "gated: queued behind a gate kernel, an event after each copy; device time per copy"


def engine_sweep(code, sizes, reps: int) -> dict:
    """`code` (time_engine_copy) at every size and direction, fresh pinned and device buffers each."""
    gate = StreamGate()

    def one(n, d, reps):
        host = cuda.pinned_array(n // 8, dtype=np.uint64)
        dev = cuda.device_array(n // 8, dtype=np.uint64)
        try:
            return code(host, dev, d, reps, gate)
        finally:
            del host, dev
    try:
        return _sweep(one, sizes, reps) | {"timing": TIMING}
    finally:
        gate.close()


def kernel_sweep(code, sizes, reps: int, blocks: int) -> dict:
    """`code` (time_kernel_copy) at every size and direction, fresh mapped and device buffers each."""
    gate = StreamGate()

    def one(n, d, reps):
        host = cuda.mapped_array(n // 8, dtype=np.uint64)
        dev = cuda.device_array(n // 8, dtype=np.uint64)
        try:
            return code(host, dev, d, reps, blocks, gate)
        finally:
            del host, dev
    try:
        out = _sweep(one, sizes, reps)
    finally:
        gate.close()
    out.update({"blocks": blocks, "threads": THREADS, "timing": TIMING})
    return out


@experiment("copy_engines.engine_copies", chapter=3, needs=(GPU,),
            title="Pinned copies by a copy engine (Numba copy_to_device/copy_to_host), 64 KiB..256 MiB, both directions")
def record_engine_copies(quick: bool, code=time_engine_copy) -> dict:
    return engine_sweep(code, QUICK_SIZES if quick else SIZES, 3 if quick else 10)


@experiment("copy_engines.kernel_copies", chapter=3, needs=(GPU,),
            title="The same copies made by a kernel reading/writing mapped pinned host memory (SM copies)")
def record_kernel_copies(quick: bool, code=time_kernel_copy) -> dict:
    return kernel_sweep(code, QUICK_SIZES if quick else SIZES, 3 if quick else 10, blocks_for_gpu())


def gbps_at(data: dict, direction: str, nbytes: int) -> float | None:
    """The median GB/s a sweep recorded for one direction and size (None if it has none)."""
    for r in data["rows"]:
        if r["direction"] == direction and r["nbytes"] == nbytes:
            return r["gbps"]
    return None


def comparison_figure(engine: Evidence, kernel: Evidence) -> figures.CourseFigure:
    """GB/s vs size: copy engine and SM copies, each direction its own series."""
    fig = go.Figure()
    for label, ev in (("copy engine", engine), ("SM kernel", kernel)):
        data = ev.require()
        for d in DIRECTIONS:
            rows = [r for r in data["rows"] if r["direction"] == d]
            fig.add_scatter(x=[r["nbytes"] for r in rows], y=[r["gbps"] for r in rows], mode="lines+markers",
                            name=f"{label}, {d}")
    figures.log_size_axis(fig, "bytes per copy")
    fig.update_layout(title="The same copy by a copy engine or by the SMs (median GB/s)",
                      yaxis_title="GB/s (1 GB = 1e9 B)", legend={"orientation": "h", "y": -0.25})
    return figures.CourseFigure(fig, list(dict.fromkeys(engine.parts + kernel.parts)))


def comparison_rows(engine: dict, kernel: dict) -> list[tuple]:
    """(direction, size, engine GB/s, kernel GB/s, kernel / engine) for sizes both recorded."""
    out = []
    for d in DIRECTIONS:
        for n in engine["sizes"]:
            e, k = gbps_at(engine, d, n), gbps_at(kernel, d, n)
            if e and k:
                out.append((d, f"{n >> 10:,} KiB", f"{e:.1f}", f"{k:.1f}", f"{k / e:.2f}"))
    return out


def gbps_range(data: dict, direction: str, nbytes: int) -> tuple[float, float] | None:
    """(slowest, fastest) GB/s among the recorded copies of one direction and size (None if absent)."""
    for r in data["rows"]:
        if r["direction"] == direction and r["nbytes"] == nbytes and r.get("times_s"):
            rates = [nbytes / t / 1e9 for t in r["times_s"] if t > 0]
            return (min(rates), max(rates)) if rates else None
    return None


def faster(engine_range, kernel_range) -> str:
    """Which side is faster, only when their ranges of single copies do not overlap."""
    (e_lo, e_hi), (k_lo, k_hi) = engine_range, kernel_range
    if k_lo > e_hi:
        return "the kernel is faster: its slowest copy beat the engine's fastest"
    if e_lo > k_hi:
        return "the engine is faster: its slowest copy beat the kernel's fastest"
    return "no winner: the two ranges of single copies overlap"


def comparison_verdict(engine: dict, kernel: dict) -> str:
    """Per direction, at the smallest and the largest common size: which moves host data faster,
    decided from the ranges of single copies (both timed the same way, behind the gate); and
    h2d vs d2h at the largest size."""
    common = sorted(set(engine["sizes"]) & set(kernel["sizes"]))
    lines = []
    for d in DIRECTIONS:
        for n in (common[0], common[-1]):
            e, k = gbps_at(engine, d, n), gbps_at(kernel, d, n)
            er, kr = gbps_range(engine, d, n), gbps_range(kernel, d, n)
            size = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
            text = f"{d}, {size}: copy engine {e:.1f} GB/s, SM kernel {k:.1f} GB/s (medians"
            if er and kr:
                text += (f"; single copies {er[0]:.1f}-{er[1]:.1f} vs {kr[0]:.1f}-{kr[1]:.1f} GB/s): "
                         f"{faster(er, kr)}.")
            else:
                text += "; this recording keeps no single copies, so no verdict)."
            lines.append(text)
    n = common[-1]
    for label, data in (("copy engine", engine), ("SM kernel", kernel)):
        h, dd = gbps_at(data, "h2d", n), gbps_at(data, "d2h", n)
        lines.append(f"{label}: host→device is {h / dd:.2f}x device→host.")
    if "timing" not in engine or "timing" not in kernel:
        lines.append("(this recording timed the engine's copies with Python's call inside the events: small sizes "
                     "read slow for that reason, not the hardware's)")
    return "\n".join(lines)
