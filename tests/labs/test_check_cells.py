"""helpers.labs.grading: feedback interactively, a raised CheckFailed under nbgrader, never a crash."""

import warnings

import numpy as np
import pytest

from helpers.core.errors import CourseError, InputError, InputTypeError
from helpers.labs import grading


def _stub():
    raise NotImplementedError()


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    grading.results.clear()


def test_pass_prints_and_records(capsys):
    with grading.check("ok_check") as c:
        c.require(True, "never shown")
    assert "✔ ok_check: PASS" in capsys.readouterr().out
    assert grading.results["ok_check"].passed


def test_failure_is_printed_and_swallowed_interactively(capsys):
    with grading.check("bad") as c:
        c.require(1 + 1 == 3, "your sum is off: did you carry the one?")
    out = capsys.readouterr().out
    assert "✘ bad: FAIL — your sum is off: did you carry the one?" in out
    assert not grading.results["bad"].passed


def test_failure_raises_checkfailed_under_nbgrader(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(grading.CheckFailed, match="bad: nope"):
        with grading.check("bad") as c:
            c.require(False, "nope")


def test_passing_check_does_not_raise_under_nbgrader(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with grading.check("fine"):
        pass
    assert "PASS" in capsys.readouterr().out


def test_unfinished_stub_names_the_function(capsys):
    with grading.check("stubbed"):
        _stub()
    out = capsys.readouterr().out
    assert "not written yet" in out and "in _stub" in out


def test_crash_in_learner_code_is_a_failure_with_its_type(capsys):
    with grading.check("crashy"):
        {}["missing"]
    assert "your code raised KeyError" in capsys.readouterr().out


def test_keyboard_interrupt_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        with grading.check("interrupted"):
            raise KeyboardInterrupt


def test_close_reports_value_expected_and_factor(capsys):
    with grading.check("num") as c:
        c.close("bandwidth", 30.0, 10.0, 0.05, "units?")
    out = capsys.readouterr().out
    assert "bandwidth is 30, expected 10 within 5% (off by a factor 3). units?" in out


@pytest.mark.parametrize("value", [None, "fast", float("nan"), True, np.bool_(True), [1.0], np.array([1.0, 1.0])],
                         ids=repr)
def test_close_rejects_non_numbers(value, capsys):
    with grading.check("num") as c:
        c.close("t0", value, 1.0, 0.1)
    assert "FAIL" in capsys.readouterr().out
    assert not grading.results["num"].passed


@pytest.mark.parametrize("value", [np.float32(1.0), np.array(1.0), "1.0", 1], ids=repr)
def test_close_accepts_a_number_in_another_type(value):
    with grading.check("num") as c:
        assert c.close("t0", value, 1.0, 0.05) == pytest.approx(1.0)
    assert grading.results["num"].passed


def test_close_accepts_within_tolerance():
    with grading.check("num") as c:
        assert c.close("t0", 1.04, 1.0, 0.05) == pytest.approx(1.04)
    assert grading.results["num"].passed


def test_warnings_go_to_stdout_not_stderr(capsys):
    # nbgrader gives a test cell zero points for any stderr output
    with grading.check("noisy"):
        warnings.warn("something odd", RuntimeWarning, stacklevel=1)
    cap = capsys.readouterr()
    assert "note: RuntimeWarning: something odd" in cap.out and cap.err == ""


def test_attempt_reports_and_continues(capsys):
    ran_after = False
    with grading.attempt("the sweep"):
        _stub()
        ran_after = True
    assert not ran_after
    assert "the sweep skipped — not written yet" in capsys.readouterr().out


@pytest.mark.parametrize("bad, exc", [("", InputError), ("  ", InputError), (None, InputTypeError),
                                      (3, InputTypeError)])
def test_check_needs_a_grade_id(bad, exc):
    with pytest.raises(exc, match="grade_id"):
        grading.check(bad)


def test_autograding_follows_nbgrader_execution(monkeypatch):
    for value, expected in (("autograde", True), ("validate", True), ("", False), ("other", False)):
        monkeypatch.setenv("NBGRADER_EXECUTION", value)
        assert grading.autograding() is expected


def test_a_failed_check_is_an_assertion_and_a_course_error():
    assert issubclass(grading.CheckFailed, AssertionError) and issubclass(grading.CheckFailed, CourseError)


def test_summary_counts(capsys):
    with grading.check("a"):
        pass
    with grading.check("b") as c:
        c.require(False, "x")
    assert grading.summary() == {"a": True, "b": False}
    assert "1/2 checks pass" in capsys.readouterr().out


def test_a_check_this_machine_cannot_run_is_not_the_learners_failure(capsys, monkeypatch):
    """Lab 6 on a machine without QEMU (the GPU machine, 2026-11-28) printed '✘ check_open: FAIL —
    your code raised SkipExperiment': the learner's code was never run. It says so, with no ✘,
    and still does not pass (nor score under nbgrader)."""
    from helpers.core.errors import SkipExperiment

    with grading.check("check_open"):
        raise SkipExperiment("QEMU is not installed")
    out = capsys.readouterr().out
    assert "✘" not in out and "your code raised" not in out
    assert "… check_open: not checked on this machine: QEMU is not installed" in out
    assert not grading.results["check_open"].passed
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(grading.CheckFailed, match="not checked on this machine"):
        with grading.check("check_open"):
            raise SkipExperiment("QEMU is not installed")
