"""Sphinx extension: the labs' student pages (book/labs, written by tools/booklabs.py) get no launch buttons.

Binder, Colab and JupyterHub open the page's file in the course repository, and a student version
exists only in the build (the repository holds the instructor's labs/): the buttons would open a
missing file. The page's download button serves the student notebook instead, as its note says.
"""

from __future__ import annotations

from sphinx.application import Sphinx

STUDENT_DIR = "book/labs/"


def drop_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """html-page-context, after the theme added its buttons (priority 501): remove the launch group."""
    if pagename.startswith(STUDENT_DIR) and "header_buttons" in context:
        context["header_buttons"] = [b for b in context["header_buttons"] if b.get("label") != "launch-buttons"]


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", drop_launch_buttons, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
