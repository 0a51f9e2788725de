"""Every chapter and every lab's student version as the book build executed it (CI executes each once, there): no cell raised,
the wording matches the mode, and a fresh run is quiet (tools/checks/quiet.py, the rules nbval's
notebooks/conftest.py applies when a chapter runs under nbval). Run by `make book`."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools.checks import quiet
from tools.grader import labgrade
from tools.site import booklabs, sitecheck

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "book" / "_build" / "html"
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))

@pytest.mark.built_site
@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_the_book_executed_the_chapter_cleanly(notebook):
    page = notebook.relative_to(ROOT).with_suffix(".html").as_posix()
    nb = sitecheck.executed_notebook(SITE, page, ROOT)
    assert nb is not None, f"{page}: the build has no executed copy of {notebook.name} matching its source"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{notebook.name}: not every code cell ran"
    found = quiet.notebook_problems(nb)
    assert not found, f"{notebook.name}:\n" + "\n".join(f"  {f}" for f in found)


@pytest.mark.built_site
@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_the_book_ran_the_student_version_to_the_end_with_every_check_failing_cleanly(lab):
    """The labs' student versions execute once per CI run too, in the book: what `python -m tools.grader
    run-student` checks (no cell raised, every check cell reports a clean FAIL) is checked on that execution."""
    state = booklabs.read_state(SITE.parent)
    assert state is not None, "the build wrote no booklabs.json (run `make book`)"
    if state["mode"] != "student":
        pytest.skip(f"this site publishes the labs' {state['mode']} versions, not the student versions")
    page = state["labs"][lab.relative_to(ROOT).with_suffix("").as_posix()] + ".html"
    nb = sitecheck.executed_notebook(SITE, page, ROOT)
    assert nb is not None, f"{page}: the build has no executed copy of the student version of {lab.name}"
    assert labgrade.student_problems(lab.name, nb) == []


def test_an_error_a_stray_value_or_a_cross_is_found():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("course.start()", outputs=[nbformat.v4.new_output("stream", text="mode : REPLAY\n")]),
        nbformat.v4.new_code_cell("1/0", outputs=[nbformat.v4.new_output("error", ename="ZeroDivisionError",
                                                                           evalue="division by zero", traceback=[])]),
        nbformat.v4.new_code_cell("x == 1", outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "True"},
                                                                              execution_count=3)]),
        nbformat.v4.new_code_cell("check()", outputs=[nbformat.v4.new_output("stream", text="✘ wrong\n")]),
    ])
    found = quiet.notebook_problems(nb)
    assert any("cell 1 raised ZeroDivisionError" in f for f in found)
    assert any("cell 2 is not quiet: a stray True" in f for f in found)
    assert any("cell 3 is not quiet: a ✘" in f for f in found)
    assert not any("cell 0" in f for f in found)
