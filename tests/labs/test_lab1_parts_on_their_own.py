"""Lab 1's visible checks, part by part (issue 37, item 5): each check runs the learner's code
for its own part and the course's stand-ins (helpers.labs.lab1_standins) for the others, so a
learner stuck on one part still gets feedback on every other part.

Solved parts are the instructor's reference code, pasted as a learner would (test_lab1.notebook);
a "stub" is what nbgrader leaves in a solution cell: a function of the same name that raises
NotImplementedError.
"""

from __future__ import annotations

import pytest
from test_lab1 import notebook

from helpers.labs import grading, lab1, lab1_standins


def stub(name: str):
    ns: dict = {}
    exec(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n", ns)  # noqa: S102 - a fixed stub
    return ns[name]


def verdicts(ns: dict) -> dict[str, str]:
    """Each visible check on `ns`: '' when it passes, else its failure message."""
    out = {}
    for check, fn in lab1.CHECK_FUNCTIONS.items():
        parts = lab1.Parts(ns, check)
        try:
            with grading.check(check) as c, parts.active():
                fn(c, parts)
            out[check] = ""
        except grading.CheckFailed as exc:
            out[check] = str(exc)
    return out


@pytest.fixture(autouse=True)
def failures_raise(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")  # a failed check raises CheckFailed


def test_with_everything_stubbed_each_check_reports_its_own_part():
    ns = notebook(**{n: stub(n) for n in lab1.FUNCTIONS})
    got = verdicts(ns)
    for check, own in lab1.CHECKS.items():
        assert "not written yet" in got[check], (check, got[check])
        named = [n for n in lab1.FUNCTIONS if f"in {n}," in got[check]]
        assert named and named[0] in own, f"{check} reported on {named}, not on its own part {own}: {got[check]}"


def test_each_check_passes_with_only_its_own_part_solved():
    """The strongest form of 'one part stubbed, the others still pass': every other part stubbed."""
    for check, own in lab1.CHECKS.items():
        ns = notebook(**{n: stub(n) for n in lab1.FUNCTIONS if n not in own})
        parts = lab1.Parts(ns, check)
        with grading.check(check) as c, parts.active():
            lab1.CHECK_FUNCTIONS[check](c, parts)


def test_a_stuck_bring_up_leaves_parts_4_to_8_checked():
    """The issue's case: Part 3 unfinished, everything else solved."""
    got = verdicts(notebook(bring_up=stub("bring_up")))
    assert "not written yet" in got["bring_up"]
    assert {k: v for k, v in got.items() if v and k != "bring_up"} == {}


def test_stand_ins_refuse_a_remote_bus():
    """The stand-ins reach results through the simulator's back doors; the grader's bus has none,
    so a submission that calls them cannot score with them."""

    class RemoteLike:
        def read(self, reg):
            return 0

    with pytest.raises(TypeError, match="never in grading"):
        lab1_standins.bring_up(RemoteLike(), 8)


def test_stand_ins_are_not_the_instructor_reference():
    import inspect

    from instructor.labs import lab1_driver as ref

    for name in lab1_standins.FUNCTIONS:
        assert inspect.getsource(getattr(lab1_standins, name)) != inspect.getsource(getattr(ref, name))
    text = inspect.getsource(lab1_standins)
    assert "VRAM_WINDOW" not in text and "VRAM_DATA" not in text, "the stand-ins must not show Part 2's mechanism"
