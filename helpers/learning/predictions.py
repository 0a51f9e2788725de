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
learner's prediction record (notebooks/my_predictions.ipynb, helpers.learning.prediction_record)
reads both.

The record is never lost. Every change is a read-modify-write made under an exclusive lock on
a lock file beside the store (`fcntl.flock` on Linux and macOS, `msvcrt.locking` on Windows,
an exclusive-create lock file where neither exists), so two notebooks saving at once both
keep their guesses; the new content goes to a temporary file in the same folder, is flushed
to disk and replaces the store in one `os.replace`, so a crash leaves the old file or the new
one, never half of one. A store that cannot be read as a record (damaged by hand, by a full
disk, by another program) is moved aside to `predictions.json.damaged-<UTC time>` with a
message saying where, never overwritten and never silently taken as empty; the record page
names every file moved aside for as long as it is there. Readers (`read_record`) take no lock
and change nothing.

A save that cannot be made (the lock held too long, a lock file or folder this account may not
write, a store from a newer course) raises PredictionStoreError saying that this guess was NOT
saved and how to save it; it never claims a guess was kept when it was not.

A numeric guess is a number. Text given for a numeric question is read as a number with an
optional unit ("80 GiB", "2x", "4 us"), and refused with an InputError naming the problem when it
is not one ("one"), is in another unit than the question's ("80 GB" for GiB) or is out of range
(a negative time, a ratio of −1): a malformed guess is never stored.
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
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from helpers.core import config, files
from helpers.core.errors import CourseError, InputError, InputTypeError
from helpers.core.evidence import VERBS
from helpers.core.mode import Mode

_QUESTION = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
VERSION = 2  # the store's format: {"version", "predictions": {q: [guess...]}, "comparisons": {q: [...]}}
LOCK_TIMEOUT_S = 10.0  # how long a save waits for another process's save before it gives up
KEEP_COMPARISONS = 20  # comparisons kept per question (the latest ones): a re-run cell appends one
# a value this close to zero (relative to the larger of guess and measured, or absolutely) is zero: a difference
# of equal counts computed in floating point (-3e-13) must not turn a total miss into "no ratio"
ZERO_REL = 1e-9
ZERO_ABS = 1e-12

#: the kinds of quantity a prediction can be about (the record groups misjudgements by them)
KINDS = {
    "time": "times (latencies, durations, CPU time)",
    "bandwidth": "bandwidths (bytes per second)",
    "count": "counts (calls, reads, frames)",
    "size": "sizes (bytes)",
    "ratio": "ratios (speed-ups, slow-downs, shares)",
    "outcome": "outcomes (which one, yes or no, what happens)",
}
NUMERIC_KINDS = frozenset(KINDS) - {"outcome"}
#: how a unit may be written in a text guess -> the unit the question names
UNIT_SPELLINGS = {"us": "µs", "μs": "µs", "×": "x", "times": "x"}


class PredictionStoreError(CourseError):
    """The predictions file cannot be used (locked too long, unreadable, or from a newer course)."""


@dataclass(frozen=True)
class Prediction:
    """One committed guess."""

    question: str
    guess: float | str
    unit: str
    at: str  # UTC time it was committed
    _: KW_ONLY
    kind: str = ""


@dataclass(frozen=True, kw_only=True)
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
        """measured / guess (see `ratio`)."""
        return ratio(self.guess, self.measured, self.guess_unit, self.unit)

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
        return (f"{self.question}: you predicted {self.guess:.3g} {self.guess_unit or self.unit}".rstrip()
                + f"; {got}: {how_far(self.ratio)}.")


def same_unit(a: str, b: str) -> bool:
    """Whether a guess in unit `a` can be set beside a value in unit `b` (an unstated unit goes with any)."""
    return not a or not b or a == b


def zeroed(x: float, scale: float) -> float:
    """x, or 0.0 when it is floating-point noise around zero next to values of size `scale`."""
    return 0.0 if abs(x) <= max(ZERO_ABS, ZERO_REL * scale) else x


def ratio(guess, measured, guess_unit: str = "", unit: str = "") -> float | None:
    """measured / guess for two numbers in the same unit, with floating-point noise around zero taken
    as zero (a measured -3e-13 against a guess of 990 is 0: a total miss, not "no ratio"): 0.0 when
    the measured value is zero and the guess is not, inf when the guess is zero and the measured value
    is not, 1.0 when both are zero. None for text, a unit mismatch or a truly negative value."""
    if not isinstance(guess, float) or isinstance(measured, bool) or not isinstance(measured, int | float):
        return None
    if not same_unit(guess_unit, unit) or not (math.isfinite(guess) and math.isfinite(measured)):
        return None
    scale = max(abs(guess), abs(measured))
    g, m = zeroed(guess, scale), zeroed(float(measured), scale)
    if g < 0 or m < 0:
        return None
    if g == 0:
        return 1.0 if m == 0 else math.inf
    return m / g


def factor(r: float | None) -> float | None:
    """How many times off a ratio is, in whichever direction (1 = spot on; inf when one side is zero)."""
    if r is None:
        return None
    return math.inf if r in (0.0, math.inf) else max(r, 1 / r)


def how_far(r: float) -> str:
    """'within 2x', 'off by 5.0x', or, when one side is zero, which side."""
    if r == 0:
        return "measured zero where you predicted more: no factor sizes this miss"
    if r == math.inf:
        return "you predicted zero and it was not: no factor sizes this miss"
    return "within 2x" if factor(r) <= 2 else f"off by {factor(r):.1f}x"


@dataclass
class Record:
    """What the store holds, as read (read_record): guesses and comparisons per question."""

    predictions: dict[str, list[dict]] = field(default_factory=dict)
    comparisons: dict[str, list[dict]] = field(default_factory=dict)
    problem: str | None = None  # why the file could not be read, when it could not
    set_aside: list[Path] = field(default_factory=list)  # damaged stores moved aside, still on disk

    def first(self, question: str) -> Prediction | None:
        entries = self.predictions.get(question) or []
        if not entries:
            return None
        e = entries[0]
        return Prediction(question, e.get("guess"), e.get("unit", ""), e.get("at", ""), kind=e.get("kind", ""))


def store() -> Path:
    """The file the guesses are kept in."""
    return config.state_dir() / "predictions.json"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- reading

class _Damaged(PredictionStoreError):
    """The store's text is not a prediction record (the reason is the message)."""


class _Newer(PredictionStoreError):
    """The store was written by a newer course (its format number is the argument)."""

    def explain(self, path: Path) -> str:
        return (f"{path} was written by a newer version of the course (record format {self.args[0]}; this "
                f"version reads formats up to {VERSION}). It was left exactly as it is. Update the course "
                "(`git pull`, then `make lab`) to read it and to keep new predictions in it")


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
        raise _Newer(doc["version"])
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
    aside = set_aside(path)
    try:
        text = _read_text(path)
        rec = _parse(text) if text is not None else Record()
    except _Damaged as exc:
        rec = Record(problem=f"{path} cannot be read as a prediction record: {exc}. Nothing was changed; "
                             "the next prediction you keep moves it aside (to predictions.json.damaged-<time>) "
                             "and starts a new record.")
    except _Newer as exc:
        rec = Record(problem=exc.explain(path) + ".")
    except PredictionStoreError as exc:
        rec = Record(problem=f"{exc}. Nothing was changed.")
    rec.set_aside = aside
    return rec


def set_aside(path: Path | None = None) -> list[Path]:
    """The damaged stores moved aside beside `path` (predictions.json.damaged-*), oldest first."""
    path = path or store()
    try:
        return sorted(path.parent.glob(_glob_escape(path.name) + ".damaged-*"))
    except OSError:
        return []


def _glob_escape(name: str) -> str:
    """`name` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


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


class _LockTimeout(PredictionStoreError):
    """The lock was not free before the deadline (turned into a message naming what was not saved)."""


def _wait_or_give_up(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise _LockTimeout()
    time.sleep(0.01)


class _NoAccess(PredictionStoreError):
    """A file or folder of the store that this account may not use (the message says which and why)."""


def _owner(path: Path) -> str:
    """'user alice (uid 1001)' for a file, as far as this system can say."""
    try:
        uid = path.stat().st_uid
    except OSError:
        return "an unknown user"
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _open_lock(lock: Path) -> int:
    """The lock file's descriptor; a lock file this account may not open is a clear error."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except PermissionError:
        if lock.exists():
            raise _NoAccess(f"the lock file {lock} belongs to {_owner(lock)} and this account "
                            f"(uid {os.getuid() if hasattr(os, 'getuid') else '?'}) may not open it. It holds "
                            f"no data: delete it (`rm {lock}`) or ask its owner to, or set COURSE_STATE_DIR "
                            "to a folder of your own") from None
        raise _NoAccess(f"this account may not create files in {lock.parent} (it belongs to "
                        f"{_owner(lock.parent)}); set COURSE_STATE_DIR to a folder of your own") from None


@contextlib.contextmanager
def _exclusive(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the store's lock file (`predictions.json.lock`) for the duration of a read-modify-write."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise _NoAccess(f"this account may not create the folder {path.parent}; set COURSE_STATE_DIR to a "
                        "folder of your own") from None
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + timeout
    if os.name == "posix" or os.name == "nt":
        fd = _open_lock(lock)
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


def _update(change: Callable[[Record], None], what: str = "this change to your predictions") -> None:
    """Read the store, apply `change`, write it back: all under the lock. Any reason it cannot be
    done is a PredictionStoreError that says `what` was NOT saved and how to save it."""
    path = store()
    again = "Nothing already in your record was changed; run the cell again to save it"
    try:
        with _exclusive(path):
            rec = _load_for_update(path)
            change(rec)
            _write_atomically(path, rec)
    except _LockTimeout:
        raise PredictionStoreError(
            f"{what} was NOT saved: another notebook or process held the lock on {path} for more than "
            f"{LOCK_TIMEOUT_S:g} s. {again} once the other save has finished (if it keeps happening, a "
            f"stopped process still holds {path.name}.lock: restart that kernel)") from None
    except _Newer as exc:
        raise PredictionStoreError(f"{what} was NOT saved: {exc.explain(path)}, then run the cell again") from None
    except _NoAccess as exc:
        raise PredictionStoreError(f"{what} was NOT saved: {exc}. {again}") from None
    except PermissionError as exc:
        raise PredictionStoreError(f"{what} was NOT saved: this account may not write {exc.filename or path} "
                                   f"(it belongs to {_owner(Path(exc.filename or path))}); set COURSE_STATE_DIR "
                                   f"to a folder of your own. {again}") from None
    except OSError as exc:
        raise PredictionStoreError(f"{what} was NOT saved: writing {path} failed ({exc.strerror or exc}). "
                                   f"{again} once that is fixed") from None
    except PredictionStoreError as exc:  # the store could not be read (the message says why)
        raise PredictionStoreError(f"{what} was NOT saved: {exc}. {again} once that is fixed") from None


# --------------------------------------------------------------------------- the two calls

_NUMBER = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)$")


def _check(question: str, guess, unit: str = "", kind: str = "") -> float | str:
    """The guess as it is kept: a float for a numeric question (text read by `_from_text`, the value
    checked by `_in_range`), else a short text."""
    if not isinstance(question, str) or not _QUESTION.match(question):
        raise InputError(f"a prediction needs an id like 'ch03.small_copy_us', got {question!r}")
    if isinstance(guess, bool):
        raise InputTypeError(f"{question}: a guess is a number or a short text, not {guess!r}")
    if isinstance(guess, str) and not (guess.strip() and len(guess) <= 500):
        raise InputTypeError(f"{question}: a guess is a number or a short text (≤ 500 characters), got {guess!r}")
    numeric = kind in NUMERIC_KINDS or (not kind and bool(unit))
    if numeric and isinstance(guess, str):
        guess = _from_text(question, guess.strip(), unit, kind)
    if isinstance(guess, int | float):
        if not math.isfinite(guess):
            raise InputError(f"{question}: {guess} is not a finite number")
        return _in_range(question, float(guess), unit, kind) if numeric else float(guess)
    if isinstance(guess, str):
        return guess.strip()
    raise InputTypeError(f"{question}: a guess is a number or a short text (≤ 500 characters), got {guess!r}")


def _asked(unit: str, kind: str) -> str:
    return f"a number of {unit}" if unit and unit != "x" else "a number of times (a ratio)" if kind == "ratio" \
        else "a number"


def _from_text(question: str, text: str, unit: str, kind: str) -> float:
    """A numeric guess written as text: '80', '80 GiB', '2x', '4 us'; anything else is refused, naming why."""
    m = _NUMBER.match(text)
    if m is None:
        raise InputError(f"{question}: {text!r} is not a number, and this question asks for {_asked(unit, kind)}. "
                         f"Write the number itself, e.g. my_guess = 2 (not \"two\", not text)")
    said = UNIT_SPELLINGS.get(m.group(2), m.group(2))
    if said and said != unit and not (said == "x" and kind == "ratio" and not unit):
        same_family = said in _SCALE and unit in _SCALE and _SCALE[said][0] == _SCALE[unit][0]
        hint = (f"{m.group(1)} {said} is {float(m.group(1)) * _SCALE[said][1] / _SCALE[unit][1]:.4g} {unit}"
                if same_family else f"convert it to {unit}" if unit else "leave the unit out")
        raise InputError(f"{question}: your guess {text!r} is in {said!r}, but this question asks for "
                         f"{_asked(unit, kind)}: {hint}. Write the number alone, e.g. my_guess = 2.5")
    return float(m.group(1))


#: units a guess may be converted between (for the hint a wrongly-unitted guess gets): family, size
_SCALE = {u: ("bytes", f) for u, f in (("B", 1), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("KiB", 2**10),
                                       ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))} | \
    {u: ("seconds", f) for u, f in (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0))}


def _in_range(question: str, value: float, unit: str, kind: str) -> float:
    """A numeric guess that can be the answer: no negative quantity, and a ratio above zero."""
    if kind == "ratio" and value <= 0:
        raise InputError(f"{question}: {value:g} cannot be a ratio; a ratio is a positive number of times "
                         "(1 means the same, 2 twice as much, 0.5 half)")
    if value < 0:
        raise InputError(f"{question}: {value:g} {unit}".rstrip() + f" is negative, and a {kind or 'quantity'} "
                         "cannot be: write a number of zero or more")
    return value


def _check_kind(question: str, kind: str) -> str:
    if kind not in KINDS:
        raise InputError(f"{question}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def commit(question: str, guess, *, unit: str = "", kind: str = "") -> Prediction | None:
    """Keep `guess` for `question` (appended: every guess stays on record), with the kind of
    quantity it is (one of KINDS; every prediction on a course page declares one, which
    tests/learning/test_predictions.py checks; "" is kept as 'not declared'). None keeps nothing
    and says how to answer. Returns the Prediction kept."""
    if kind:
        _check_kind(question if isinstance(question, str) else repr(question), kind)
    if guess is None:
        print(f"… {question}: no prediction yet. Replace None with your guess and run the cell again; "
              "the next cell shows the result either way.")
        return None
    value = _check(question, guess, unit, kind)
    kept = Prediction(question, value, unit, _now(), kind=kind)
    _update(lambda rec: rec.predictions.setdefault(question, []).append(
        {"guess": value, "unit": unit, "kind": kind, "at": kept.at}),
        f"your prediction {value}{(' ' + unit) if unit else ''} for {question}")
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

    _update(change, f"the comparison for {question} (measured {measured:.3g} {unit})".replace(" )", ")"))
    p = seen["p"]
    return Comparison(question=question, measured=float(measured), unit=unit, source=source, mode=m, at=at,
                      guess=p.guess if p else None, guess_unit=p.unit if p else "")
