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

from helpers.core import figures
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cuda
from helpers.measure.transfers import DIRECTIONS

SIZES = (64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20)
QUICK_SIZES = (64 << 10, 1 << 20, 4 << 20)
THREADS = 256


def time_engine_copy(host, dev, direction: str, reps: int) -> list[float]:
    """Seconds per copy made by a copy engine: copying a pinned buffer with Numba's
    copy_to_device / copy_to_host is one cuMemcpy, which the driver hands to a DMA engine."""
    times = []
    for _ in range(reps + 1):
        begin, end = cuda.event(), cuda.event()
        begin.record()
        if direction == "h2d":
            dev.copy_to_device(host)
        else:
            dev.copy_to_host(host)
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / 1e3)  # ms -> s
    return times[1:]  # the first one warms up


def time_kernel_copy(host, dev, direction: str, reps: int, blocks: int) -> list[float]:
    """Seconds per copy made by the SMs: a kernel's threads read (h2d) or write (d2h) the mapped
    pinned host buffer themselves, 8 bytes per thread per step of a grid-stride loop. A copy's time
    is two copies' time minus one's: launching a kernel from Python takes tens of microseconds, and
    the GPU would sit idle for them between the first event and the kernel."""
    @cuda.jit
    def copy(dst, src):
        for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
            dst[i] = src[i]

    dst, src = (dev, host) if direction == "h2d" else (host, dev)
    launch = copy[blocks, 256]
    launch(dst, src)  # compiles and warms up
    times = []
    for _ in range(reps):
        spans = []
        for n in (1, 2):  # one copy, then two back to back, between the same kind of events
            begin, end = cuda.event(), cuda.event()
            begin.record()
            for _ in range(n):
                launch(dst, src)
            end.record()
            end.synchronize()
            spans.append(begin.elapsed_time(end) / 1e3)  # ms -> s
        times.append(spans[1] - spans[0])  # the second copy alone: Python's launch time hides under the first
    return times


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


def engine_sweep(code, sizes, reps: int) -> dict:
    """`code` (time_engine_copy) at every size and direction, fresh pinned and device buffers each."""
    def one(n, d, reps):
        host = cuda.pinned_array(n // 8, dtype=np.uint64)
        dev = cuda.device_array(n // 8, dtype=np.uint64)
        try:
            return code(host, dev, d, reps)
        finally:
            del host, dev
    return _sweep(one, sizes, reps)


def kernel_sweep(code, sizes, reps: int, blocks: int) -> dict:
    """`code` (time_kernel_copy) at every size and direction, fresh mapped and device buffers each."""
    def one(n, d, reps):
        host = cuda.mapped_array(n // 8, dtype=np.uint64)
        dev = cuda.device_array(n // 8, dtype=np.uint64)
        try:
            return code(host, dev, d, reps, blocks)
        finally:
            del host, dev
    out = _sweep(one, sizes, reps)
    out.update({"blocks": blocks, "threads": THREADS})
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


def comparison_verdict(engine: dict, kernel: dict) -> str:
    """At the largest common size: which moves host data faster, per direction, and h2d vs d2h."""
    n = max(set(engine["sizes"]) & set(kernel["sizes"]))
    lines = []
    for d in DIRECTIONS:
        e, k = gbps_at(engine, d, n), gbps_at(kernel, d, n)
        lines.append(f"{d}, {n >> 20} MiB: copy engine {e:.1f} GB/s, SM kernel {k:.1f} GB/s "
                     f"({'the kernel is faster' if k > e * 1.02 else 'the engine is faster' if e > k * 1.02 else 'about equal'}).")
    for label, data in (("copy engine", engine), ("SM kernel", kernel)):
        h, dd = gbps_at(data, "h2d", n), gbps_at(data, "d2h", n)
        lines.append(f"{label}: host→device is {h / dd:.2f}x device→host.")
    return "\n".join(lines)
