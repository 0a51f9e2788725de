"""Does a chapter meet the course's chapter standard (COURSE_DESIGN.md)? Checks what can be
checked from the notebooks and the chapter's package, without running them.

    python -m tools.chapter_standard 3        # one chapter (all its notebooks: 03_*.ipynb, 03b_*.ipynb …)
    python -m tools.chapter_standard          # every chapter

Per notebook: a time estimate, prerequisites and objectives at the top, key points at the end;
numbered sections (## 1., ## 2., ...) consecutive from 1; no Predict prompt without a committed
prediction and no prediction without a Predict prompt in the text just above it, and the result
cell after a prediction folded on the site (tag hide-output); no "seed" (the sources are "source questions"); no check
that takes its expected value in view (checks.close/equal/choice/explain/code are called
from the chapter's exercises module, never from the page).
Per chapter: at least two cells (one in Chapter 0) that show an experiment's measuring function
(cells marked `#@shown`, which `python -m tools.shown` writes from the package); an exercises module
with at least one coding exercise (checks.code) and one conceptual question (checks.choice or
checks.explain); at least one diagram (a helpers.presentation.diagrams.Diagram, shown by a call named
*diagram*).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

from helpers.core import experiments
from tools.shown.generate import marked_cells

ROOT = Path(__file__).resolve().parents[1]

SEED = re.compile(r"(?<!random )(?<!random-)\bseeds?\b", re.IGNORECASE)
DIRECT_CHECK = re.compile(r"\bchecks\.(close|equal|choice|explain|code|verdict)\(")


def notebooks_of(chapter: int) -> list[Path]:
    """The chapter's notebooks, in order (NN_*.ipynb, then NNb_*.ipynb, NNc_* …)."""
    return sorted((ROOT / "notebooks").glob(f"{chapter:02d}*_*.ipynb"))


def package_of(chapter: int) -> Path | None:
    found = sorted((ROOT / "helpers").glob(f"ch{chapter:02d}_*"))
    return found[0] if found else None


def page_problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    name, out = path.name, []
    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    head = md[0] if md else ""
    for what, pat in (("a time estimate (**Time:** about N min)", r"\*\*Time:\*\*[^\n]*\d+\s*min"),
                      ("prerequisites (**Prerequisites:**)", r"\*\*Prerequisites:\*\*"),
                      ("learning objectives", r"(?i)objectives")):
        if not re.search(pat, head):
            out.append(f"{name}: the first cell lacks {what}")
    if not md or not re.search(r"(?im)^#+\s*key points", md[-1]):
        out.append(f"{name}: the last text cell must be '## Key points'")
    for i, src in enumerate(md):
        if m := SEED.search(src):
            out.append(f"{name}: text cell {i} says {m.group(0)!r} (call them source questions)")
    cells = nb.cells
    for i, c in enumerate(cells):
        if c.cell_type != "code":
            continue
        if m := DIRECT_CHECK.search(c.source):
            out.append(f"{name}: code cell {i} calls checks.{m.group(1)} in view (use the chapter's exercises module)")
        if "ctx.predict(" in c.source:
            nxt = next((d for d in cells[i + 1:] if d.cell_type == "code"), None)
            if nxt is None or "hide-output" not in nxt.metadata.get("tags", []):
                out.append(f"{name}: the cell after the prediction in cell {i} must carry the tag hide-output")
        if "ctx.predict(" in c.source:
            above = next((d for d in reversed(cells[:i]) if d.cell_type == "markdown"), None)
            if above is None or not re.search(r"\*\*Predict\b", above.source):
                out.append(f"{name}: the prediction in cell {i} has no **Predict** prompt in the text cell above it")
    out += numbering_problems(name, md)
    for i, c in enumerate(cells):
        if c.cell_type == "markdown" and re.search(r"\*\*Predict\b", c.source):
            nxt = next((d for d in cells[i + 1:] if d.cell_type == "code"), None)
            if nxt is None or "ctx.predict(" not in nxt.source:
                out.append(f"{name}: the Predict prompt in cell {i} must be followed by a ctx.predict(...) cell")
    return out


SECTION = re.compile(r"^##\s+(\d+)\.\s", re.MULTILINE)


def numbering_problems(name: str, md: list[str]) -> list[str]:
    """Numbered sections (## 1. ..., ## 2. ...) must run 1, 2, 3, ... with none skipped or repeated."""
    numbers = [int(m.group(1)) for src in md for m in SECTION.finditer(src)]
    if numbers and numbers != list(range(1, len(numbers) + 1)):
        return [f"{name}: sections are numbered {', '.join(map(str, numbers))}; they must run 1, 2, 3, ... "
                "with none skipped or repeated"]
    return []


def shown_on(paths: list[Path], registry: dict) -> int:
    """How many marked cells show a registered experiment's measuring function (the cells' text is
    the package's by construction: tools.shown writes it, and `make test` runs its --check)."""
    measuring = {(e.shown.__module__, e.shown.__name__) for e in registry.values() if e.shown is not None}
    return sum(any((m.module, n) in measuring for m in cell.marks for n in m.names)
               for p in paths for cell in marked_cells(p, ROOT))


def chapter_problems(chapter: int) -> list[str]:
    paths = notebooks_of(chapter)
    if not paths:
        return [f"chapter {chapter}: no notebooks/{chapter:02d}_*.ipynb"]
    out = [p for path in paths for p in page_problems(path)]
    registry = experiments.discover()
    count = shown_on(paths, registry)
    need = 1 if chapter == 0 else 2
    if count < need:
        out.append(f"chapter {chapter}: {count} cell(s) show an experiment's measuring code (#@shown); needs {need}")
    pkg = package_of(chapter)
    ex = (pkg / "exercises.py") if pkg else None
    if ex is None or not ex.is_file():
        out.append(f"chapter {chapter}: no exercises module ({pkg.name if pkg else 'helpers/chNN_*'}/exercises.py)")
    else:
        src = ex.read_text()
        if "checks.code(" not in src:
            out.append(f"chapter {chapter}: no coding exercise (checks.code) in {ex.relative_to(ROOT)}")
        if "checks.choice(" not in src and "checks.explain(" not in src:
            out.append(f"chapter {chapter}: no conceptual question (checks.choice/explain) in {ex.relative_to(ROOT)}")
    pkg_src = "".join(f.read_text() for f in pkg.rglob("*.py")) if pkg else ""
    pages = "".join(c.source for p in paths for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
    if "Diagram(" not in pkg_src or not re.search(r"\w*diagram\w*\(", pages):
        out.append(f"chapter {chapter}: no diagram (a diagrams.Diagram in its package, shown by a *diagram*() call)")
    return out


def main(argv: list[str]) -> int:
    chapters = [int(a) for a in argv] or list(range(10))
    found = [p for ch in chapters for p in chapter_problems(ch)]
    print("\n".join(found) if found else f"chapter standard: chapters {chapters} meet it")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
