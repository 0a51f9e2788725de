"""Plotly figures and tables that always say where their numbers come from.

Every figure carries a provenance line under its title: LIVE (measured now, on which GPU),
REPLAY (recorded on which machine, driver, CUDA, date) or SIMULATED (a model, not a
measurement). `CourseFigure` renders in JupyterLab through Plotly's own MIME type and in
the Jupyter Book site as HTML that uses the plotly.js the book ships in its _static folder,
so pages render with no network and no CDN.
"""

from __future__ import annotations

import html
import json
import uuid

import plotly.graph_objects as go
import plotly.io as pio

from helpers.core.errors import InputError
from helpers.core.mode import Mode

_BADGE = {
    Mode.LIVE: ("LIVE", "#1b7837"),
    Mode.REPLAY: ("REPLAY", "#2166ac"),
    Mode.SIMULATED: ("SIMULATED", "#b2182b"),
}


def provenance_line(mode: Mode | str, source: str) -> str:
    """'LIVE · measured now on …', 'REPLAY · recorded on …' or 'SIMULATED · model: …'."""
    m = Mode(mode)
    verb = {Mode.LIVE: "measured now on", Mode.REPLAY: "recorded on",
            Mode.SIMULATED: "a software model, not a measurement:"}[m]
    return f"{_BADGE[m][0]} · {verb} {source}"


class CourseFigure:
    """A plotly figure whose provenance is part of it, displayable offline everywhere."""

    def __init__(self, fig: go.Figure, parts: list[tuple[Mode | str, str]]):
        if not parts:
            raise InputError("a course figure needs at least one (mode, source) provenance part")
        self.fig = fig
        self.parts = [(Mode(m), s) for m, s in parts]
        title = fig.layout.title.text or ""
        lines = "<br>".join(provenance_line(m, s) for m, s in self.parts)
        fig.update_layout(title={"text": f"{title}<br><sup>{lines}</sup>", "x": 0.01},
                          margin={"t": 60 + 18 * len(self.parts)}, template="plotly_white")

    @property
    def modes(self) -> list[Mode]:
        return [m for m, _ in self.parts]

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        div_id = f"fig-{uuid.uuid4().hex[:12]}"
        html_part = pio.to_html(self.fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                                config={"displaylogo": False, "responsive": True})
        return {
            "application/vnd.plotly.v1+json": json.loads(self.fig.to_json()),
            "text/html": html_part,
            "text/plain": repr(self),
        }

    def __repr__(self) -> str:
        prov = "; ".join(provenance_line(m, s) for m, s in self.parts)
        return f"<figure: {self.fig.layout.title.text.split('<br>')[0]!s} [{prov}]>"


def log_size_axis(fig: go.Figure, title: str = "transfer size") -> None:
    """A log x axis labelled in binary units (4 B … 256 MiB)."""
    ticks = [4 ** k for k in range(1, 15)]
    fig.update_xaxes(type="log", title=title, tickvals=ticks, ticktext=[_size_label(t) for t in ticks])


def _size_label(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


class Table:
    """A small table for notebooks: HTML in Jupyter and the book, aligned text elsewhere."""

    def __init__(self, rows: list[tuple], headers: tuple[str, ...], caption: str = ""):
        self.rows, self.headers, self.caption = [tuple(map(str, r)) for r in rows], headers, caption

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self.rows)
        cap = f"<caption style='caption-side:top;text-align:left'>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
                  for i, h in enumerate(self.headers)]
        fmt = "  ".join(f"{{:{w}}}" for w in widths)
        lines = ([self.caption] if self.caption else []) + [fmt.format(*self.headers)]
        lines += [fmt.format(*r) for r in self.rows]
        return "\n".join(lines)
