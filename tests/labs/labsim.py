"""Grade a lab in this process the way nbgrader autograde does, with some solution cells replaced.

`score(lab, solutions)` executes the instructor's source notebook top to bottom in one namespace
(hidden tests included, as nbgrader restores them), with NBGRADER_EXECUTION set so that a failing
check raises, and the solution cells named in `solutions` replaced by the given source. It returns
{grade_id: points earned}. It is what `make grade` does to a submission, minus the kernel and
nbgrader's bookkeeping (tests/labs/test_labgrade.py drives nbgrader itself), so that planted
submissions can be graded in seconds.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
LABS = {p.name.split("_")[0]: p for p in sorted((ROOT / "labs").glob("lab*.ipynb"))}


def cells(lab: str):
    """(nbgrader metadata, source) of every code cell of a lab's source notebook."""
    nb = nbformat.read(LABS[lab], as_version=4)
    return [(c.metadata["nbgrader"], c.source) for c in nb.cells if c.cell_type == "code"]


def strip_hidden(source: str) -> str:
    """A check cell as the student version has it: nbgrader's hidden-test region removed."""
    out, hidden = [], False
    for ln in source.splitlines():
        if "BEGIN HIDDEN TESTS" in ln:
            hidden = True
        elif "END HIDDEN TESTS" in ln:
            hidden = False
        elif not hidden:
            out.append(ln)
    return "\n".join(out)


def score(lab: str, solutions: dict[str, str] | None = None, *, monkeypatch, hidden: bool = True) -> dict[str, float]:
    """Points per graded check for the source lab with `solutions` (grade_id -> source) swapped in.

    hidden=False runs the checks as the student version has them (published examples only)."""
    from helpers.labs import grading

    solutions = solutions or {}
    monkeypatch.setenv("COURSE_MODE", "replay")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    unknown = set(solutions) - {m["grade_id"] for m, _ in cells(lab) if m.get("solution")}
    assert not unknown, f"{lab} has no solution cells {unknown}"
    ns: dict = {"display": lambda *a, **k: None, "__name__": "__main__"}
    points: dict[str, float] = {}
    grading.results.clear()
    FEEDBACK.clear()
    for meta, src in cells(lab):
        gid = meta["grade_id"]
        src = solutions.get(gid, src)
        graded = meta.get("grade") and not meta.get("solution")
        if graded and not hidden:
            src = strip_hidden(src)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(src, gid, "exec"), ns)
        except Exception as exc:  # a failed check (CheckFailed) or any error: no points, like nbgrader
            if graded:
                points[gid] = 0.0
                FEEDBACK[gid] = f"{type(exc).__name__}: {exc}"
            continue
        if graded:
            points[gid] = float(meta["points"])
    return points


FEEDBACK: dict[str, str] = {}  # the last failure message of each check, for assertion messages
