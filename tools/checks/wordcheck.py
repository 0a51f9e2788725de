"""Does an executed notebook's output word each value by its mode? (issue 38, item 2)

    python -m tools.checks.wordcheck notebooks/*.ipynb                 # executed copies: check their outputs
    python -m tools.checks.wordcheck --execute notebooks/0[0-5]*.ipynb  # execute each (live on a GPU), then check

A value's wording comes from its Evidence (helpers.core.evidence: "measured now on …", "recorded
on …", "the model gives …"). This tool reads what a run printed, line by line, and reports:

1. a model's value called measured: a line (or one of its `;`-separated parts, as a figure that
   shows a live and a modelled series names each) that says SIMULATED and "measured";
2. live data called recorded: a line that carries a LIVE caption or "measured now" and also says
   "recorded" or "the reference machine" — unless it is a beside line ("reference (<machine>)"),
   which sets the reference's value next to the live one on purpose;
3. in a notebook whose banner says LIVE, any line that says "recorded" or "the reference machine"
   without naming the recording it means (a REPLAY caption, "recorded on <machine>" or a beside
   line): a sentence written for the recording, printed over live data.

Exit status 1 when a notebook has a problem (each printed with notebook, cell and line). The same
`problems` function runs in CI over every replayed notebook's outputs (notebooks/conftest.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_RECORDED = re.compile(r"\brecorded\b|\breference machine\b", re.I)
_NAMED = re.compile(r"REPLAY|recorded on |reference (machine )?\(|recorded=True", re.I)
_LIVE_LINE = re.compile(r"\bLIVE\b|measured now", re.I)
_MEASURED = re.compile(r"\bmeasured\b", re.I)
# a figure or line that sets a replayed series beside the live one names it: "REPLAY · recorded on X"
_BESIDE = re.compile(r"REPLAY\s*[·:]\s*recorded on ", re.I)


def problems(text: str, live_notebook: bool) -> list[str]:
    """The lines of one cell's output whose wording contradicts their mode (see the module docstring)."""
    out = []
    for line in text.splitlines():
        if any("SIMULATED" in part and _MEASURED.search(part) for part in line.split(";")):
            out.append(f"a model's value called measured: {line.strip()[:200]}")
        elif _LIVE_LINE.search(line) and _RECORDED.search(_BESIDE.sub("", line)) and not re.search(r"reference \(", line):
            out.append(f"live data called recorded: {line.strip()[:200]}")
        elif live_notebook and _RECORDED.search(line) and not _NAMED.search(line):
            out.append(f"recording wording in a live run: {line.strip()[:200]}")
    return out


def output_text(outputs: list[dict]) -> str:
    """The text a cell printed or displayed (streams, and text/plain of results and displays)."""
    parts = []
    for o in outputs:
        if "text" in o:
            parts.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            t = o["data"]["text/plain"]
            parts.append("".join(t) if isinstance(t, list) else t)
    return "\n".join(parts)


def is_live(text: str) -> bool:
    """Whether a notebook's banner (the first cell's output) says the mode is LIVE."""
    return re.search(r"^mode\s*:\s*LIVE", text, re.M) is not None


def cell_problems(nb: dict) -> list[tuple[int, int, str]]:
    """(cell index, code-cell index, problem) for every wording problem of an executed notebook: the
    mode is read from the first output that names one (the banner)."""
    found, live = [], None
    code = [(i, c) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]
    for j, (i, cell) in enumerate(code):
        text = output_text(cell.get("outputs", []))
        if live is None and "mode" in text:
            live = is_live(text)
        found += [(i, j, p) for p in problems(text, bool(live))]
    return found


def check_notebook(nb: dict) -> list[str]:
    """Every problem of an executed notebook, as 'cell N: problem'."""
    return [f"cell {i}: {p}" for i, _, p in cell_problems(nb)]


def _execute(path: Path, timeout: int) -> dict:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}).execute()
    return json.loads(nbformat.writes(nb))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--execute", action="store_true", help="execute each notebook first (in this mode: live on a GPU)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell when executing")
    args = ap.parse_args(argv)
    bad = 0
    for p in args.notebooks:
        nb = _execute(p, args.timeout) if args.execute else json.loads(p.read_text())
        found = check_notebook(nb)
        bad += bool(found)
        print(f"{p}: " + ("ok" if not found else f"{len(found)} problem(s)"))
        for f in found:
            print(f"  {f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
