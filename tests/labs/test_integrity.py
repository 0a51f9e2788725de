"""helpers.labs.grading.integrity: own_work finds the course's implementation however it is kept."""

from __future__ import annotations

import functools
import types

import pytest

from helpers.labs.grading import integrity
from helpers.models import copy_cost

FORBIDDEN = {copy_cost: ("fit",)}
KEPT = {
    "a list": [copy_cost.fit],
    "a dict": {"f": copy_cost.fit},
    "a tuple in a dict": {"k": (1, copy_cost.fit)},
    "a set of partials": {functools.partial(copy_cost.fit)},
    "a namespace": types.SimpleNamespace(f=copy_cost.fit),
}


@pytest.mark.parametrize("how", list(KEPT))
def test_a_course_function_kept_in_a_container_is_found(how):
    box = KEPT[how]

    def fit_line(n, t):
        return box  # refers to the container only: the function is inside it

    assert integrity.uses(fit_line, [copy_cost.fit]) == ["helpers.models.copy_cost.fit"]
    with pytest.raises(integrity.NotOwnWork), integrity.own_work("fit_line", fit_line, FORBIDDEN):
        pass


def test_a_default_argument_holding_a_list_is_found():
    def fit_line(n, t, helpers=[copy_cost.fit]):  # noqa: B006 - the trick under test
        return helpers[0](n, t)

    assert integrity.uses(fit_line, [copy_cost.fit])


def test_own_work_is_accepted():
    def fit_line(n, t):
        return [1.0, 2.0], {"a": 1}

    assert integrity.uses(fit_line, [copy_cost.fit]) == []
    with integrity.own_work("fit_line", fit_line, FORBIDDEN):
        pass
