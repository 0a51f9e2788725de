"""Notebook hygiene: valid notebooks, no committed outputs, and a mode banner first.

    python -m tools.checks.nbhygiene notebooks/*.ipynb labs/*.ipynb

Exits 1 listing every problem. Outputs are never committed (the book and CI execute the
notebooks themselves, so a committed output could only be stale or from another machine),
and every notebook's first code cell calls `course.start(...)` so its mode is always shown.
"""

from __future__ import annotations

import sys

import nbformat


def problems(path: str) -> list[str]:
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:
        return [f"{path}: not a valid notebook ({exc})"]
    out = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, c in enumerate(code):
        if c.get("outputs") or c.get("execution_count") is not None:
            out.append(f"{path}: code cell {i} has committed outputs or an execution count")
    if not code or "course.start(" not in code[0].source:
        out.append(f"{path}: the first code cell must call course.start(...) to show the mode")
    return out


def main(paths: list[str]) -> int:
    found = [p for path in paths for p in problems(path)]
    print("\n".join(found) if found else f"notebook hygiene: {len(paths)} notebooks clean")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
