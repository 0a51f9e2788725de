"""An answer of an odd type never crashes a chapter's check: every exercise check that takes only the
learner's `answer` is fed values of the wrong shape and type, and each must print its verdict and
return True, False or None, never raise (a learner's typo must not end in a traceback from the course)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import helpers

ODD = [5, -1, 2.5, "x", "", [1], [], {"a": 1}, (1, 2), np.array([1, 2]), np.float32(1), True, b"b", object(),
       [(1, 2, 3)], [("a", "b")], float("nan")]


def one_answer_checks() -> list:
    """(name, function) of every public function in helpers/ch*/exercises.py whose one required
    parameter is `answer`."""
    found = []
    for info in pkgutil.iter_modules(helpers.__path__):
        if not info.name.startswith("ch"):
            continue
        try:
            mod = importlib.import_module(f"helpers.{info.name}.exercises")
        except ModuleNotFoundError:
            continue
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ != mod.__name__ or name.startswith("_"):
                continue
            required = [p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
            if [p.name for p in required] == ["answer"]:
                found.append((f"{info.name}.{name}", fn))
    return found


CHECKS = one_answer_checks()


def test_the_checks_are_found():
    assert len(CHECKS) >= 15, [n for n, _ in CHECKS]


@pytest.mark.parametrize("name,check", CHECKS, ids=[n for n, _ in CHECKS])
def test_an_odd_answer_gets_a_verdict_never_an_exception(name, check, capsys):
    for odd in ODD:
        got = check(odd)
        out = capsys.readouterr().out
        assert got in (True, False, None), f"{name}({odd!r}) returned {got!r}"
        assert out.strip(), f"{name}({odd!r}) printed no verdict"
