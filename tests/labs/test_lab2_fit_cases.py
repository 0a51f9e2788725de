"""Lab 2's hidden fit cases tell a weighted fit from an unweighted one, every time.

The planted bug of tests/labs/test_planted.py (a least-squares line through (bytes, seconds) without
weights) must lose the part, and the reference fit must earn it, whatever seed the grader draws. The
check is the grader's own (instructor/labs/lab2_checks.py: B within 5%, t0 within 25%) over fixed
seeds, so the test is deterministic: with one hard case, 686 of seeds 0-19,999 let the bug through.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

from helpers.labs import lab2
from instructor.labs import lab2 as ref

SIZES = np.logspace(2, np.log10(256 << 20), 30)  # as lab2_checks.fit_synthetic
SEEDS = range(2000)


def _unweighted(times):
    slope, t0 = np.polyfit(SIZES, times, 1)
    return t0, 1 / slope


def _earns(fit, seed: int) -> bool:
    with contextlib.redirect_stdout(io.StringIO()):  # cases() names its seed on stdout
        cases = ref.cases("fit", seed=seed)
    for t0, bw, noise_seed in cases:
        f0, fb = fit(lab2.synthetic_line(t0, bw, SIZES, noise=0.03, seed=noise_seed))
        if not (abs(fb - bw) <= 0.05 * bw and abs(f0 - t0) <= 0.25 * t0):
            return False
    return True


def test_an_unweighted_fit_never_earns_the_part_on_these_seeds():
    assert [s for s in SEEDS if _earns(_unweighted, s)] == []


def test_the_reference_fit_always_earns_it():
    assert all(_earns(lambda t: ref.fit_line(SIZES, t), s) for s in SEEDS)


def test_the_hard_cases_are_there():
    with contextlib.redirect_stdout(io.StringIO()):
        cases = ref.cases("fit", seed=3)
    assert len(cases) == ref.HARD_FIT_CASES + 2
    assert all(t0 <= 4e-6 and bw >= 40e9 for t0, bw, _ in cases[:ref.HARD_FIT_CASES])
