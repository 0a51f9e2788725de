"""The code a page shows is the code the recorder runs: comparing a function with its page.

An experiment's measuring function (the default of its `code` parameter, see
core.experiments) appears verbatim in a notebook cell, where the learner reads, runs and
changes it. `source_of` gives a function's text in the one normal form both sides are compared
in; `page_functions` finds the functions a notebook defines; `changed` tells the evidence
contract whether the learner's function is still the course's.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path


def normal_form(text: str) -> str:
    """A function's text without indentation, trailing spaces or blank lines at either end."""
    lines = [line.rstrip() for line in textwrap.dedent(text).strip("\n").splitlines()]
    return "\n".join(lines).strip()


def source_of(fn: Callable) -> str | None:
    """The normal form of `fn`'s source, or None when Python cannot find it (a lambda typed at a
    prompt, a builtin)."""
    try:
        return normal_form(inspect.getsource(fn))
    except (OSError, TypeError):
        return None


def changed(given: Callable, original: Callable) -> bool:
    """True when `given` is not the course's `original` (another object and another text)."""
    if given is original:
        return False
    mine = source_of(given)
    return mine is None or mine != source_of(original)


def functions_in(code: str) -> dict[str, str]:
    """The top-level functions a cell defines: name -> normal form of its text."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    lines = code.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            out[node.name] = normal_form("\n".join(lines[start:node.end_lineno]))
    return out


def page_functions(notebook: Path) -> dict[str, str]:
    """Every top-level function the notebook's code cells define: name -> normal form."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    found: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            found.update(functions_in(cell.source))
    return found
