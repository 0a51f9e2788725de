"""Predict before you measure: the learner's guess is kept before the result is shown.

A Predict prompt on a page is followed by a cell where the learner writes a number, and the
cell after it (folded on the static site) shows the measurement:

    my_guess = None          # µs for one 4-byte copy: replace None with your guess
    ctx.predict("ch03.small_copy_us", my_guess, unit="µs")
    ...
    ctx.compare("ch03.small_copy_us", measured_us, unit="µs", source=ev.source)

`commit` writes the guess with its time to predictions.json in the course's state folder
(COURSE_STATE_DIR), so the guess is on record before the answer appears and a changed guess
after the fact shows as a later entry; None (not answered) writes nothing. `compare` reads
the first guess back and says how far off it was, in a ratio, never as right or wrong: a
prediction is for thinking, not for points.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.core import config
from helpers.core.errors import InputError, InputTypeError

_QUESTION = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


@dataclass(frozen=True)
class Prediction:
    """One committed guess."""

    question: str
    guess: float | str
    unit: str
    at: str  # UTC time it was committed


def store() -> Path:
    """The file the guesses are kept in."""
    return config.state_dir() / "predictions.json"


def _load() -> dict:
    try:
        data = json.loads(store().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError):
        return {}  # a damaged file is not the learner's problem now: start afresh
    return data if isinstance(data, dict) else {}


def _check(question: str, guess) -> float | str:
    if not isinstance(question, str) or not _QUESTION.match(question):
        raise InputError(f"a prediction needs an id like 'ch03.small_copy_us', got {question!r}")
    if isinstance(guess, bool):
        raise InputTypeError(f"{question}: a guess is a number or a short text, not {guess!r}")
    if isinstance(guess, int | float):
        if not math.isfinite(guess):
            raise InputError(f"{question}: {guess} is not a finite number")
        return float(guess)
    if isinstance(guess, str) and guess.strip() and len(guess) <= 500:
        return guess.strip()
    raise InputTypeError(f"{question}: a guess is a number or a short text (≤ 500 characters), got {guess!r}")


def commit(question: str, guess, *, unit: str = "") -> Prediction | None:
    """Keep `guess` for `question` (appended: every guess stays on record). None keeps nothing and
    says how to answer. Returns the Prediction kept."""
    if guess is None:
        print(f"… {question}: no prediction yet. Replace None with your guess and run the cell again; "
              "the next cell shows the result either way.")
        return None
    value = _check(question, guess)
    kept = Prediction(question, value, unit, _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    data = _load()
    data.setdefault(question, []).append({"guess": value, "unit": unit, "at": kept.at})
    path = store()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)
    print(f"✎ {question}: your prediction {value}{(' ' + unit) if unit else ''} is kept ({kept.at}). "
          "Now run the next cell.")
    return kept


def first(question: str) -> Prediction | None:
    """The first guess kept for `question`, or None."""
    entries = _load().get(question) or []
    if not entries:
        return None
    e = entries[0]
    return Prediction(question, e.get("guess"), e.get("unit", ""), e.get("at", ""))


def compare(question: str, measured: float, *, unit: str = "", source: str = "") -> str:
    """A line setting the first kept guess beside `measured`; printed and returned."""
    where = f" ({source})" if source else ""
    p = first(question)
    if p is None:
        line = f"{question}: measured {measured:.3g} {unit}{where}. You kept no prediction for this one."
    elif isinstance(p.guess, str) or not p.guess:
        line = f"{question}: you predicted {p.guess!r}; measured {measured:.3g} {unit}{where}."
    else:
        ratio = measured / p.guess
        off = "within 2x" if 0.5 <= ratio <= 2 else f"off by {max(ratio, 1 / ratio):.1f}x"
        line = (f"{question}: you predicted {p.guess:.3g} {p.unit or unit}; measured {measured:.3g} {unit}{where}: "
                f"{off}.")
    print(line)
    return line
