"""The learner's prediction record: with none, some and all predictions, and never changing the store."""

from __future__ import annotations

import hashlib

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.core import figures, prediction_record, predictions


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def pages(tmp_path):
    """Two small chapters: predictions in numbered sections, exercises that cite them."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = new_notebook(cells=[
        new_markdown_cell("# Chapter 3 — copies\n\n**Time:** 5 min"),
        new_markdown_cell("## 1. Small copies\n\nA tiny copy pays the fixed cost of the doorbell and completion."),
        new_code_cell('my_guess = None  # µs for one 4-byte copy: replace None with your guess\n'
                      'ctx.predict("ch03.small_us", my_guess, unit="µs", kind="time")'),
        new_markdown_cell("## 2. Large copies\n\nBandwidth of the link, in GB/s, for a large pinned copy."),
        new_code_cell('my_guess = None  # GB/s for 256 MiB pinned\nctx.predict("ch03.big_gbps", my_guess, '
                      'unit="GB/s", kind="bandwidth")'),
        new_markdown_cell("## Exercises\n\n**Exercise 3.1 — link ceiling (derivation).** From the bandwidth of "
                          "section 2, what fraction of the link's ceiling does a large pinned copy reach?\n\n"
                          "**Exercise 3.2 — doorbells (concept).** Why does a tiny copy cost a fixed time? "
                          "Think of the completion and the doorbell of section 1."),
        new_markdown_cell("## Key points\n\n- copies")])
    nbformat.write(nb, folder / "03_copies.ipynb")
    nb = new_notebook(cells=[
        new_markdown_cell("# Chapter 5 — managed memory"),
        new_markdown_cell("## 1. Which pointer\n\nText."),
        new_code_cell('my_guess = None  # "a", "b" or "c"\nctx.predict("ch05.which", my_guess, kind="outcome")'),
        new_markdown_cell("## Exercises\n\n**1. (code) Walk the pages.** Write a kernel."),
    ])
    nbformat.write(nb, folder / "05_managed.ipynb")
    return folder


def _snapshot(folder):
    """Each file's content, inode and modification time: a rewrite with the same bytes shows too."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir())} if folder.exists() else {}


def _every_view(report):
    return [prediction_record.overview(report), prediction_record.calibration(report),
            prediction_record.by_chapter(report), prediction_record.by_kind(report),
            prediction_record.to_revisit(report)]


def test_the_catalog_reads_where_each_question_is_asked(pages):
    c = prediction_record.catalog(pages)
    assert list(c) == ["ch03.small_us", "ch03.big_gbps", "ch05.which"]
    small = c["ch03.small_us"]
    assert (small.chapter, small.section, small.kind, small.unit) == ("Chapter 3 — copies", "1. Small copies",
                                                                     "time", "µs")
    assert small.asks == "µs for one 4-byte copy" and small.exercise == "Exercise 3.2 — doorbells"
    assert c["ch03.big_gbps"].exercise == "Exercise 3.1 — link ceiling"
    assert c["ch05.which"].exercise == "Exercise 1 — Walk the pages"


def test_with_no_predictions_the_page_says_how_to_make_some(pages, state):
    report = prediction_record.load(notebooks=pages)
    views = _every_view(report)
    text = repr(views[0])
    assert "no predictions yet" in text and "replace `my_guess = None`" in text and str(predictions.store()) in text
    assert all(isinstance(v, prediction_record.Note | prediction_record.Stack) for v in views)
    assert not state.exists()  # reading an absent record creates nothing


def _plant_some():
    predictions.commit("ch03.small_us", 1, unit="µs", kind="time")
    predictions.commit("ch03.small_us", 4, unit="µs", kind="time")  # a later change of mind: not the one shown
    predictions.compare("ch03.small_us", 8.0, unit="µs", source="H100 reference", mode="replay")
    predictions.compare("ch03.small_us", 3.0, unit="µs", source="my GPU", mode="live")
    predictions.compare("ch03.small_us", 9.0, unit="µs", source="H100 reference", mode="replay")  # after the live one
    predictions.commit("ch03.big_gbps", 50, unit="GB/s", kind="bandwidth")
    predictions.compare("ch03.big_gbps", 52.0, unit="GB/s", source="H100 reference", mode="replay")
    predictions.commit("ch05.which", "b", kind="outcome")


def test_with_some_predictions_each_is_set_beside_what_it_was_compared_with(pages):
    _plant_some()
    report = prediction_record.load(notebooks=pages)
    small, big, which = report.entries
    assert small.guess == 1.0 and small.measured == 3.0 and small.mode == "live"  # first guess; live preferred
    assert small.verdict == "off by 3.0x (measured higher)" and big.verdict == "within 2x"
    assert which.guess == "b" and which.ratio is None
    assert "3 of the course's 3 Predict questions" in prediction_record.summary(report)


def test_the_calibration_plot_is_log_log_with_the_band_and_its_provenance(pages):
    _plant_some()
    fig = prediction_record.calibration(prediction_record.load(notebooks=pages))
    assert isinstance(fig, figures.CourseFigure)
    f = fig.fig
    assert f.layout.xaxis.type == "log" and f.layout.yaxis.type == "log"
    band = f.data[0]
    assert band.fill == "toself" and [y / x for x, y in zip(band.x[:3], band.y[:3], strict=True)] == [0.5, 0.5, 2.0]
    points = [t for t in f.data if t.mode == "markers"]
    assert {t.name for t in points} == {predictions.KINDS["time"], predictions.KINDS["bandwidth"]}
    assert {t.marker.color for t in points} <= set(figures.PALETTE)
    assert len({t.marker.symbol for t in points}) == 2  # told apart by shape as well as colour
    assert {(m.value, s) for m, s in fig.parts} == {("live", "my GPU"), ("replay", "H100 reference")}


def test_kinds_and_revisits_name_the_misjudged_and_where_to_go(pages):
    _plant_some()
    report = prediction_record.load(notebooks=pages)
    assert "You misjudge times (latencies, durations, CPU time) most: typically off by 3x" in \
        prediction_record.misjudged(report)
    (row,) = prediction_record.revisit_rows(report, factor=2.5)
    assert row == ("ch03.small_us", "3.0x", "Chapter 3 — copies, section “1. Small copies”",
                   "Exercise 3.2 — doorbells")
    assert prediction_record.revisit_rows(report, factor=3.5) == []


def test_a_value_from_an_unstated_mode_or_another_unit_is_not_plotted(pages):
    predictions.commit("ch03.small_us", 1, unit="µs", kind="time")
    predictions.compare("ch03.small_us", 3.0, unit="µs", source="somewhere")  # no mode
    predictions.commit("ch03.big_gbps", 50, unit="GB/s", kind="bandwidth")
    predictions.compare("ch03.big_gbps", 52.0, unit="MB/s", mode="replay")
    report = prediction_record.load(notebooks=pages)
    assert isinstance(prediction_record.calibration(report), prediction_record.Note)
    assert report.entries[1].verdict == "guessed in GB/s, measured in MB/s: no ratio"


def test_with_every_question_of_the_course_predicted_every_view_renders():
    """All of the real course's Predict questions answered (numbers and texts), half compared."""
    places = prediction_record.catalog()
    assert len(places) > 30
    for i, (q, p) in enumerate(places.items()):
        numeric = p.kind != "outcome"
        predictions.commit(q, (i + 1) * 1.5 if numeric else "my answer", unit=p.unit, kind=p.kind)
        if numeric and i % 2:
            predictions.compare(q, (i + 1) * 4.0, unit=p.unit, source="reference", mode="replay")
    report = prediction_record.load()
    assert len(report.entries) == len(places)
    views = _every_view(report)
    assert isinstance(views[1], figures.CourseFigure)
    tables = views[2].parts
    assert len(tables) == len({p.notebook for p in places.values()})
    assert sum(len(t.rows) for t in tables) == len(places)
    assert all("<table>" in v._repr_html_() for v in views[2:4])


def test_the_page_never_changes_the_record(pages, state):
    _plant_some()
    before = _snapshot(state)
    report = prediction_record.load(notebooks=pages)
    for v in _every_view(report):
        getattr(v, "_repr_html_", v.__repr__)()
        repr(v)
    assert _snapshot(state) == before


def test_a_damaged_record_is_reported_and_left_where_it_is(pages, state):
    state.mkdir()
    (state / "predictions.json").write_text("{half a file")
    before = _snapshot(state)
    report = prediction_record.load(notebooks=pages)
    text = prediction_record.summary(report)
    assert "cannot be read as a prediction record" in text and "Nothing was changed" in text
    assert _snapshot(state) == before


def test_a_measured_zero_is_shown_without_a_ratio(pages):
    predictions.commit("ch03.small_us", 2, unit="µs", kind="time")
    predictions.compare("ch03.small_us", -0.0, unit="µs", mode="replay")  # a difference of equal counts
    (e,) = prediction_record.load(notebooks=pages).entries
    assert e.measured == 0.0 and str(e.measured) == "0.0" and e.ratio is None and "no ratio" in e.verdict
