"""A copy between two buffers of one GPU: the part of Chapter 8 that runs live on a single GPU.

A peer copy needs two GPUs. On one GPU the same two ways of moving bytes between buffers can be
timed: the copy engine (`cudaMemcpyAsync`, device to device, the engine that writes into a peer
over NVLink or PCIe when peer access is on) and the SMs (a kernel whose threads load and store,
as a kernel on one GPU may store straight into a peer's memory once peer access is enabled).
The experiment `p2p.d2d_copy` runs `time_d2d`, the function the chapter shows.
"""

from __future__ import annotations

import numpy as np

from helpers.core import validate
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp

D2D_BYTES = 256 << 20  # nvbandwidth's size in the course's comparison (nvbandwidth -b 256, device_local_copy)


def time_d2d(nbytes: int, repeats: int) -> dict:
    """Seconds per copy of nbytes between two buffers on one GPU, timed with CUDA events:
    by the copy engine (cudaMemcpyAsync device to device) and by the SMs (a copy kernel)."""
    host = np.arange(nbytes // 4, dtype=np.uint32)
    src = cp.asarray(host)  # filled from the host: no CuPy kernel to compile but the copy kernel
    dst = cp.empty_like(src)
    kernel = cp.ElementwiseKernel("T x", "T y", "y = x", "course_copy")
    stream = cp.cuda.get_current_stream()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = {"copy engine": [], "kernel": []}
    for _ in range(repeats):
        for how, seconds in times.items():
            start.record(stream)
            if how == "copy engine":
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                            cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
            else:
                kernel(src, dst)
            stop.record(stream)
            stop.synchronize()
            seconds.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    assert np.array_equal(dst.get(), host), "the copy did not arrive intact"
    return times


@experiment("p2p.d2d_copy", chapter=8, needs=(GPU,), params={"nbytes": validate.size(4096, 1 << 30)},
            title="One GPU: device-to-device copy by the copy engine and by a kernel (CUDA events)")
def d2d_experiment(quick: bool, nbytes: int = D2D_BYTES, code=time_d2d) -> dict:
    repeats = 5 if quick else 30
    code(min(nbytes, 1 << 20), 2)  # warm-up: the kernel's compilation and the first launch
    return {"nbytes": nbytes, "repeats": repeats, "times_s": code(nbytes, repeats)}


def d2d_rows(data: dict) -> list[tuple[str, str, str]]:
    """(how, median µs, GB/s counting bytes read + written) for each way of copying."""
    n = data["nbytes"]
    rows = []
    for how, ts in data["times_s"].items():
        t = float(np.median(ts))
        rows.append((how, f"{t * 1e6:.1f}", f"{2 * n / t / 1e9:.0f}"))
    return rows
