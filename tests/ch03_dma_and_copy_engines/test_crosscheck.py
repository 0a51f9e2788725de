"""The course-vs-C cross-check: interleaved rounds, medians, and what a disagreement looks like."""

from __future__ import annotations

import pytest

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core.errors import InputError


def _scripted(values: list[float], calls: list[str], name: str):
    it = iter(values)

    def one_round() -> dict:
        calls.append(name)
        v = next(it)
        return {"h2d": v, "d2h": v + 1.0}
    return one_round


def test_rounds_alternate_course_and_c():
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([50.0, 51.0, 52.0], calls, "course"),
                                 _scripted([55.0, 55.0, 55.0], calls, "c"), rounds=3)
    assert calls == ["course", "c"] * 3
    assert len(out["rounds"]) == 3 and out["rounds"][1]["course_gbps"]["h2d"] == 51.0


def test_one_slow_round_does_not_decide_the_comparison():
    """A first round at a settling machine's speed is outvoted by the two that follow."""
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([49.3, 54.9, 55.1], calls, "course"),
                                 _scripted([55.0, 55.0, 54.8], calls, "c"), rounds=3)
    assert out["course_gbps"]["h2d"] == 54.9 and out["c_gbps"]["h2d"] == 55.0
    assert out["relative_difference"]["h2d"] == pytest.approx(0.1 / 55.0)
    assert crosscheck.disagreements({"crosscheck.bwcheck": out}) == []


def test_a_steady_disagreement_still_fails():
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([50.0, 50.1, 49.9], calls, "course"),
                                 _scripted([55.0, 55.1, 54.9], calls, "c"), rounds=3)
    problems = crosscheck.disagreements({"crosscheck.bwcheck": out})
    assert len(problems) == 2 and "h2d" in problems[0] and "9.1% apart" in problems[0]


def test_even_rounds_take_the_middle_pair():
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([50.0, 54.0], calls, "course"),
                                 _scripted([55.0, 55.0], calls, "c"), rounds=2)
    assert out["course_gbps"]["h2d"] == 52.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True, None])
def test_rounds_must_be_a_positive_whole_number(bad):
    with pytest.raises(InputError, match="rounds must be a whole number"):
        crosscheck.interleaved(lambda: {}, lambda: {}, bad)
