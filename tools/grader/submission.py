"""A submitted lab notebook, read as data: the learner's solution cells and nothing else.

The grader never runs a submitted notebook as a whole. It takes from it only the code of the
cells whose nbgrader grade_id names a solution cell of the instructor's source lab, and
pairs them with the lab's own setup cell(s), taken from the source (the import cell before
the first solution cell). Everything else a submission carries — check cells, their
outputs, edited metadata, nbgrader checksums, cells the learner added — is ignored, so no
edit of it changes a grade or stops the class's run; a file that is not a notebook at all is
that student's 0 with the reason (`SubmissionError`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.core.errors import CourseError

LAB_NAME = re.compile(r"^(lab\d+)_[a-z0-9_]+\.ipynb$")
MAX_BYTES = 20 << 20


class SubmissionError(CourseError):
    """A submission that cannot be read as the lab's notebook (the student's 0, with this reason)."""


@dataclass(frozen=True)
class LabSource:
    """What the grader takes from the instructor's source lab."""

    lab: str
    name: str
    setup: tuple[str, ...]          # the lab's setup cell(s), run before the learner's cells
    solution_ids: tuple[str, ...]   # grade_ids of the solution cells, in order
    points: dict                    # grade_id -> points of the graded cells


def _cells(nb: dict) -> list[dict]:
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise SubmissionError("not a Jupyter notebook (no list of cells)")
    return [c for c in cells if isinstance(c, dict)]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _meta(cell: dict) -> dict:
    m = cell.get("metadata")
    m = m.get("nbgrader") if isinstance(m, dict) else None
    return m if isinstance(m, dict) else {}


def lab_source(path: Path) -> LabSource:
    """The setup cells, solution ids and points of the instructor's source lab at `path`."""
    m = LAB_NAME.match(path.name)
    if not m:
        raise SubmissionError(f"{path.name}: a lab is named labN_topic.ipynb")
    cells = [c for c in _cells(json.loads(path.read_text())) if c.get("cell_type") == "code"]
    setup, sol, points = [], [], {}
    for c in cells:
        meta = _meta(c)
        if meta.get("solution"):
            sol.append(meta["grade_id"])
        elif meta.get("grade"):
            points[meta["grade_id"]] = float(meta.get("points", 0))
        elif not sol:
            setup.append(_source(c))
    return LabSource(m.group(1), path.name, tuple(setup), tuple(sol), points)


def solution_cells(path: Path, source: LabSource) -> dict[str, str]:
    """{grade_id: code} of the learner's solution cells in the submission at `path`."""
    if path.stat().st_size > MAX_BYTES:
        raise SubmissionError(f"the notebook is {path.stat().st_size >> 20} MiB, more than {MAX_BYTES >> 20} MiB")
    try:
        nb = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SubmissionError(f"not a readable notebook (invalid JSON: {type(exc).__name__}: {exc})"[:300]) from None
    out: dict[str, str] = {}
    for c in _cells(nb):
        gid = _meta(c).get("grade_id")
        if c.get("cell_type") == "code" and gid in source.solution_ids:
            out[gid] = out.get(gid, "") + _source(c) + "\n"
    if not out:
        raise SubmissionError("none of the lab's solution cells is in it (their nbgrader grade_ids are missing)")
    return {gid: out[gid] for gid in source.solution_ids if gid in out}
