"""Exercise checks for the chapters: they say right or wrong, explain, and never raise.

A chapter must run top to bottom even before the learner answers, so a check prints its
verdict and returns it instead of failing the notebook; graded labs use core.grading.

The expected value never sits in the notebook: each chapter package keeps its exercises in
its `exercises.py`, which computes what is expected from the chapter's Evidence and calls
these checks. The kinds:
- `close` / `equal`: a number or an exact answer, with `Hint`s that recognise common wrong
  answers (a unit slip, a factor of two) and say what to rethink;
- `choice`: a multiple-choice question whose every option carries its explanation, so a
  wrong pick learns why it is wrong and a right one why it is right;
- `explain`: a short written answer, set beside a model answer and the points it should make;
- `code`: the learner's function, run on inputs the check chooses, with what went wrong.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Hint:
    """Feedback for a recognisable wrong answer: `applies(answer, expected)` → show `text`."""

    applies: Callable[[float, float], bool]
    text: str


def factor_hint(factor: float, text: str, rel_tol: float = 0.05) -> Hint:
    """A hint for an answer `factor` times the expected one (1000 for a µs/ms slip, 2 for a
    missed half, 8 for bits vs bytes)."""
    return Hint(lambda a, e: e != 0 and math.isclose(a / e, factor, rel_tol=rel_tol), text)


def verdict(name: str, ok: bool | None, hint: str = "") -> bool | None:
    """Print ✔ / ✘ / '…not answered yet' for exercise `name`; return ok."""
    if ok is None:
        print(f"… {name}: not answered yet — replace the None above with your answer")
    elif ok:
        print(f"✔ {name}: correct")
    else:
        print(f"✘ {name}: not yet. {hint}".rstrip())
    return ok


def close(name: str, answer, expected: float, rel_tol: float = 0.02, hint: str = "",
          hints: Sequence[Hint] = (), why: str = "") -> bool | None:
    """Check a numeric answer against `expected` within a relative tolerance. A wrong answer
    gets the first matching hint, else `hint`; a right one gets `why` (the reasoning)."""
    if answer is None:
        return verdict(name, None)
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return verdict(name, False, f"expected a number, got {answer!r}. {hint}")
    if not math.isfinite(value):
        return verdict(name, False, f"{value} is not a finite number. {hint}")
    ok = math.isclose(value, expected, rel_tol=rel_tol)
    if ok:
        verdict(name, True)
        if why:
            print(f"  why: {why}")
        return True
    specific = next((h.text for h in hints if h.applies(value, expected)), hint)
    return verdict(name, False, f"{value:g} is not within {rel_tol:.0%} of what the data gives. {specific}")


def equal(name: str, answer, expected, hint: str = "", why: str = "") -> bool | None:
    """Check an exact answer (a size, a name, a count)."""
    if answer is None:
        return verdict(name, None)
    ok = verdict(name, answer == expected, hint)
    if ok and why:
        print(f"  why: {why}")
    return ok


def choice(name: str, answer, options: Mapping[str, str], correct: str, explanations: Mapping[str, str]) -> bool | None:
    """A multiple-choice question: print the explanation of the option picked, right or wrong."""
    if answer is None:
        listing = "; ".join(f"{k}) {v}" for k, v in options.items())
        print(f"… {name}: not answered yet — set the answer to one of {', '.join(options)} ({listing})")
        return None
    key = str(answer).strip().lower().rstrip(")")
    if key not in options:
        return verdict(name, False, f"{answer!r} is not one of the options {', '.join(options)}")
    verdict(name, key == correct, "")
    print(f"  {key}) {options[key]} — {explanations[key]}")
    return key == correct


def explain(name: str, answer, model: str, points: Sequence[tuple[str, Sequence[str]]]) -> bool | None:
    """A written answer: set it beside a model answer and the points a full answer makes.

    `points` are (point, words that show it) pairs; the check says which points the answer
    seems to make by looking for those words. It cannot grade prose, and says so: the model
    answer is the feedback. Returns True when every point is touched."""
    if answer is None or not str(answer).strip():
        print(f"… {name}: not answered yet — write your explanation in the string above, then run the cell")
        return None
    text = str(answer).lower()
    made = [(p, any(w.lower() in text for w in words)) for p, words in points]
    print(f"{name}: compare your answer with this one, point by point.")
    for p, ok in made:
        print(f"  {'✔' if ok else '·'} {p}")
    print(f"  model answer: {model}")
    print("  (✔ marks words found in your text, a rough guide; read the model answer for what they mean)")
    return all(ok for _, ok in made)


def code(name: str, fn, trial: Callable[[Callable], list[str]], *, why: str = "") -> bool | None:
    """Run the learner's function through `trial(fn) -> problems` (empty: it works) and report.

    The trial chooses its own inputs; an unfinished function (still None or raising
    NotImplementedError) is 'not answered', a crash is reported with its line, never raised."""
    if fn is None:
        return verdict(name, None)
    if not callable(fn):
        return verdict(name, False, f"expected your function, got {type(fn).__name__}")
    try:
        problems = trial(fn)
    except NotImplementedError:
        return verdict(name, None)
    except Exception as exc:  # the learner's code failed: say where, go on
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "helpers" not in f.filename]
        where = f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""
        return verdict(name, False, f"your code raised {type(exc).__name__}: {exc}{where}")
    ok = verdict(name, not problems, " ".join(problems))
    if ok and why:
        print(f"  why: {why}")
    return ok
