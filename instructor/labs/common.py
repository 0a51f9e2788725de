"""Hidden grading cases: seeds nobody has seen, drawn when an instructor grades."""

from __future__ import annotations

import functools
import secrets

from helpers.core.evidence import Evidence
from helpers.labs.grading.cases import Case

__all__ = ["Case", "draw_seed", "recorded"]


def draw_seed(what: str, seed: int | None = None) -> int:
    """A fresh seed for `what`'s hidden cases (or `seed` as given, to reproduce a grade).

    The seed is printed in the graded cell's output, so a disputed grade can be rerun exactly:
    `instructor.labs.labN.cases(part, seed=...)`.
    """
    if seed is None:
        seed = secrets.randbelow(2**31)
    print(f"  hidden cases for {what}: seed {seed}")
    return int(seed)


@functools.cache
def recorded(experiment_id: str) -> Evidence:
    """The reference machine's recording of `experiment_id`, as the labs' cells get it."""
    from helpers import course

    return course.start(quiet=True).get(experiment_id, recorded=True)
