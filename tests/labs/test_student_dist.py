"""The student distribution (tools/dist/studentdist.py, `make student-repo DEST=...`) and its scan.

The scan must find every kind of leak planted into a small tree — an instructor file, an nbgrader
marker, a solution line, a reference implementation renamed and re-documented — and find nothing
in the distribution `build` writes, which must hold the chapters, the student labs, helpers, data
and a student README, and no instructor/ folder. Run from the distribution, `--solve` says that
the answers are the instructor's.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.dist import studentdist

ROOT = Path(__file__).resolve().parents[2]

LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))

RENAMED_MAKESPAN = '''
def busiest(matrix, jobs, chosen):
    """Nothing to see here: a helper for Chapter 8's tables."""
    if len(chosen) != len(jobs):
        raise RoutingInputError(f"{len(jobs)} transfers but {len(chosen)} routes")
    load: dict = {}
    for (x, y, size), hops in zip(jobs, chosen, strict=True):
        if hops[0] != rt.gpu_name(x, matrix.n_gpus) or hops[-1] != rt.gpu_name(y, matrix.n_gpus):
            raise RoutingInputError(f"route {hops} does not go from GPU{x} to GPU{y}")
        for u, v in zip(hops, hops[1:], strict=False):
            load[(u, v)] = load.get((u, v), 0.0) + matrix.cost(u, v, size)
    worst = max((route_time(matrix, h, size) for (_, _, size), h in zip(jobs, chosen, strict=True)), default=0.0)
    return max(max(load.values(), default=0.0), worst)
'''


def _tree(tmp_path) -> Path:
    dist = tmp_path / "dist"
    (dist / "helpers").mkdir(parents=True)
    (dist / "helpers" / "ok.py").write_text("def twice(x):\n    return 2 * x\n")
    return dist


def test_a_clean_tree_has_no_findings(tmp_path):
    assert studentdist.scan(_tree(tmp_path), labs=LABS) == []


@pytest.mark.parametrize("plant, what", [
    (lambda d: (d / "instructor").mkdir(), "instructor-only path"),
    (lambda d: (d / "helpers" / "copy.md").write_bytes((ROOT / "instructor" / "labs" / "lab5.py").read_bytes()),
     "a copy of instructor/labs/lab5.py"),
    (lambda d: (d / "notes.md").write_text("```\n### BEGIN SOLUTION\n```\n"), "BEGIN SOLUTION"),
    (lambda d: (d / "hint.md").write_text("try: compressed = xp.fft.ifft(xp.fft.fft(frame, axis=1) * mf, axis=1)\n"),
     "lab3_realtime_pipeline.ipynb's solution"),
    (lambda d: (d / "helpers" / "chapter8.py").write_text(RENAMED_MAKESPAN), "reference implementation"),
])
def test_the_scan_finds_each_kind_of_leak(tmp_path, plant, what):
    dist = _tree(tmp_path)
    plant(dist)
    found = studentdist.scan(dist, labs=LABS)
    assert any(what in str(f) for f in found), found


def test_the_renamed_copy_is_found_as_the_instructors_makespan(tmp_path):
    dist = _tree(tmp_path)
    (dist / "helpers" / "chapter8.py").write_text(RENAMED_MAKESPAN)
    [finding] = studentdist.scan(dist, labs=LABS)
    assert "busiest" in finding.what and "instructor/labs/lab5.py" in finding.what and "makespan" in finding.what


def test_small_common_functions_are_not_called_copies():
    import ast

    tiny = ast.parse("def first(candidates, needed, model):\n    return candidates[0]\n").body[0]
    assert studentdist.fingerprint(tiny) is None


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    pytest.importorskip("nbgrader")
    dest = tmp_path_factory.mktemp("student") / "course"
    studentdist.build(dest)
    return dest


def test_the_distribution_holds_what_a_class_hands_out(dist):
    listing = studentdist.files(dist)
    tops = {f.split("/")[0] for f in listing}
    assert {"README.md", "helpers", "notebooks", "labs", "data", "pyproject.toml", "Makefile"} <= tops
    assert "instructor" not in tops and not any("instructor" in Path(f).parts for f in listing)
    chapters = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert chapters <= {Path(f).name for f in listing if f.startswith("notebooks/")}
    assert {p.name for p in LABS} == {Path(f).name for f in listing if f.startswith("labs/") and f.endswith(".ipynb")}
    assert "YOUR CODE HERE" in (dist / "labs" / "lab4_buddy_eviction.ipynb").read_text()


def test_the_distribution_scans_clean(dist):
    assert studentdist.scan(dist) == []


def test_solve_in_the_distribution_says_the_answers_are_the_instructors(dist):
    env = dict(os.environ, PYTHONPATH=str(dist))
    r = subprocess.run([sys.executable, "-m", "helpers.problems", "--lab", "5", "--learner", "ann", "--solve"],
                       cwd=dist, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Lab 5: your topology" in r.stdout and "instructor" in r.stderr and "not here" in r.stderr
