"""tools/grader/labgrade.py: the lab-format lint and the verdict logic of grading and student runs."""

import copy
from pathlib import Path

import nbformat
import pytest

from tools.grader import labgrade

ROOT = Path(__file__).resolve().parents[2]

LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))


@pytest.mark.parametrize("lab", LABS, ids=[p.name for p in LABS])
def test_every_lab_follows_the_format(lab):
    assert labgrade.lint(lab) == []


def _mutated(tmp_path, change, name="lab2_bandwidth_test.ipynb"):
    nb = nbformat.read(ROOT / "labs" / "lab2_bandwidth_test.ipynb", as_version=4)
    change(nb)
    out = tmp_path / name
    nbformat.write(nb, out)
    return labgrade.lint(out)


def _cell(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def test_lint_catches_a_cell_without_metadata(tmp_path):
    probs = _mutated(tmp_path, lambda nb: nb.cells[0].metadata.pop("nbgrader"))
    assert any("no nbgrader metadata" in p for p in probs)


def test_lint_catches_a_top_level_solution_region(tmp_path):
    def change(nb):
        _cell(nb, "fit_line").source = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
    assert any("top level" in p for p in _mutated(tmp_path, change))


def test_lint_catches_a_check_without_grading_check(tmp_path):
    def change(nb):
        _cell(nb, "fit_synthetic").source = "assert fit_line([1], [1])"
    assert any("exactly one grading.check" in p for p in _mutated(tmp_path, change))


def test_lint_catches_a_trailing_value_in_a_check(tmp_path):
    def change(nb):
        _cell(nb, "batch_slowdown").source += "\nbatch_slowdown(2, 2, 1, 1)"
    assert any("partial credit" in p for p in _mutated(tmp_path, change))


def test_lint_catches_an_unlocked_check_and_a_bad_name(tmp_path):
    probs = _mutated(tmp_path, lambda nb: _cell(nb, "fit_synthetic").metadata["nbgrader"].update(locked=False),
                     name="Lab-two.ipynb")
    assert any("labN_topic" in p for p in probs)
    probs = _mutated(tmp_path, lambda nb: _cell(nb, "fit_synthetic").metadata["nbgrader"].update(locked=False))
    assert any("must be locked" in p for p in probs)


def test_print_as_last_statement_is_not_a_value():
    assert not labgrade._ends_with_value("x = 1\nprint(x)")
    assert labgrade._ends_with_value("x = 1\nx")
    assert not labgrade._ends_with_value("x = 1\nx;")


def _graded_cell(gid, outputs):
    c = nbformat.v4.new_code_cell("pass")
    c.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": gid, "points": 1}
    c.outputs = [nbformat.from_dict(o) for o in outputs]
    return c


def _stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _error(ename):
    return {"output_type": "error", "ename": ename, "evalue": "boom", "traceback": []}


def _result(status, score, max_score=5):
    return labgrade.CheckResult(lab="lab2", grade_id="x", score=score, max_score=max_score, status=status,
                                feedback="")


def test_meets_pass_and_fail_expectations():
    ok, clean, crash = _result("OK", 5), _result("FAIL", 0), _result("CRASH", 0)
    assert labgrade.meets({"s": [ok]}, "pass") == []
    assert labgrade.meets({"s": [ok, clean]}, "pass")
    assert labgrade.meets({"s": [clean]}, "fail") == []
    assert labgrade.meets({"s": [crash]}, "fail")
    assert labgrade.meets({"s": [ok]}, "fail")
    assert labgrade.meets({"s": []}, "pass")


def test_student_run_problems():
    nb = nbformat.v4.new_notebook()
    nb.cells = [_graded_cell("a", [_stdout("✘ a: FAIL — not written yet\n")])]
    assert labgrade.student_problems("lab9_x.ipynb", nb) == []
    crashed = copy.deepcopy(nb)
    crashed.cells[0].outputs.append(nbformat.from_dict(_error("NameError")))
    assert any("raised NameError" in p for p in labgrade.student_problems("lab9_x.ipynb", crashed))
    silent = copy.deepcopy(nb)
    silent.cells[0].outputs = []
    assert any("did not report a clean FAIL" in p for p in labgrade.student_problems("lab9_x.ipynb", silent))


def test_report_lines_and_totals(capsys):
    failed = labgrade.CheckResult(lab="lab2", grade_id="fit", score=0, max_score=3, status="FAIL",
                                  feedback="weight by 1/t")
    labgrade.print_report({"alice": [_result("OK", 5), failed]})
    out = capsys.readouterr().out
    assert "lab2: x ...." in out and "OK (5/5)" in out and "FAIL (0/3)" in out
    assert "    weight by 1/t" in out and "lab2: 5/8" in out and "Score: 5/8" in out


def test_submissions_layouts(tmp_path):
    from tools.grader.classrun import submissions

    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "lab2_bandwidth_test.ipynb").write_text("{}")
    assert list(submissions(tmp_path / "flat")) == ["submission"]
    for s in ("ann", "bob"):
        (tmp_path / "class" / s).mkdir(parents=True)
        (tmp_path / "class" / s / "lab2_bandwidth_test.ipynb").write_text("{}")
    (tmp_path / "class" / "cyd" / "lab2").mkdir(parents=True)  # nbgrader's submitted/<student>/<lab>/
    (tmp_path / "class" / "cyd" / "lab2" / "lab2_bandwidth_test.ipynb").write_text("{}")
    (tmp_path / "class" / "dan").mkdir()  # handed in nothing: listed, with a reason
    got = submissions(tmp_path / "class")
    assert list(got) == ["ann", "bob", "cyd", "dan"] and got["dan"] == [] and len(got["cyd"]) == 1


def test_a_student_without_a_lab_is_listed_with_the_reason(tmp_path):
    from tools.grader.classrun import grade_class

    (tmp_path / "dan").mkdir()
    (tmp_path / "eve").mkdir()
    (tmp_path / "eve" / "lab9_nothing.ipynb").write_text("{}")
    report = grade_class(ROOT, tmp_path, {"lab2": ROOT / "labs" / "lab2_bandwidth_test.ipynb"}, progress=lambda m: None)
    assert set(report) == {"dan", "eve"}
    assert report["dan"][0].status == "ERROR" and "no lab notebook" in report["dan"][0].feedback
    assert report["eve"][0].status == "ERROR" and "not a lab of this course" in report["eve"][0].feedback


def test_nbgrader_student_version_partial_credit_and_tampered_checks(tmp_path, capsys):
    """A student version made by nbgrader, in which the student wrote only fit_line and replaced
    a check with `pass`: the fit's points, and none for the tampered check (checks are the
    grader's, never the notebook's)."""
    pytest.importorskip("nbgrader")
    lab = ROOT / "labs" / "lab2_bandwidth_test.ipynb"
    [student] = labgrade.make_student([lab], tmp_path / "student")
    nb = nbformat.read(student, as_version=4)
    solved = _cell(nbformat.read(lab, as_version=4), "fit_line").source
    _cell(nb, "fit_line").source = "\n".join(ln for ln in solved.splitlines() if "SOLUTION" not in ln)
    _cell(nb, "benchmark_warmup").source = "pass"
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "ann" / lab.name)
    report = labgrade.grade(tmp_path / "subs")
    got = {c.grade_id: (c.status, c.score) for c in report["ann"]}
    assert got["fit_synthetic"] == ("OK", 5)
    assert got["benchmark_warmup"] == ("FAIL", 0)
    assert got["timed_copy_events"] == ("FAIL", 0)
