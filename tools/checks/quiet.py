"""What an executed chapter must not show, read from its outputs (issue 38, items 2 and 4).

Used on every cell nbval runs (notebooks/conftest.py: `make matrix`, one notebook by hand) and on
the notebooks the book build executed (tests/site/test_executed_notebooks.py: `make book`, CI's
one execution of each chapter):

1. Wording against the mode, with tools/checks/wordcheck.py's rules.
2. A fresh run is quiet: no ✘ (an unanswered exercise says "not answered yet"), no bare
   `True` / `False` as a cell's value, no warning text, no ANSI escape codes.
3. (executed notebooks) no error output: a cell that raised fails, as under nbval-lax.
"""

from __future__ import annotations

import re

from tools.checks import wordcheck

ANSI = re.compile(r"\x1b\[")
WARNING = re.compile(r"\b[A-Z]\w*Warning\b\s*[:(]|\bwarnings\.warn\(")


def _text(output) -> str:
    """The text one output shows (a stream's text or a result's text/plain), as wordcheck reads it."""
    return wordcheck.output_text([output])


def noise(outputs) -> list[str]:
    """What in a cell's outputs a fresh run must not show (empty: quiet)."""
    found = []
    for out in outputs or ():
        if out.get("output_type") == "error":
            continue  # an error fails the cell already
        text = _text(out)
        if "✘" in text:
            found.append(f"a ✘ on a fresh run (an unanswered exercise says 'not answered yet'): {text.strip()[:200]!r}")
        if out.get("output_type") == "execute_result" and text.strip() in ("True", "False"):
            found.append(f"a stray {text.strip()} as the cell's value")
        if WARNING.search(text):
            found.append(f"warning text: {text.strip()[:200]!r}")
        if ANSI.search(text):
            found.append(f"ANSI escape codes: {text.strip()[:120]!r}")
    return found



def notebook_problems(nb) -> list[str]:
    """Every error, wording and quiet problem in an executed notebook's code cells, cell by cell."""
    found = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        found += [f"code cell {i} raised {out.get('ename')}: {out.get('evalue', '')[:200]}"
                  for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        found += [f"code cell {i} is not quiet: {p}" for p in noise(cell.get("outputs", []))]
    found += [f"code cell {j}: wording against the mode: {p}" for _, j, p in wordcheck.cell_problems(nb)]
    return found
