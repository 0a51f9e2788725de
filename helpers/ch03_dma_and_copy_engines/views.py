"""Chapter 3's views of the copy-cost model: the bandwidth figure with its fitted lines, the
table of fits, and seed 002's "~10 KB overhead" set against the fitted n½.

The model itself (the one estimator of t0 and B) is helpers.models.copy_cost; these views
take the sweep's Evidence, so every figure names the mode and machine it came from.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from helpers.core.evidence import Evidence
from helpers.models import copy_cost
from helpers.models.copy_cost import LinearFit
from helpers.presentation.figures import CourseFigure, log_size_axis

SEED_002_OVERHEAD_BYTES = 10_000  # seed 002: "the initial overhead equals (approx) 10KB"
SEED_002_PINNED_BPS = 3.2e9  # seed 002's own pinned bandwidth, 16 MB in 5 ms

_COLORS = {("pinned", "h2d"): "#1b7837", ("pinned", "d2h"): "#5aae61",
           ("pageable", "h2d"): "#2166ac", ("pageable", "d2h"): "#92c5de"}


def seed_verdict(f: LinearFit, claim_bytes: float = SEED_002_OVERHEAD_BYTES) -> str:
    """Seed 002's '~10 KB' overhead set against a fitted n½, verdict decided by the ratio.

    Within a factor of 2 the claim still holds; otherwise the text says how far off it is.
    """
    ratio = f.n_half / claim_bytes
    t0_then = claim_bytes / SEED_002_PINNED_BPS
    head = (f"fit: t0 = {f.t0_s * 1e6:.2f} us, B = {f.bandwidth_gbps:.1f} GB/s, "
            f"n½ = t0·B = {f.n_half / 1e3:.1f} kB ({ratio:.1f}x the claimed 10 kB).")
    if 0.5 <= ratio <= 2:
        verdict = "verdict: the ~10 kB rule of thumb still holds for these data."
    elif ratio > 2:
        faster = f.bandwidth_Bps / SEED_002_PINNED_BPS
        change = (f"the fixed cost shrank {t0_then / f.t0_s:.1f}x" if f.t0_s < t0_then
                  else f"the fixed cost did not shrink ({f.t0_s / t0_then:.1f}x)")
        verdict = (f"verdict: the claim is dated — the overhead is now worth {ratio:.0f}x more bytes. "
                   f"In time it is {f.t0_s * 1e6:.1f} us against the ~{t0_then * 1e6:.1f} us that 10 kB cost "
                   f"at the forum thread's 3.2 GB/s: {change}, while the link got {faster:.0f}x faster.")
    else:
        verdict = f"verdict: the overhead is now worth fewer bytes than claimed ({ratio:.2f}x)."
    return head + "\n" + verdict


def bandwidth_figure(sweep: Evidence, fits: dict, *, highlight: tuple | None = None) -> CourseFigure:
    """Effective bandwidth vs size: measured medians (markers) and each fitted model (line).

    `highlight` = (nbytes, GB/s, label) adds one large marker, e.g. the explorer's chosen copy.
    """
    data = sweep.require()
    fig = go.Figure()
    grid = np.logspace(2, np.log2(256 << 20) * np.log10(2), 200)
    for (kind, d), f in fits.items():
        s = copy_cost.series_for(data, kind, d)
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
    return CourseFigure(fig, sweep.parts)


def fit_rows(fits: dict) -> list[tuple]:
    """Table rows: kind, direction, t0 (us), B (GB/s), n½ (kB), worst relative residual."""
    return [(k, d, f"{f.t0_s * 1e6:.2f}", f"{f.bandwidth_gbps:.1f}", f"{f.n_half / 1e3:.1f}",
             f"{f.max_relative_residual():.0%}") for (k, d), f in fits.items()]


DROP = 0.25  # a fall of more than 25 % between neighbouring sizes is a step, not noise


def _steps(s: dict, min_bytes: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, float]]]:
    n = np.asarray(s["nbytes"], dtype=float)
    bw = n / np.asarray(s["median_s"], dtype=float) / 1e9
    keep = n >= min_bytes
    n, bw = n[keep], bw[keep]
    falls = []  # (size index of the peak before, size index of the first point more than DROP below it)
    for j in range(1, len(bw)):
        i = int(np.argmax(bw[:j]))
        if bw[j] < (1 - DROP) * bw[i] and not any(k == i for k, _ in falls):
            falls.append((i, j))
    return n, bw, falls


def pageable_steps(sweep: Evidence, min_bytes: int = 1 << 20) -> list[str]:
    """Where the pageable bandwidth first falls more than DROP below its best at a smaller size (above
    `min_bytes`), computed from the data shown, with the likely cause; one line per direction."""
    series = {(s["host_kind"], s["direction"]): s for s in sweep.require()["series"]}
    lines = []
    for (kind, d), s in series.items():
        if kind != "pageable":
            continue
        n, bw, falls = _steps(s, min_bytes)
        if not falls:
            lines.append(f"pageable {d} ({sweep.verb}): never more than {DROP:.0%} below its best from "
                         f"{min_bytes >> 20} MiB up ({bw.min():.1f}..{bw.max():.1f} GB/s).")
            continue
        i, j = falls[0]
        f = 1 - bw[j] / bw[i]
        pinned = series.get(("pinned", d))
        pinned_falls = _steps(pinned, min_bytes)[2] if pinned else None
        where = ("Pinned copies of the same sizes show no such step, so the likely cause is on the host: "
                 if pinned_falls == [] else "Pinned copies step down too, so the link or the GPU may share in it; "
                 if pinned_falls else "The likely cause is on the host: ")
        lines.append(f"pageable {d} ({sweep.verb}): {bw[i]:.1f} GB/s at {n[i] / 2**20:g} MiB, "
                     f"{bw[j]:.1f} GB/s at {n[j] / 2**20:g} MiB ({f:.0%} less), then "
                     f"{bw[j:].min():.1f}..{bw[j:].max():.1f} GB/s up to {n[-1] / 2**20:g} MiB. {where}"
                     "the CPU's memcpy into the driver's staging buffers, which can slow once the source no longer fits in "
                     "the CPU's caches and is read from DRAM (part 3 looks at the pipeline); the data do not say "
                     "which cache or which limit.")
    return lines


def fits_beside(here: Evidence, here_fits: dict, ref: Evidence, ref_fits: dict) -> list[str]:
    """The fitted pinned B and t0 measured now beside the reference's (live); in replay, the recorded fits."""
    from helpers.presentation import beside

    out = []
    for d in ("h2d", "d2h"):
        m, r = here_fits[("pinned", d)], ref_fits[("pinned", d)]
        out.append(beside.sentence(f"pinned {d}, fitted B", "GB/s", here, beside.Value(m.bandwidth_gbps), ref,
                                   beside.Value(r.bandwidth_gbps), "link"))
        out.append(beside.sentence(f"pinned {d}, fitted t0", "µs", here, beside.Value(m.t0_s * 1e6), ref,
                                   beside.Value(r.t0_s * 1e6), "host"))
    return out


def residual_lines(sweep: Evidence, fits: dict) -> list[str]:
    """How well each memory kind follows t(n) = t0 + n/B, per direction, from the fits of the data shown:
    which kind's worst relative residual is smaller (the sentence the page would otherwise assert)."""
    out = []
    for d in ("h2d", "d2h"):
        pg, pn = fits[("pageable", d)].max_relative_residual(), fits[("pinned", d)].max_relative_residual()
        better = ("pinned follows the model more closely" if pn < pg else
                  "pageable follows the model as closely as pinned or more so")
        out.append(f"{d} ({sweep.verb}): worst residual pinned {pn:.0%}, pageable {pg:.0%}: {better}.")
    return out


def n_half_key_point(sweep: Evidence, fits: dict, claim_bytes: float = SEED_002_OVERHEAD_BYTES) -> str:
    """The key point on n½, from the fits of the data shown: pinned n½ each way beside the source's 10 KB."""
    parts = []
    for d in ("h2d", "d2h"):
        f = fits[("pinned", d)]
        parts.append(f"{d} {f.n_half / 1e3:.0f} kB (t0 {f.t0_s * 1e6:.1f} µs, B {f.bandwidth_gbps:.1f} GB/s)")
    ratio = min(fits[("pinned", d)].n_half for d in ("h2d", "d2h")) / claim_bytes
    how = (f"at least {int(ratio)}x source question 002's {claim_bytes / 1e3:.0f} KB" if ratio >= 2 else
           f"within a factor of 2 of source question 002's {claim_bytes / 1e3:.0f} KB" if ratio > 0.5 else
           f"below source question 002's {claim_bytes / 1e3:.0f} KB")
    return f"Pinned n½ ({sweep.said}): {'; '.join(parts)}: {how}."
