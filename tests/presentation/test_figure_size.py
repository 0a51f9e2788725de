"""No figure embeds more than figures.MAX_EMBED_BYTES in a notebook (issue 38: a Chapter 9 heatmap embedded
8.6 MB). The guard is in CourseFigure's display, so every figure every notebook shows is held to it when
the notebooks run (make test-notebooks); here: that it raises, that block_max reduces a grid honestly, and
that the course's largest figures, drawn from the recordings, stay under the limit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from helpers import course
from helpers.ch09_radar_pipeline import diagrams
from helpers.core.mode import Mode
from helpers.models.radar import designs, dsp, metrics
from helpers.presentation import figures


def test_a_figure_over_the_limit_refuses_to_display():
    z = np.random.default_rng(0).normal(size=(512, 900))
    cf = figures.CourseFigure(go.Figure(go.Heatmap(z=z)), [(Mode.SIMULATED, "a test grid")])
    assert cf.embedded_bytes() > figures.MAX_EMBED_BYTES
    with pytest.raises(figures.FigureTooLargeError, match="block_max"):
        cf._repr_mimebundle_()
    small = figures.CourseFigure(go.Figure(go.Heatmap(z=z[:20, :20])), [(Mode.SIMULATED, "a test grid")])
    bundle = small._repr_mimebundle_()
    assert small.embedded_bytes() <= figures.MAX_EMBED_BYTES and "text/html" in bundle


def test_block_max_keeps_every_peak_and_says_its_step():
    z = np.zeros((100, 90))
    z[37, 61], z[99, 89], z[0, 0] = 5.0, 7.0, -3.0
    out, sy, sx = figures.block_max(z, 400)
    assert out.shape[0] * out.shape[1] <= 400 and sy == sx > 1
    assert out.max() == 7.0 and out[37 // sy, 61 // sx] == 5.0 and out[99 // sy, 89 // sx] == 7.0
    same, a, b = figures.block_max(z, z.size)
    assert (a, b) == (1, 1) and np.array_equal(same, z)
    for bad in (np.zeros(5), np.zeros((0, 3))):
        with pytest.raises(figures.InputError):
            figures.block_max(bad)
    with pytest.raises(figures.InputError):
        figures.block_max(z, 0)


def test_the_range_doppler_map_stays_under_the_limit_and_keeps_its_targets():
    frame = dsp.synth_frame(4 << 20, seed=9, variant=0)
    rd = dsp.doppler_map(np, frame, dsp.matched_filter(np))
    cf = diagrams.map_figure(rd)
    assert cf.embedded_bytes() <= figures.MAX_EMBED_BYTES
    full = 10 * np.log10(rd[:, :900] + 1e-3)
    assert float(np.max(cf.fig.data[0].z)) == pytest.approx(full.max(), abs=0.06)  # the brightest target survives
    assert "maximum of" in cf.title


def test_the_recorded_radar_figures_stay_under_the_limit():
    ctx = course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")
    measured = [ctx.get(f"radar.{d}") for d in designs.DESIGNS]
    parts = metrics.parts_of(measured)
    for n in (4 << 20, 16 << 20):
        runs = metrics.runs_of(measured, frame_bytes=n)
        for cf in (diagrams.latency_figure(runs, parts), diagrams.histogram_figure(runs, parts)):
            assert cf.embedded_bytes() <= figures.MAX_EMBED_BYTES, cf.title
