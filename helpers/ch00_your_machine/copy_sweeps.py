"""Chapter 0's experiments: host<->device copies from pageable and pinned memory, timed with
CUDA events (the primitives are helpers.measure.transfers).

`transfers.pinned_vs_pageable` sweeps powers of two from `lo` to `hi` bytes, each direction,
each host kind; Chapter 0 runs it at one size (lo = hi), Chapter 3 fits the copy-cost model to
the whole recorded sweep. `transfers.large_copy` keeps every repetition of a 256 MiB copy, for
Lab 2's benchmark and the recorder's cross-check.
"""

from __future__ import annotations

from helpers.core import validate
from helpers.core.experiments import experiment
from helpers.measure.transfers import (
    DIRECTIONS,
    measure_copy,
    results_to_series,
    sweep,
    sweep_sizes,
)

SWEEP_LO, SWEEP_HI = 4, 256 << 20  # the recorded sweep: 4 B to 256 MiB
QUICK_HI = 16 << 20  # the recorder's smoke test stops at 16 MiB
MAX_SIZE = 1 << 30  # a learner's sweep may go to 1 GiB (host and device memory permitting)


def check_range(params: dict) -> None:
    """lo and hi together: a range that holds at least one power of two (checked before any run)."""
    sweep_sizes(params.get("lo", SWEEP_LO), params.get("hi", SWEEP_HI))


@experiment("transfers.pinned_vs_pageable", chapter=0,
            title="Host<->device copy time vs size, pageable and pinned, 4 B to 256 MiB",
            params={"lo": validate.size(1, MAX_SIZE), "hi": validate.size(1, MAX_SIZE)},
            params_check=check_range)
def record_pinned_vs_pageable(quick: bool, lo: int = SWEEP_LO, hi: int = SWEEP_HI) -> dict:
    """Median event-timed copy time of every power of two in [lo, hi] bytes, both directions,
    pageable and pinned (repetitions adapt to the size: more for small copies)."""
    sizes = sweep_sizes(lo, max(lo, min(hi, QUICK_HI)) if quick else hi)
    return results_to_series(sweep(sizes, reps=5 if quick else None))


@experiment("transfers.large_copy", chapter=0,
            title="256 MiB pinned copies, many repetitions (cross-checked against tools/bwcheck)")
def record_large_copy(quick: bool) -> dict:
    """Every repetition of a 256 MiB copy, per host kind and direction."""
    n = (16 << 20) if quick else (256 << 20)
    out = {}
    for kind in ("pinned", "pageable"):
        for d in DIRECTIONS:
            r = measure_copy(n, d, kind, reps=5 if quick else 30, warmup=3)
            out[f"{kind}/{d}"] = {"nbytes": n, "times_s": r.times_s, "bandwidth_gbps": r.bandwidth_gbps}
    return out
