"""Chapter 0's first experiment: one pinned and one pageable copy each way, here and on the
reference machine, side by side."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from helpers.core import figures
from helpers.core.mode import Mode
from helpers.core.reference import Reference
from helpers.measure.host_memory import check_nbytes
from helpers.measure.transfers import DIRECTIONS, measure_copy

KINDS = ("pageable", "pinned")
_NAMES = {"h2d": "host → device", "d2h": "device → host"}


def measure(nbytes: int = 64 << 20, reps: int = 10) -> dict[tuple[str, str], float]:
    """Live: median bandwidth (GB/s) of each (host kind, direction) at `nbytes`."""
    check_nbytes(nbytes, "first copy")
    return {(k, d): measure_copy(nbytes, d, k, reps=reps).bandwidth_gbps
            for k in KINDS for d in DIRECTIONS}


def from_reference(ref: Reference, nbytes: int = 64 << 20) -> tuple[int, dict[tuple[str, str], float]]:
    """Replay: the recorded bandwidths at the recorded size closest to `nbytes` (log scale).

    Returns (size actually used, {(kind, direction): GB/s}).
    """
    data = ref.experiment("transfers.pinned_vs_pageable")
    out, used = {}, None
    for s in data["series"]:
        if s["host_kind"] not in KINDS:
            continue
        sizes = np.asarray(s["nbytes"], dtype=float)
        i = int(np.argmin(np.abs(np.log2(sizes) - np.log2(nbytes))))
        used = int(sizes[i])
        out[(s["host_kind"], s["direction"])] = used / s["median_s"][i] / 1e9
    return used, out


def figure(ref: Reference, ref_bw: dict, ref_size: int, live_bw: dict | None = None,
           live_size: int | None = None, gpu_name: str | None = None) -> figures.CourseFigure:
    """Grouped bars: reference machine (replayed) and, when given, this machine (live)."""
    fig = go.Figure()
    cats = [f"{k}<br>{_NAMES[d]}" for k in KINDS for d in DIRECTIONS]
    parts = []
    if live_bw is not None:
        fig.add_bar(name=f"this machine ({gpu_name}), {live_size >> 20} MiB", x=cats,
                    y=[live_bw[(k, d)] for k in KINDS for d in DIRECTIONS], marker_color="#1b7837")
        parts.append((Mode.LIVE, gpu_name or "this GPU"))
    fig.add_bar(name=f"reference ({ref.provenance['gpu']['name']}), {ref_size >> 20} MiB", x=cats,
                y=[ref_bw[(k, d)] for k in KINDS for d in DIRECTIONS], marker_color="#2166ac")
    parts.append((Mode.REPLAY, ref.label))
    fig.update_layout(title="Pinned vs pageable copy bandwidth", barmode="group",
                      yaxis_title="bandwidth (GB/s, 1 GB = 1e9 B)", legend={"orientation": "h", "y": -0.25})
    return figures.CourseFigure(fig, parts)


# Seed 002 (2009, a Tesla card): 16 MB host->device from malloc'ed memory in 9 ms
# (1777 MB/s) and from cudaMallocHost memory in 5 ms (3200 MB/s), as the thread reports them.
SEED_2009 = {"pageable": 1777e6, "pinned": 3200e6, "nbytes": 16 << 20}


def ratio_rows(ref_bw: dict, live_bw: dict | None) -> list[tuple]:
    """Rows (direction, source, pageable GB/s, pinned GB/s, pinned/pageable)."""
    rows = []
    for d in DIRECTIONS:
        for src, bw in (("this machine (live)", live_bw), ("reference (replay)", ref_bw)):
            if bw is None:
                continue
            pg, pn = bw[("pageable", d)], bw[("pinned", d)]
            rows.append((_NAMES[d], src, f"{pg:.2f}", f"{pn:.2f}", f"{pn / pg:.2f}x"))
    return rows


def claim_vs_measurement(bw: dict, source: str) -> str:
    """Seed 002's 2009 pinned/pageable speed-up set against today's measured one."""
    then = SEED_2009["pinned"] / SEED_2009["pageable"]
    now = bw[("pinned", "h2d")] / bw[("pageable", "h2d")]
    grow = bw[("pinned", "h2d")] * 1e9 / SEED_2009["pinned"]
    return (f"2009 (seed 002): pinned host->device was {then:.2f}x pageable "
            f"({SEED_2009['pinned'] / 1e9:.1f} vs {SEED_2009['pageable'] / 1e9:.2f} GB/s).\n"
            f"now ({source}): pinned is {now:.2f}x pageable, and pinned bandwidth is "
            f"{grow:.0f}x the 2009 figure.\n"
            + ("verdict: pinning still pays, by more than it did." if now > then else
               "verdict: pinning pays less than it did in 2009." if now > 1 else
               "verdict: here pageable copies are as fast as pinned ones."))
