"""Chapter 3's replay path: every figure renders from a recording (a fake one, built here
from the committed reference plus synthetic chapter-3 data), missing recordings fail with a
clear message, and the explorer places points on the model."""


import pytest
from conftest import write_reference

from helpers import course
from helpers.ch03_dma_and_copy_engines import copy_engines, explorer, views
from helpers.core.errors import InputError, InputTypeError, ReferenceDataError
from helpers.core.mode import Mode
from helpers.models import copy_cost
from helpers.presentation.figures import CourseFigure

SWEEP_ID = "transfers.pinned_vs_pageable"


def fake_runs():
    return {"sizes": [4, 4096], "count": 10, "runs": [
        {"nbytes": n, "direction": d, "count": 10, "gate_held": True, "span_s": 3.5e-5,
         "enqueue_median_s": 2.2e-6, "device_median_s": 3.5e-6, "device_per_copy_s": 3.5e-6,
         "sync_wall_median_s": 7e-6, "enqueue_p90_s": 2.5e-6} for d in ("h2d", "d2h") for n in (4, 4096)]}


FAKE = {
    "copy_engines.gated_small_copies": fake_runs(),
    "copy_engines.bidirectional": {"nbytes": 64 << 20, "copies": 8, "trials": 2, "async_engine_count": 3,
                                   **{k: {"aggregate_gbps": [v, v], "median_gbps": v, "per_stream_gbps": {}}
                                      for k, v in (("h2d", 55.0), ("d2h", 55.0), ("both", 98.0))}},
    "copy_engines.cpu_cost": {"nbytes": 256 << 20, "reps": 5, "cpus": 16, "results": {
        f"{k}/{d}": {"wall_s": w, "cpu_s": c, "user_s": c, "sys_s": 0.0, "gbps": (256 << 20) / w / 1e9,
                     "cpu_share": c / w}
        for k, w, c in (("pageable", 0.027, 0.027), ("pinned", 0.005, 0.0007)) for d in ("h2d", "d2h")}},
}


@pytest.fixture
def fake_ref_dir(tmp_path, monkeypatch):
    write_reference(tmp_path, add=FAKE, chapter=3)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_MODE", "replay")
    return tmp_path


def test_every_chapter3_figure_renders_in_replay(fake_ref_dir):
    ctx = course.start("test", quiet=True)
    assert not ctx.live
    sweep = ctx.get(SWEEP_ID)
    assert sweep.mode is Mode.REPLAY
    fits = copy_cost.fit_all(sweep.data)
    figs = [views.bandwidth_figure(sweep, fits)]
    gated = ctx.get("copy_engines.gated_small_copies")
    figs.append(copy_engines.gated_figure(gated))
    figs.append(copy_engines.bidirectional_figure(ctx.get("copy_engines.bidirectional")))
    cpu = ctx.get("copy_engines.cpu_cost")
    figs.append(copy_engines.cpu_cost_figure(cpu))
    point = explorer.recorded_point(sweep, fits, 5000, "h2d", "pinned")
    figs.append(explorer.explorer_figure(sweep, fits, point))
    for f in figs:
        assert isinstance(f, CourseFigure) and f.modes == [Mode.REPLAY]
        assert "REPLAY · recorded on" in f.fig.layout.title.text
        assert "text/html" in f._repr_mimebundle_()
    assert len(copy_engines.gated_rows(gated.data)) == 4 and len(copy_engines.cpu_cost_rows(cpu.data)) == 4


def test_missing_recording_fails_with_a_clear_message(tmp_path, monkeypatch):
    write_reference(tmp_path, drop=("copy_engines.bidirectional",))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_MODE", "replay")
    ctx = course.start("test", quiet=True)
    with pytest.raises(ReferenceDataError, match="no recording of 'copy_engines.bidirectional'.*--only"):
        ctx.get("copy_engines.bidirectional")


def test_recorded_point_snaps_to_nearest_size_and_sits_on_the_model(fake_ref_dir):
    sweep = course.start("test", quiet=True).get(SWEEP_ID)
    fits = copy_cost.fit_all(sweep.data)
    p = explorer.recorded_point(sweep, fits, 5000, "h2d", "pinned")
    assert p.nbytes == 4096 and p.source == "recorded"
    assert 0.5 < p.measured_gbps / p.model_gbps < 2  # the pinned model fits the sweep
    assert "latency-bound" in p.describe()
    big = explorer.recorded_point(sweep, fits, 256 << 20, "d2h", "pinned")
    assert "bandwidth-bound" in big.describe()


@pytest.mark.parametrize("size, exc", [(0, InputError), (3, InputError), (-4, InputError),
                                       ((256 << 20) + 1, InputError), (4.0, InputTypeError), (True, InputTypeError)])
def test_explorer_rejects_bad_sizes(size, exc):
    with pytest.raises(exc, match="copy size"):
        explorer.check_size(size)


def test_explorer_control_builds_in_replay(fake_ref_dir):
    pytest.importorskip("ipywidgets")
    ctx = course.start("test", quiet=True)
    sweep = ctx.get(SWEEP_ID)
    fits = copy_cost.fit_all(sweep.data)
    ui = explorer.explorer(sweep, fits)
    slider, direction, kind = ui.children[1:4]
    direction.value = "d2h"  # redraws without error
    kind.value = "pageable"
    slider.value = 1 << 20
    assert slider.value == 1 << 20
