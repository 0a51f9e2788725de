"""Figures a screen reader and a colour-blind reader can use, with their data as CSV."""

from __future__ import annotations

import base64
import re

import plotly.graph_objects as go

from helpers.presentation.figures import PALETTE, CourseFigure


def _fig() -> CourseFigure:
    f = go.Figure([go.Scatter(x=[4, 4096, 1 << 20], y=[0.001, 1.2, 52.7], name="pinned h2d"),
                   go.Scatter(x=[4, 4096, 1 << 20], y=[0.002, 1.5, 55.1], name="pinned d2h")])
    f.update_layout(title="Bandwidth vs size", xaxis_title="transfer size (B)", yaxis_title="bandwidth (GB/s)")
    return CourseFigure(f, [("replay", "H100 reference")])


def test_the_description_comes_from_the_data():
    d = _fig().description()
    assert "Bandwidth vs size" in d and "2 series of bandwidth (GB/s) against transfer size (B)" in d
    assert "Series pinned d2h: 3 points" in d and "to 55.1 (at x 1.05e+06)" in d and "REPLAY" in d


def test_the_csv_holds_every_point_with_axis_headers():
    lines = _fig().csv().splitlines()
    assert lines[0] == "series,transfer size (B),bandwidth (GB/s)" and len(lines) == 7
    assert "pinned h2d,4096,1.2" in lines


def test_series_differ_by_more_than_colour():
    f = _fig().fig
    assert {t.line.dash for t in f.data} == {"solid", "dash"} and len({t.marker.symbol for t in f.data}) == 2
    assert tuple(f.layout.colorway) == PALETTE


def test_the_page_html_names_the_figure_and_offers_the_csv():
    cf = _fig()
    page = cf._repr_mimebundle_()["text/html"]
    assert '<figure class="course-figure" aria-label="Figure: Bandwidth vs size.' in page  # a figure names itself
    assert 'role="group"' not in page  # a role axe-core does not allow on <figure>
    uri = re.search(r'href="data:text/csv;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(uri).decode() == cf.csv() and 'download="bandwidth-vs-size.csv"' in page


def test_a_figure_that_chose_its_own_dashes_keeps_them():
    f = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], line={"dash": "dot"}, marker={"symbol": "star"})])
    cf = CourseFigure(f, [("simulated", "model")])
    assert cf.fig.data[0].line.dash == "dot" and cf.fig.data[0].marker.symbol == "star"


def test_a_size_axis_is_described_in_the_units_its_ticks_show():
    """On a log_size_axis the reader sees '4 B … 256 MiB'; the description says the same, not 2.68e+08."""
    from helpers.presentation.figures import log_size_axis

    f = go.Figure([go.Scatter(x=[4, 1 << 20, 3 << 23, 1 << 28], y=[0.001, 20.0, 54.0, 53.0], name="pinned h2d")])
    f.update_layout(title="Bandwidth vs size", yaxis_title="GB/s")
    log_size_axis(f, "copy size")
    d = CourseFigure(f, [("replay", "H100 reference")]).description()
    assert "4 points, x 4 B to 256 MiB; y from 0.001 (at x 4 B) to 54 (at x 24 MiB)." in d, d
    # an axis whose ticks are not sizes keeps plain numbers
    assert "(at x 1.05e+06)" in _fig().description()
