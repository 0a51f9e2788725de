"""The site's reference pages: the source questions, the glossary, the bibliography and the index.

The built_site tests run after `make book` (Makefile's book target), on book/_build/html."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "book" / "_build" / "html"
MIN_INDEX_ENTRIES = 150  # the glossary alone defines about 127 terms, plus the topic groups
SOURCE_FILES = ("000_", "001_", "002_", "003_", "004_")


def genindex_entries(page: str) -> list[str]:
    """The entries (and sub-entries) of a Sphinx genindex page, as their text."""
    tables = re.findall(r'<table[^>]*class="[^"]*\bgenindextable\b[^"]*"[^>]*>(.*?)</table>', page, re.S)
    items = re.findall(r"<li>(.*?)(?=<li>|</li>|<ul>)", "".join(tables), re.S)
    return [t for t in (re.sub(r"<[^>]+>", "", i).strip() for i in items) if t]


def test_genindex_reader_on_made_up_html():
    page = ('<table style="width: 100%" class="indextable genindextable"><tr><td><ul><li><a href="g.html#term-BAR">BAR</a></li>'
            '<li>bus<ul><li><a href="g.html#i1">PCI</a></li><li><a href="g.html#i2">PCIe</a></li></ul></li>'
            '</ul></td></tr></table><ul><li>not in the index</li></ul>')
    assert genindex_entries(page) == ["BAR", "bus", "PCI", "PCIe"]
    assert genindex_entries("<html>no index</html>") == []


def test_reference_pages_are_in_the_toc():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [e["file"] for part in toc["parts"] for e in part["chapters"]]
    for page in ("book/sources", "book/glossary", "book/bibliography"):
        assert page in files and (ROOT / f"{page}.md").is_file()


def test_bibliography_is_configured_and_every_cited_key_exists():
    cfg = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    bib = ROOT / cfg["bibtex_bibfiles"][0]
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib.read_text(), re.M))
    assert {"src000", "src001", "src002", "src003", "src004"} <= keys
    cited = set()
    for page in (ROOT / "book").glob("*.md"):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", page.read_text()):
            cited |= {k.strip() for k in group.split(",")}
    assert cited and cited <= keys, f"cited but not in {bib.name}: {sorted(cited - keys)}"
    assert "```{bibliography}" in (ROOT / "book" / "bibliography.md").read_text()


def test_sources_page_names_every_source_question_never_seeds():
    text = (ROOT / "book" / "sources.md").read_text()
    for prefix in SOURCE_FILES:
        assert f"(source-{prefix[:3]})=" in text
    for page in ("sources.md", "bibliography.md", "glossary.md", "intro.md"):
        assert not re.search(r"\bseeds?\b", (ROOT / "book" / page).read_text(), re.I), page


@pytest.mark.built_site
def test_built_site_has_an_index_and_the_reference_pages():
    genindex = SITE / "genindex.html"
    assert genindex.is_file(), "no genindex.html: build the site with `make book` first"
    entries = genindex_entries(genindex.read_text())
    assert len(entries) >= MIN_INDEX_ENTRIES, f"only {len(entries)} index entries"
    for term in ("BAR", "pinned memory", "P2PDMA", "doorbell"):
        assert term in entries
    glossary = (SITE / "book" / "glossary.html").read_text()
    assert 'id="term-BAR"' in glossary
    bibliography = (SITE / "book" / "bibliography.html").read_text()
    assert "drivers/gpu/drm/ttm/ttm_bo.c" in bibliography and "nv-p2p.c" in bibliography
    assert "Source questions" in (SITE / "book" / "sources.html").read_text()
