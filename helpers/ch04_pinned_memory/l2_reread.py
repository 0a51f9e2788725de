"""Does a re-read of mapped host memory cross the link again? The GPU's L2 cache decides.

A zero-copy kernel's loads of mapped host memory go through the GPU's L2 cache like any other
load. A kernel that reads the same bytes eight times can therefore be served from L2 after the
first pass, when the working set fits in L2 (50 MB on an H100) and the re-reads come before the
lines are evicted; a working set larger than L2 evicts them and every pass crosses the link. The
experiment measures exactly that, with zero_copy's own Numba kernel (`sum_passes`):

- one kernel, 1 pass and 8 passes, over mapped host memory and over a copy in GPU memory;
- eight launches of a 1-pass kernel (does a line stay in L2 from one kernel to the next?);

at one working set below the L2 size and one above (16 MiB and 256 MiB). The verdict compares
eight passes with eight times one pass: near 8x, every pass crossed the link; far below it, the
re-reads were served on the GPU.
"""

from __future__ import annotations

import numpy as np

from helpers.core import experiments, gpu, validate
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU
from helpers.measure.sysinfo import fmt_bytes

SIZES = (16 << 20, 256 << 20)  # below and above an H100's 50 MB L2
QUICK_SIZES = (1 << 20, 4 << 20)
WAYS = ("one_kernel_1_pass", "one_kernel_8_passes", "eight_kernels_1_pass")
CROSSED = 6.0  # 8 passes taking >= 6x one pass: (nearly) every pass crossed the link
SERVED = 4.0  # below 4x: at least half the re-reads were served on the GPU


def _time(launch, reps: int, stream, out, want: float, what: str) -> float:
    """Median seconds of `launch()` on `stream`, timed with CUDA events, after one warm-up; `out` is
    zeroed before each run and must hold `want` after it (zero_copy.WrongResultError otherwise)."""
    from numba import cuda

    from helpers.ch04_pinned_memory.zero_copy import WrongResultError

    times = []
    for i in range(reps + 1):
        out.copy_to_device(np.zeros(1, dtype=np.float64), stream=stream)
        start, end = cuda.event(), cuda.event()
        start.record(stream)
        launch()
        end.record(stream)
        end.synchronize()
        got = float(out.copy_to_host(stream=stream)[0])
        stream.synchronize()
        if got != want:
            raise WrongResultError(f"{what}: got {got}, expected {want}")
        if i:
            times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def measure(nbytes: int, reps: int) -> dict:
    """Seconds of each way (WAYS) over mapped host memory and over device memory, `nbytes` of float32,
    every sum checked against the exact value the data determine."""
    from numba import cuda

    from helpers.ch04_pinned_memory import zero_copy

    n = zero_copy._elements(nbytes)
    zero_copy._device_room(nbytes)
    sum_passes, _ = zero_copy.numba_kernels()
    blocks, threads = zero_copy._numba_grid()
    one = zero_copy.expected(n, "stream", None)
    stream = cuda.stream()
    mapped = cuda.mapped_array(n, dtype=np.float32)
    row = {"nbytes": nbytes}
    try:
        zero_copy.fill_pattern(mapped)
        dev = cuda.to_device(np.asarray(mapped), stream=stream)
        out = cuda.device_array(1, dtype=np.float64)
        for where, x in (("zero_copy", mapped), ("device", dev)):
            def k(passes, x=x):
                sum_passes[blocks, threads, stream](x, passes, out)
            for way, launch, times in (("one_kernel_1_pass", lambda k=k: k(1), 1),
                                       ("one_kernel_8_passes", lambda k=k: k(8), 8),
                                       ("eight_kernels_1_pass", lambda k=k: [k(1) for _ in range(8)], 8)):
                row[f"{where}_{way}_s"] = _time(launch, reps, stream, out, times * one, f"{where} {way}")
    finally:
        stream.synchronize()
        mapped = dev = None
        zero_copy._numba_cleanup()
    return row


@experiments.experiment("zero_copy.l2_reread", chapter=4, needs=(GPU,),
                        title="Re-reading mapped host memory: 1 vs 8 passes in one kernel and 8 kernels, "
                              "working set below (16 MiB) and above (256 MiB) the GPU's L2",
                        params={"reps": validate.count(1, 50)})
def record_l2_reread(quick: bool, reps: int = 5) -> dict:
    cp = gpu.cupy()
    l2 = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["l2CacheSize"])
    sizes = QUICK_SIZES if quick else SIZES
    return {"l2_bytes": l2, "runs": [measure(n, min(reps, 2) if quick else reps) for n in sizes]}


def reread_factor(run: dict, where: str = "zero_copy", way: str = "one_kernel_8_passes") -> float:
    """Time of 8 passes (one kernel, or eight kernels) over the time of one pass."""
    return run[f"{where}_{way}_s"] / run[f"{where}_one_kernel_1_pass_s"]


def judgement(factor: float) -> str:
    """'crossed' (each pass crossed the link), 'served' (re-reads served on the GPU) or 'partly'."""
    return "crossed" if factor >= CROSSED else "served" if factor < SERVED else "partly"


_SAYS = {"crossed": "every pass crossed the link again",
         "served": "the re-reads were served on the GPU (its L2), not by the link",
         "partly": "some re-reads were served on the GPU, some crossed the link again"}


def lines(ev: Evidence) -> list[str]:
    """One line per working set and way, computed from the data: 8 passes vs one, and what that means."""
    if ev.data is None:
        return [f"zero_copy.l2_reread is not yet recorded ({ev.missing}); on a GPU the cell measures it now. "
                "Until then this page makes no claim about the L2 and re-read mapped memory."]
    l2 = ev.data["l2_bytes"]
    out = [f"{ev.said}; the GPU's L2 cache: {fmt_bytes(l2)}"]
    for r in ev.data["runs"]:
        fits = "fits in" if r["nbytes"] <= l2 else "is larger than"
        for way, what in (("one_kernel_8_passes", "8 passes in one kernel"),
                          ("eight_kernels_1_pass", "8 kernels of 1 pass")):
            f = reread_factor(r, way=way)
            out.append(f"{fmt_bytes(r['nbytes'])} ({fits} L2), zero-copy, {what}: {f:.1f}x one pass "
                       f"({r[f'zero_copy_{way}_s'] * 1e3:.3f} vs {r['zero_copy_one_kernel_1_pass_s'] * 1e3:.3f} ms): "
                       f"{_SAYS[judgement(f)]}")
    return out


def served_in_l2(data: dict | None) -> bool | None:
    """Whether, in these data, some working set's re-reads within one kernel were served on the GPU
    (None: no data). Exercise 4.5 and the key points take this from the data, not from the text."""
    if data is None:
        return None
    return any(judgement(reread_factor(r)) == "served" for r in data["runs"])


def crossed_above_l2(data: dict | None) -> bool | None:
    """Whether every working set larger than L2 crossed the link on every pass (None: no such run)."""
    if data is None:
        return None
    big = [r for r in data["runs"] if r["nbytes"] > data["l2_bytes"]]
    return all(judgement(reread_factor(r)) == "crossed" for r in big) if big else None
