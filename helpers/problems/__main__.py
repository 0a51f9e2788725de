"""python -m helpers.problems --lab 2 --learner alice [--solve]: one learner's problem (and answers).

    python -m helpers.problems --lab 4 --learner s1234567
    python -m helpers.problems --chapter 3 --learner alice --solve     # instructors only
    python -m helpers.problems --list

`--solve` prints the answers, computed by the instructor's reference implementations; it works
only in the instructor's copy of the course (or with `--instructor DIR` naming it) and says so
elsewhere (exit status 2). It never looks for instructor/ above the working directory.
"""

from __future__ import annotations

import argparse
import sys

from helpers import problems
from helpers.core.errors import InputError
from helpers.labs.grading.integrity import InstructorOnlyError, instructor_module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.problems", description=__doc__.split("\n\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--lab", type=int, help="lab number (2-5)")
    which.add_argument("--chapter", type=int, help="chapter number (3, 6 or 9)")
    which.add_argument("--list", action="store_true", help="the problems there are")
    ap.add_argument("--learner", help="learner id: a name, login or student number")
    ap.add_argument("--solve", action="store_true", help="print the answers too (instructor's copy only)")
    ap.add_argument("--instructor", metavar="DIR", help="the instructor's checkout holding instructor/ (default: "
                    "the checkout this helpers package comes from; never the folders above the working directory)")
    a = ap.parse_args(argv)
    if a.list:
        print("per-learner problems:", ", ".join(problems.KEYS))
        return 0
    if not a.learner:
        ap.error("--learner is required")
    key = f"lab{a.lab}" if a.lab is not None else f"ch{a.chapter:02d}"
    try:
        p = problems.problem(key, a.learner)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(p)
    if a.solve:
        try:
            solver = instructor_module("problems", a.instructor)
        except InstructorOnlyError as exc:
            print(f"\n--solve: {exc}", file=sys.stderr)
            return 2
        print("\nAnswers (instructor):")
        for line in solver.solve(p):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
