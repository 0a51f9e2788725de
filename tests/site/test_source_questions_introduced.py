""""Source question NNN" means something to a learner: Chapter 0, where the course first uses the
term, says what the source questions are and where each is described (book/sources.md), and in
every notebook the first text cell that names source question NNN also cites it (the
bibliography entry srcNNN gives its title and date; a link to the page's source-NNN anchor
does too)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MENTION = re.compile(r"(?i)source questions?(?: answered:)?\W{0,3}(?:\*\*)?(\d{3})")


def _markdown(nb: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]


def first_uncited(cells: list[str]) -> list[str]:
    """'NNN in text cell i' for each source question whose first mention is not cited there."""
    seen, bad = set(), []
    for i, text in enumerate(cells):
        for m in MENTION.finditer(text):
            n = m.group(1)
            if n in seen:
                continue
            seen.add(n)
            if f"src{n}" not in text and f"source-{n}" not in text:
                bad.append(f"{n} in text cell {i}")
    return bad


def test_chapter_0_says_what_a_source_question_is():
    head = " ".join(_markdown(ROOT / "notebooks" / "00_your_machine.ipynb")[0].split())
    assert "*source questions*" in head and "number them 000 to 004" in head
    link = re.search(r"\]\((\.\./book/sources\.md)\)", head)
    assert link and (ROOT / "notebooks" / link.group(1)).resolve().is_file()
    assert (ROOT / "book" / "sources.md").read_text().count("\n## 00") == 5


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_first_mention_of_each_source_question_cites_it(nb):
    assert first_uncited(_markdown(nb)) == []


def test_an_uncited_first_mention_is_caught():
    assert first_uncited(["As source question 002 says", "source question 002 {cite}`src002`"]) == ["002 in text cell 0"]
    assert first_uncited(["Source question 001 ({cite}`src001`)", "source question 001 again"]) == []
