"""Chapter checks explain: hints for common slips, explanations per option, model answers."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.learning import checks


def test_a_unit_slip_gets_its_own_hint(capsys):
    hints = [checks.factor_hint(1000, "Check your units: µs or ms?")]
    assert checks.close("3.1", 4410, 4.41, hints=hints, hint="generic") is False
    out = capsys.readouterr().out
    assert "Check your units" in out and "generic" not in out
    assert checks.close("3.1", 7.0, 4.41, hints=hints, hint="generic") is False
    assert "generic" in capsys.readouterr().out


def test_a_right_answer_gets_the_reasoning(capsys):
    assert checks.close("3.1", 4.4, 4.41, why="t0 is the intercept") is True
    assert "why: t0 is the intercept" in capsys.readouterr().out


def test_choice_explains_the_option_picked(capsys):
    opts = {"a": "separate lanes", "b": "one lane, both directions"}
    expl = {"a": "No: each lane has a transmit and a receive pair.", "b": "Yes: full duplex per lane."}
    assert checks.choice("3.2", "a", opts, "b", expl) is False
    assert "transmit and a receive pair" in capsys.readouterr().out
    assert checks.choice("3.2", "B)", opts, "b", expl) is True
    assert checks.choice("3.2", "z", opts, "b", expl) is False
    assert checks.choice("3.2", None, opts, "b", expl) is None


def test_explain_never_marks_prose_and_shows_the_model_for_self_assessment(capsys):
    points = [("reads wait for a completion", ("completion", "non-posted")), ("writes do not", ("posted write", "fire and forget"))]
    for text in ("A read is non-posted: it waits for its completion.", "completion non-posted posted write"):
        assert checks.explain("2.3", text, "MODEL", points) is None
        out = capsys.readouterr().out
        assert "MODEL" in out and "self-assessment" in out and "reads wait for a completion" in out
        assert "✔" not in out and "✘" not in out
    assert checks.explain("2.3", "  ", "MODEL", points) is None
    assert "not answered yet" in capsys.readouterr().out


def test_code_runs_the_learners_function_and_reports_a_crash_without_raising(capsys):
    def trial(fn):
        return [] if fn(3) == 9 else [f"fn(3) gave {fn(3)}, expected a square"]

    assert checks.code("4.1", lambda x: x * x, trial) is True
    assert checks.code("4.1", lambda x: x + x, trial) is False and "expected a square" in capsys.readouterr().out

    def unfinished(x):
        raise NotImplementedError

    assert checks.code("4.1", unfinished, trial) is None

    def crashes(x):
        return 1 / 0

    assert checks.code("4.1", crashes, trial) is False
    out = capsys.readouterr().out
    assert "ZeroDivisionError" in out and "in crashes" in out


def test_an_unanswered_exercise_says_so_once_and_nothing_else(capsys):
    """Issue 38: no ✘, no stray value, no 'replace the None above' where there is no None."""
    from helpers.ch08_peer_to_peer import exercises as ex8

    def stub(*args):
        raise NotImplementedError

    def starter_like(fn):
        raise checks.NotAnswered("your kernel wrote nothing yet")

    cases = [lambda: checks.close("a", None, 1.0), lambda: checks.equal("b", None, 1),
             lambda: checks.choice("c", None, {"a": "x", "b": "y"}, "a", {"a": "", "b": ""}),
             lambda: checks.explain("d", "", "MODEL", []), lambda: checks.code("e", stub, lambda f: f(1)),
             lambda: checks.code("f", stub, starter_like), lambda: ex8.capture_bytes(None, None)]
    for case in cases:
        assert case() is None
        out = capsys.readouterr().out
        assert out.count("not answered yet") == 1 and "✘" not in out and "✔" not in out, out
    checks.code("e", stub, lambda f: f(1))
    assert "replace the None" not in capsys.readouterr().out


def test_a_crash_names_the_learners_line_never_the_simulators_internals(capsys):
    """Issue 37: 'in `__getitem__`, line 159' and 'FakeCUDAArray' mean nothing to a learner."""
    library = {}
    exec(compile("def __getitem__(a, i):\n    raise IndexError(\"'FakeCUDAArray' index 9 is out of bounds\")\n",
                 "/venv/lib/python3.11/site-packages/numba/cuda/simulator/cudadrv/devicearray.py", "exec"), library)

    def mine(x):
        return library["__getitem__"](x, 9)

    assert checks.code("2.5", mine, lambda f: f([1])) is False
    out = capsys.readouterr().out
    assert "in mine, line" in out and "__getitem__" not in out
    assert "FakeCUDAArray" not in out and "device array" in out


# -- a right answer in another type counts; a wrong one never crashes the check ----------------------
RIGHT_IN_ANOTHER_TYPE = [(4096.0, 4096), ("4096", 4096), (" 4_096 ", 4096), ("4096.0", 4096), (np.int64(4096), 4096),
                         (np.array(4096), 4096), (2**60 + 1, 2**60 + 1), (" fb1 ", "fb1"), (np.str_("fb1"), "fb1"),
                         (np.bool_(True), True), (np.array([[14, 1], [13, 0]]), [[14, 1], [13, 0]])]
NOT_THE_ANSWER = [(True, 1, "yes/no"), (1, True, "True or False"), (4096.5, 4096, "whole number"),
                  ("4096.5", 4096, "whole number"), (float("nan"), 4096, "whole number"), ("four", 4096, "whole number"),
                  (np.array([4096, 4096]), 4096, "one value"), ([4096], 4096, "one value"),
                  (float(2**60), 2**60 + 1, ""), ("FB1", "fb1", ""), (np.array([[1, 0]]), [(1, 0)], "")]


@pytest.mark.parametrize("answer,expected", RIGHT_IN_ANOTHER_TYPE, ids=repr)
def test_equal_ticks_a_right_answer_in_another_type(answer, expected, capsys):
    assert checks.equal("e", answer, expected) is True
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("answer,expected,says", NOT_THE_ANSWER, ids=repr)
def test_equal_refuses_a_wrong_answer_and_says_why_without_raising(answer, expected, says, capsys):
    assert checks.equal("e", answer, expected, hint="h") is False
    out = capsys.readouterr().out
    assert "✘" in out and says in out and "✔" not in out


@pytest.mark.parametrize("answer", [True, np.bool_(True)], ids=repr)
def test_close_refuses_a_yes_no_for_a_quantity(answer, capsys):
    assert checks.close("c", answer, 1.0) is False
    assert "yes/no" in capsys.readouterr().out


@pytest.mark.parametrize("answer", [np.float32(2.0), np.array(2.0), "2", 2], ids=repr)
def test_close_ticks_a_number_in_another_type(answer, capsys):
    assert checks.close("c", answer, 2.0) is True


@pytest.mark.parametrize("answer", ["b", "B", " b ", "(b)", "b)", "b.", "[b]"])
def test_choice_takes_an_option_written_the_usual_ways(answer, capsys):
    opts, why = {"a": "x", "b": "y"}, {"a": "no", "b": "yes"}
    assert checks.choice("q", answer, opts, "b", why) is True


@pytest.mark.parametrize("answer", ["ab", "b, a", "y", "", ["b"], True, 1])
def test_choice_refuses_what_names_no_single_option(answer, capsys):
    opts, why = {"a": "x", "b": "y"}, {"a": "no", "b": "yes"}
    assert checks.choice("q", answer, opts, "b", why) is False
    assert "✔" not in capsys.readouterr().out
