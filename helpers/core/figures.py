"""Plotly figures and tables that always say where their numbers come from.

Every figure carries a provenance line under its title: LIVE (measured now, on which GPU),
REPLAY (recorded on which machine, driver, CUDA, date) or SIMULATED (a model, not a
measurement). `CourseFigure` renders in JupyterLab through Plotly's own MIME type and in
the Jupyter Book site as HTML that uses the plotly.js the book ships in its _static folder,
so pages render with no network and no CDN.

Every figure is readable without seeing colour: the palette is Okabe and Ito's colour-blind
safe set, and series also differ by dash and marker. Every figure carries a text description
generated from its own data (shown under it, and its accessible name on the site) and a CSV of
that data to download.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import re
import textwrap
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


# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
PROVENANCE_WIDTH = 80  # characters per provenance line under a figure's title (about 560 px at <sup> size)
TITLE_WIDTH = 64       # characters per title line in the plot (about 600 px at plotly's 17 px)
TITLE_LINE_PX, PROVENANCE_LINE_PX = 24, 18  # height of a title line and of a provenance (<sup>) line
TITLE_PAD, TITLE_GAP = 28, 28  # room above the title block (plotly lets a top-anchored title rise ~20 px), below it
AXIS_TITLE_WIDTH = 40  # characters per line of an x-axis title (about 310 px at plotly's 14 px); y: 30
AXIS_ROOM = 110        # bottom margin for an x axis's tick labels and a two-line title
DEFAULT_HEIGHT = 450   # plotly's height for a figure that sets none
LEGEND_ROW_PX, LEGEND_ROW_WIDTH = 24, 560  # a horizontal legend's row height, and the width it fills
MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down")


def provenance_line(mode: Mode | str, source: str) -> str:
    """'LIVE · measured now on …', 'REPLAY · recorded on …' or 'SIMULATED · model: …'."""
    m = Mode(mode)
    verb = {Mode.LIVE: "measured now on", Mode.REPLAY: "recorded on",
            Mode.SIMULATED: "a software model, not a measurement:"}[m]
    return f"{_BADGE[m][0]} · {verb} {source}"


def wrap_at_dots(line: str, width: int = PROVENANCE_WIDTH) -> list[str]:
    """A provenance line cut at its ' · ' separators into lines of at most `width` characters (a
    piece longer than that stays whole; the mode badge stays with the piece after it). Plotly does
    not wrap titles: in a narrow page or a JupyterLab panel the end of one long line (the link,
    the date) would be cut off unseen."""
    badge, *pieces = line.split(" · ")
    out = [badge + (" · " + pieces.pop(0) if pieces else "")]  # the mode badge never stands alone
    for piece in pieces:
        if len(out[-1]) + 3 + len(piece) <= width:
            out[-1] += " · " + piece
        else:
            out.append("· " + piece)
    return out


class CourseFigure:
    """A plotly figure whose provenance is part of it, displayable offline everywhere."""

    def __init__(self, fig: go.Figure, parts: list[tuple[Mode | str, str]]):
        if not parts:
            raise InputError("a course figure needs at least one (mode, source) provenance part")
        self.fig = fig
        self.parts = [(Mode(m), s) for m, s in parts]
        title = fig.layout.title.text or ""
        lines = [piece for m, s in self.parts for piece in wrap_at_dots(provenance_line(m, s))]
        self.title = re.sub(r"<[^>]+>", "", title.split("<br>")[0]).strip()
        self._heading = title
        head = [piece for part in title.split("<br>")
                for piece in (textwrap.wrap(part, TITLE_WIDTH) if "<" not in part else [part]) or [""]]
        block = TITLE_LINE_PX * len(head) + PROVENANCE_LINE_PX * len(lines)
        # The title block hangs from the top of the figure and the plot starts below it, so a title
        # or provenance of any number of lines never reaches the plot or its y-axis title.
        fig.update_layout(title={"text": f"{'<br>'.join(head)}<br><sup>{'<br>'.join(lines)}</sup>", "x": 0.01,
                                 "xanchor": "left", "xref": "container", "y": 1, "yref": "container",
                                 "yanchor": "top", "pad": {"t": TITLE_PAD}},
                          margin={"t": TITLE_PAD + block + TITLE_GAP}, template="plotly_white", colorway=PALETTE)
        # margins grow to hold tick labels and axis titles (a second y axis on the right included);
        # a long axis title wraps (plotly would run it past the figure's edge)
        fig.update_xaxes(automargin=True)
        # a little room between the y axis and its tick labels, so its lowest label and the x axis's
        # first one never meet in the corner (they did on a heatmap whose axes both start at 0)
        fig.update_yaxes(automargin=True, ticklabelstandoff=4)
        fig.for_each_xaxis(lambda ax: _wrap_axis_title(ax, AXIS_TITLE_WIDTH))
        fig.for_each_yaxis(lambda ax: _wrap_axis_title(ax, AXIS_TITLE_WIDTH * 3 // 4))  # a y axis is shorter
        # A legend laid in rows under the plot landed on the x axis's ticks and title (plotly makes
        # room for each, not for both): it hangs from the bottom of the figure instead, under a
        # bottom margin that holds the axis and the legend's rows; on a phone-width page the site
        # moves legends above the plot (course.js).
        # A legend in plotly's default place (right of the plot) goes there too when a second y
        # axis holds the right side (the legend ran past the figure's edge beside its ticks). The
        # figure grows by the legend's rows, so the plot keeps its height.
        lg = fig.layout.legend
        right_axis = any(getattr(fig.layout[k], "side", None) == "right" for k in fig.layout if k.startswith("yaxis"))
        below = lg.orientation == "h" and lg.y is not None and lg.y < 0
        if below or (right_axis and lg.x is None and lg.orientation in (None, "v")):
            names = [tr.name for tr in fig.data if tr.name and tr.showlegend is not False]
            rows = _legend_rows(names)
            fig.update_layout(legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom",
                                      "x": 0, "xanchor": "left"},
                              margin={"b": AXIS_ROOM + LEGEND_ROW_PX * rows},
                              height=(fig.layout.height or DEFAULT_HEIGHT) + LEGEND_ROW_PX * rows)
        _tell_series_apart(fig)

    def rows(self) -> list[tuple[str, object, object]]:
        """The plotted data as (series, x, y) rows: what the CSV holds and the description reads."""
        out = []
        for i, tr in enumerate(self.fig.data):
            name = tr.name or f"series {i + 1}"
            xs = list(tr.x) if getattr(tr, "x", None) is not None else []
            ys = list(tr.y) if getattr(tr, "y", None) is not None else []
            out += [(name, x, y) for x, y in zip(xs, ys, strict=False)]
        return out

    def csv(self) -> str:
        """The figure's data as CSV: series, x, y (with the axis titles as headers)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["series", _axis_title(self.fig, "x") or "x", _axis_title(self.fig, "y") or "y"])
        w.writerows(self.rows())
        return buf.getvalue()

    def description(self) -> str:
        """A text description of the figure generated from its data, for screen readers and the page."""
        x_t, y_t = _axis_title(self.fig, "x") or "x", _axis_title(self.fig, "y") or "y"
        series = {}
        for name, x, y in self.rows():
            series.setdefault(name, []).append((x, y))
        prov = "; ".join(provenance_line(m, s) for m, s in self.parts)
        head = (f"Figure: {self.title or 'untitled'}. {len(series)} series of {y_t} against {x_t}. {prov}.")
        fx = _size_label if _is_size_axis(self.fig.layout.xaxis) else _fmt
        parts = [head] + [_series_sentence(name, pts, fx) for name, pts in series.items()]
        return " ".join(p for p in parts if p)

    @property
    def modes(self) -> list[Mode]:
        return [m for m, _ in self.parts]

    def _page_figure(self) -> tuple[go.Figure, str]:
        """The figure for an HTML page, and its heading: the title and provenance move out of the
        plot into HTML above it, where they wrap to any column width (plotly's title cannot)."""
        fig = go.Figure(self.fig)
        t = fig.layout.margin.t or 0
        fig.update_layout(title_text="", margin={"t": TITLE_GAP})
        if fig.layout.height:
            fig.update_layout(height=max(fig.layout.height - (t - TITLE_GAP), 160))
        prov = "".join(f'<span class="course-figure-provenance">{html.escape(provenance_line(m, s))}</span>'
                       for m, s in self.parts)
        heading = re.sub(r"<(?!/?(?:b|i|sup|sub|br)\b)[^>]*>", "", self._heading)  # plotly's few tags only
        return fig, f'<div class="course-figure-heading"><span class="course-figure-title">{heading}</span>{prov}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        div_id = f"fig-{uuid.uuid4().hex[:12]}"
        page_fig, heading = self._page_figure()
        plot = heading + pio.to_html(page_fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                                     config={"displaylogo": False, "responsive": True})
        desc = html.escape(self.description())
        data_uri = "data:text/csv;base64," + base64.b64encode(self.csv().encode()).decode()
        name = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-") or "figure"
        html_part = (f'<figure class="course-figure" aria-label="{desc}">{plot}'
                     f'<figcaption class="course-figure-description">{desc} '
                     f'<a download="{name}.csv" href="{data_uri}">Download the data (CSV)</a></figcaption></figure>')
        return {
            "application/vnd.plotly.v1+json": json.loads(self.fig.to_json()),
            "text/html": html_part,
            "text/plain": repr(self),
        }

    def __repr__(self) -> str:
        return f"<{self.description()}>"


def _legend_rows(names: list[str], width: float = LEGEND_ROW_WIDTH) -> int:
    """How many rows a horizontal legend of these entries takes in `width` px (about 7 px a
    character at plotly's 12 px, 40 px for each entry's symbol and gap), at least one."""
    rows, x = 1, 0.0
    for name in names:
        w = 40 + 7 * max(len(part) for part in re.sub(r"<[^>]+>", "\n", name.replace("<br>", "\n")).split("\n"))
        if x and x + w > width:
            rows, x = rows + 1, 0.0
        x += w
    return rows


def _wrap_axis_title(ax, width: int) -> None:
    """Break an axis title longer than `width` characters into lines at spaces (plotly's <br>)."""
    text = ax.title.text
    if text and "<br>" not in text and len(text) > width:
        ax.title.text = "<br>".join(textwrap.wrap(text, width))


def _axis_title(fig: go.Figure, axis: str) -> str:
    ax = fig.layout.xaxis if axis == "x" else fig.layout.yaxis
    return re.sub(r"<[^>]+>", "", re.sub(r"<br>", " ", (ax.title.text or "") if ax and ax.title else "")).strip()


def _fmt(v) -> str:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return f"{v:.3g}" if math.isfinite(v) else str(v)
    return str(v)


def _series_sentence(name: str, pts: list[tuple], fx=_fmt) -> str:
    """'Series pinned h2d: 24 points, x 4 B to 256 MiB; y from 0.001 (at x 4 B) to 52.7 (at x 128 MiB).'
    `fx` writes an x value: in binary units on a size axis (log_size_axis), as the reader sees the ticks."""
    ys = [(y, x) for x, y in pts if isinstance(y, int | float) and not isinstance(y, bool) and math.isfinite(y)]
    if not ys:
        return f"Series {name}: {len(pts)} points."
    lo, hi = min(ys), max(ys)
    return (f"Series {name}: {len(pts)} points, x {fx(pts[0][0])} to {fx(pts[-1][0])}; "
            f"y from {_fmt(lo[0])} (at x {fx(lo[1])}) to {_fmt(hi[0])} (at x {fx(hi[1])}).")


def _tell_series_apart(fig: go.Figure) -> None:
    """Give each line series its own dash and marker unless the figure chose them, so no two
    series differ by colour alone."""
    k = 0
    for tr in fig.data:
        if tr.type != "scatter":
            continue
        mode = tr.mode or "lines"
        if "lines" in mode and not (tr.line and tr.line.dash):
            tr.update(line={"dash": DASHES[k % len(DASHES)]})
        if not (tr.marker and tr.marker.symbol):
            tr.update(marker={"symbol": MARKERS[k % len(MARKERS)]})
            if mode == "lines":
                tr.update(mode="lines+markers")
        k += 1


def log_size_axis(fig: go.Figure, title: str = "transfer size") -> None:
    """A log x axis labelled in binary units (4 B … 256 MiB)."""
    ticks = [4 ** k for k in range(1, 15)]
    fig.update_xaxes(type="log", title=title, tickvals=ticks, ticktext=[_size_label(t) for t in ticks])


def _size_label(n: int | float) -> str:
    """4 -> '4 B', 3 << 20 -> '3 MiB', 1.5e6 -> '1.43 MiB' (anything not a number: as _fmt writes it)."""
    if not isinstance(n, int | float) or isinstance(n, bool) or not math.isfinite(n):
        return _fmt(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def _is_size_axis(ax) -> bool:
    """Whether an axis was labelled by log_size_axis (its tick texts are the sizes of its tick values)."""
    vals, texts = getattr(ax, "tickvals", None), getattr(ax, "ticktext", None)
    return bool(vals) and texts is not None and list(texts) == [_size_label(v) for v in vals]


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
