"""Figures carry their mode and render without a CDN; exercise checks can say 'wrong'."""

import plotly.graph_objects as go
import pytest

from helpers import course
from helpers.ch00_your_machine import first_copy
from helpers.core.errors import InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.learning import checks
from helpers.presentation import figures


def _fig(parts):
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    fig.update_layout(title="Bandwidth")
    return figures.CourseFigure(fig, parts)


@pytest.mark.parametrize("mode,word", [(Mode.LIVE, "LIVE"), (Mode.REPLAY, "REPLAY"), (Mode.SIMULATED, "SIMULATED")])
def test_title_names_mode(mode, word):
    f = _fig([(mode, "somewhere")])
    assert word in f.fig.layout.title.text and "somewhere" in f.fig.layout.title.text
    assert word in repr(f)


def test_a_long_provenance_wraps_at_its_separators_and_loses_nothing():
    src = ("NVIDIA H100 80GB HBM3 (H100 SXM5 80GB, 10de:2330) · driver 580.159.04 · CUDA 13.2 · "
           "32.0 GT/s PCIe x16 · 2026-11-21")
    line = figures.provenance_line(Mode.REPLAY, src)
    lines = figures.wrap_at_dots(line, width=60)
    assert len(lines) >= 2 and lines[0].startswith("REPLAY · recorded on NVIDIA")
    assert lines[0].count(" · ") == 1  # the badge and the piece after it, however long
    assert all(len(x) <= 60 or " · " not in x.removeprefix("· ") for x in lines[1:])  # only a lone long piece exceeds
    assert " ".join(lines) == line  # nothing lost, nothing reordered
    text = _fig([(Mode.REPLAY, src)]).fig.layout.title.text
    assert "2026-11-21" in text and text.count("<br>") == len(figures.wrap_at_dots(line)) >= 2
    assert figures.wrap_at_dots("LIVE · measured now on here") == ["LIVE · measured now on here"]


def test_simulated_is_never_called_measured():
    text = _fig([(Mode.SIMULATED, "toy")]).fig.layout.title.text
    assert "not a measurement" in text and "measured" not in text.replace("not a measurement", "")


def test_figure_needs_provenance():
    with pytest.raises(ValueError, match="provenance"):
        figures.CourseFigure(go.Figure(), [])


def test_mimebundle_offline():
    bundle = _fig([(Mode.REPLAY, "ref")])._repr_mimebundle_()
    assert set(bundle) >= {"application/vnd.plotly.v1+json", "text/html", "text/plain"}
    html = bundle["text/html"]
    assert "Plotly.newPlot" in html
    assert "cdn" not in html.lower() and "<script src" not in html.lower(), "no network fetch at view time"
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["y"] == [3, 4]


def test_table_text_and_html():
    t = figures.Table([("a", 1), ("<b>", 2)], ("k", "v"), caption="cap")
    assert "&lt;b&gt;" in t._repr_html_() and repr(t).splitlines() == ["cap", "k    v", "a    1", "<b>  2"]


@pytest.mark.parametrize("answer,expected", [(None, None), (63.0, True), (60, False), ("x", False),
                                             (float("nan"), False)])
def test_checks_close(answer, expected, capsys):
    assert checks.close("ex", answer, 63.015, rel_tol=0.01) is expected
    out = capsys.readouterr().out
    assert {None: "not answered", True: "✔", False: "✘"}[expected] in out


def test_checks_equal(capsys):
    assert checks.equal("ex", 4096, 4096) is True
    assert checks.equal("ex", 4095, 4096, hint="a page is 4 KiB") is False
    assert "a page is 4 KiB" in capsys.readouterr().out


def _sweep(live: bool, bw: dict[tuple[str, str], float], sizes=(4 << 20, 64 << 20)) -> Evidence:
    """A transfers.pinned_vs_pageable Evidence whose copies run at the given GB/s."""
    series = [{"host_kind": k, "direction": d, "nbytes": list(sizes), "median_s": [n / (g * 1e9) for n in sizes]}
              for (k, d), g in bw.items()]
    mode, source = (Mode.LIVE, "Test GPU") if live else (Mode.REPLAY, "NVIDIA H100 · recorded")
    return Evidence("transfers.pinned_vs_pageable", {"series": series}, mode, source, why="test",
                    provenance={"gpu": {"name": "NVIDIA H100"}})


def _bw(pageable: float, pinned: float) -> dict:
    return {(k, d): (pinned if k == "pinned" else pageable) for k in ("pageable", "pinned") for d in ("h2d", "d2h")}


def test_first_copy_reads_the_nearest_swept_size_of_the_real_recording():
    ctx = course.Context(Mode.REPLAY, "test", gpu_name=None, reference_name="h100-pcie")
    recorded = ctx.get("transfers.pinned_vs_pageable", recorded=True)
    used, bw = first_copy.bandwidths(recorded, 60 << 20)
    assert used == 64 << 20
    assert set(bw) == {(k, d) for k in ("pageable", "pinned") for d in ("h2d", "d2h")}
    fig = first_copy.figure(recorded, recorded, 60 << 20)
    assert fig.modes == [Mode.REPLAY] and len(fig.fig.data) == 1


def test_first_copy_sets_a_live_run_beside_the_recording():
    here, recorded = _sweep(True, _bw(10.0, 50.0), sizes=(64 << 20,)), _sweep(False, _bw(2.0, 20.0))
    fig = first_copy.figure(here, recorded, 64 << 20)
    assert fig.modes == [Mode.LIVE, Mode.REPLAY]
    assert [round(y) for y in fig.fig.data[0].y] == [10, 10, 50, 50]
    rows = first_copy.ratio_rows(here, recorded, 64 << 20)
    assert [r[1] for r in rows] == ["this machine (live)", "reference (replay)"] * 2
    assert rows[0][-1] == "5.00x" and rows[1][-1] == "10.00x"
    only_ref = first_copy.ratio_rows(_sweep(False, _bw(2.0, 20.0)), recorded, 64 << 20)
    assert [r[1] for r in only_ref] == ["reference (replay)"] * 2
    with pytest.raises(InputTypeError, match="copy size"):
        first_copy.bandwidths(recorded, 2.5)


def test_claim_vs_measurement_follows_the_numbers():
    slow, fast = _sweep(False, _bw(2.9, 3.0)), _sweep(True, _bw(10.0, 50.0))
    assert "pays less" in first_copy.claim_vs_measurement(slow, 16 << 20)
    text = first_copy.claim_vs_measurement(fast, 16 << 20)
    assert "more than it did" in text and "now (live, Test GPU)" in text


def test_widget_output_is_state_not_capture():
    """helpers.presentation.widgets.show writes nbformat outputs (stream + MIME bundle) into the widget."""
    from helpers.presentation import widgets

    class Out:
        outputs = ()

    class Fig:
        def _repr_mimebundle_(self, **kw):
            return {"application/vnd.plotly.v1+json": {"data": []}, "text/html": "<div></div>"}

    out = Out()
    widgets.show(out, "3 evictions", Fig())
    kinds = [o["output_type"] for o in out.outputs]
    assert kinds == ["stream", "display_data"]
    assert out.outputs[0]["text"] == "3 evictions\n"
    assert "application/vnd.plotly.v1+json" in out.outputs[1]["data"]
