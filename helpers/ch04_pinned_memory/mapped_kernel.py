"""Zero-copy in one Numba kernel: sum float32 ones that stay in mapped pinned host memory, or
copy them to the GPU first and sum there (the measurement Chapter 4 shows on its page).

`time_mapped_sum` is the experiment's `code`: the page shows it (tools.shown writes that cell
from this file) and a learner may change it. The kernel it launches, `sum_into`, lives in
`_kernels` (it must be compiled against numba.cuda itself; see that module) and is reached here
through `sum_into`, a stand-in (gpu.KernelOnFirstUse) that imports it on first launch.
"""

from __future__ import annotations

import numpy as np

from helpers.core import experiments, gpu, validate
from helpers.core.errors import CourseError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU
from helpers.core.gpu import cuda
from helpers.measure.host_memory import check_nbytes
from helpers.measure.sysinfo import fmt_bytes


class WrongSumError(CourseError):
    """The kernel's sum differs from the number of ones it was given: the time is not kept."""


sum_into = gpu.KernelOnFirstUse("helpers.ch04_pinned_memory._kernels", "sum_into")


def time_mapped_sum(nbytes: int, repeats: int, blocks: int = 528) -> dict:
    """Median milliseconds to sum float32 ones with a Numba kernel: reading them where they are,
    in mapped pinned host memory (zero-copy), or after copying them to GPU memory."""
    n = nbytes // 4
    host = cuda.mapped_array(n, dtype=np.float32)  # pinned, and mapped into the GPU's address space
    host[:] = 1.0
    dev = cuda.device_array(n, dtype=np.float32)
    out = cuda.device_array(1, dtype=np.float64)
    times = {"zero_copy_ms": [], "copy_then_sum_ms": []}
    for _ in range(repeats):
        for way, x in (("zero_copy_ms", host), ("copy_then_sum_ms", dev)):
            out.copy_to_device(np.zeros(1))
            start, end = cuda.event(), cuda.event()
            start.record()
            if way == "copy_then_sum_ms":
                dev.copy_to_device(np.asarray(host))  # one bulk DMA copy over the link (from the same pinned pages)
            sum_into[blocks, 256](x, out)  # every read of x: a PCIe read (zero-copy) or GPU memory
            end.record()
            end.synchronize()
            if out.copy_to_host()[0] != n:
                raise WrongSumError(f"{way}: the kernel summed {out.copy_to_host()[0]}, not {n}")
            times[way].append(start.elapsed_time(end))
    return {way: float(np.median(t)) for way, t in times.items()}


SIZES = (16 << 20, 256 << 20)
QUICK_SIZES = (4 << 20,)


@experiments.experiment("zero_copy.numba_mapped", chapter=4, needs=(GPU,),
                        title="One Numba kernel summing mapped pinned host memory (zero-copy) vs "
                              "copying it to the GPU first, 16 and 256 MiB",
                        params={"repeats": validate.count(1, 50)})
def record_numba_mapped(quick: bool, repeats: int = 5, code=time_mapped_sum) -> dict:
    sizes = QUICK_SIZES if quick else SIZES
    sms = int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    runs = []
    for n in sizes:
        check_nbytes(2 * n, "zero-copy sum (host and device copies)", host=True, device=True)
        runs.append({"nbytes": n, **code(n, min(repeats, 2) if quick else repeats, 4 * sms)})
    return {"runs": runs, "blocks_per_sm": 4, "threads": 256}


def rows(data: dict) -> list[tuple]:
    """(size, zero-copy ms, copy-then-sum ms, zero-copy GB/s, speed-up of zero-copy) per size."""
    out = []
    for r in data["runs"]:
        zc, cs = r["zero_copy_ms"], r["copy_then_sum_ms"]
        out.append((fmt_bytes(r["nbytes"]), f"{zc:.3f}", f"{cs:.3f}", f"{r['nbytes'] / zc / 1e6:.1f}",
                    f"{cs / zc:.2f}x"))
    return out


HEADERS = ("buffer", "zero-copy ms", "copy, then sum ms", "zero-copy GB/s", "zero-copy speed-up")


def summary(ev: Evidence) -> str:
    """What these data say, size by size, computed (zero_copy's ±10 % tie rule), or that the recording is pending."""
    from helpers.ch04_pinned_memory.zero_copy import TIE

    if ev.data is None:
        return (f"zero_copy.numba_mapped: recording pending ({ev.missing or 'not in the reference file'}); "
                "with a GPU the cell above runs it live.")
    parts = []
    for r in ev.data["runs"]:
        s = r["copy_then_sum_ms"] / r["zero_copy_ms"]
        word = ("faster" if s > 1 + TIE else "slower" if s < 1 - TIE else
                f"as fast, within ±{TIE:.0%}")
        how = f"{max(s, 1 / s):.2f}x {word}" if "within" not in word else f"{word} ({s:.2f}x)"
        parts.append(f"{fmt_bytes(r['nbytes'])}: summing in place {r['zero_copy_ms']:.2f} ms, copying first then "
                     f"summing {r['copy_then_sum_ms']:.2f} ms: zero-copy is {how}")
    return f"{ev.said}, data read once:\n" + "\n".join(parts)


def beside_lines(here: Evidence, ref: Evidence) -> list[str]:
    """Each size's zero-copy speed-up measured now beside the reference's (replay: the recorded values). A
    zero-copy read is the SMs' PCIe reads against a DMA copy: a difference points at the link and the host."""
    from helpers.presentation import beside

    if here.data is None or ref.data is None:
        return []
    theirs = {r["nbytes"]: r for r in ref.data["runs"]}
    return [beside.sentence(f"zero-copy speed-up, {fmt_bytes(r['nbytes'])}", "x", here,
                            beside.Value(r["copy_then_sum_ms"] / r["zero_copy_ms"]), ref,
                            beside.Value(theirs[r["nbytes"]]["copy_then_sum_ms"] / theirs[r["nbytes"]]["zero_copy_ms"]),
                            "link")
            for r in here.data["runs"] if r["nbytes"] in theirs]
