"""Predict before you measure: the learner's guess is kept before the result is shown.

A Predict prompt on a page is followed by a cell where the learner writes a number, and the
cell after it (folded on the static site) shows the measurement:

    my_guess = None          # µs for one 4-byte copy: replace None with your guess
    ctx.predict("ch03.small_copy_us", my_guess, unit="µs", kind="time")
    ...
    ctx.compare("ch03.small_copy_us", measured_us, unit="µs", source=ev)

`commit` keeps the guess, with its kind of quantity and its time, in predictions.json in the
course's state folder (COURSE_STATE_DIR), so the guess is on record before the answer appears
and a changed guess after the fact shows as a later entry; None (not answered) writes nothing.
`compare` reads the first guess back, says how far off it was (a ratio, never right or wrong: a
prediction is for thinking, not for points) and keeps what it was compared with: the value,
its source and whether it was measured live, replayed from a recording or simulated. The
learner's prediction record (notebooks/my_predictions.ipynb, helpers.core.prediction_record)
reads both.

The record is never lost. Every change is a read-modify-write made under an exclusive lock on
a lock file beside the store (`fcntl.flock` on Linux and macOS, `msvcrt.locking` on Windows,
an exclusive-create lock file where neither exists), so two notebooks saving at once both
keep their guesses; the new content goes to a temporary file in the same folder, is flushed
to disk and replaces the store in one `os.replace`, so a crash leaves the old file or the new
one, never half of one. A store that cannot be read as a record (damaged by hand, by a full
disk, by another program) is moved aside to `predictions.json.damaged-<UTC time>` with a
message saying where, never overwritten and never silently taken as empty. Readers
(`read_record`) take no lock and change nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers.core import config, files
from helpers.core.errors import CourseError, InputError, InputTypeError
from helpers.core.evidence import VERBS
from helpers.core.mode import Mode

_QUESTION = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
VERSION = 2  # the store's format: {"version", "predictions": {q: [guess...]}, "comparisons": {q: [...]}}
LOCK_TIMEOUT_S = 10.0  # how long a save waits for another process's save before it gives up
KEEP_COMPARISONS = 20  # comparisons kept per question (the latest ones): a re-run cell appends one

#: the kinds of quantity a prediction can be about (the record groups misjudgements by them)
KINDS = {
    "time": "times (latencies, durations, CPU time)",
    "bandwidth": "bandwidths (bytes per second)",
    "count": "counts (calls, reads, frames)",
    "size": "sizes (bytes)",
    "ratio": "ratios (speed-ups, slow-downs, shares)",
    "outcome": "outcomes (which one, yes or no, what happens)",
}


class PredictionStoreError(CourseError):
    """The predictions file cannot be used (locked too long, unreadable, or from a newer course)."""


@dataclass(frozen=True)
class Prediction:
    """One committed guess."""

    question: str
    guess: float | str
    unit: str
    at: str  # UTC time it was committed
    kind: str = ""


@dataclass(frozen=True)
class Comparison:
    """A measured value set beside the first guess, as `compare` kept it."""

    question: str
    measured: float
    unit: str
    source: str
    mode: str | None  # "live", "replay", "simulated", or None when the caller did not say
    at: str
    guess: float | str | None = None  # the first guess, if any
    guess_unit: str = ""

    @property
    def ratio(self) -> float | None:
        """measured / guess, when both are positive numbers."""
        g = self.guess
        if isinstance(g, float) and g > 0 and self.measured > 0 and same_unit(self.guess_unit, self.unit):
            return self.measured / g
        return None

    @property
    def line(self) -> str:
        """'q: you predicted 10 GB/s; measured 50 GB/s (REPLAY, H100): off by 5.0x.'"""
        where = ", ".join(x for x in ((self.mode or "").upper(), self.source) if x)
        where = f" ({where})" if where else ""
        verb = VERBS[Mode(self.mode)] if self.mode in tuple(Mode) else "measured"  # a model's is never "measured"
        got = f"{verb} {self.measured:.3g} {self.unit}".rstrip() + where
        if self.guess is None:
            return f"{self.question}: {got}. You kept no prediction for this one."
        if self.ratio is None:
            shown = f"{self.guess:.3g}" if isinstance(self.guess, float) else repr(self.guess)
            apart = "" if same_unit(self.guess_unit, self.unit) else " (in another unit: no ratio)"
            return f"{self.question}: you predicted {shown} {self.guess_unit}".rstrip() + f"; {got}{apart}."
        r = self.ratio
        off = "within 2x" if 0.5 <= r <= 2 else f"off by {max(r, 1 / r):.1f}x"
        return (f"{self.question}: you predicted {self.guess:.3g} {self.guess_unit or self.unit}".rstrip()
                + f"; {got}: {off}.")


def same_unit(a: str, b: str) -> bool:
    """Whether a guess in unit `a` can be set beside a value in unit `b` (an unstated unit goes with any)."""
    return not a or not b or a == b


@dataclass
class Record:
    """What the store holds, as read (read_record): guesses and comparisons per question."""

    predictions: dict[str, list[dict]] = field(default_factory=dict)
    comparisons: dict[str, list[dict]] = field(default_factory=dict)
    problem: str | None = None  # why the file could not be read, when it could not

    def first(self, question: str) -> Prediction | None:
        entries = self.predictions.get(question) or []
        if not entries:
            return None
        e = entries[0]
        return Prediction(question, e.get("guess"), e.get("unit", ""), e.get("at", ""), e.get("kind", ""))


def store() -> Path:
    """The file the guesses are kept in."""
    return config.state_dir() / "predictions.json"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- reading

class _Damaged(PredictionStoreError):
    """The store's text is not a prediction record (the reason is the message)."""


def _entries(value, where: str) -> dict[str, list[dict]]:
    if not isinstance(value, dict):
        raise _Damaged(f"{where} is not a mapping of questions")
    for q, lst in value.items():
        if not isinstance(lst, list) or not all(isinstance(e, dict) for e in lst):
            raise _Damaged(f"{where}[{q!r}] is not a list of entries")
    return value


def _parse(text: str) -> Record:
    """A Record from the store's text (version 2, or the first format: {question: [guess...]})."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Damaged(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _Damaged("not a JSON object")
    if "version" not in doc:  # the first format: every key a question
        return Record(_entries(doc, "the file"), {})
    if not isinstance(doc["version"], int):
        raise _Damaged(f"version {doc['version']!r} is not a number")
    if doc["version"] > VERSION:
        raise PredictionStoreError(f"{store()} was written by a newer version of the course (format "
                                   f"{doc['version']}); update the course to read it (it was left as it is)")
    return Record(_entries(doc.get("predictions", {}), "predictions"),
                  _entries(doc.get("comparisons", {}), "comparisons"))


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise _Damaged(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise PredictionStoreError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_record(path: Path | None = None) -> Record:
    """The store as it is, read without a lock and without changing anything (a damaged file is
    reported in Record.problem, not moved). For pages that only show the record."""
    path = path or store()
    try:
        text = _read_text(path)
        return _parse(text) if text is not None else Record()
    except _Damaged as exc:
        return Record(problem=f"{path} cannot be read as a prediction record: {exc}. Nothing was changed; "
                              "the next prediction you keep moves it aside (to predictions.json.damaged-<time>) "
                              "and starts a new record.")


def first(question: str) -> Prediction | None:
    """The first guess kept for `question`, or None."""
    return read_record().first(question)


# --------------------------------------------------------------------------- writing

def _lock_fcntl(fd: int, deadline: float) -> Callable[[], None]:
    import fcntl

    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lambda: fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            _wait_or_give_up(deadline)


def _lock_msvcrt(fd: int, deadline: float) -> Callable[[], None]:  # pragma: no cover - Windows only
    import msvcrt

    while True:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return lambda: (os.lseek(fd, 0, os.SEEK_SET), msvcrt.locking(fd, msvcrt.LK_UNLCK, 1))
        except OSError:
            _wait_or_give_up(deadline)


def _wait_or_give_up(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise PredictionStoreError(f"another process has held the lock on {store()} for more than "
                                   f"{LOCK_TIMEOUT_S:g} s; try again (no prediction was lost)")
    time.sleep(0.01)


@contextlib.contextmanager
def _exclusive(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the store's lock file (`predictions.json.lock`) for the duration of a read-modify-write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + timeout
    if os.name == "posix" or os.name == "nt":
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            release = (_lock_fcntl if os.name == "posix" else _lock_msvcrt)(fd, deadline)
            try:
                yield
            finally:
                release()
        finally:
            os.close(fd)
        return
    # Neither fcntl nor msvcrt (no platform the course supports): an exclusive-create lock file.
    excl = lock.with_name(lock.name + ".held")  # pragma: no cover
    while True:  # pragma: no cover
        try:
            os.close(os.open(excl, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            _wait_or_give_up(deadline)
    try:  # pragma: no cover
        yield
    finally:  # pragma: no cover
        excl.unlink(missing_ok=True)


def _move_aside(path: Path, why: str) -> Path:
    """Rename a damaged store to predictions.json.damaged-<UTC time>[-n] (never over another file)."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    aside, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, aside)
    print(f"⚠ Your predictions file {path} could not be read ({why}). It was moved, unchanged, to {aside}, "
          "and a new record starts now. Nothing was deleted: open the moved file to recover its guesses.",
          file=sys.stderr)
    return aside


def _load_for_update(path: Path) -> Record:
    try:
        text = _read_text(path)
        return _parse(text) if text is not None else Record()
    except _Damaged as exc:
        _move_aside(path, str(exc))
        return Record()


def _write_atomically(path: Path, rec: Record) -> None:
    doc = {"version": VERSION, "predictions": rec.predictions, "comparisons": rec.comparisons}
    files.write_atomically(path, json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False))


def _update(change: Callable[[Record], None]) -> None:
    """Read the store, apply `change`, write it back: all under the lock."""
    path = store()
    with _exclusive(path):
        rec = _load_for_update(path)
        change(rec)
        _write_atomically(path, rec)


# --------------------------------------------------------------------------- the two calls

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


def _check_kind(question: str, kind: str) -> str:
    if kind not in KINDS:
        raise InputError(f"{question}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def commit(question: str, guess, *, unit: str = "", kind: str = "") -> Prediction | None:
    """Keep `guess` for `question` (appended: every guess stays on record), with the kind of
    quantity it is (one of KINDS; every prediction on a course page declares one, which
    tests/core/test_predictions.py checks; "" is kept as 'not declared'). None keeps nothing
    and says how to answer. Returns the Prediction kept."""
    if kind:
        _check_kind(question if isinstance(question, str) else repr(question), kind)
    if guess is None:
        print(f"… {question}: no prediction yet. Replace None with your guess and run the cell again; "
              "the next cell shows the result either way.")
        return None
    value = _check(question, guess)
    kept = Prediction(question, value, unit, _now(), kind)
    _update(lambda rec: rec.predictions.setdefault(question, []).append(
        {"guess": value, "unit": unit, "kind": kind, "at": kept.at}))
    print(f"✎ {question}: your prediction {value}{(' ' + unit) if unit else ''} is kept ({kept.at}). "
          "Now run the next cell.")
    return kept


def _mode_name(mode) -> str | None:
    if mode is None:
        return None
    try:
        return Mode(mode).value
    except ValueError:
        raise InputError(f"mode {mode!r} is not one of {', '.join(m.value for m in Mode)}") from None


def compare(question: str, measured: float, *, unit: str = "", source: str = "",
            mode: Mode | str | None = None) -> Comparison:
    """Set the first kept guess beside `measured`, keep what it was compared with (value, unit,
    source, mode) and return the Comparison; its `.line` says how far off the guess was."""
    if not isinstance(question, str) or not _QUESTION.match(question):
        raise InputError(f"a comparison needs an id like 'ch03.small_copy_us', got {question!r}")
    if isinstance(measured, bool) or not isinstance(measured, int | float):
        raise InputTypeError(f"{question}: the measured value is a number, got {measured!r}")
    if not math.isfinite(measured):
        raise InputError(f"{question}: the measured value {measured} is not a finite number")
    m = _mode_name(mode)
    measured = float(measured) + 0.0  # -0.0 (a difference of equal counts) is written 0
    at = _now()
    seen: dict[str, Prediction | None] = {}

    def change(rec: Record) -> None:
        seen["p"] = rec.first(question)
        kept = rec.comparisons.setdefault(question, [])
        kept.append({"measured": float(measured), "unit": unit, "source": source, "mode": m, "at": at})
        del kept[:-KEEP_COMPARISONS]

    _update(change)
    p = seen["p"]
    return Comparison(question, float(measured), unit, source, m, at,
                      p.guess if p else None, p.unit if p else "")
