"""Is the learner's function still the course's? Comparing a function's text with the package's.

An experiment's measuring function (the default of its `code` parameter, see core.experiments)
lives once, in its chapter's package; the page's cell that shows it is written from that text by
`python -m tools.shown`, so the two are the same text by construction. The learner may change
the cell and pass their function back (`ctx.get(..., code=fn)`): `changed` tells the evidence
contract whether it is still the course's, comparing texts in one normal form (`source_of`).
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable


def normal_form(text: str) -> str:
    """A function's text without indentation, trailing spaces or blank lines at either end."""
    lines = [line.rstrip() for line in textwrap.dedent(text).strip("\n").splitlines()]
    return "\n".join(lines).strip()


def source_of(fn: Callable) -> str | None:
    """The normal form of `fn`'s source, or None when Python cannot find it (a lambda typed at a
    prompt, a builtin)."""
    try:
        return normal_form(inspect.getsource(fn))
    except (OSError, TypeError):
        return None


def changed(given: Callable, original: Callable) -> bool:
    """True when `given` is not the course's `original` (another object and another text)."""
    if given is original:
        return False
    mine = source_of(given)
    return mine is None or mine != source_of(original)
