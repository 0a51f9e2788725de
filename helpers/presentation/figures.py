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
import functools
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
MAX_EMBED_BYTES = 1_000_000  # what one figure may add to a notebook (its plotly JSON, its page HTML and CSV)
MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down")


TRACE_TYPES = ("bar", "heatmap", "histogram", "scatter", "scattergl")  # every trace type a course figure uses


@functools.lru_cache(maxsize=1)
def course_template() -> go.layout.Template:
    """plotly_white's layout and its defaults for the course's TRACE_TYPES only: a figure looks the
    same as under the whole template, which styles some twenty other trace types as well. Naming
    the whole one cost each notebook ~0.25 s at its first figure, validating all of them, and
    every figure carried the 7 KB of it in its JSON (this one is half that)."""
    white = pio.templates["plotly_white"]
    return go.layout.Template(layout=white.layout, data={t: getattr(white.data, t) for t in TRACE_TYPES})


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


class FigureTooLargeError(InputError):
    """A figure whose display would embed more than MAX_EMBED_BYTES in a notebook: decimate its data
    honestly (`block_max`, fewer points) before drawing it."""


def block_max(z, max_cells: int = 40_000):
    """(grid, row step, column step): `z` reduced by the maximum over blocks of step x step cells,
    the smallest square block that leaves at most `max_cells` cells. A maximum keeps every peak
    (a target in a range-Doppler map stays as bright as it was); a grid already small enough comes
    back unchanged with steps 1, 1. The caller says on the figure what a cell now is."""
    import numpy as np

    z = np.asarray(z, dtype=float)
    if z.ndim != 2 or not z.size:
        raise InputError(f"block_max needs a non-empty 2-D grid, got shape {z.shape}")
    max_cells = int(max_cells)
    if max_cells < 1:
        raise InputError("block_max: max_cells must be at least 1")
    step = 1
    while -(-z.shape[0] // step) * -(-z.shape[1] // step) > max_cells:
        step += 1
    if step == 1:
        return z, 1, 1
    rows, cols = -(-z.shape[0] // step) * step, -(-z.shape[1] // step) * step
    padded = np.full((rows, cols), -np.inf)
    padded[:z.shape[0], :z.shape[1]] = z
    return padded.reshape(rows // step, step, cols // step, step).max(axis=(1, 3)), step, step


class CourseFigure:
    """A plotly figure whose provenance is part of it, displayable offline everywhere.

    Displaying one embeds its plotly JSON, its page HTML and its CSV in the notebook; more than
    MAX_EMBED_BYTES of that raises FigureTooLargeError (a 9 MB notebook page is slow to open,
    to diff and to build), so a figure over large data must be drawn from an honest reduction."""

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
                          margin={"t": TITLE_PAD + block + TITLE_GAP}, template=course_template(), colorway=PALETTE)
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
        """The plotted (series, x, y) points of the figure's line, marker and bar traces (a
        heatmap's cells and a table's rows are in `csv`)."""
        out = []
        for i, tr in enumerate(self.fig.data):
            xs = list(tr.x) if getattr(tr, "x", None) is not None else []
            ys = list(tr.y) if getattr(tr, "y", None) is not None else []
            out += [(_trace_name(tr, i), x, y) for x, y in zip(xs, ys, strict=False)]
        return out

    def csv(self) -> str:
        """The figure's data as CSV. Line, marker and bar charts: series, x, y (the axis titles as
        headers), with each span's start and end for bars drawn from a base (timelines); a
        histogram: series and each value; a heatmap: its grid, one row per y, one column per x;
        a table trace: the table."""
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(_data_table(self.fig))
        return buf.getvalue()

    def description(self) -> str:
        """A text description of the figure generated from its data, for screen readers and the
        page: what kind of chart it is (lines, bars, a timeline, a histogram, a heatmap, a table),
        over which axes, and what each trace's data runs from and to."""
        prov = "; ".join(provenance_line(m, s) for m, s in self.parts)
        kinds = [_kind(tr) for tr in self.fig.data]
        head = f"Figure: {self.title or 'untitled'}. {_overview(self.fig, kinds)} {prov}."
        parts = [head] + [_DESCRIBE[k](self.fig, i, tr) for i, (tr, k) in enumerate(zip(self.fig.data, kinds,
                                                                                           strict=True))]
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
        bundle = self._bundle()
        size = _bundle_bytes(bundle)
        if size > MAX_EMBED_BYTES:
            raise FigureTooLargeError(
                f"the figure {self.title!r} would embed {size / 1e6:.1f} MB in the notebook (at most "
                f"{MAX_EMBED_BYTES / 1e6:g} MB): draw it from fewer points or a reduced grid (figures.block_max)")
        return bundle

    def embedded_bytes(self) -> int:
        """What displaying the figure adds to a notebook, in bytes (all its MIME parts)."""
        return _bundle_bytes(self._bundle())

    def _bundle(self) -> dict:
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


def _bundle_bytes(bundle: dict) -> int:
    return sum(len(v.encode()) if isinstance(v, str) else len(json.dumps(v)) for v in bundle.values())


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
    ys = [(y, x) for x, y in pts if _is_number(y)]
    if not ys:
        return f"Series {name}: {len(pts)} points."
    lo, hi = min(ys), max(ys)
    return (f"Series {name}: {len(pts)} points, x {fx(pts[0][0])} to {fx(pts[-1][0])}; "
            f"y from {_fmt(lo[0])} (at x {fx(lo[1])}) to {_fmt(hi[0])} (at x {fx(hi[1])}).")


# -- what a description says for each kind of trace ----------------------------------------------------

def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _trace_name(tr, i: int) -> str:
    return getattr(tr, "name", None) or f"series {i + 1}"


def _kind(tr) -> str:
    """xy (lines and markers), bar, span (bars drawn from a base: a timeline or a placement map),
    histogram, heatmap, table, or other."""
    if tr.type in ("scatter", "scattergl"):
        return "xy"
    if tr.type == "bar":
        return "span" if tr.base is not None else "bar"
    return tr.type if tr.type in ("histogram", "heatmap", "table") else "other"


def _horizontal(tr) -> bool:
    return getattr(tr, "orientation", None) == "h"


def _titles(fig: go.Figure) -> tuple[str, str]:
    return _axis_title(fig, "x") or "x", _axis_title(fig, "y") or "y"


def _colour_title(tr) -> str:
    cb = getattr(tr, "colorbar", None)
    text = (cb.title.text if cb is not None and cb.title is not None else None) or ""
    return re.sub(r"<[^>]+>", "", text).strip() or "value"


def _overview(fig: go.Figure, kinds: list[str]) -> str:
    """The figure's first sentence after its title: what kind of chart over which axes."""
    x_t, y_t = _titles(fig)
    out = []
    n = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    if "xy" in n:
        out.append(f"{n['xy']} series of {y_t} against {x_t}.")
    if "bar" in n:
        bx, by_ = _axis_title(fig, "x") or "category", _axis_title(fig, "y") or "category"
        value, by = (bx, by_) if all(_horizontal(t) for t in fig.data if _kind(t) == "bar") else (by_, bx)
        out.append(f"A bar chart of {value} by {by}, {n['bar']} series of bars.")
    if "span" in n:
        spans = [t for t in fig.data if _kind(t) == "span"]
        if all(_horizontal(t) for t in spans):
            lanes = list(dict.fromkeys(str(v) for t in spans for v in (t.y if t.y is not None else [])))
            what = "A timeline (Gantt chart) along" if _TIME.search(x_t) else "Bars spanning ranges of"
            out.append(f"{what} {x_t}: bars from a start to an end in {len(lanes)} "
                       f"{'lane' if len(lanes) == 1 else 'lanes'} ({_some(lanes)}), {n['span']} kinds of bar.")
        else:
            out.append(f"Bars spanning ranges of {y_t} at each {x_t}, {n['span']} series.")
    if "histogram" in n:
        out.append(f"A histogram of {x_t}, {n['histogram']} series.")
    for tr in (t for t in fig.data if _kind(t) == "heatmap"):
        z = _grid(tr)
        out.append(f"A heatmap of {_colour_title(tr)} over {x_t} ({z.shape[1]} columns) and {y_t} "
                   f"({z.shape[0]} rows).")
    if "table" in n:
        out.append(f"{n['table']} table{'s' if n['table'] > 1 else ''}.")
    if "other" in n:
        out.append(f"{n['other']} other trace{'s' if n['other'] > 1 else ''} "
                   f"({', '.join(sorted({t.type for t in fig.data if _kind(t) == 'other'}))}).")
    return " ".join(out) or "No data."


_TIME = re.compile(r"\btime\b|\((?:s|ms|µs|us|ns)\)|\bseconds?\b", re.I)  # an axis of time: a timeline


def _some(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _describe_xy(fig: go.Figure, i: int, tr) -> str:
    xs = list(tr.x) if tr.x is not None else []
    ys = list(tr.y) if tr.y is not None else []
    fx = _size_label if _is_size_axis(fig.layout.xaxis) else _fmt
    return _series_sentence(_trace_name(tr, i), list(zip(xs, ys, strict=False)), fx)


def _describe_bar(fig: go.Figure, i: int, tr) -> str:
    """'Series device memory: H100 80, H200 141.' (every bar when few; the range when many)."""
    cats, vals = (tr.y, tr.x) if _horizontal(tr) else (tr.x, tr.y)
    pairs = list(zip(list(cats if cats is not None else []), list(vals if vals is not None else []), strict=False))
    name = _trace_name(tr, i)
    nums = [(v, c) for c, v in pairs if _is_number(v)]
    if not nums:
        return f"Series {name}: {len(pairs)} bars."
    if len(pairs) <= 8:
        return f"Series {name}: " + ", ".join(f"{c} {_fmt(v)}" for c, v in pairs) + "."
    lo, hi = min(nums), max(nums)
    return (f"Series {name}: {len(pairs)} bars, from {_fmt(lo[0])} ({lo[1]}) to {_fmt(hi[0])} ({hi[1]}).")


def _spans(tr) -> list[tuple[object, float, float]]:
    """(lane or position, start, end) of each bar of a span trace."""
    pos, length = (tr.y, tr.x) if _horizontal(tr) else (tr.x, tr.y)
    pos, length = list(pos if pos is not None else []), list(length if length is not None else [])
    base = tr.base if hasattr(tr.base, "__len__") and not isinstance(tr.base, str) else [tr.base] * len(length)
    return [(p, b, b + n) for p, b, n in zip(pos, list(base), length, strict=False) if _is_number(b) and _is_number(n)]


def _describe_span(fig: go.Figure, i: int, tr) -> str:
    """'copy H→D: 12 bars in 2 lanes (buffer 0: copy, buffer 1: copy), from 0.1 to 14.2, each 0.8 to 1.1 long.'"""
    spans = _spans(tr)
    name = _trace_name(tr, i)
    if not spans:
        return f"{name}: no bars."
    lanes = list(dict.fromkeys(str(p) for p, _, _ in spans))
    lengths = [e - s for _, s, e in spans]
    where = f"in {len(lanes)} {'lane' if len(lanes) == 1 else 'lanes'} ({_some(lanes)})" if _horizontal(tr) else \
        f"at {len(lanes)} positions ({_some(lanes)})"
    long = _fmt(min(lengths)) if _fmt(min(lengths)) == _fmt(max(lengths)) else \
        f"{_fmt(min(lengths))} to {_fmt(max(lengths))}"
    return (f"{name}: {len(spans)} bars {where}, from {_fmt(min(s for _, s, _ in spans))} to "
            f"{_fmt(max(e for _, _, e in spans))}, each {long} long.")


def _describe_histogram(fig: go.Figure, i: int, tr) -> str:
    vals = sorted(float(v) for v in (tr.x if tr.x is not None else tr.y if tr.y is not None else []) if _is_number(v))
    name = _trace_name(tr, i)
    if not vals:
        return f"Series {name}: no values."
    mid = len(vals) // 2
    median = vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
    return (f"Series {name}: {len(vals)} values from {_fmt(vals[0])} to {_fmt(vals[-1])}, "
            f"median {_fmt(median)}.")


def _grid(tr):
    import numpy as np

    z = np.asarray(tr.z if tr.z is not None else [[]], dtype=float)
    return z if z.ndim == 2 else z.reshape(1, -1)


def _heat_axis(tr, axis: str, n: int) -> list:
    given = getattr(tr, axis)
    if given is not None and len(given) == n:
        return list(given)
    start, step = getattr(tr, f"{axis}0"), getattr(tr, f"d{axis}")
    start = start if _is_number(start) else 0
    step = step if _is_number(step) else 1
    return [start + k * step for k in range(n)]


def _describe_heatmap(fig: go.Figure, i: int, tr) -> str:
    """'Range bin 0 to 899, Doppler bin 0 to 63; dB from -30 (at range bin 12, Doppler bin 3) to 41.2 (…).'"""
    import numpy as np

    z = _grid(tr)
    x_t, y_t = _titles(fig)
    xs, ys = _heat_axis(tr, "x", z.shape[1]), _heat_axis(tr, "y", z.shape[0])
    finite = np.isfinite(z)
    if not finite.any():
        return f"{x_t} {_fmt(xs[0])} to {_fmt(xs[-1])}; no finite values."
    masked = np.where(finite, z, np.nan)
    lo = np.unravel_index(np.nanargmin(masked), z.shape)
    hi = np.unravel_index(np.nanargmax(masked), z.shape)
    at = lambda r, c: f"{x_t} {_fmt(xs[c])}, {y_t} {_fmt(ys[r])}"  # noqa: E731
    return (f"{x_t} {_fmt(xs[0])} to {_fmt(xs[-1])}, {y_t} {_fmt(ys[0])} to {_fmt(ys[-1])}; {_colour_title(tr)} "
            f"from {_fmt(float(z[lo]))} (at {at(*lo)}) to {_fmt(float(z[hi]))} (at {at(*hi)}), median "
            f"{_fmt(float(np.nanmedian(masked)))}.")


def _table_columns(tr) -> tuple[list[str], list[list]]:
    heads = [re.sub(r"<[^>]+>", "", str(h)) for h in (tr.header.values or [])]
    cols = [list(c) for c in (tr.cells.values or [])]
    return heads, cols


def _describe_table(fig: go.Figure, i: int, tr) -> str:
    heads, cols = _table_columns(tr)
    n = max((len(c) for c in cols), default=0)
    return f"Table {_trace_name(tr, i) if tr.name else ''}".rstrip() + \
        f": {n} rows, columns {', '.join(heads) or '(untitled)'}."


def _describe_other(fig: go.Figure, i: int, tr) -> str:
    return f"{tr.type} trace {_trace_name(tr, i)}."


_DESCRIBE = {"xy": _describe_xy, "bar": _describe_bar, "span": _describe_span, "histogram": _describe_histogram,
             "heatmap": _describe_heatmap, "table": _describe_table, "other": _describe_other}


def _data_table(fig: go.Figure) -> list[list]:
    """The rows `CourseFigure.csv` writes, header first (see there)."""
    x_t, y_t = _titles(fig)
    traces = list(fig.data)
    if len(traces) == 1 and _kind(traces[0]) == "heatmap":
        tr = traces[0]
        z = _grid(tr)
        xs, ys = _heat_axis(tr, "x", z.shape[1]), _heat_axis(tr, "y", z.shape[0])
        head = [f"{y_t} \\ {x_t} ({_colour_title(tr)})"] + xs
        return [head] + [[y] + [f"{v:.4g}" for v in row] for y, row in zip(ys, z.tolist(), strict=True)]
    if len(traces) == 1 and _kind(traces[0]) == "table":
        heads, cols = _table_columns(traces[0])
        return [heads] + [list(r) for r in zip(*cols, strict=False)]
    if traces and all(_kind(t) == "histogram" for t in traces):
        return [["series", x_t if traces[0].x is not None else y_t]] + [
            [_trace_name(t, i), v] for i, t in enumerate(traces) for v in (t.x if t.x is not None else t.y or [])]
    has_spans = any(_kind(t) == "span" for t in traces)
    head = ["series", x_t, y_t] + (["span start", "span end"] if has_spans else [])
    rows = [head]
    for i, tr in enumerate(traces):
        k, name = _kind(tr), _trace_name(tr, i)
        if k == "histogram":
            vals = tr.x if tr.x is not None else tr.y
            rows += [[name, v, ""] if tr.x is not None else [name, "", v] for v in (vals if vals is not None else [])]
        elif k == "span":
            rows += [[name, *((e - s, p) if _horizontal(tr) else (p, e - s)), s, e] for p, s, e in _spans(tr)]
        elif k in ("xy", "bar"):
            xs = list(tr.x) if tr.x is not None else []
            ys = list(tr.y) if tr.y is not None else []
            rows += [[name, x, y] + ([""] * 2 if has_spans else []) for x, y in zip(xs, ys, strict=False)]
    return rows


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
