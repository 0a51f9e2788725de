"""Hidden grading cases: seeds nobody has seen, drawn when an instructor grades."""

from __future__ import annotations

import secrets

from helpers.labs.cases import Case

__all__ = ["Case", "draw_seed"]


def draw_seed(what: str, seed: int | None = None) -> int:
    """A fresh seed for `what`'s hidden cases (or `seed` as given, to reproduce a grade).

    The seed is printed in the graded cell's output, so a disputed grade can be rerun exactly:
    `instructor.labs.labN.cases(part, seed=...)`.
    """
    if seed is None:
        seed = secrets.randbelow(2**31)
    print(f"  hidden cases for {what}: seed {seed}")
    return int(seed)
