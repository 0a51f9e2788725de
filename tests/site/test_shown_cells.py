"""tools.shown: the cells that show package code are written from the package (one source).

On the course's notebooks: --check passes and a rewrite changes nothing, and a function defined
by a generated cell is, to the evidence contract, the course's own (not "your changed ...").
On throwaway copies: an edited cell or an edited package function makes --check fail and a
rewrite restores the package's text; bad markers, missing or broken modules and a name shown
twice are refused with the notebook and the cell named."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from helpers.core import experiments, shown
from tools.shown.__main__ import main
from tools.shown.generate import ShownError, cell_text, marked_cells, stale_cells

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A page")] + [nbformat.v4.new_code_cell(s) for s in sources]
    path.write_text(nbformat.writes(nb) + "\n")
    return path


def _module(root: Path, dotted: str, text: str) -> None:
    path = root.joinpath(*dotted.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_the_course_s_marked_cells_are_the_package_s_text():
    assert main(["--check"]) == 0
    assert {nb.name: stale_cells(nb) for nb in NOTEBOOKS} == {nb.name: {} for nb in NOTEBOOKS}


def test_every_measuring_function_is_shown_and_a_shown_cell_defines_the_package_s_function(tmp_path):
    """Running a generated cell's text gives functions whose text is the package's: the evidence
    contract sees the page's function as the course's own, not as a learner's change."""
    shown_by = {}
    for nb in NOTEBOOKS:
        for cell in marked_cells(nb):
            for m in cell.marks:
                for name in m.names:
                    shown_by[(m.module, name)] = cell
    measuring = {e.shown for e in experiments.discover().values() if e.shown is not None}
    assert len(measuring) >= 19
    for i, fn in enumerate(sorted(measuring, key=lambda f: f.__qualname__)):
        cell = shown_by[(fn.__module__, fn.__name__)]
        page = tmp_path / f"page_{i}.py"  # a file, so inspect finds the text as it does in a notebook
        page.write_text(cell_text(cell))
        ns = dict(vars(importlib.import_module(fn.__module__)))  # the page's imports
        ns["cuda"] = SimpleNamespace(jit=lambda kernel: kernel)  # a kernel in the cell: no Numba here
        exec(compile(page.read_text(), str(page), "exec"), ns)
        assert ns[fn.__name__] is not fn and not shown.changed(ns[fn.__name__], fn), cell.where


def test_an_edited_cell_fails_the_check_and_a_rewrite_restores_it(tmp_path, capsys):
    copy = tmp_path / "04_pinned_memory.ipynb"
    shutil.copy(ROOT / "notebooks/04_pinned_memory.ipynb", copy)
    nb = nbformat.read(copy, as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("#@shown helpers.ch04_pinned_memory.pinning"))
    original = cell.source
    cell.source = original.replace("t1 - t0", "(t1 - t0) / 2")  # a "faster" pin, typed into the page
    copy.write_text(nbformat.writes(nb) + "\n")
    assert main(["--check", str(copy)]) == 1
    assert "04_pinned_memory.ipynb cell" in capsys.readouterr().err
    assert main([str(copy)]) == 0
    assert original in _sources(copy) and main(["--check", str(copy)]) == 0
    assert copy.read_text() == (ROOT / "notebooks/04_pinned_memory.ipynb").read_text()  # the rest untouched


def test_the_package_is_the_source_a_changed_function_changes_the_cell(tmp_path):
    _module(tmp_path, "helpers.timing", "import time\n\n\n@staticmethod\ndef f(n):\n    return n  # one\n\n\n"
                                    "def g():\n    pass\n")
    page = _notebook(tmp_path / "p.ipynb", "x = 1", "#@shown helpers.timing: g, f\nstale text")
    assert main(["--check", str(page)], root=tmp_path) == 1
    assert main([str(page)], root=tmp_path) == 0
    assert _sources(page)[1] == ("#@shown helpers.timing: g, f\ndef g():\n    pass\n\n\n@staticmethod\n"
                                 "def f(n):\n    return n  # one")
    _module(tmp_path, "helpers.timing", "def f(n):\n    return 2 * n\n\n\ndef g():\n    pass\n")
    assert main(["--check", str(page)], root=tmp_path) == 1
    main([str(page)], root=tmp_path)
    assert _sources(page) == ["x = 1", "#@shown helpers.timing: g, f\ndef g():\n    pass\n\n\ndef f(n):\n    return 2 * n"]


@pytest.mark.parametrize(("cells", "module_text", "message"), [
    (["#@shown helpers.timing g"], "def g():\n    pass\n", r"p\.ipynb cell 1 \(id .*\): marker '#@shown helpers\.timing g'"),
    (["#@shown helpers.timing: g, 2x"], "def g():\n    pass\n", r"p\.ipynb cell 1 .*must read"),
    (["#@shown helpers.nothere: g"], "def g():\n    pass\n", r"p\.ipynb cell 1 .*helpers\.nothere is not a module"),
    (["x = 1\n#@shown helpers.timing: g"], "def g():\n    pass\n", r"p\.ipynb cell 1 .*markers open the cell"),
    (["#@shown instructor.labs.lab1: g"], "def g():\n    pass\n", r"p\.ipynb cell 1 .*not in the helpers package"),
    (["#@shown helpers.timing: g"], "def g(:\n    pass\n", r"p\.ipynb cell 1 .*helpers/timing\.py does not parse \(line 1"),
    (["#@shown helpers.timing: h"], "def g():\n    pass\n", r"p\.ipynb cell 1 .*cannot show h: .*does not define it"),
    (["#@shown helpers.timing: g"], "def g():\n    pass\n\n\ndef g():\n    return 1\n",
     r"cannot show g: .*defines it 2 times"),
    (["#@shown helpers.timing: g", "y = 2", "#@shown helpers.timing: g"], "def g():\n    pass\n",
     r"p\.ipynb cell 3 .*: g is already shown by .*p\.ipynb cell 1"),
])
def test_bad_marks_and_sources_are_refused_naming_the_notebook_and_cell(tmp_path, capsys, cells, module_text,
                                                                          message):
    _module(tmp_path, "helpers.timing", module_text)
    page = _notebook(tmp_path / "p.ipynb", *cells)
    before = page.read_text()
    with pytest.raises(ShownError, match=message):
        stale_cells(page, tmp_path)
    assert main([str(page)], root=tmp_path) == 2
    assert "shown: " in capsys.readouterr().err and page.read_text() == before  # nothing written


def test_a_module_that_leads_outside_the_package_is_refused(tmp_path):
    (tmp_path / "outside.py").write_text("def g():\n    return 'secret'\n")
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "link.py").symlink_to(tmp_path / "outside.py")
    page = _notebook(tmp_path / "p.ipynb", "#@shown helpers.link: g")
    with pytest.raises(ShownError, match=r"p\.ipynb cell 1 .*helpers/link\.py leads outside helpers/"):
        stale_cells(page, tmp_path)
