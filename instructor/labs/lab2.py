"""Lab 2 (your own bandwidth test): the reference answers and the hidden cases.

Hidden cases are simulated GPU clocks and timings with parameters drawn at grading time, and
perturbed copies of the reference machine's recording (helpers.problems.perturb_sweep), so an
answer that copies the published examples' numbers earns nothing.
"""

from __future__ import annotations

import numpy as np

from helpers.core.evidence import Evidence
from helpers.labs import lab2
from helpers.problems import perturb_sweep
from instructor.labs.common import draw_seed

PARTS = ("timed_copy", "benchmark_warmup", "benchmark_agrees", "fit", "predict", "batch")


# ----------------------------------------------------------------------------- the answers
def timed_copy(cuda, stream, dst, src, nbytes, kind):
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    end.record(stream)
    end.synchronize()
    return cuda.get_elapsed_time(start, end) / 1e3


def benchmark(timer, reps=20, warmup=3):
    for _ in range(warmup):
        timer()
    times = [timer() for _ in range(reps)]
    return {"times_s": times, "median_s": float(np.median(times)), "min_s": float(min(times))}


def fit_line(nbytes, times_s):
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    a = np.column_stack([1.0 / t, n / t])  # (t0 + n * inv_bw) / t = 1, for every point
    (t0, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(t0), float(1.0 / inv_bw)


def predict_time(nbytes, t0_s, bw_Bps):
    return t0_s + np.asarray(nbytes, dtype=float) / bw_Bps


def batch_slowdown(count, nbytes_each, t0_s, bw_Bps):
    return count * predict_time(nbytes_each, t0_s, bw_Bps) / predict_time(count * nbytes_each, t0_s, bw_Bps)


# ----------------------------------------------------------------------------- grading
def earlier(part: str) -> dict:
    """The reference for the parts `part` builds on."""
    return {"predict": {"fit_line": fit_line},
            "batch": {"fit_line": fit_line, "predict_time": predict_time}}.get(part, {})


HARD_FIT_CASES = 5  # hidden fit cases where an unweighted fit loses t0 (see cases("fit"))


def cases(part: str, evidence: Evidence | None = None, seed: int | None = None) -> list:
    """Hidden cases of `part`, in the shape of the published ones in the lab's check cell.

    timed_copy: (bytes, t0 s, B) of a simulated clock; benchmark_warmup: timer settings;
    benchmark_agrees: (name, timings, warm-up) from the recorded repetitions (`evidence`: the
    transfers.large_copy Evidence), scaled and re-noised; fit: (t0, B, noise seed);
    predict and batch: (name, bytes, seconds) perturbed copies of the recorded sweep (`evidence`:
    the transfers.pinned_vs_pageable Evidence), batch with (count, bytes each) pairs.
    """
    if part not in PARTS:
        raise ValueError(f"lab2 has no part {part!r}; parts: {PARTS}")
    rng = np.random.default_rng(draw_seed(f"lab2 {part}", seed))
    if part == "timed_copy":
        return [(int(rng.integers(1, 1 << 28)), float(rng.uniform(2e-6, 30e-6)), float(rng.uniform(3e9, 60e9)))
                for _ in range(3)]
    if part == "benchmark_warmup":
        out = []
        for _ in range(2):
            slow = int(rng.integers(1, 4))
            out.append({"steady_s": float(rng.uniform(1e-5, 5e-3)), "slow_calls": slow,
                        "slow_factor": float(rng.uniform(10, 60)), "seed": int(rng.integers(1 << 30)),
                        "reps": int(rng.integers(7, 40)), "warmup": slow + int(rng.integers(0, 3))})
        return out
    if part == "benchmark_agrees":
        _, times, _ = lab2.reference_reps(evidence, "pinned/h2d")
        t = np.asarray(times, dtype=float)
        return [(f"a perturbed copy of the recorded repetitions (case {i + 1})",
                 list(t * rng.uniform(0.5, 2.0) * rng.lognormal(0, 0.02, t.size)), int(rng.integers(1, 6)))
                for i in range(2)]
    if part == "fit":
        # five cases like today's links (a few µs, tens of GB/s: n½ of a few hundred KB, where an unweighted
        # fit loses t0 in the noise of the largest copies), then two drawn from the whole range. With one
        # such case a planted unweighted fit earned the part in 686 of 20,000 gradings (seeds 0-19,999; it
        # did once in `make test`); with five, in 1 (tests/labs/test_lab2_fit_cases.py holds the count).
        hard = [(float(rng.uniform(1e-6, 4e-6)), float(rng.uniform(40e9, 80e9)), int(rng.integers(1 << 30)))
                for _ in range(HARD_FIT_CASES)]
        return hard + [(float(rng.uniform(1e-6, 30e-6)), float(rng.uniform(2e9, 80e9)), int(rng.integers(1 << 30)))
                       for _ in range(2)]
    n, t = lab2.reference_sweep(evidence, "pinned", "h2d")
    out = []
    for i in range(2):
        pn, pt = perturb_sweep(n, t, rng)
        out.append((f"a perturbed copy of the reference sweep (case {i + 1})", pn, pt))
    if part == "batch":  # count x bytes each, both sizes within the sweep (4 B ... 256 MiB)
        return [(name, pn, pt, [(int(2 ** rng.integers(2, 9)), int(2 ** rng.integers(10, 20))) for _ in range(3)])
                for name, pn, pt in out]
    return out
