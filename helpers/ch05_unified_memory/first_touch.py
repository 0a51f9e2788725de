"""Managed memory's first GPU read: by page faults, or after a prefetch — the measurement Chapter 5
shows on its page (`time_fault_vs_prefetch`, the `code` of um.fault_vs_prefetch).

The CPU writes every byte of a fresh managed allocation, so its pages start in host memory. Then
a CuPy reduction reads every byte on the GPU: either at once (each missing page is a GPU page
fault that the UVM driver services by migrating it), or after cudaMemPrefetchAsync has moved the
range in bulk. CUDA events time the prefetch and the read. Every size is checked against the free
device memory first (managed.check_managed_nbytes): the course never oversubscribes the GPU.
"""

from __future__ import annotations

import ctypes

import numpy as np

from helpers.ch05_unified_memory import managed
from helpers.core import experiments, validate
from helpers.core.errors import CourseError, InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU
from helpers.core.gpu import cp
from helpers.measure.host_memory import check_nbytes
from helpers.measure.sysinfo import fmt_bytes


class WrongSumError(CourseError):
    """The GPU's sum of the managed bytes was not what the CPU wrote: the times are not kept."""


def time_fault_vs_prefetch(nbytes: int) -> dict:
    """Milliseconds for a GPU kernel's first read of managed memory the CPU has just written:
    reached by GPU page faults, or moved first by a prefetch (which is timed too)."""
    out = {}
    warm = cp.zeros(nbytes // 4, cp.float32)
    warm.sum(dtype=cp.float64)  # compile the sum now: a first call takes seconds, which the events would time
    del warm
    for way in ("fault", "prefetch"):
        mem = cp.cuda.memory.ManagedMemory(nbytes)  # cudaMallocManaged: one fresh range per way
        n = nbytes // 4  # float32 words
        x = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(mem, 0))
        host = np.ctypeslib.as_array((ctypes.c_float * n).from_address(mem.ptr))
        host[:] = 1  # the CPU touches every page first: they now live in host memory
        start, moved, done = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
        start.record()
        if way == "prefetch":
            managed.prefetch(mem.ptr, nbytes, cp.cuda.Device().id)  # cudaMemPrefetchAsync (CUDA 12 or 13 form)
        moved.record()
        total = x.sum(dtype=cp.float64)  # a kernel reads every byte (Chapter 4's zero-copy reduction)
        done.record()
        done.synchronize()
        if total != n:
            raise WrongSumError(f"{way}: the GPU summed {float(total):.0f}, expected {n}")
        out[way] = {"prefetch_ms": cp.cuda.get_elapsed_time(start, moved),
                    "first_read_ms": cp.cuda.get_elapsed_time(moved, done)}
        del host, x, mem
    return out


SIZES = (64 << 20, 256 << 20, 1 << 30)
QUICK_SIZES = (16 << 20,)


@experiments.experiment("um.fault_vs_prefetch", chapter=5, needs=(GPU,),
                        title="Managed memory written by the CPU, first read by the GPU: page faults vs a "
                              "prefetch first, 64 MiB to 1 GiB, CUDA events",
                        params={"repeats": validate.count(1, 10)})
def record_fault_vs_prefetch(quick: bool, repeats: int = 3, code=time_fault_vs_prefetch) -> dict:
    runs, skipped = [], []
    for n in QUICK_SIZES if quick else SIZES:
        try:
            managed.check_managed_nbytes(n)  # never more than half the GPU's free memory
            check_nbytes(n, "managed allocation (its pages start in host memory)")
        except InputError as exc:
            skipped.append({"nbytes": n, "why": str(exc)})
            continue
        for r in range(1 if quick else repeats):
            runs.append({"nbytes": n, "repeat": r, **code(n)})
    return {"runs": runs, "skipped": skipped, "timer": "cuda-event"}


def rows(data: dict) -> list[tuple]:
    """(size, repeat, fault: first read ms, prefetch ms, read after prefetch ms, faults / (prefetch + read))."""
    out = []
    for r in data["runs"]:
        f, p = r["fault"], r["prefetch"]
        total_p = p["prefetch_ms"] + p["first_read_ms"]
        out.append((fmt_bytes(r["nbytes"]), r["repeat"], f"{f['first_read_ms']:.2f}", f"{p['prefetch_ms']:.2f}",
                    f"{p['first_read_ms']:.2f}", f"{f['first_read_ms'] / total_p:.1f}x"))
    return out


HEADERS = ("size", "run", "first read by faults ms", "prefetch ms", "read after prefetch ms",
           "faults / (prefetch + read)")


def summary(ev: Evidence) -> str:
    """The largest size's median ratio, or that the recording is pending."""
    if ev.data is None:
        return (f"um.fault_vs_prefetch: recording pending ({ev.missing or 'not in the reference file'}); with a "
                "GPU the cell runs it live. The older, larger recording below (um.migration) answers the same "
                "question.")
    n = max(r["nbytes"] for r in ev.data["runs"])
    ratios = [r["fault"]["first_read_ms"] / (r["prefetch"]["prefetch_ms"] + r["prefetch"]["first_read_ms"])
              for r in ev.data["runs"] if r["nbytes"] == n]
    return (f"{fmt_bytes(n)}, {ev.said}: the first read by page faults took {float(np.median(ratios)):.1f}x as long "
            f"as prefetching and then reading (median of {len(ratios)} runs).")


def fault_over_prefetch(mig: dict, nbytes: int = 1 << 30) -> float:
    """um.migration's ratio at `nbytes`: the time faults added to the first read over the prefetch alone
    (the prediction's ratio; one run per mode and size)."""
    gib = {r["mode"]: managed.rates(r) for r in mig["runs"] if r["nbytes"] == nbytes}
    return gib["prefetch"]["to_gpu_gbps"] / gib["fault"]["to_gpu_gbps"]


def ratio_note(fvp: Evidence, mig: Evidence, nbytes: int = 1 << 30) -> str:
    """Why the two fault/prefetch ratios on the page differ: different experiments, different denominators."""
    r = fault_over_prefetch(mig.require(), nbytes)
    text = (f"um.migration ({mig.said}), {fmt_bytes(nbytes)}, one run per mode: the migration time faults added to "
            f"the first read was {r:.2f}x the prefetch alone (the ratio compared with your prediction).")
    if fvp.data is not None:
        text += (" The line above is a different ratio from a different experiment: the whole first read by faults "
                 "over prefetch plus first read, a median of several runs; the two need not agree.")
    return text


def ratio_beside(here: Evidence, ref: Evidence, nbytes: int = 1 << 30) -> str:
    """um.migration's fault/prefetch ratio measured now beside the reference's (replay: the recorded value). One
    run per mode and size, so no spread: the 5 % floor of helpers.presentation.beside stands in."""
    from helpers.presentation import beside

    return beside.sentence(f"fault-driven migration / prefetch, {fmt_bytes(nbytes)}", "x", here,
                           beside.Value(fault_over_prefetch(here.require(), nbytes)), ref,
                           beside.Value(fault_over_prefetch(ref.require(), nbytes)), "driver")
