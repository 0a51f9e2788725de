"""Per-learner problems (helpers.problems) and their instructor answers (instructor.problems)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import problems
from helpers.core.errors import InputError
from instructor import problems as answers

ROOT = Path(__file__).resolve().parents[2]


def test_the_seed_is_a_stable_hash_of_problem_and_learner():
    assert problems.learner_seed("lab2", "alice") == problems.learner_seed("lab2", " Alice ")
    assert problems.learner_seed("lab2", "alice") != problems.learner_seed("lab2", "bob")
    assert problems.learner_seed("lab2", "alice") != problems.learner_seed("lab5", "alice")
    assert problems.learner_seed("lab2", "alice") == 4137392677377253099  # the same on every machine, every run


@pytest.mark.parametrize("key", problems.KEYS)
def test_each_learner_gets_a_different_real_problem_with_answers(key):
    a, a2, b = problems.problem(key, "alice"), problems.problem(key, "alice"), problems.problem(key, "bob")
    assert a.text == a2.text and a.seed == a2.seed
    assert a.text != b.text or repr(a.data) != repr(b.data)
    sa, sb = answers.solve(a), answers.solve(b)
    assert sa and all(isinstance(x, str) for x in sa)
    assert sa == answers.solve(a2) and sa != sb


def test_a_perturbed_sweep_keeps_the_recordings_shape():
    n, t, _ = problems.recorded_sweep()
    pn, pt = problems.perturb_sweep(n, t, np.random.default_rng(1), keep=0.8)
    assert pn.size == round(n.size * 0.8) and set(pn) <= set(n)
    assert np.all(np.diff(pt[pn >= 1 << 20]) > 0)  # large copies still take longer the larger they are
    assert not np.allclose(pt, t[np.isin(n, pn)])   # and the numbers are not the recording's


@pytest.mark.parametrize("bad, match", [("lab9", "no per-learner problem"), ("", "learner")])
def test_bad_requests_are_input_errors(bad, match):
    with pytest.raises(InputError, match=match):
        problems.problem(bad or "lab2", "alice" if bad else "")


def test_the_command_line_prints_the_problem_and_with_solve_the_answers():
    run = [sys.executable, "-m", "helpers.problems", "--lab", "5", "--learner", "alice"]
    r = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Lab 5: your topology — for alice" in r.stdout and "Answers" not in r.stdout
    r = subprocess.run(run + ["--solve"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Answers (instructor):" in r.stdout and "smallest makespan" in r.stdout
    r = subprocess.run([sys.executable, "-m", "helpers.problems", "--lab", "9", "--learner", "x"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no per-learner problem 'lab9'" in r.stderr


def test_solve_never_searches_the_folders_above_a_student_copy(tmp_path):
    """A student copy unpacked inside an instructor's checkout must not find its instructor/:
    --solve takes the answers only from the copy's own checkout or from --instructor DIR."""
    import shutil

    checkout = tmp_path / "instructor-checkout"
    shutil.copytree(ROOT / "instructor", checkout / "instructor", ignore=shutil.ignore_patterns("__pycache__"))
    student = checkout / "build" / "student-copy"
    shutil.copytree(ROOT / "helpers", student / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(student))
    run = [sys.executable, "-m", "helpers.problems", "--lab", "5", "--learner", "ann", "--solve"]
    r = subprocess.run(run, cwd=student, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Answers" not in r.stdout, r.stdout + r.stderr
    assert "not here" in r.stderr and "--instructor DIR" in r.stderr
    r = subprocess.run(run + ["--instructor", str(checkout)], cwd=student, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "Answers (instructor):" in r.stdout, r.stdout + r.stderr
