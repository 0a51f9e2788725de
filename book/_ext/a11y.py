"""Sphinx extension: repair what axe-core finds in the theme's and extensions' own markup.

tools/site/sitecheck.py runs axe-core (the standard accessibility engine) over every page of the built
site. The course's content is fixed at its source (helpers/presentation/figures.py, diagrams.py); what the
theme (pydata-sphinx-theme under sphinx-book-theme), docutils' citations and myst-nb write is
repaired here, in every HTML page once the build has finished:

* the search field's button is named "Search" but shows "Search Ctrl+K": its aria-label goes, so
  its name is what it shows (label-content-name-mismatch);
* the colour-mode button's icons carry titles ("Light", "Dark") that differ from its name
  ("Color mode"): the icons become decorative (aria-hidden) and lose the titles;
* the table of contents' fold toggles are <summary> elements with only an icon: they get a name;
  myst-nb's folds ("Show code cell output") are named "Toggle hidden content": the name goes, so
  it is what they show;
* docutils' citations use the deprecated role doc-biblioentry inside a role=list container: the
  roles go, the bibliography is plain text in sections (aria-deprecated-role, aria-allowed-role,
  aria-required-children);
* the primary sidebar (site title, search, chapters) becomes a navigation landmark (region);
* an empty table header cell (a pandas index corner, a blank heading) becomes a data cell.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

LOG = logging.getLogger(__name__)

RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="Search"'), r"\1"),
    (re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+")\s+title="[^"]*"'), r'\1 aria-hidden="true"'),
    (re.compile(r'<summary>(<span class="toctree-toggle")'), r'<summary aria-label="Show or hide the parts">\1'),
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>"),
    (re.compile(r' role="doc-biblioentry"'), ""),
    (re.compile(r'<div role="list" class="citation-list">'), '<div class="citation-list">'),
    (re.compile(r'<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">'),
     '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="navigation" aria-label="Course">'),
    # a header row of empty cells (a Markdown table used as a key-value list) goes; any other
    # empty header cell becomes a data cell
    (re.compile(r"<thead>\s*<tr[^>]*>(?:\s*<th[^>]*>\s*(?:<p>\s*</p>)?\s*</th>)+\s*</tr>\s*</thead>"), ""),
    (re.compile(r"<th([^>]*)>(\s*(?:<p>\s*</p>)?\s*)</th>"), r"<td\1>\2</td>"),
]


def fix_html(text: str) -> tuple[str, int]:
    """The page with every repair applied, and how many were made."""
    total = 0
    for pattern, repl in RULES:
        text, n = pattern.subn(repl, text)
        total += n
    return text, total


def repair_pages(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    total = 0
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed, n = fix_html(text)
        if n:
            page.write_text(fixed, encoding="utf-8")
            total += n
    LOG.info(f"a11y: {total} repairs to the theme's markup")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", repair_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
