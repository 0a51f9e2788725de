"""Every chapter meets the chapter standard as far as it can be checked without running it
(tools/chapter_standard.py: head, key points, predictions folded, the measuring code shown
in cells tools.shown writes, exercises of each kind in the chapter's package, a diagram)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import chapter_standard

ROOT = Path(__file__).resolve().parents[2]

CHAPTERS = sorted({int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")})


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_meets_the_standard(chapter):
    assert chapter_standard.chapter_problems(chapter) == []


def test_every_experiment_s_measuring_function_is_shown_on_a_page():
    """An experiment that takes page code (a `code` parameter) has a marked cell showing that very
    function, named by its module: tools.shown then writes the cell from it."""
    from helpers.core import experiments
    from tools.shown.generate import marked_cells

    shown = {(m.module, n) for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for cell in marked_cells(nb, ROOT) for m in cell.marks for n in m.names}
    missing = [e.id for e in experiments.discover().values()
               if e.shown is not None and (e.shown.__module__, e.shown.__name__) not in shown]
    assert missing == []
