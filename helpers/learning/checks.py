"""Exercise checks for the chapters: they say right or wrong, explain, and never raise.

A chapter must run top to bottom even before the learner answers, so a check prints its
verdict and returns it instead of failing the notebook; graded labs use helpers.labs.grading.

The expected value never sits in the notebook: each chapter package keeps its exercises in
its `exercises.py`, which computes what is expected from the chapter's Evidence and calls
these checks. The kinds:
- `close` / `equal`: a number or an exact answer, with `Hint`s that recognise common wrong
  answers (a unit slip, a factor of two) and say what to rethink;
- `choice`: a multiple-choice question whose every option carries its explanation, so a
  wrong pick learns why it is wrong and a right one why it is right;
- `explain`: a short written answer, set beside a model answer and the points it should make, for
  the learner to judge: the check never marks prose right or wrong (no keyword matching);
- `code`: the learner's function, run on inputs the check chooses (on the GPU, or on Numba's CUDA
  simulator and the course's stand-ins without one), judged by what it did, never by its text.

An unanswered exercise says "not answered yet" once and returns None (nothing else is shown):
a number or choice still None, a function that raises NotImplementedError or `NotAnswered`
(a trial raises it when the learner's code still does exactly what the starter code does).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from helpers.core import gpu
from helpers.core.errors import CourseError

C = TypeVar("C")  # one case of a trial: the inputs the learner's code is given
R = TypeVar("R")  # what the learner's code gave for it


@dataclass(frozen=True)
class Hint:
    """Feedback for a recognisable wrong answer: `applies(answer, expected)` → show `text`."""

    applies: Callable[[float, float], bool]
    text: str


def factor_hint(factor: float, text: str, rel_tol: float = 0.05) -> Hint:
    """A hint for an answer `factor` times the expected one (1000 for a µs/ms slip, 2 for a
    missed half, 8 for bits vs bytes)."""
    return Hint(lambda a, e: e != 0 and math.isclose(a / e, factor, rel_tol=rel_tol), text)


class NotAnswered(CourseError, NotImplementedError):
    """Raised by a trial when the learner's code still behaves exactly like the starter code
    (it wrote nothing, or only what the starter writes): the exercise is not answered yet."""


ANSWER_TODO = "put your answer in place of None, then run the cell"
CODE_TODO = "write your code in the cell above, then run it"


def verdict(name: str, ok: bool | None, hint: str = "", todo: str = ANSWER_TODO) -> bool | None:
    """Print ✔ / ✘ / '…not answered yet' for exercise `name`; return ok."""
    if ok is None:
        print(f"… {name}: not answered yet — {todo}")
    elif ok:
        print(f"✔ {name}: correct")
    else:
        print(f"✘ {name}: not yet. {hint}".rstrip())
    return ok


def quantity(answer) -> tuple[float | None, str]:
    """A learner's number as a finite float, and '' or what is wrong with it: a number in any
    numeric type (numpy's and 0-d arrays included) or a string of one counts; True/False, a
    list, an array of several, nan and inf do not. Used by the chapters' checks and the labs'."""
    answer = _one_value(answer)
    if isinstance(answer, bool):
        return None, f"expected a number, got {answer!r} (a yes/no, not a quantity)."
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None, f"expected a number, got {answer!r}."
    if not math.isfinite(value):
        return None, f"{value} is not a finite number."
    return value, ""


def close(name: str, answer, expected: float, rel_tol: float = 0.02, hint: str = "",
          hints: Sequence[Hint] = (), why: str = "") -> bool | None:
    """Check a numeric answer against `expected` within a relative tolerance. A wrong answer
    gets the first matching hint, else `hint`; a right one gets `why` (the reasoning)."""
    if answer is None:
        return verdict(name, None)
    value, problem = quantity(answer)
    if problem:
        return verdict(name, False, f"{problem} {hint}")
    ok = math.isclose(value, expected, rel_tol=rel_tol)
    if ok:
        verdict(name, True)
        if why:
            print(f"  why: {why}")
        return True
    specific = next((h.text for h in hints if h.applies(value, expected)), hint)
    return verdict(name, False, f"{value:g} is not within {rel_tol:.0%} of what the data gives. {specific}")


def _one_value(answer):
    """A numpy scalar or 0-d array as the plain Python value it holds; anything else unchanged."""
    if getattr(answer, "ndim", None) == 0 and hasattr(answer, "item"):
        return answer.item()
    return answer


def _as_kind_of(answer, expected) -> tuple[object, str]:
    """`answer` in the type of `expected` where it plainly means the same (whole numbers, names),
    and '' or what is wrong with it."""
    answer = _one_value(answer)
    if isinstance(expected, (list, tuple)):
        return (answer.tolist() if hasattr(answer, "tolist") else answer), ""
    if getattr(answer, "ndim", 0) or isinstance(answer, (list, tuple)):
        return answer, f"expected one value, got {type(answer).__name__} of {len(answer)}."
    if isinstance(expected, bool):
        return answer, "" if isinstance(answer, bool) else f"expected True or False, got {answer!r}."
    if isinstance(expected, int):
        return _whole_number(answer)
    if isinstance(expected, str) and isinstance(answer, str):
        return answer.strip(), ""
    return answer, ""


def _whole_number(answer) -> tuple[object, str]:
    """A count given as an int, an integral float or a string of digits, as an int (exactly: a large
    int never goes through float)."""
    wrong = f"expected a whole number, got {answer!r}."
    if isinstance(answer, bool):
        return answer, f"{wrong[:-1]} (a yes/no, not a count)."
    if isinstance(answer, int):
        return answer, ""
    text = answer.strip().replace("_", "") if isinstance(answer, str) else None
    try:
        return int(text), ""
    except (TypeError, ValueError):
        pass
    try:
        value = float(answer if text is None else text)
    except (TypeError, ValueError):
        return answer, wrong
    return (int(value), "") if math.isfinite(value) and value == int(value) else (answer, wrong)


def equal(name: str, answer, expected, hint: str = "", why: str = "") -> bool | None:
    """Check an exact answer (a size, a name, a count).

    A right answer in another type counts (a count as 4096.0, "4096" or np.int64(4096), a name with
    spaces around it); a yes/no for a count, a list for one value, or 4096.5 does not, and an
    answer that cannot be compared is a ✘ that says why, never an exception."""
    if answer is None:
        return verdict(name, None)
    given, problem = _as_kind_of(answer, expected)
    if problem:
        return verdict(name, False, f"{problem} {hint}".strip())
    try:
        same = bool(given == expected)
    except (TypeError, ValueError):  # e.g. an array against a list: elementwise, no single truth
        same = False
    ok = verdict(name, same, hint)
    if ok and why:
        print(f"  why: {why}")
    return ok


def choice(name: str, answer, options: Mapping[str, str], correct: str, explanations: Mapping[str, str]) -> bool | None:
    """A multiple-choice question: print the explanation of the option picked, right or wrong."""
    if answer is None:
        listing = "; ".join(f"{k}) {v}" for k, v in options.items())
        print(f"… {name}: not answered yet — set the answer to one of {', '.join(options)} ({listing})")
        return None
    key = str(answer).strip().lower().strip("()[]. ")  # b, B, (b), b), b. all name option b
    if key not in options:
        return verdict(name, False, f"{answer!r} is not one of the options {', '.join(options)}")
    verdict(name, key == correct, "")
    print(f"  {key}) {options[key]} — {explanations[key]}")
    return key == correct


def explain(name: str, answer, model: str, points: Sequence[tuple[str, Sequence[str]]]) -> None:
    """A written answer: set it beside a model answer and the points a full answer makes, for the
    learner to judge. Prose cannot be graded by a program (a string of keywords is not an answer,
    and a right-sounding answer can say the opposite), so this check gives no tick and no score:
    it says so, shows the model answer and the points, and returns None.

    `points` are (point, words) pairs; only the point is shown (the words are kept for authors
    who list what a full answer mentions)."""
    if answer is None or not str(answer).strip():
        print(f"… {name}: not answered yet — write your explanation in the string above, then run the cell")
        return None
    print(f"{name}: self-assessment — the course cannot mark a written answer, so compare yours with the "
          "model answer, point by point.")
    for p, _words in points:
        print(f"  · {p}: does your answer make this point, and explain it?")
    print(f"  model answer: {model}")
    return None


def code(name: str, fn, trial: Callable[[Callable], list[str]], *, why: str = "") -> bool | None:
    """Run the learner's function through `trial(fn) -> problems` (empty: it works) and report.

    The trial chooses its own inputs; an unfinished function (still None or raising
    NotImplementedError) is 'not answered', a crash is reported with its line, never raised.

    The learner's code runs in this process, so it can read every frame above it (this one, the
    trial's, `sys._getframe(1).f_locals`). Hence the rule for trials: the trial computes the
    expected result only after the learner's code has run, so no frame the learner's code can
    reach holds it (nor an earlier case's result or expectation: `learner_first` runs each case
    that way). Where the expected value must exist first (it builds the input), the trial's
    docstring says so and what its frames hold is the input, not the answer.
    tests/learning/test_no_answer_in_frames.py holds every code exercise to this."""
    if fn is None:
        return verdict(name, None, todo=CODE_TODO)
    if not callable(fn):
        return verdict(name, False, f"expected your function, got {type(fn).__name__}")
    try:
        with gpu.deliberate_launch():  # the trials' small grids and host arrays are deliberate
            problems = trial(fn)
    except NotAnswered as exc:
        return verdict(name, None, todo=" — ".join(x for x in (str(exc), CODE_TODO) if x))
    except NotImplementedError:
        return verdict(name, None, todo=CODE_TODO)
    except Exception as exc:  # the learner's code failed: say where, go on
        return verdict(name, False, f"your code raised {type(exc).__name__}: {_plain(str(exc))}{_where(exc)}")
    ok = verdict(name, not problems, " ".join(problems))
    if ok and why:
        print(f"  why: {why}")
    return ok


def learner_first(cases: Iterable[C], run: Callable[[C], R], judge: Callable[[C, R], list[str]], *,
                  first_only: bool = True) -> list[str]:
    """The problems a trial finds over `cases`: each case is run by the learner's code first
    (`run(case)`), then judged (`judge(case, result)`, which computes what is expected), in a
    call of its own. So while the learner's code runs, no frame it can reach holds the expected
    result, nor an earlier case's result or expectation (a trial's own loop would keep those
    in its locals). `cases` holds inputs only (a generator builds them as they are needed);
    stops at the first case with problems unless `first_only` is False."""
    problems: list[str] = []
    for case in cases:
        problems += judge(case, run(case))
        if problems and first_only:
            break
    return problems


#: names from Numba's CUDA simulator that mean nothing to a learner, and what they stand for
_SIMULATOR_WORDS = {"FakeCUDAArray": "device array", "FakeCUDAModule": "cuda module",
                    "FakeCUDAKernel": "kernel", "FakeWithinKernelCUDAArray": "device array"}


def _plain(message: str) -> str:
    """An exception's message with the simulator's internal class names replaced by what they are."""
    for internal, plain in _SIMULATOR_WORDS.items():
        message = message.replace(internal, plain)
    return message


def _is_learner_frame(filename: str) -> bool:
    """A frame of the learner's own code: not the course's package, a library or Python itself."""
    f = filename.replace("\\", "/")
    return not any(part in f for part in ("/helpers/", "site-packages", "dist-packages", "/lib/python"))


def _where(exc: BaseException) -> str:
    """' (in fn, line N)' for the learner's innermost frame, or '' when none is the learner's."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_learner_frame(f.filename)]
    return f" (in {frames[-1].name}, line {frames[-1].lineno})" if frames else ""
