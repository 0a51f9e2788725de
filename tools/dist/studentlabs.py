"""The labs' student versions without nbgrader, for every learner (`make lab` writes them).

    python -m tools.dist.studentlabs [--out my_labs] [labs/labN_topic.ipynb ...]

labs/ holds the instructor versions (solutions and hidden tests inside nbgrader's markers).
`make student` makes the student versions with nbgrader, which only the test environment has;
a learner after `make lab` gets them from this file instead, in my_labs/. The rules are
nbgrader 0.9's `generate_assignment` (tests/labs/test_studentlabs.py compares the two on every
lab):

* a `### BEGIN SOLUTION` ... `### END SOLUTION` region becomes the stub (code: `# YOUR CODE HERE`
  and `raise NotImplementedError()`, indented as the BEGIN line; markdown: `YOUR ANSWER HERE`);
  a solution cell without a region becomes the stub entirely;
* `BEGIN HIDDEN TESTS` ... `END HIDDEN TESTS` and `BEGIN MARK SCHEME` ... `END MARK SCHEME`
  regions are removed, marker lines included;
* outputs and execution counts are cleared; graded and read-only cells are locked (not
  deletable, not editable), solution cells made undeletable.

A learner's copy is never overwritten: a lab whose student version is already in the folder is
left as it is (the learner's work), and reported. A marker that is not closed, a nested one or a
region in a cell of the wrong kind stops with a message, as nbgrader does.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
TEXT_STUB = ["YOUR ANSWER HERE"]
SOLUTION = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MARK_SCHEME = ("BEGIN MARK SCHEME", "END MARK SCHEME")


class LabFormatError(ValueError):
    """A lab whose markers cannot be stripped safely (unclosed, nested, in the wrong cell)."""


def _flags(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def strip_region(lines: list[str], markers: tuple[str, str], stub: list[str] | None, where: str) -> tuple[list[str], bool]:
    """`lines` with each marked region replaced by `stub` (indented as its BEGIN line) or removed."""
    begin, end = markers
    out, inside, found = [], False, False
    for line in lines:
        if begin in line:
            if inside:
                raise LabFormatError(f"{where}: nested '{begin}'")
            inside = found = True
            indent = re.match(r"\s*", line).group(0)
            out += [indent + s for s in stub or []]
        elif end in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise LabFormatError(f"{where}: '{begin}' without '{end}'")
    return out, found


def student_cell(cell: dict, where: str) -> dict:
    """One cell of the student version (a new dict; `cell` is not changed)."""
    cell = copy.deepcopy(cell)
    flags = _flags(cell)
    code = cell["cell_type"] == "code"
    stub = CODE_STUB if code else TEXT_STUB
    lines = "".join(cell["source"]).split("\n")
    lines, had_solution = strip_region(lines, SOLUTION, stub, where)
    if had_solution and not flags.get("solution"):
        raise LabFormatError(f"{where}: a solution region in a cell not marked as a solution cell")
    if flags.get("solution") and not had_solution:
        lines = list(stub)
    for markers, kind in ((HIDDEN, "grade"), (MARK_SCHEME, "task")):
        lines, had = strip_region(lines, markers, None, where)
        if had and not flags.get(kind):
            raise LabFormatError(f"{where}: a '{markers[0]}' region in a cell not marked as a {kind} cell")
    cell["source"] = "\n".join(lines)
    if code:
        cell["outputs"], cell["execution_count"] = [], None
    for key in ("collapsed", "scrolled"):
        cell.get("metadata", {}).pop(key, None)
    _lock(cell, flags)
    return cell


def _lock(cell: dict, flags: dict) -> None:
    """nbgrader's LockCells: solution cells undeletable; graded and read-only cells also not editable."""
    meta = cell.setdefault("metadata", {})
    if flags.get("solution"):
        meta["deletable"] = False
    elif flags.get("grade") or flags.get("locked"):
        meta["deletable"] = meta["editable"] = False


def student_notebook(nb: dict, name: str = "notebook") -> dict:
    """The student version of a lab notebook (nbformat 4 as a dict)."""
    out = copy.deepcopy(nb)
    out["cells"] = [student_cell(c, f"{name} cell {i}") for i, c in enumerate(nb["cells"])]
    out.get("metadata", {}).pop("celltoolbar", None)
    return out


def write_student_labs(labs: list[Path], out: Path) -> tuple[list[Path], list[Path]]:
    """Write the student version of each lab into `out` unless one is there; (written, kept)."""
    out.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for lab in labs:
        dest = out / lab.name
        if dest.exists():
            kept.append(dest)
            continue
        nb = student_notebook(json.loads(lab.read_text()), lab.name)
        tmp = dest.with_name(f".{dest.name}.tmp")
        tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        tmp.replace(dest)
        written.append(dest)
    return written, kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("labs", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "my_labs")
    args = ap.parse_args(argv)
    labs = args.labs or sorted((ROOT / "labs").glob("lab*.ipynb"))
    try:
        written, kept = write_student_labs(labs, args.out)
    except LabFormatError as exc:
        print(f"studentlabs: {exc}", file=sys.stderr)
        return 1
    for p in written:
        print(f"studentlabs: {p}: student version (no solutions)")
    if kept:
        print(f"studentlabs: kept your own {', '.join(p.name for p in kept)} in {args.out} "
              "(delete one to get a fresh copy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
