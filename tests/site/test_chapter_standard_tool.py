"""tools/chapter_standard.py finds what a chapter page lacks (it must be able to fail)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tools import chapter_standard

ROOT = Path(__file__).resolve().parents[2]

GOOD_HEAD = "# Chapter 3\n**Time:** about 45 min · **Prerequisites:** Chapter 0\n\n**Learning objectives.** ..."


def _write(tmp_path, cells) -> Path:
    p = tmp_path / "03_demo.ipynb"
    nbformat.write(new_notebook(cells=cells), p)
    return p


def test_a_page_that_meets_the_standard_has_no_problems(tmp_path):
    fold = new_code_cell("ev = ctx.get('x')")
    fold.metadata["tags"] = ["hide-output"]
    p = _write(tmp_path, [new_markdown_cell(GOOD_HEAD), new_code_cell("ctx = course.start()"),
                          new_markdown_cell("**Predict**: how long?"), new_code_cell("ctx.predict('ch03.a', None)"),
                          fold, new_markdown_cell("## Key points\n- one")])
    assert chapter_standard.page_problems(p) == []


def test_each_missing_part_is_named(tmp_path):
    p = _write(tmp_path, [new_markdown_cell("# Chapter 3\nSeed 002 asks"), new_code_cell("ctx = course.start()"),
                          new_markdown_cell("**Predict**: how long?"), new_code_cell("ev = ctx.get('x')"),
                          new_code_cell("ctx.predict('ch03.a', 1)"), new_code_cell("checks.close('3.1', a, 9 * t0)"),
                          new_markdown_cell("The end.")])
    found = "\n".join(chapter_standard.page_problems(p))
    for part in ("time estimate", "prerequisites", "objectives", "Key points", "'Seed'", "tag hide-output",
                 "followed by a ctx.predict", "checks.close in view"):
        assert part in found, part


def test_a_prediction_without_a_prompt_is_named(tmp_path):
    fold = new_code_cell("ev = ctx.get('x')")
    fold.metadata["tags"] = ["hide-output"]
    p = _write(tmp_path, [new_markdown_cell(GOOD_HEAD), new_markdown_cell("**Explain.** Reads wait; writes do not."),
                          new_code_cell("ctx.predict('ch03.a', None)"), fold, new_markdown_cell("## Key points\n- one")])
    assert chapter_standard.page_problems(p) == [
        "03_demo.ipynb: the prediction in cell 2 has no **Predict** prompt in the text cell above it"]


def test_sections_must_be_numbered_without_gaps(tmp_path):
    head = GOOD_HEAD + "\n\n## 1. First"
    for numbers, ok in (((2, 3), True), ((2, 3, 5), False), ((2, 2), False), ((3,), False)):
        cells = [new_markdown_cell(head)] + [new_markdown_cell(f"## {n}. Part\n\ntext") for n in numbers]
        p = _write(tmp_path, [*cells, new_markdown_cell("## Exercises"), new_markdown_cell("## Key points\n- one")])
        found = chapter_standard.page_problems(p)
        assert (found == []) is ok, (numbers, found)


def test_random_seed_is_allowed_but_seed_alone_is_not(tmp_path):
    assert not chapter_standard.SEED.search("each learner's device comes from a random seed")
    assert chapter_standard.SEED.search("the seeds asked")


def test_only_cells_marked_as_showing_the_experiment_s_function_count(tmp_path):
    """A cell counts when its #@shown marker names the experiment's measuring function (its
    module and name; tools.shown writes the text); a hand-typed copy of the function does not."""
    from helpers.core import experiments

    def time_it(n):
        return n

    exp = experiments.Experiment("demo.x", 3, "demo", lambda quick, code=time_it: {})
    mark = f"#@shown {time_it.__module__}: time_it\n"
    p = _write(tmp_path, [new_code_cell("def time_it(n):\n    return n\n"),
                          new_code_cell("#@shown elsewhere.mod: time_it\ndef time_it(n):\n    return n")])
    assert chapter_standard.shown_on([p], {"demo.x": exp}) == 0
    p2 = _write(tmp_path, [new_code_cell(mark + "def time_it(n):\n    return n")])
    assert chapter_standard.shown_on([p2], {"demo.x": exp}) == 1
