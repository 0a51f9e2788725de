"""The per-channel timeline of CUPTI activity records (helpers.measure.cupti_trace): one lane per
hardware channel, labelled with its type, one bar per copy, kernel or memset, coloured by stream
and marked with its text, x in device µs from the first record. Chapters 3b, 7 and 9 draw their
CUPTI records with it; the caption's mode and machine come from the Evidence's parts.
"""

from __future__ import annotations

import plotly.graph_objects as go

from helpers.core.errors import InputError
from helpers.measure import cupti_trace
from helpers.presentation import figures

LANE_TEXT = {"compute": "compute", "async_memcpy": "copy", "other": "other"}
PATTERNS = ("", "/", ".", "x", "-", "|", "+", "\\")  # bars of different streams differ by more than colour


def skip_note(ev) -> list[str]:
    """['(This page replays: ...)'] when a live run was possible but CUPTI was not (the
    Evidence's `why` carries unavailable_reason()), else []: the learner with a GPU learns why."""
    return [f"(This page replays: {ev.why}.)"] if not ev.live and "CUPTI" in (ev.why or "") else []


def lane_label(channel_type: str, channel: int) -> str:
    """'copy channel 10' / 'compute channel 1': a lane's name on the y axis."""
    return f"{LANE_TEXT.get(channel_type, channel_type)} channel {channel}"


def stream_labels(records, names: dict[int, str] | None = None) -> dict[int, str]:
    """{stream id: label}: the caller's names, else 'stream <id>', in order of first appearance."""
    order = list(dict.fromkeys(r["stream"] for r in sorted(records, key=lambda r: r["start_ns"])))
    names = names or {}
    return {s: names.get(s, f"stream {s}") for s in order}


def bar_text(rec: dict) -> str:
    """What a bar says: the copy's direction and size, or 'kernel'."""
    if rec["kind"] == "memcpy":
        return f"{rec['copy'] or 'copy'} {rec['bytes'] / 2**20:g} MiB"
    return rec["kind"]


def lanes_figure(records, parts, title: str, names: dict[int, str] | None = None,
                 height: int | None = None) -> figures.CourseFigure:
    """One horizontal bar per record on its channel's lane, x in µs from the first record's start.

    `parts` is the Evidence's (mode, source) list, so the figure says live or replayed and from
    which machine; `names` maps stream ids to labels (default 'stream <id>').
    """
    recs = cupti_trace.check_records(records)
    if not recs:
        raise InputError("no CUPTI records to draw: the trace caught no copy or kernel")
    t0 = min(r["start_ns"] for r in recs)
    order = [lane_label(lane["channel_type"], lane["channel"]) for lane in cupti_trace.lanes(recs)]
    fig = go.Figure()
    for i, (stream, label) in enumerate(stream_labels(recs, names).items()):
        rs = [r for r in recs if r["stream"] == stream]
        fig.add_bar(name=label, orientation="h", y=[lane_label(r["channel_type"], r["channel"]) for r in rs],
                    x=[(r["end_ns"] - r["start_ns"]) / 1e3 for r in rs],
                    base=[(r["start_ns"] - t0) / 1e3 for r in rs],
                    text=[bar_text(r) for r in rs], textposition="inside", insidetextanchor="middle",
                    marker={"pattern": {"shape": PATTERNS[i % len(PATTERNS)]}},
                    hovertemplate=f"{label}: %{{text}}, %{{base:.1f}} → +%{{x:.1f}} µs<extra></extra>")
    fig.update_layout(title=title, barmode="overlay",
                      xaxis_title="device time from the first record (µs, CUPTI timestamps)",
                      yaxis={"title": "hardware channel", "categoryorder": "array",
                             "categoryarray": order[::-1]},
                      # at least 360 px: with the title, the x title and the legend below, a two-lane chart at
                      # 280 px left under 120 px of plot for the vertical "hardware channel" (sitecheck caught it)
                      height=height or max(360, 60 + 45 * len(order)),
                      legend={"orientation": "h", "y": -0.25})
    return figures.CourseFigure(fig, parts)
