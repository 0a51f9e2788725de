"""Grading, the learner's side: what runs in the learner's kernel and in the sandboxed worker.

- this module: the labs' check cells (`check`, `attempt`, `CheckFailed`), below;
- `wire`: the data that crosses between grader and worker (JSON, one object per line);
- `worker`: the process that runs a submission's cells for the grader (`python -m helpers.labs.grading.worker`);
- `remote`: the stand-ins the worker hands to learner code (their questions go to the grader);
- `integrity`: the instructor-only reference, earlier parts bound to the reference, the own-work check;
- `cases`: the shape of a published example and of a hidden case.

The host side, which holds the checks, the hidden cases and the sandbox, is `tools/grader`; what a
lab's graded parts are written against is in labs/README.md ("The authoring API").

Check cells of the labs: instant feedback for a learner on the published examples.

A lab's check cell wraps its test in `check`, named by the cell's nbgrader grade_id:

    with grading.check("fit_synthetic") as c:
        t0, bw = fit_line(sizes, times)
        c.require(abs(bw / true_bw - 1) < 0.05, f"your bandwidth is {bw:.3g} B/s, ...")

The block's outcome is one line, `✔ fit_synthetic: PASS` or `✘ fit_synthetic: FAIL — <feedback>`.
Interactively (and when CI executes a student version) a failure is printed and swallowed, so
the notebook runs to the end; under nbgrader's validate (NBGRADER_EXECUTION set) it is raised
again as CheckFailed, so the Validate button reports it. An unfinished solution region
(nbgrader's stub `raise NotImplementedError()`) or a crash in the learner's code is reported as
a failure with the function it came from, never as a crash of the check itself.

These cells never decide a grade. Grades come from the lab grader (tools/grader), which runs
the same kind of checks — `check(...).require` / `.close`, the same CheckFailed — in its own
process, on hidden cases, calling the learner's functions in a sandboxed worker: whatever a
learner does to this module in their kernel changes their feedback, not their grade.

Cells that merely *use* the learner's code ("try it" cells, plots) wrap it in `attempt()`,
which reports an unfinished or failing function and lets the notebook go on.
"""

from __future__ import annotations

import math
import sys
import traceback
import warnings
from dataclasses import dataclass

from helpers.core import config, validate
from helpers.core.errors import CourseError, SkipExperiment
from helpers.learning import checks

PASS_MARK, FAIL_MARK = "✔", "✘"


class CheckFailed(CourseError, AssertionError):
    """A graded check found the learner's answer wrong; the message says what to do.

    An AssertionError (what a failed test cell raises, for nbgrader and for a learner reading
    the traceback) and a CourseError (the course raised it on purpose)."""


@dataclass
class Outcome:
    """The result of one graded check in this kernel."""

    grade_id: str
    passed: bool
    feedback: str = ""


results: dict[str, Outcome] = {}  # grade_id -> latest outcome in this kernel


def autograding() -> bool:
    """True while nbgrader validates (or autogrades) this notebook: failures raise, for its report."""
    return config.nbgrader_grading()


def _origin(tb) -> str:
    """'in fit_line, line 7' for the innermost frame of a traceback that is not this module."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename != __file__]
    if not frames:
        return ""
    f = frames[-1]
    return f"in {f.name}, line {f.lineno}"


def explain(exc: BaseException) -> str:
    """Turn an exception from the learner's code into feedback a learner can act on."""
    where = _origin(exc.__traceback__)
    if isinstance(exc, NotImplementedError):
        return (f"not written yet: a `raise NotImplementedError()` stub was reached ({where}). "
                "Replace the `# YOUR CODE HERE` part of that function with your code.")
    if isinstance(exc, AssertionError):
        return str(exc) or f"an assertion failed ({where})"
    return f"your code raised {type(exc).__name__}: {exc} ({where})"


class check:  # noqa: N801 - used as a context manager, reads like a statement
    """Context manager for one graded check (see the module docstring)."""

    def __init__(self, grade_id: str) -> None:
        self.grade_id = validate.text(grade_id, "a check's grade_id (its cell's nbgrader grade_id)")
        self._warnings: warnings.catch_warnings | None = None
        self._caught: list = []

    # -- helpers for the body -------------------------------------------------------------
    def require(self, condition: bool, feedback: str) -> None:
        """Fail the check with `feedback` unless condition holds."""
        if not condition:
            raise CheckFailed(feedback)

    def close(self, what: str, value, expected: float, rel_tol: float, hint: str = "") -> float:
        """Require `value` (a number) within rel_tol of `expected`; returns it as a float."""
        v, problem = checks.quantity(value)
        if problem:
            raise CheckFailed(f"{what}: {problem} {hint}".rstrip())
        if not math.isclose(v, expected, rel_tol=rel_tol):
            raise CheckFailed(f"{what} is {v:.4g}, expected {expected:.4g} within {rel_tol:.0%} "
                              f"(off by a factor {v / expected if expected else float('inf'):.3g}). "
                              f"{hint}".rstrip())
        return v

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> check:
        # Anything on stderr gives a test cell zero points in nbgrader, so warnings raised
        # inside the check are collected and shown on stdout instead.
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        self._warnings.__exit__(None, None, None)
        for w in self._caught:
            print(f"  note: {w.category.__name__}: {w.message}")
        if etype is None:
            results[self.grade_id] = Outcome(self.grade_id, True)
            print(f"{PASS_MARK} {self.grade_id}: PASS", flush=True)
            return False
        if not issubclass(etype, Exception):
            return False  # KeyboardInterrupt, SystemExit: not the learner's answer
        if isinstance(exc, SkipExperiment):  # this machine cannot run the check (no QEMU, no GPU): not the learner's fault
            feedback = f"not checked on this machine: {exc}"
            results[self.grade_id] = Outcome(self.grade_id, False, feedback)
            print(f"… {self.grade_id}: {feedback}", flush=True)
            if autograding():
                raise CheckFailed(f"{self.grade_id}: {feedback}") from None
            return True
        feedback = explain(exc)
        results[self.grade_id] = Outcome(self.grade_id, False, feedback)
        print(f"{FAIL_MARK} {self.grade_id}: FAIL — {feedback}", flush=True)
        if autograding():
            raise CheckFailed(f"{self.grade_id}: {feedback}") from None
        return True


class attempt:  # noqa: N801
    """Run learner code in a non-graded cell; report (do not raise) if it is unfinished or fails."""

    def __init__(self, what: str = "this cell") -> None:
        self.what = what

    def __enter__(self) -> attempt:
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        if etype is None or not issubclass(etype, Exception):
            return False
        print(f"… {self.what} skipped — {explain(exc)}", file=sys.stdout, flush=True)
        return True


def summary() -> dict[str, bool]:
    """Print how many of this kernel's checks pass; return {grade_id: passed}."""
    done = {k: o.passed for k, o in results.items()}
    n_ok = sum(done.values())
    print(f"{n_ok}/{len(done)} checks pass" + (": " + ", ".join(
        f"{k} {PASS_MARK if v else FAIL_MARK}" for k, v in done.items()) if done else ""))
    return done
