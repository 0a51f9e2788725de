"""Chapter 0's first copies: pinned and pageable bandwidth each way at one size, on this
machine (live) beside the reference machine's recording, and source question 002's 2009 claim.

The data of both is the `transfers.pinned_vs_pageable` experiment (copy_sweeps): live at the
one size the learner picks, recorded over the whole sweep; the views read the swept size
nearest the one asked for.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from helpers.core import validate
from helpers.core.evidence import Evidence
from helpers.measure.sysinfo import fmt_bytes
from helpers.measure.transfers import DIRECTIONS
from helpers.presentation import beside, figures

KINDS = ("pageable", "pinned")
_NAMES = {"h2d": "host → device", "d2h": "device → host"}
_COLOURS = {True: "#1b7837", False: "#2166ac"}  # live, replay

# Source question 002 (2009, a Tesla card): 16 MB host->device from malloc'ed memory in 9 ms
# (1777 MB/s) and from cudaMallocHost memory in 5 ms (3200 MB/s), as the thread reports them.
SEED_2009 = {"pageable": 1777e6, "pinned": 3200e6, "nbytes": 16 << 20}


def bandwidths(ev: Evidence, nbytes: int) -> tuple[int, dict[tuple[str, str], float]]:
    """Median bandwidth (GB/s) of each (host kind, direction) at the swept size closest to
    `nbytes` (log scale). Returns (size actually used, {(kind, direction): GB/s})."""
    nbytes = validate.byte_size(nbytes, "copy size")
    out, used = {}, None
    for s in ev.require()["series"]:
        if s["host_kind"] not in KINDS:
            continue
        sizes = np.asarray(s["nbytes"], dtype=float)
        i = int(np.argmin(np.abs(np.log2(sizes) - np.log2(nbytes))))
        used = int(sizes[i])
        out[(s["host_kind"], s["direction"])] = used / s["median_s"][i] / 1e9
    return used, out


def _shown(here: Evidence, recorded: Evidence) -> list[Evidence]:
    """What to show: this machine's live run (when there is one) and the reference recording."""
    return [here, recorded] if here.live else [recorded]


def figure(here: Evidence, recorded: Evidence, nbytes: int) -> figures.CourseFigure:
    """Grouped bars at `nbytes`: this machine (when measured live) and the reference machine."""
    fig = go.Figure()
    cats = [f"{k}<br>{_NAMES[d]}" for k in KINDS for d in DIRECTIONS]
    shown = _shown(here, recorded)
    for ev in shown:
        size, bw = bandwidths(ev, nbytes)
        who = f"this machine ({ev.source})" if ev.live else f"reference ({ev.provenance['gpu']['name']})"
        fig.add_bar(name=f"{who}, {fmt_bytes(size)}", x=cats, y=[bw[(k, d)] for k in KINDS for d in DIRECTIONS],
                    marker_color=_COLOURS[ev.live])
    fig.update_layout(title="Pinned vs pageable copy bandwidth", barmode="group",
                      yaxis_title="bandwidth (GB/s, 1 GB = 1e9 B)", legend={"orientation": "h", "y": -0.25})
    return figures.CourseFigure(fig, [p for ev in shown for p in ev.parts])


def ratio_rows(here: Evidence, recorded: Evidence, nbytes: int) -> list[tuple]:
    """Rows (direction, source, pageable GB/s, pinned GB/s, pinned/pageable)."""
    rows = []
    for d in DIRECTIONS:
        for ev in _shown(here, recorded):
            bw = bandwidths(ev, nbytes)[1]
            pg, pn = bw[("pageable", d)], bw[("pinned", d)]
            src = "this machine (live)" if ev.live else "reference (replay)"
            rows.append((_NAMES[d], src, f"{pg:.2f}", f"{pn:.2f}", f"{pn / pg:.2f}x"))
    return rows


def values(ev: Evidence, nbytes: int) -> dict[tuple[str, str], beside.Value]:
    """Median bandwidth (GB/s) of each (host kind, direction) at the swept size nearest `nbytes`, with its
    spread: how much faster the fastest repeat was (min_s), the one-sided spread the sweep records."""
    used = bandwidths(ev, nbytes)[0]
    out = {}
    for s in ev.require()["series"]:
        if s["host_kind"] in KINDS:
            i = list(s["nbytes"]).index(used)
            med, best = used / s["median_s"][i] / 1e9, used / s["min_s"][i] / 1e9
            out[(s["host_kind"], s["direction"])] = beside.Value(med, abs(best - med))
    return out


def beside_lines(here: Evidence, recorded: Evidence, nbytes: int) -> list[str]:
    """Each of the four figures measured now beside the reference's, a difference named (live); in
    replay, the recorded values with their machine. Pageable copies are host work, pinned ones the link's."""
    mine, theirs = values(here, nbytes), values(recorded, nbytes)
    size = fmt_bytes(bandwidths(recorded, nbytes)[0])
    return [beside.sentence(f"{k} {_NAMES[d]}, {size}", "GB/s", here, mine[(k, d)], recorded, theirs[(k, d)],
                            "host" if k == "pageable" else "link")
            for k in KINDS for d in DIRECTIONS]


def claim_vs_measurement(ev: Evidence, nbytes: int) -> str:
    """Source question 002's 2009 pinned/pageable speed-up set against today's, at the swept size nearest
    `nbytes`, from the Evidence's own data and named by its mode and machine."""
    bw = bandwidths(ev, nbytes)[1]
    source = f"{ev.mode.value}, {ev.source}"
    then = SEED_2009["pinned"] / SEED_2009["pageable"]
    now = bw[("pinned", "h2d")] / bw[("pageable", "h2d")]
    grow = bw[("pinned", "h2d")] * 1e9 / SEED_2009["pinned"]
    return (f"2009 (source question 002): pinned host->device was {then:.2f}x pageable "
            f"({SEED_2009['pinned'] / 1e9:.1f} vs {SEED_2009['pageable'] / 1e9:.2f} GB/s).\n"
            f"now ({source}): pinned is {now:.2f}x pageable, and pinned bandwidth is "
            f"{grow:.0f}x the 2009 figure.\n"
            + ("verdict: pinning still pays, by more than it did." if now > then else
               "verdict: pinning pays less than it did in 2009." if now > 1 else
               "verdict: here pageable copies are as fast as pinned ones."))
