"""Red team: planted adversarial submissions for every lab, graded in one class run.

Every trick of tests/labs/redteam.py is played in every lab (a different trick in each solution
cell, the cells left over solved) and must earn 0 on the parts it touches while the solved
parts keep their points; a submission with the check cells' metadata, checksums and sources
edited keeps its full score (only solution cells are graded); a file that is not a notebook
is that student's 0 with the reason. The run
must finish with every student listed, leave the instructor's checkout byte for byte as it
was, and write nothing outside the sandbox.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
import redteam  # noqa: E402

from tools.grader import labgrade, sandbox  # noqa: E402

pytestmark = pytest.mark.slow  # whole classes through the sandboxed grader

LABS = tuple(redteam.FUNCTIONS)
LIMITS = sandbox.Limits(call_s=5.0, load_s=60.0, part_s=60.0, submission_s=240.0)


def _parts(lab: str):
    from tools.grader.classrun import lab_parts

    return lab_parts(lab)


@pytest.fixture(scope="module")
def class_run(tmp_path_factory):
    assert sandbox.available() is None, f"the red team needs the sandbox: {sandbox.available()}"
    folder = tmp_path_factory.mktemp("class")
    marker = tmp_path_factory.mktemp("outside") / "written-from-a-sandbox"
    for lab in LABS:
        for name, plan in redteam.plans(lab).items():
            redteam.write(folder, f"{lab}-{name}", lab, redteam.notebook(lab, redteam.plan_cells(lab, plan, marker)))
        redteam.write(folder, f"{lab}-edited-metadata", lab, redteam.edited_metadata(lab))
        redteam.write(folder, f"{lab}-not-a-notebook", lab, b"\x00\xffnot json at all")
    before = redteam.tree_hash()
    t0 = time.monotonic()
    report = labgrade.grade(folder, limits=LIMITS)
    took = time.monotonic() - t0
    labgrade.print_report(report)
    print(f"red team: {len(report)} submissions graded in {took:.0f} s")
    return {"folder": folder, "report": report, "before": before, "after": redteam.tree_hash(), "marker": marker}


def _score(results) -> tuple[float, float]:
    return sum(r.score for r in results), sum(r.max_score for r in results)


def trick_table(report) -> dict[tuple[str, str], tuple[float, float]]:
    """(lab, trick) -> (points earned, points of the parts it played in): the closing note's table."""
    out = {}
    for lab in LABS:
        for name, plan in redteam.plans(lab).items():
            results = {r.grade_id: r for r in report[f"{lab}-{name}"]}
            for gid, trick in plan.items():
                if trick == "stub":
                    continue
                funcs = {n for n, _ in redteam.FUNCTIONS[lab][gid]}
                parts = [p for p in _parts(lab) if funcs & set(p.functions)]
                out[(lab, trick)] = (sum(results[p.grade_id].score for p in parts), sum(p.points for p in parts))
    return out


def test_every_student_is_listed(class_run):
    students = {d.name for d in class_run["folder"].iterdir()}
    assert set(class_run["report"]) == students
    assert all(class_run["report"][s] for s in students)


def test_every_trick_is_played_in_every_lab(class_run):
    table = trick_table(class_run["report"])
    tricks = set(redteam.DATA_TRICKS) | {t for pair in redteam.PROCESS_TRICKS for t in pair}
    assert set(table) == {(lab, t) for lab in LABS for t in tricks}
    for (lab, trick), (got, of) in sorted(table.items()):
        print(f"red team: {lab} {trick:<13} {got:g}/{of:g}")


@pytest.mark.parametrize("lab", LABS)
def test_a_trick_earns_nothing_and_the_untricked_parts_keep_their_points(class_run, lab):
    for name, plan in redteam.plans(lab).items():
        results = {r.grade_id: r for r in class_run["report"][f"{lab}-{name}"]}
        played = {n for gid, t in plan.items() for n, _ in redteam.FUNCTIONS[lab][gid]}  # tricks and stubs
        for p in _parts(lab):
            r = results[p.grade_id]
            if played & set(p.functions):
                assert r.score == 0 and r.status in ("FAIL", "ERROR") and r.feedback, (name, p.grade_id)
            else:
                assert r.score == p.points, (name, p.grade_id, r.feedback)


@pytest.mark.parametrize("lab", LABS)
def test_edited_check_cells_and_metadata_change_nothing(class_run, lab):
    results = class_run["report"][f"{lab}-edited-metadata"]
    assert _score(results) == (sum(p.points for p in _parts(lab)),) * 2, [(r.grade_id, r.feedback) for r in results]


@pytest.mark.parametrize("lab", LABS)
def test_a_file_that_is_not_a_notebook_is_a_zero_with_its_reason(class_run, lab):
    results = class_run["report"][f"{lab}-not-a-notebook"]
    assert _score(results)[0] == 0
    assert all(r.status == "ERROR" and "not a readable notebook" in r.feedback for r in results)


@pytest.mark.parametrize("lab", LABS)
def test_process_tricks_are_reported_with_their_reason(class_run, lab):
    feedback = {}
    for name, plan in redteam.plans(lab).items():
        results = {r.grade_id: r for r in class_run["report"][f"{lab}-{name}"]}
        for gid, trick in plan.items():
            funcs = {n for n, _ in redteam.FUNCTIONS[lab][gid]}
            feedback[trick] = " ".join(results[p.grade_id].feedback for p in _parts(lab) if funcs & set(p.functions))
    assert "did not answer in time" in feedback["endless_loop"]
    assert "size limit" in feedback["output_flood"] or "MiB" in feedback["output_flood"]
    assert "exited" in feedback["exit"]
    assert "SIGKILL" in feedback["kill"] or "exited" in feedback["kill"]


def test_the_instructor_checkout_is_unchanged_and_nothing_leaked_out(class_run):
    assert class_run["after"] == class_run["before"]
    assert not class_run["marker"].exists()
    root = redteam.ROOT
    assert not (root / "instructor" / "labs" / "pwned.py").exists()
    assert not (root / "helpers" / "pwned.py").exists()
