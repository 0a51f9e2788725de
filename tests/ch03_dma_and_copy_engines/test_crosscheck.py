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
    """A first round at a settling machine's speed does not decide: the fastest round does."""
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([49.3, 54.9, 55.1], calls, "course"),
                                 _scripted([55.0, 55.0, 54.8], calls, "c"), rounds=3)
    assert out["course_gbps"]["h2d"] == 55.1 and out["c_gbps"]["h2d"] == 55.0
    assert out["relative_difference"]["h2d"] == pytest.approx(0.1 / 55.0)
    assert out["median_rounds"]["course_gbps"]["h2d"] == 54.9  # kept beside it
    assert crosscheck.disagreements({"crosscheck.bwcheck": out}) == []


def test_a_steady_disagreement_still_fails():
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([50.0, 50.1, 49.9], calls, "course"),
                                 _scripted([55.0, 55.1, 54.9], calls, "c"), rounds=3)
    problems = crosscheck.disagreements({"crosscheck.bwcheck": out})
    assert len(problems) == 2 and "h2d" in problems[0] and "9.1% apart" in problems[0]


def test_three_slow_rounds_of_five_do_not_decide_but_a_slow_side_does():
    calls: list[str] = []
    out = crosscheck.interleaved(_scripted([47.0, 55.0, 48.0, 49.5, 54.9], calls, "course"),
                                 _scripted([55.1, 55.0, 54.9, 55.0, 55.1], calls, "c"), rounds=5)
    assert crosscheck.disagreements({"crosscheck.bwcheck": out}) == []
    assert out["median_rounds"]["course_gbps"]["h2d"] == 49.5  # a median of rounds would have failed
    slow = crosscheck.interleaved(_scripted([53.0, 53.5, 52.9], [], "course"),
                                  _scripted([55.1, 55.0, 54.9], [], "c"), rounds=3)
    assert "h2d" in crosscheck.disagreements({"crosscheck.bwcheck": slow})[0]  # 2.9% apart at best


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True, None])
def test_rounds_must_be_a_positive_whole_number(bad):
    with pytest.raises(InputError, match="rounds must be a whole number"):
        crosscheck.interleaved(lambda: {}, lambda: {}, bad)
