"""A figure's text description and CSV fit its kind: lines, bars, a timeline, a histogram, a heatmap, a table."""

from __future__ import annotations

import csv
import io

import numpy as np
import plotly.graph_objects as go

from helpers.presentation.figures import CourseFigure

REPLAY = [("replay", "H100 reference")]


def _rows(cf: CourseFigure) -> list[list[str]]:
    return list(csv.reader(io.StringIO(cf.csv())))


def _heatmap() -> CourseFigure:
    z = np.zeros((4, 6))
    z[2, 5], z[1, 0] = 40.0, -30.0
    fig = go.Figure(go.Heatmap(z=z, colorbar={"title": "dB"}))
    fig.update_layout(title="Range-Doppler map", xaxis_title="range bin", yaxis_title="Doppler bin")
    return CourseFigure(fig, [("simulated", "synthetic echoes")])


def test_a_heatmap_is_described_as_a_grid_with_its_extremes_not_as_series():
    d = _heatmap().description()
    assert "series" not in d, d
    assert "A heatmap of dB over range bin (6 columns) and Doppler bin (4 rows)." in d, d
    assert "range bin 0 to 5, Doppler bin 0 to 3" in d
    assert "dB from -30 (at range bin 0, Doppler bin 1) to 40 (at range bin 5, Doppler bin 2)" in d, d


def test_a_heatmaps_csv_is_its_grid():
    rows = _rows(_heatmap())
    assert rows[0] == ["Doppler bin \\ range bin (dB)", "0", "1", "2", "3", "4", "5"]
    assert len(rows) == 5 and rows[3][0] == "2" and rows[3][6] == "40"


def _gantt() -> CourseFigure:
    fig = go.Figure()
    fig.add_bar(name="copy H→D", orientation="h", y=["buffer 0", "buffer 1", "buffer 0"], x=[1.0, 1.0, 1.5],
                base=[0.0, 2.0, 4.0])
    fig.add_bar(name="kernels", orientation="h", y=["buffer 0", "buffer 1"], x=[2.0, 2.0], base=[1.0, 3.0])
    fig.update_layout(title="Pipeline timeline", xaxis_title="time (ms)", yaxis_title="lane", barmode="overlay")
    return CourseFigure(fig, REPLAY)


def test_a_timeline_is_described_by_lanes_starts_and_ends():
    d = _gantt().description()
    assert "A timeline (Gantt chart) along time (ms): bars from a start to an end in 2 lanes (buffer 0, buffer 1)" in d
    assert "copy H→D: 3 bars in 2 lanes (buffer 0, buffer 1), from 0 to 5.5, each 1 to 1.5 long." in d, d
    assert "kernels: 2 bars in 2 lanes (buffer 0, buffer 1), from 1 to 5, each 2 long." in d, d


def test_a_timelines_csv_gives_each_span_its_start_and_end():
    rows = _rows(_gantt())
    assert rows[0] == ["series", "time (ms)", "lane", "span start", "span end"]
    assert ["copy H→D", "1.5", "buffer 0", "4.0", "5.5"] in rows and len(rows) == 6


def test_bars_are_read_out_by_category():
    fig = go.Figure()
    fig.add_bar(name="largest BAR", x=["H100", "H200"], y=[128, 256])
    fig.add_bar(name="device memory", x=["H100", "H200"], y=[80, 141])
    fig.update_layout(title="BAR vs memory", yaxis_title="GiB")
    d = CourseFigure(fig, REPLAY).description()
    assert "A bar chart of GiB by category, 2 series of bars." in d and "series of GiB against" not in d, d
    assert "Series largest BAR: H100 128, H200 256. Series device memory: H100 80, H200 141." in d


def test_many_bars_give_their_range():
    fig = go.Figure(go.Bar(x=[f"c{i}" for i in range(12)], y=list(range(12)), name="n"))
    d = CourseFigure(fig, REPLAY).description()
    assert "Series n: 12 bars, from 0 (c0) to 11 (c11)." in d, d


def test_a_histogram_gives_its_count_range_and_median():
    fig = go.Figure(go.Histogram(x=[1.0, 2.0, 3.0, 4.0, 10.0], name="pinned"))
    fig.update_layout(title="Latency", xaxis_title="latency (ms)")
    cf = CourseFigure(fig, REPLAY)
    assert "A histogram of latency (ms), 1 series. " in cf.description()
    assert "Series pinned: 5 values from 1 to 10, median 3." in cf.description()
    assert _rows(cf) == [["series", "latency (ms)"]] + [["pinned", v] for v in ("1.0", "2.0", "3.0", "4.0", "10.0")]


def test_a_table_trace_is_described_by_its_rows_and_columns():
    fig = go.Figure(go.Table(header={"values": ["design", "p50 ms"]}, cells={"values": [["serial", "pipelined"],
                                                                                       [4.1, 2.2]]}))
    fig.update_layout(title="Designs")
    cf = CourseFigure(fig, REPLAY)
    assert "1 table." in cf.description() and "Table: 2 rows, columns design, p50 ms." in cf.description()
    assert _rows(cf) == [["design", "p50 ms"], ["serial", "4.1"], ["pipelined", "2.2"]]


def test_bars_and_points_together_say_both():
    fig = go.Figure()
    fig.add_bar(x=["host", "device"], y=[900.0, 400.0], name="median")
    fig.add_scatter(x=["host"] * 2, y=[880.0, 950.0], mode="markers", name="trials")
    fig.update_layout(yaxis_title="ns")
    d = CourseFigure(fig, REPLAY).description()
    assert "A bar chart of ns by category, 1 series of bars." in d and "1 series of ns against x." in d, d


def test_bars_spanning_an_address_range_are_not_called_a_timeline():
    fig = go.Figure(go.Bar(x=[2.0, 4.0], base=[0.0, 8.0], y=["VRAM", "VRAM"], orientation="h", name="allocated"))
    fig.update_layout(title="Buddy blocks", xaxis_title="VRAM offset (MiB)")
    d = CourseFigure(fig, [("simulated", "drm_buddy model")]).description()
    assert "timeline" not in d and "Bars spanning ranges of VRAM offset (MiB): bars from a start to an end in 1 lane" \
        in d, d
    assert "allocated: 2 bars in 1 lane (VRAM), from 0 to 12, each 2 to 4 long." in d
