"""Sphinx extension: glossary terms and bibliography entries as targets of markdown links.

The notebooks link a term as `[PCIe](../book/glossary.md#term-pcie)` and a source as
`[NVIDIA, nv-mmap.c](../book/bibliography.md#cite-nv-mmap)` (tools/checks/labroles.py writes them),
because JupyterLab cannot resolve `{term}` or `{cite}` roles. myst-parser resolves the
`#fragment` of a link to another page only among that page's heading anchors and warns about
any other. This extension adds, for every page, each glossary term (`#term-<slug>`) and each
bibliography entry (`#cite-<key>`, the ids `bibtex_cite_id` in book/_config.yml gives them) to
those anchors, pointing at the id Sphinx gave the term or entry. A link to a term or key that
does not exist still warns (and fails the `-W` build).
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tools.checks.labroles import slug  # noqa: E402  (one slug rule for the links and their targets)


def targets(doctree: nodes.document) -> dict[str, tuple[int, str, str]]:
    """{fragment: (line, element id, text)} for the glossary terms and citations of one page."""
    found: dict[str, tuple[int, str, str]] = {}
    for glossary in doctree.findall(addnodes.glossary):
        for term in glossary.findall(nodes.term):
            if term["ids"]:
                found[f"term-{slug(term.astext())}"] = (term.line or 0, term["ids"][0], term.astext())
    for node_id in doctree.ids:
        if node_id.startswith("cite-"):
            found[f"cite-{slug(node_id[len('cite-'):])}"] = (0, node_id, node_id[len("cite-"):])
    return found


def register(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: add this page's terms and citations to its markdown link anchors."""
    found = targets(doctree)
    if found:
        meta = app.env.metadata[app.env.docname]
        meta["myst_slugs"] = {**found, **meta.get("myst_slugs", {})}


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", register)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
