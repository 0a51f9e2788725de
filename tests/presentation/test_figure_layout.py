"""Course figures' layout: the title block hangs from the top and the plot starts below it, however
many lines the provenance wraps into; on a page the title and provenance are HTML above the plot."""

from __future__ import annotations

import plotly.graph_objects as go

from helpers.core.mode import Mode
from helpers.presentation import figures


def _fig(parts, title="Pinned vs pageable copy bandwidth", height=None):
    f = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    f.update_layout(title=title, yaxis_title="bandwidth (GB/s)", height=height)
    return figures.CourseFigure(f, parts)


LONG = "NVIDIA H100 80GB HBM3 (H100 SXM5 80GB) · driver 580.159.04 · CUDA 13.2 · 2026-11-01 · a long source"


def test_the_top_margin_holds_every_title_and_provenance_line():
    one, three = _fig([(Mode.REPLAY, "h100")]), _fig([(Mode.REPLAY, LONG), (Mode.SIMULATED, "a model")])
    for cf in (one, three):
        t = cf.fig.layout.title
        assert (t.yref, t.y, t.yanchor) == ("container", 1, "top")
        lines = t.text.count("<br>") + 1
        prov = t.text.split("<sup>")[1].count("<br>") + 1
        block = figures.TITLE_LINE_PX * (lines - prov) + figures.PROVENANCE_LINE_PX * prov
        assert cf.fig.layout.margin.t >= figures.TITLE_PAD + block + 20
    assert three.fig.layout.margin.t > one.fig.layout.margin.t


def test_a_long_title_wraps_in_the_plot():
    cf = _fig([(Mode.REPLAY, "h100")], title="A title " * 20)
    head = cf.fig.layout.title.text.split("<sup>")[0]
    assert all(len(line) <= figures.TITLE_WIDTH for line in head.split("<br>") if line)


def test_on_a_page_title_and_provenance_are_html_above_a_plot_without_them():
    cf = _fig([(Mode.REPLAY, LONG)], height=400)
    page = cf._repr_mimebundle_()["text/html"]
    assert '<span class="course-figure-title">Pinned vs pageable copy bandwidth</span>' in page
    assert '<span class="course-figure-provenance">REPLAY · recorded on NVIDIA H100' in page
    page_fig, _ = cf._page_figure()
    assert not page_fig.layout.title.text and page_fig.layout.margin.t == figures.TITLE_GAP
    # the plot keeps its height; the title's room goes
    assert page_fig.layout.height == 400 - (cf.fig.layout.margin.t - figures.TITLE_GAP)
    assert "REPLAY" in cf.fig.layout.title.text  # JupyterLab's plotly JSON keeps the provenance in the plot


def test_a_legend_under_the_plot_moves_off_the_x_axis_and_long_axis_titles_wrap():
    f = go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name="one"))
    long_x = "round trips N (copy in, kernel, copy out, each a separate call into the CUDA library)"
    f.update_layout(title="t", xaxis_title=long_x, legend={"orientation": "h", "y": -0.25})
    cf = figures.CourseFigure(f, [(Mode.SIMULATED, "a model")])
    lg = cf.fig.layout.legend
    assert (lg.yref, lg.y, lg.yanchor) == ("container", 0, "bottom")  # under the axis, not on it
    assert cf.fig.layout.margin.b >= figures.AXIS_ROOM + figures.LEGEND_ROW_PX
    assert "<br>" in cf.fig.layout.xaxis.title.text and cf.fig.layout.xaxis.automargin
    assert figures._axis_title(cf.fig, "x") == long_x  # the description and CSV read it whole


def test_legend_rows_are_counted_from_the_names():
    assert figures._legend_rows(["a", "b"]) == 1
    assert figures._legend_rows(["a long legend entry name " * 2] * 6) >= 3


def test_a_legend_beside_a_right_hand_y_axis_moves_under_the_plot_and_the_figure_grows():
    from plotly.subplots import make_subplots

    f = make_subplots(specs=[[{"secondary_y": True}]])
    f.add_trace(go.Scatter(x=[1, 2], y=[1, 2], name="bytes over the link (MiB)"), secondary_y=False)
    f.add_trace(go.Scatter(x=[1, 2], y=[3, 1], name="evictions"), secondary_y=True)
    f.update_layout(title="t", height=420)
    cf = figures.CourseFigure(f, [(Mode.SIMULATED, "a model")])
    assert cf.fig.layout.legend.orientation == "h" and cf.fig.layout.legend.yref == "container"
    assert cf.fig.layout.height == 420 + figures.LEGEND_ROW_PX


def test_figures_wear_plotly_white_for_every_trace_type_the_course_draws():
    """The course's template is plotly_white cut to the trace types the course uses: the same
    layout, the same defaults for those traces, so a figure looks as it did under the whole one."""
    import plotly.io as pio

    white = pio.templates["plotly_white"]
    tmpl = _fig([(Mode.REPLAY, "h100")]).fig.layout.template
    assert tmpl.layout.to_plotly_json() == white.layout.to_plotly_json()
    for t in figures.TRACE_TYPES:
        assert [x.to_plotly_json() for x in getattr(tmpl.data, t)] == \
               [x.to_plotly_json() for x in getattr(white.data, t)], t


def test_every_trace_type_drawn_anywhere_in_the_course_is_in_the_template():
    """A new kind of trace (go.Box, go.Pie, ...) must be added to figures.TRACE_TYPES, or it would
    be drawn without plotly_white's styling."""
    import re
    from pathlib import Path

    root = Path(figures.__file__).resolve().parents[2]
    used = set()
    for path in [*root.joinpath("helpers").rglob("*.py"), *root.joinpath("notebooks").glob("*.ipynb"),
                 *root.joinpath("labs").glob("*.ipynb")]:
        used |= {m.lower() for m in re.findall(r"\bgo\.([A-Z][A-Za-z]*)\(", path.read_text())}
    used -= {"figure"}
    assert {"scatter", "bar"} <= used  # the scan finds the traces it must
    assert used <= set(figures.TRACE_TYPES), sorted(used - set(figures.TRACE_TYPES))
