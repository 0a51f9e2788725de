"""Every chapter meets the chapter standard as far as it can be checked without running it
(tools/chapter_standard.py: head, key points, predictions folded, the measuring code shown
verbatim, exercises of each kind in the chapter's package, a diagram)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import chapter_standard  # noqa: E402

CHAPTERS = sorted({int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")})


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_meets_the_standard(chapter):
    assert chapter_standard.chapter_problems(chapter) == []


def test_every_measuring_function_a_page_shows_is_shown_somewhere():
    """An experiment that declares page code must have that code on some page, verbatim."""
    from helpers.core import experiments, shown

    pages = {}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        pages.update(shown.page_functions(nb))
    missing = [e.id for e in experiments.discover().values()
               if e.shown is not None and pages.get(e.shown.__name__) != shown.source_of(e.shown)]
    assert missing == []
