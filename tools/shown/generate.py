"""Write each marked notebook cell from the package's text (see tools.shown for the rules)."""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "#@shown"
PACKAGE = "helpers"  # the only package a page may show code from
MARK = re.compile(r"#@shown\s+(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*:\s*(?P<names>.+?)\s*$")
NAME = re.compile(r"[A-Za-z_]\w*")
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class ShownError(InputError):
    """A marked cell cannot be written: a bad marker, a missing module or name, a duplicate."""


@dataclass(frozen=True)
class Mark:
    """One marker line: the module (dotted, inside the repository) and the names it shows."""

    module: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Cell:
    """A marked cell of a notebook: where it is (for messages), its markers and its text now."""

    where: str
    index: int
    marks: tuple[Mark, ...]
    source: str


def parse_marks(source: str, where: str) -> tuple[Mark, ...]:
    """The marker lines that open a cell (none: not a shown cell). A line that starts with the
    prefix but does not read `#@shown package.module: name, name` is refused, naming the cell."""
    lines = source.splitlines()
    head = len(lines) - len(list(itertools.dropwhile(lambda line: line.startswith(PREFIX), lines)))
    if any(line.lstrip().startswith(PREFIX) for line in lines[head:]):
        raise ShownError(f"{where}: a '{PREFIX}' line below the cell's first lines; markers open the cell")
    marks = []
    for line in lines[:head]:
        m = MARK.fullmatch(line)
        names = tuple(n.strip() for n in m.group("names").split(",")) if m else ()
        if m is None or not all(NAME.fullmatch(n) for n in names):
            raise ShownError(f"{where}: marker {line!r} must read '#@shown package.module: name, name'")
        marks.append(Mark(m.group("module"), names))
    return tuple(marks)


def marked_cells(notebook: Path, root: Path = ROOT) -> list[Cell]:
    """Every marked code cell of `notebook`, in order."""
    nb = nbformat.read(notebook, as_version=4)
    rel = notebook.relative_to(root) if notebook.is_relative_to(root) else notebook
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{rel} cell {i} (id {cell.get('id', '?')})"
        marks = parse_marks(cell.source, where)
        if marks:
            out.append(Cell(where, i, marks, cell.source))
    return out


def module_file(module: str, root: Path, where: str) -> Path:
    """The file that holds `module` in the repository at `root` (a module or a package's __init__).
    Only the course's package is shown: a page is public, and tools/ or instructor/ (the labs'
    solutions) must never be copied into one, nor a file a symlink leads outside helpers/ to."""
    if module.split(".")[0] != PACKAGE:
        raise ShownError(f"{where}: {module} is not in the {PACKAGE} package; a page shows only the course's package")
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            if not path.resolve().is_relative_to((root / PACKAGE).resolve()):
                raise ShownError(f"{where}: {path.relative_to(root)} leads outside {PACKAGE}/ (a symlink)")
            return path
    raise ShownError(f"{where}: {module} is not a module of this repository (no {base.relative_to(root)}.py)")


def definitions(path: Path, root: Path, where: str) -> dict[str, list[str]]:
    """Each top-level def or class of the file: name -> its texts (decorators included), one per
    definition, so a name defined twice can be told apart from a name defined once."""
    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ShownError(f"{where}: {path.relative_to(root)} does not parse (line {exc.lineno}: {exc.msg})") from None
    lines = text.splitlines()
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, DEFINITIONS):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            found.setdefault(node.name, []).append("\n".join(lines[start:node.end_lineno]))
    return found


def cell_text(cell: Cell, root: Path = ROOT) -> str:
    """What the cell must hold: its marker lines, then each named definition from its module."""
    parts = []
    for mark in cell.marks:
        path = module_file(mark.module, root, cell.where)
        defs = definitions(path, root, cell.where)
        for name in mark.names:
            texts = defs.get(name, [])
            if len(texts) != 1:
                why = "does not define it at top level" if not texts else f"defines it {len(texts)} times"
                raise ShownError(f"{cell.where}: cannot show {name}: {path.relative_to(root)} {why}")
            parts.append(texts[0])
    head = "\n".join(f"{PREFIX} {m.module}: {', '.join(m.names)}" for m in cell.marks)
    return head + "\n" + "\n\n\n".join(parts)


def check_unique(cells: list[Cell]) -> None:
    """Two marked cells of one notebook may not show the same name: the later would replace the
    earlier in the page's namespace, and the page would run code it does not show where it says."""
    seen: dict[str, str] = {}
    for cell in cells:
        for mark in cell.marks:
            for name in mark.names:
                if name in seen:
                    raise ShownError(f"{cell.where}: {name} is already shown by {seen[name]}")
                seen[name] = cell.where


def stale_cells(notebook: Path, root: Path = ROOT) -> dict[int, str]:
    """The marked cells of `notebook` whose text differs from what the package gives: index -> text."""
    cells = marked_cells(notebook, root)
    check_unique(cells)
    out = {}
    for cell in cells:
        want = cell_text(cell, root)
        if cell.source != want:
            out[cell.index] = want
    return out


def rewrite(notebook: Path, stale: dict[int, str]) -> None:
    """Put the generated texts into the notebook's cells (nothing else in the file changes)."""
    nb = nbformat.read(notebook, as_version=4)
    for index, text in stale.items():
        nb.cells[index].source = text
    notebook.write_text(nbformat.writes(nb) + "\n")
