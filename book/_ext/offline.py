"""Sphinx extension: leave out sphinx-thebe's scripts, which would fetch thebe from a CDN.

Jupyter Book 1 always loads sphinx-thebe. This site offers no in-page live code (it would
need a network kernel); the launch buttons open the notebooks in JupyterLab instead. Its
scripts name a CDN URL and are added twice by Jupyter Book 1.0.4 (a redeclared `const`
that throws in the browser), so they are removed from every page.
"""

from __future__ import annotations

from sphinx.application import Sphinx


def _is_thebe(js) -> bool:
    name = getattr(js, "filename", None) or str(js)
    body = (getattr(js, "attributes", None) or {}).get("body", "")
    return "sphinx-thebe" in str(name) or "thebe" in str(name) or "THEBE_JS_URL" in body


def drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if not _is_thebe(js)]


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
