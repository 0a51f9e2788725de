"""The latency/bandwidth model of a copy: t(n) = t0 + n / B, fitted to measured times.

A copy of n bytes pays a fixed cost t0 (the driver and the copy engine setting up, the
first bytes crossing the link, the completion coming back) and then streams at the link's
rate B. The size at which the two terms are equal, n½ = t0 · B, is the *half-bandwidth
size*: a copy of n½ bytes reaches half of B. Seed 002 states this overhead as "about 10 KB
of transferred data", which is exactly an n½; `seed_verdict` sets it against the fit.

The fit is weighted least squares with weights 1 / t², i.e. it minimises *relative*
residuals. Sizes span 4 B to 256 MiB (eight decades of time); an unweighted fit would be
decided by the largest copies alone and would leave t0 at the mercy of their noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.core.errors import CourseError
from helpers.measure.transfers import DIRECTIONS

HOST_KINDS = ("pageable", "pinned")
SEED_002_OVERHEAD_BYTES = 10_000  # seed 002: "the initial overhead equals (approx) 10KB"


class ModelInputError(CourseError, ValueError):
    """Data or arguments the latency/bandwidth model cannot use, with the reason."""


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
        if not isinstance(v, (int, float, np.floating)) or not math.isfinite(v) or v <= 0:
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


def fit_series(series: dict) -> LinearFit:
    """Fit one recorded series (its nbytes and median_s lists)."""
    return fit(series["nbytes"], series["median_s"])


def fit_all(data: dict) -> dict[tuple[str, str], LinearFit]:
    """Fits for every (host kind, direction) series of a sweep recording."""
    return {(k, d): fit_series(series_for(data, k, d)) for k in HOST_KINDS for d in DIRECTIONS}


def seed_verdict(f: LinearFit, claim_bytes: float = SEED_002_OVERHEAD_BYTES) -> str:
    """Seed 002's '~10 KB' overhead set against a fitted n½, verdict decided by the ratio.

    Within a factor of 2 the claim still holds; otherwise the text says how far off it is.
    """
    ratio = f.n_half / claim_bytes
    t0_then = claim_bytes / 3.2e9  # seed 002's own pinned bandwidth, 16 MB in 5 ms
    head = (f"fit: t0 = {f.t0_s * 1e6:.2f} us, B = {f.bandwidth_gbps:.1f} GB/s, "
            f"n½ = t0·B = {f.n_half / 1e3:.1f} kB ({ratio:.1f}x the claimed 10 kB).")
    if 0.5 <= ratio <= 2:
        verdict = "verdict: the ~10 kB rule of thumb still holds on this machine."
    elif ratio > 2:
        faster = f.bandwidth_Bps / 3.2e9
        change = (f"the fixed cost shrank {t0_then / f.t0_s:.1f}x" if f.t0_s < t0_then
                  else f"the fixed cost did not shrink ({f.t0_s / t0_then:.1f}x)")
        verdict = (f"verdict: the claim is dated — the overhead is now worth {ratio:.0f}x more bytes. "
                   f"In time it is {f.t0_s * 1e6:.1f} us against the ~{t0_then * 1e6:.1f} us that 10 kB cost "
                   f"at 2009's 3.2 GB/s: {change}, while the link got {faster:.0f}x faster.")
    else:
        verdict = f"verdict: the overhead is now worth fewer bytes than claimed ({ratio:.2f}x)."
    return head + "\n" + verdict


_COLORS = {("pinned", "h2d"): "#1b7837", ("pinned", "d2h"): "#5aae61",
           ("pageable", "h2d"): "#2166ac", ("pageable", "d2h"): "#92c5de"}


def bandwidth_figure(data: dict, fits: dict, parts: list, *, highlight: tuple | None = None):
    """Effective bandwidth vs size: measured medians (markers) and each fitted model (line).

    `highlight` = (nbytes, GB/s, label) adds one large marker, e.g. the explorer's chosen copy.
    """
    import plotly.graph_objects as go

    from helpers.core.figures import CourseFigure, log_size_axis

    fig = go.Figure()
    grid = np.logspace(2, np.log2(256 << 20) * np.log10(2), 200)
    for (kind, d), f in fits.items():
        s = series_for(data, kind, d)
        n = np.asarray(s["nbytes"], dtype=float)
        color = _COLORS[(kind, d)]
        fig.add_scatter(x=n, y=n / np.asarray(s["median_s"]) / 1e9, mode="markers", marker={"color": color},
                        name=f"{kind} {d} (measured median)", legendgroup=f"{kind}{d}")
        fig.add_scatter(x=grid, y=f.predict_gbps(grid), mode="lines", line={"color": color, "dash": "dot"},
                        name=f"{kind} {d} model: t0={f.t0_s * 1e6:.1f} us, B={f.bandwidth_gbps:.1f} GB/s",
                        legendgroup=f"{kind}{d}")
    if highlight is not None:
        n, gbps, label = highlight
        fig.add_scatter(x=[n], y=[gbps], mode="markers", name=label,
                        marker={"size": 16, "symbol": "star", "color": "#d6604d", "line": {"width": 1}})
    fig.update_layout(title="Effective bandwidth n / t(n) vs copy size, with t(n) = t0 + n/B",
                      yaxis_title="bandwidth (GB/s, 1 GB = 1e9 B)", legend={"orientation": "h", "y": -0.3},
                      height=560)
    fig.update_yaxes(type="log")
    log_size_axis(fig, "copy size")
    return CourseFigure(fig, parts)


def fit_rows(fits: dict) -> list[tuple]:
    """Table rows: kind, direction, t0 (us), B (GB/s), n½ (kB), worst relative residual."""
    return [(k, d, f"{f.t0_s * 1e6:.2f}", f"{f.bandwidth_gbps:.1f}", f"{f.n_half / 1e3:.1f}",
             f"{f.max_relative_residual():.0%}") for (k, d), f in fits.items()]
