"""A class on a real JupyterHub (tools/hub/hubclass.py): one lab through nbgrader's exchange end to end,
graded by the course's sandboxed grader (tools/grader), the path `make grade` takes.

Marker `hub` (run by `make test-hub`, part of `make test`): it starts JupyterHub with its proxy
on 127.0.0.1, drives headless Chromium for one student, and runs nbgrader for the rest.
"""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.hub
ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "labs" / "lab4_buddy_eviction.ipynb"


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    from tools.hub import hubclass

    out = tmp_path_factory.mktemp("hub")
    return hubclass.cycle(LAB, out, browser=True)


def test_scores_follow_the_work_done(cycle):
    s = cycle["scores"]
    assert set(s) == {"student1", "student2", "student3"}, s  # each submission under its own student
    full = s["student1"]["max_score"]
    assert full > 0 and s["student1"]["score"] == full  # solved, through the hub's web pages
    assert 0 < s["student2"]["score"] < full  # partly solved
    assert s["student3"]["score"] == 0  # handed in as released


def test_the_gradebook_csv_and_the_feedback_reached_every_student(cycle):
    rows = list(csv.DictReader(open(cycle["csv"])))
    assert {r["student"] for r in rows if r["lab"] == cycle["lab"]} == {"student1", "student2", "student3"}
    assert all(any(f.endswith(".html") and "feedback" in f for f in files) for files in cycle["feedback_files"].values())


def test_the_browser_student_went_through_the_hub(cycle):
    t = "\n".join(cycle["transcript"])
    for step in ("logged in at /hub/login", "JupyterLab open at /user/student1/lab",
                 "POST /user/student1/assignments/fetch -> 200", "POST /user/student1/assignments/submit -> 200",
                 "POST /user/student1/assignments/fetch_feedback -> 200"):
        assert step in t, step
    for step in ("release_assignment", "collect", "release_feedback"):
        assert f"nbgrader {step}" in t, step
    # the points come from the course's sandboxed grader (as `make grade`), not from nbgrader autograde
    assert "nbgrader autograde" not in t
    for s in ("student1", "student2", "student3"):
        assert f"grader: {s} {cycle['lab']} graded in a sandboxed worker" in t, s


def test_no_hub_process_is_left_behind(cycle):
    left = subprocess.run(["pgrep", "-f", "jupyterhub-singleuser|configurable-http-proxy|jupyterhub -f"],
                          capture_output=True, text=True).stdout.split()
    assert left == [], left
