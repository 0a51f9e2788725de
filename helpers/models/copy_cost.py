"""The copy-cost model of the whole course: t(n) = t0 + n / B, fitted to measured times.

A copy of n bytes pays a fixed cost t0 (the driver and the copy engine setting up, the
first bytes crossing the link, the completion coming back) and then streams at the link's
rate B. The size at which the two terms are equal, n½ = t0 · B, is the *half-bandwidth
size*: a copy of n½ bytes reaches half of B.

There is one estimator, `fit`, and every chapter that needs t0 and B calls it (Chapter 3's
sweep, Chapter 6's TTM link model, Chapter 9's radar model, Lab 5's routes). It is weighted
least squares with weights 1 / t², i.e. it minimises *relative* residuals. Sizes span 4 B to
256 MiB (eight decades of time); an unweighted fit would be decided by the largest copies
alone and would leave t0 at the mercy of their noise. With exactly two sizes the fit is the
straight line through both points.

`fit_series` fits one recorded series of a `transfers.pinned_vs_pageable` sweep, over all of
its sizes or over a documented size range [lo, hi]: a chapter whose question concerns only
large copies (Chapter 9's 64 KiB+ radar frames) fits those, and says so on its page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.core.errors import InputError
from helpers.measure.transfers import DIRECTIONS

HOST_KINDS = ("pageable", "pinned")


class ModelInputError(InputError):
    """Data or arguments the copy-cost model cannot use, with the reason."""


@dataclass(frozen=True)
class LinearFit:
    """A fitted t(n) = t0 + n / B, with the data it was fitted to."""

    t0_s: float  # fixed cost per copy, seconds
    bandwidth_Bps: float  # asymptotic bandwidth, bytes per second
    nbytes: tuple[int, ...]
    times_s: tuple[float, ...]

    @property
    def bandwidth_gbps(self) -> float:
        return self.bandwidth_Bps / 1e9

    @property
    def n_half(self) -> float:
        """Half-bandwidth size in bytes: the copy size that reaches B / 2."""
        return half_bandwidth_size(self.t0_s, self.bandwidth_Bps)

    def predict_s(self, nbytes) -> np.ndarray:
        """Model time (s) for each size."""
        return self.t0_s + np.asarray(nbytes, dtype=float) / self.bandwidth_Bps

    def predict_gbps(self, nbytes) -> np.ndarray:
        """Model effective bandwidth n / t(n), in GB/s."""
        n = np.asarray(nbytes, dtype=float)
        return n / self.predict_s(n) / 1e9

    def max_relative_residual(self) -> float:
        """Largest |measured - model| / measured over the fitted points."""
        t = np.asarray(self.times_s)
        return float(np.max(np.abs(t - self.predict_s(self.nbytes)) / t))

    def to_dict(self) -> dict:
        return {"t0_s": self.t0_s, "bandwidth_gbps": self.bandwidth_gbps, "n_half_bytes": self.n_half,
                "points": len(self.nbytes), "max_relative_residual": self.max_relative_residual()}


def half_bandwidth_size(t0_s: float, bandwidth_Bps: float) -> float:
    """n½ = t0 · B in bytes; both must be positive, finite numbers."""
    for name, v in (("t0", t0_s), ("bandwidth", bandwidth_Bps)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not math.isfinite(v) or v <= 0:
            raise ModelInputError(f"half-bandwidth size needs a positive, finite {name}, got {v!r}: "
                                  "the data do not show a fixed cost and a finite bandwidth")
    return float(t0_s) * float(bandwidth_Bps)


def fit(nbytes: Sequence[int], times_s: Sequence[float]) -> LinearFit:
    """Fit t(n) = t0 + n / B by least squares weighted with 1 / t² (relative residuals).

    Raises ModelInputError for mismatched lengths, non-positive or non-finite sizes or
    times, fewer than two distinct sizes, or data whose fit has no positive t0 and B
    (e.g. times that do not grow with size).
    """
    n = np.asarray(list(nbytes), dtype=float)
    t = np.asarray(list(times_s), dtype=float)
    if n.ndim != 1 or n.shape != t.shape:
        raise ModelInputError(f"sizes and times must be two lists of equal length, got {n.shape} and {t.shape}")
    if not np.all(np.isfinite(n)) or np.any(n <= 0):
        raise ModelInputError(f"sizes must be positive byte counts, got {n[(n <= 0) | ~np.isfinite(n)][:3].tolist()}")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ModelInputError(f"times must be positive seconds, got {t[(t <= 0) | ~np.isfinite(t)][:3].tolist()}")
    if len(np.unique(n)) < 2:
        raise ModelInputError(f"a line needs at least two distinct sizes, got {sorted(set(n.tolist()))}")
    w = 1.0 / t  # sqrt of the weights 1/t^2
    A = np.stack([np.ones_like(n), n], axis=1) * w[:, None]
    (t0, inv_b), *_ = np.linalg.lstsq(A, t * w, rcond=None)
    if not (t0 > 0 and inv_b > 0):
        raise ModelInputError(f"the fit gives t0 = {t0:.3g} s and 1/B = {inv_b:.3g} s/B; both must be "
                              "positive. Do the times grow with size, and are the small sizes included?")
    return LinearFit(float(t0), float(1.0 / inv_b), tuple(int(x) for x in n), tuple(float(x) for x in t))


def series_for(data: dict, host_kind: str, direction: str) -> dict:
    """The (host kind, direction) series of a transfers.pinned_vs_pageable recording."""
    if host_kind not in HOST_KINDS:
        raise ModelInputError(f"memory kind must be one of {HOST_KINDS}, got {host_kind!r}")
    if direction not in DIRECTIONS:
        raise ModelInputError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    for s in data.get("series", []):
        if s.get("host_kind") == host_kind and s.get("direction") == direction:
            return s
    raise ModelInputError(f"the recording has no {host_kind}/{direction} series")


def fit_series(series: dict, lo: int | None = None, hi: int | None = None) -> LinearFit:
    """Fit one recorded series (its nbytes and median_s lists), over the sizes in [lo, hi] bytes.

    lo and hi None: every size. A range is for a question about some sizes only (Chapter 9
    fits 64 KiB and up, the frames it moves); the caller says on its page which range it fits.
    """
    n = np.asarray(series["nbytes"], dtype=float)
    t = np.asarray(series["median_s"], dtype=float)
    keep = np.ones(n.shape, dtype=bool)
    if lo is not None:
        keep &= n >= lo
    if hi is not None:
        keep &= n <= hi
    if keep.sum() < 2:
        raise ModelInputError(f"the {series.get('host_kind')}/{series.get('direction')} series has "
                              f"{int(keep.sum())} size(s) from {lo or 'the smallest'} to {hi or 'the largest'} "
                              "bytes; a line needs two")
    return fit(n[keep], t[keep])


def fit_all(data: dict, lo: int | None = None, hi: int | None = None) -> dict[tuple[str, str], LinearFit]:
    """Fits for every (host kind, direction) series of a sweep recording, over [lo, hi] bytes."""
    return {(k, d): fit_series(series_for(data, k, d), lo, hi) for k in HOST_KINDS for d in DIRECTIONS}
