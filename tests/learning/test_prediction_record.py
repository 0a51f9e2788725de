"""The learner's prediction record: with none, some and all predictions, and never changing the store."""

from __future__ import annotations

import hashlib
import json
import math

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.learning import prediction_record, predictions
from helpers.presentation import figures


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
    (folder / "revisit.json").write_text(json.dumps({"ch03.small_us": "3.2", "ch03.big_gbps": "3.1",
                                                     "ch05.which": "1"}))
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
    (pages / "revisit.json").write_text(json.dumps({"ch03.small_us": "3.9"}))  # no such exercise: none named
    assert prediction_record.catalog(pages)["ch03.small_us"].exercise == ""
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


def test_a_measured_zero_is_a_total_miss_not_a_missing_ratio(pages):
    predictions.commit("ch03.small_us", 2, unit="µs", kind="time")
    predictions.compare("ch03.small_us", -0.0, unit="µs", mode="replay")  # a difference of equal counts
    report = prediction_record.load(notebooks=pages)
    (e,) = report.entries
    assert e.measured == 0.0 and str(e.measured) == "0.0" and e.ratio == 0.0 and e.factor == math.inf
    assert "measured zero" in e.verdict and not e.plottable
    assert [r[0] for r in prediction_record.revisit_rows(report)] == ["ch03.small_us"]


@pytest.mark.parametrize("noise", [-3e-13, 3e-13, -1e-15, 0.0])
def test_float_noise_around_zero_does_not_hide_the_biggest_miss(pages, noise):
    """Issue 37: a measured -3e-13 (990 rounds' worth of a zero slope) made 'no ratio', so a guess of 990
    extra calls, the worst miss, vanished from what to revisit while a 5x miss headed it."""
    predictions.commit("ch03.small_us", 990, unit="calls", kind="count")
    predictions.compare("ch03.small_us", noise, unit="calls", source="reference", mode="replay")
    predictions.commit("ch03.big_gbps", 10, unit="GB/s", kind="bandwidth")
    predictions.compare("ch03.big_gbps", 50.0, unit="GB/s", source="reference", mode="replay")
    report = prediction_record.load(notebooks=pages)
    rows = prediction_record.revisit_rows(report)
    assert [r[0] for r in rows] == ["ch03.small_us", "ch03.big_gbps"]  # the total miss first
    assert rows[0][1] == "measured 0, you guessed 990"
    small = report.entries[0]
    assert small.measured == 0.0  # shown as the zero it is, not as -3e-13
    table = prediction_record.chapter_tables(report)[0]
    assert table.rows[0][3] == "0 calls" and "e-13" not in repr(table.rows)
    assert prediction_record.misjudged(report).startswith("You misjudge counts (calls, reads, frames) most: 1 of 1 "
                                                          "comparison set a guess against a zero")
    assert "a zero on one side" in prediction_record.summary(report)
    fig = prediction_record.calibration(report)  # the zero cannot sit on log axes; the 5x miss can
    assert [list(t.x) for t in fig.fig.data if t.mode == "markers"] == [[10.0]]


def test_a_small_but_real_value_is_not_taken_for_zero(pages):
    predictions.commit("ch03.small_us", 2e-9, unit="s", kind="time")
    predictions.compare("ch03.small_us", 4e-9, unit="s", mode="replay")
    (e,) = prediction_record.load(notebooks=pages).entries
    assert e.ratio == pytest.approx(2.0) and e.verdict == "within 2x"


def test_every_course_question_names_an_exercise_that_exists_and_the_pinning_cost_one_is_right():
    """Issue 37: the record sent a learner who misjudged the cost of pinning 1 GiB to Exercise 4.7 (which
    page a device wrote). Every question of the course must have a chosen exercise (or an explicit null)
    that exists where revisit.json says."""
    places = prediction_record.catalog()
    chosen = prediction_record.revisit_map()
    assert set(chosen) == set(places), ("questions without a choice in notebooks/revisit.json: "
                                        f"{sorted(set(places) - set(chosen))}; choices for no question: "
                                        f"{sorted(set(chosen) - set(places))}")
    broken = [q for q, p in places.items() if chosen[q] is not None and not p.exercise]
    assert not broken, f"revisit.json names exercises that do not exist for {broken}"
    assert places["ch04.register_1gib_ms"].exercise == "Exercise 4.1 — when does pinning pay?"
    assert places["ch04.memlock_stops"].exercise.startswith("Exercise 2 — Room under the limit (")
    own = [q for q, c in chosen.items() if c and " " not in c]  # an exercise of the question's own chapter
    assert all(places[q].exercise.startswith(f"Exercise {chosen[q]} — ") for q in own)


def test_a_question_whose_comment_is_only_a_unit_is_labelled_by_its_predict_question():
    """Issue 37: a question was labelled "The reference machine (GiB)" (a section and a unit)."""
    places = prediction_record.catalog()
    labels = {q: prediction_record._asks_or_section(p) for q, p in places.items()}
    assert labels["ch00.largest_bar_gib"].startswith("How large is the biggest BAR") and \
        labels["ch00.largest_bar_gib"].endswith("?")
    bare = {q: lab for q, lab in labels.items() if len(lab.split()) < 3 or lab.endswith(f"({places[q].unit})")}
    assert not bare, f"questions labelled by a section and a unit, or by almost nothing: {bare}"


def test_the_page_keeps_naming_a_record_it_moved_aside(pages, state):
    """Issue 39: the message about a moved-aside record went to stderr once; the page must keep saying it."""
    state.mkdir()
    (state / "predictions.json").write_text("{half a file")
    predictions.commit("ch03.small_us", 2, unit="µs", kind="time")  # moves the damaged file aside
    (aside,) = state.glob("predictions.json.damaged-*")
    for _ in range(2):  # and on every later visit
        text = prediction_record.summary(prediction_record.load(notebooks=pages))
        assert str(aside) in text and "moved aside" in text
        predictions.commit("ch03.big_gbps", 5, unit="GB/s", kind="bandwidth")
    aside.unlink()  # recovered by the learner: the page stops naming it
    assert "moved aside" not in prediction_record.summary(prediction_record.load(notebooks=pages))


def test_a_record_from_a_newer_course_is_explained_on_the_page_not_raised(pages, state):
    state.mkdir()
    newer = json.dumps({"version": predictions.VERSION + 1, "predictions": {"ch03.small_us": [{"guess": 1}]}})
    (state / "predictions.json").write_text(newer)
    report = prediction_record.load(notebooks=pages)
    text = prediction_record.summary(report)
    assert "newer version of the course" in text and "left exactly as it is" in text and "make lab" in text
    for v in _every_view(report):
        repr(v)
    assert (state / "predictions.json").read_text() == newer
