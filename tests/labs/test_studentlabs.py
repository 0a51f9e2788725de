"""tools/dist/studentlabs.py (the learner's student labs without nbgrader) against nbgrader itself."""

import json
from pathlib import Path

import pytest

from tools.dist import studentlabs as S

ROOT = Path(__file__).resolve().parents[2]

LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))


def cell(src, kind="code", **flags):
    meta = {"nbgrader": dict(flags, grade_id="x")} if flags else {}
    c = {"cell_type": kind, "metadata": meta, "source": src}
    if kind == "code":
        c.update(outputs=[{"output_type": "stream", "name": "stdout", "text": "secret"}], execution_count=3)
    return c


@pytest.fixture(scope="module")
def nbgrader_versions(tmp_path_factory):
    pytest.importorskip("nbgrader")
    from tools.grader import labgrade

    out = tmp_path_factory.mktemp("nbgrader")
    labgrade.make_student(LABS, out)
    return out


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_same_as_nbgrader(lab, nbgrader_versions):
    ours = S.student_notebook(json.loads(lab.read_text()), lab.name)["cells"]
    theirs = json.loads((nbgrader_versions / lab.name).read_text())["cells"]
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        where = f"{lab.name} cell {i}"
        assert a["cell_type"] == b["cell_type"], where
        assert a["source"] == "".join(b["source"]), where
        for key in ("editable", "deletable"):
            assert a["metadata"].get(key, True) == b["metadata"].get(key, True), f"{where}: {key}"
        if a["cell_type"] == "code":
            assert a["outputs"] == [] and a["execution_count"] is None, where


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_no_solution_or_hidden_line_left(lab):
    text = json.dumps(S.student_notebook(json.loads(lab.read_text()), lab.name))
    for marker in S.SOLUTION + S.HIDDEN + S.MARK_SCHEME:
        assert marker not in text
    assert "raise NotImplementedError()" in text


def test_region_replaced_with_indented_stub_and_hidden_tests_removed():
    nb = {"cells": [cell("def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n", solution=True),
                    cell("check()\n### BEGIN HIDDEN TESTS\nassert f() == 42\n### END HIDDEN TESTS\nok()",
                         grade=True, locked=True),
                    cell("An answer", kind="markdown", solution=True)], "metadata": {"celltoolbar": "x"}}
    out = S.student_notebook(nb)
    a, b, c = out["cells"]
    assert a["source"] == "def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    assert a["outputs"] == [] and a["execution_count"] is None and a["metadata"]["deletable"] is False
    assert b["source"] == "check()\nok()"
    assert b["metadata"]["editable"] is False and b["metadata"]["deletable"] is False
    assert c["source"] == "YOUR ANSWER HERE"
    assert "celltoolbar" not in out["metadata"]
    assert nb["cells"][0]["source"].count("42") == 1  # the input is not changed


def test_solution_cell_without_region_becomes_the_stub():
    out = S.student_notebook({"cells": [cell("x = 42", solution=True)], "metadata": {}})
    assert out["cells"][0]["source"] == "# YOUR CODE HERE\nraise NotImplementedError()"


@pytest.mark.parametrize("src, flags, msg", [
    ("### BEGIN SOLUTION\nx = 1\n", {"solution": True}, "without"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", {"solution": True}, "nested"),
    ("### BEGIN SOLUTION\nx\n### END SOLUTION", {}, "not marked as a solution"),
    ("### BEGIN HIDDEN TESTS\nx\n### END HIDDEN TESTS", {"locked": True}, "grade cell"),
    ("### BEGIN HIDDEN TESTS\nx\n", {"grade": True}, "without"),
])
def test_malformed_markers_are_refused(src, flags, msg):
    with pytest.raises(S.LabFormatError, match=msg):
        S.student_notebook({"cells": [cell(src, **flags)], "metadata": {}})


def test_never_overwrites_the_learners_copy(tmp_path, capsys):
    lab = LABS[0]
    mine = tmp_path / lab.name
    mine.write_text("my work")
    assert S.main(["--out", str(tmp_path), str(lab), str(LABS[1])]) == 0
    assert mine.read_text() == "my work"
    fresh = json.loads((tmp_path / LABS[1].name).read_text())
    assert "BEGIN SOLUTION" not in json.dumps(fresh)
    assert "kept your own" in capsys.readouterr().out
    assert S.main(["--out", str(tmp_path), str(LABS[1])]) == 0  # second run: nothing rewritten
    assert json.loads((tmp_path / LABS[1].name).read_text()) == fresh
