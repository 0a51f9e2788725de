"""Sphinx extension: the site publishes the labs' student versions, whatever way it is built.

Two jobs:

* **Refuse a build that would publish solutions.** labs/ holds the instructor's labs, solutions
  included; `make book` builds from a toc that tools/site/booklabs.py writes into book/_build, with
  each lab mapped to its student version in book/labs/ (made by nbgrader). Any other way of
  building with this config (`jupyter-book build . --config book/_config.yml --toc book/_toc.yml`,
  a toc of one's own, `only_build_toc_files` turned off) could read labs/ directly. So before a
  single page is read (`env-before-read-docs`, which sees every document the build found, cached
  ones included), the build stops with an error naming the instructor labs it would publish,
  unless the toc in use is one booklabs wrote for a solution site (its booklabs.json beside it says
  `"mode": "solution"`: `make book BOOK_LABS=solution`, an instructor's private site). A page under
  book/labs/ that still holds a solution or hidden-test region (not made by nbgrader) stops it too.
* **No launch buttons on the student pages.** Binder, Colab and JupyterHub open the page's file
  in the course repository, and a student version exists only in the build (the repository holds
  the instructor's labs/): the buttons would open a missing file. The page's download button
  serves the student notebook instead, as its note says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import SphinxError

STUDENT_DIR = "book/labs/"
INSTRUCTOR_LAB = re.compile(r"^labs/lab\d+_[a-z0-9_]+$")  # the docname of an instructor lab (labs/*.ipynb)
# nbgrader's markers around a solution or the hidden tests, as a line of code (prose that names them
# in backquotes, as book/teaching.md does, is not one)
SECRET = re.compile(r"^\s*#+\s*BEGIN (SOLUTION|HIDDEN TESTS)\b", re.M)
STATE = "booklabs.json"  # written by tools/site/booklabs.py beside the toc it writes


class SolutionsWouldBePublished(SphinxError):
    category = "Lab solutions would be published"


def solution_site(toc_path: str | None, srcdir: Path) -> bool:
    """Whether the toc in use was written by tools/site/booklabs.py for a solution site."""
    if not toc_path:
        return False
    for toc in (Path(toc_path), srcdir / toc_path):
        try:
            return json.loads((toc.parent / STATE).read_text()).get("mode") == "solution"
        except (OSError, ValueError, AttributeError):
            continue
    return False


def holds_secrets(path: Path) -> bool:
    """Whether a source file holds a solution or hidden-test region (a notebook: in a cell's source)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    if path.suffix == ".ipynb":
        try:
            text = "\n".join("".join(c.get("source", "")) for c in json.loads(text).get("cells", []))
        except (ValueError, AttributeError):
            pass
    return bool(SECRET.search(text))


def refusal(found: dict[str, Path], toc_path: str | None, srcdir: Path) -> str | None:
    """Why the build must stop (None: it may go on). `found` maps every document the build found to
    its source file. Unless the toc is a solution site's: instructor labs (labs/labN_topic), or any page
    whose source holds a solution or hidden-test region; always: a student page (book/labs/) that does."""
    how = ("Build the site with `make book`, which publishes the student versions (tools/site/booklabs.py, "
           "nbgrader); an instructor's private site with solutions is `make book BOOK_LABS=solution`.")
    student = sorted(d for d, p in found.items() if d.startswith(STUDENT_DIR) and holds_secrets(p))
    if student:
        return (f"{', '.join(student)} should be student versions but hold solution or hidden-test regions; "
                f"they are written by tools/site/booklabs.py, never by hand. {how}")
    if solution_site(toc_path, srcdir):
        return None
    secret = sorted(d for d, p in found.items() if INSTRUCTOR_LAB.match(d) or holds_secrets(p))
    if secret:
        return (f"this build would publish solutions: {', '.join(secret)} (the instructor's version"
                f"{'s' if len(secret) > 1 else ''}, from the toc {toc_path or '(none given)'}). {how}")
    return None


def check_documents(app: Sphinx, env, docnames: list[str]) -> None:
    """env-before-read-docs: stop before any page is read (or executed) when solutions would be published."""
    found = {d: Path(env.doc2path(d)) for d in set(env.found_docs) | set(docnames)}
    why = refusal(found, getattr(app.config, "external_toc_path", None), Path(app.srcdir))
    if why:
        raise SolutionsWouldBePublished(why)


def drop_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """html-page-context, after the theme added its buttons (priority 501): remove the launch group."""
    if pagename.startswith(STUDENT_DIR) and "header_buttons" in context:
        context["header_buttons"] = [b for b in context["header_buttons"] if b.get("label") != "launch-buttons"]


def setup(app: Sphinx) -> dict:
    app.connect("env-before-read-docs", check_documents)
    app.connect("html-page-context", drop_launch_buttons, priority=600)
    return {"version": "1.1", "parallel_read_safe": True, "parallel_write_safe": True}
