"""The course's input validators: every helper checks a learner's value through these.

Each returns the clean value or raises InputTypeError (the wrong kind of value: text for a
size, a float or a bool for a count) or InputError (the right kind, out of range, or not one
of the choices), with a message that names the value, what was expected and what was given.
Experiments declare their parameters with them (see core.experiments), so the evidence
contract checks a learner's parameters before it decides between live and replay: bad input
always raises, in both modes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from helpers.core.errors import InputError, InputTypeError

Validator = Callable[[Any], Any]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def whole_number(value, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number (not a bool, not a float) in [lo, hi]."""
    if not _is_int(value):
        raise InputTypeError(f"{what} must be a whole number, got {value!r} ({type(value).__name__})")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        span = f"from {lo} to {hi}" if lo is not None and hi is not None else (
            f"at least {lo}" if lo is not None else f"at most {hi}")
        raise InputError(f"{what} must be {span}, got {v}")
    return v


def byte_size(value, what: str, lo: int = 1, hi: int | None = None) -> int:
    """A size in bytes: a whole number in [lo, hi] (hi None: no upper bound here)."""
    if not _is_int(value):
        raise InputTypeError(f"{what} must be a whole number of bytes, got {value!r} ({type(value).__name__})")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        span = (f"from {lo} to {hi} bytes" if hi is not None
                else "a positive number of bytes" if lo == 1 else f"at least {lo} bytes")
        raise InputError(f"{what} must be {span}, got {v}")
    return v


def seconds(value, what: str, lo: float = 0.0, hi: float | None = None, *, allow_zero: bool = False) -> float:
    """A finite duration in seconds, > lo (or >= lo with allow_zero) and <= hi."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{what} must be a number of seconds, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v) or (v < lo if allow_zero else v <= lo) or (hi is not None and v > hi):
        bound = f"{'at least' if allow_zero else 'more than'} {lo:g}" + (f" and at most {hi:g}" if hi is not None else "")
        raise InputError(f"{what} must be a finite number of seconds, {bound}; got {value!r}")
    return v


def number(value, what: str, lo: float | None = None, hi: float | None = None) -> float:
    """A finite real number in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{what} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InputError(f"{what} must be a finite number from {lo} to {hi}, got {value!r}")
    return v


def choice(value, what: str, allowed: Iterable) -> Any:
    """One of `allowed` (compared with ==)."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise InputError(f"{what} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value


def text(value, what: str) -> str:
    """A non-empty string (a name, an id, a piece of code)."""
    if not isinstance(value, str):
        raise InputTypeError(f"{what} must be a string, got {value!r:.80} ({type(value).__name__})")
    if not value.strip():
        raise InputError(f"{what} must not be empty, got {value!r}")
    return value


def flag(value, what: str) -> bool:
    """True or False, nothing else (1 and 'yes' are refused: say what you mean)."""
    if not isinstance(value, bool):
        raise InputTypeError(f"{what} must be True or False, got {value!r} ({type(value).__name__})")
    return value


# -- parameter declarations for experiments ---------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A parameter validator that can say what it accepts (`python -m helpers.record --list`)."""

    check: Callable[[Any, str], Any]
    text: str

    def __call__(self, value, what: str = "value"):
        return self.check(value, what)

    def __str__(self) -> str:
        return self.text


def describe(validator: Validator) -> str | None:
    """What a parameter validator accepts, in words: a Rule's text, else the first line of the
    function's docstring (None when it says nothing: the registry refuses such a validator)."""
    if isinstance(validator, Rule):
        return str(validator)
    doc = " ".join((getattr(validator, "__doc__", None) or "").split("\n\n")[0].split())
    return doc.split(". ")[0].rstrip(".") if doc else None


def count(lo: int, hi: int) -> Validator:
    """A parameter validator: a whole number in [lo, hi]."""
    return Rule(lambda v, what: whole_number(v, what, lo, hi), f"a whole number from {lo} to {hi}")


def size(lo: int = 1, hi: int | None = None) -> Validator:
    """A parameter validator: a byte size in [lo, hi]."""
    return Rule(lambda v, what: byte_size(v, what, lo, hi),
                f"a byte size from {lo}" + (f" to {hi}" if hi is not None else " up"))


def one_of(*allowed) -> Validator:
    """A parameter validator: one of the given values."""
    return Rule(lambda v, what: choice(v, what, allowed), "one of " + ", ".join(map(repr, allowed)))


def duration(lo: float = 0.0, hi: float | None = None) -> Validator:
    """A parameter validator: seconds in (lo, hi]."""
    return Rule(lambda v, what: seconds(v, what, lo, hi),
                f"seconds, more than {lo:g}" + (f" and at most {hi:g}" if hi is not None else ""))


def boolean() -> Validator:
    """A parameter validator: True or False."""
    return Rule(flag, "True or False")
