"""Exercise checks for the chapters: they say right or wrong, with a hint, and never raise.

A chapter must run top to bottom even before the learner answers, so a check prints its
verdict and returns it instead of failing the notebook; graded labs use their own cells.
"""

from __future__ import annotations

import math


def verdict(name: str, ok: bool | None, hint: str = "") -> bool | None:
    """Print ✔ / ✘ / '…not answered yet' for exercise `name`; return ok."""
    if ok is None:
        print(f"… {name}: not answered yet — replace the None above with your answer")
    elif ok:
        print(f"✔ {name}: correct")
    else:
        print(f"✘ {name}: not yet. {hint}".rstrip())
    return ok


def close(name: str, answer, expected: float, rel_tol: float = 0.02, hint: str = "") -> bool | None:
    """Check a numeric answer against `expected` within a relative tolerance."""
    if answer is None:
        return verdict(name, None)
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return verdict(name, False, f"expected a number, got {answer!r}. {hint}")
    if not math.isfinite(value):
        return verdict(name, False, f"{value} is not a finite number. {hint}")
    ok = math.isclose(value, expected, rel_tol=rel_tol)
    return verdict(name, ok, f"{value:g} is not within {rel_tol:.0%} of the expected value. {hint}")


def equal(name: str, answer, expected, hint: str = "") -> bool | None:
    """Check an exact answer (a size, a name, a count)."""
    if answer is None:
        return verdict(name, None)
    return verdict(name, answer == expected, hint)
