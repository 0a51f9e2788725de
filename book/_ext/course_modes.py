"""Sphinx extension: every chapter and lab page must show its mode banner; the status page lists them.

While a notebook page is read, its executed outputs are searched for the banner that
`helpers.course.start` prints ("mode      : REPLAY: ..."). A page under notebooks/, labs/ or
book/labs/ (the labs' student versions, tools/site/booklabs.py) without one is a build warning (the
book builds with -W, so the build fails): a reader must always see whether the numbers came from
this machine or from a reference GPU.

The directive ``{course-run-table}`` (on the status page, which is therefore read, and with
`execution_mode: force` in its metadata executed, at every build) becomes a table with, per notebook,
the mode, the GPU the build machine had, the replay reference, and myst-nb's execution data
(run time, when the outputs were produced, success).
"""

from __future__ import annotations

import datetime
import posixpath
import re

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOGGER = logging.getLogger(__name__)
COURSE_DIRS = ("notebooks/", "labs/", "book/labs/")  # book/labs: the labs' student versions
_LINE = re.compile(r"^(mode|GPU here|reference)\s*:\s*(.+)$", re.M)


def banner_fields(text: str) -> dict[str, str] | None:
    """{'mode': 'REPLAY', 'GPU here': ..., 'reference': ...} from a banner, None without one."""
    fields = {k: v.strip() for k, v in _LINE.findall(text)}
    m = re.match(r"(LIVE|REPLAY)\b", fields.get("mode", ""))
    if not m:
        return None
    fields["mode"] = m.group(1)
    return fields


def _store(env):
    if not hasattr(env, "course_modes"):
        env.course_modes = {}
    return env.course_modes


def read_banner(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: remember the page's banner; warn when a course notebook has none."""
    env = app.env
    docname = env.docname
    _store(env).pop(docname, None)
    if not docname.startswith(COURSE_DIRS):
        return
    for block in doctree.findall(nodes.literal_block):
        if "output" in block.get("classes", []):
            fields = banner_fields(block.astext())
            if fields:
                _store(env)[docname] = fields
                return
    LOGGER.warning(f"{docname}: no mode banner in the executed outputs (the first code cell must "
                   "call helpers.course.start(...) without quiet=True)", location=docname)


def purge(app: Sphinx, env, docname: str) -> None:
    _store(env).pop(docname, None)


def merge(app: Sphinx, env, docnames, other) -> None:
    _store(env).update({d: v for d, v in getattr(other, "course_modes", {}).items() if d in docnames})


class RunTableNode(nodes.General, nodes.Element):
    """Placeholder replaced by the table once every page has been read."""


class RunTable(SphinxDirective):
    """``{course-run-table}``: mode, GPU, reference and run time of every course notebook."""

    def run(self):
        self.env.course_run_table_docs = getattr(self.env, "course_run_table_docs", set()) | {self.env.docname}
        return [RunTableNode()]


def reread_tables(app: Sphinx, env, added, changed, removed) -> list[str]:
    """env-get-outdated: the pages holding the table are always read (and so executed) again."""
    return sorted(getattr(env, "course_run_table_docs", set()) - set(removed))


def tables_to_update(app: Sphinx, env):
    """env-updated: rewrite the pages holding the table whenever any page was re-read."""
    return sorted(getattr(env, "course_run_table_docs", set()))


def _cell(content) -> nodes.entry:
    para = nodes.paragraph()
    para += content if isinstance(content, nodes.Node) else nodes.Text(str(content))
    return nodes.entry("", para)


def _when(mtime: float | None) -> str:
    if not mtime:
        return "-"
    return datetime.datetime.fromtimestamp(mtime, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def make_table(env, parent: str) -> nodes.table:
    from myst_nb.sphinx_ import NbMetadataCollector

    exec_data = {d: v.get("exec_data") for d, v in NbMetadataCollector.get_doc_data(env).items()}
    headers = ["Notebook", "Mode", "GPU", "Reference", "Run time (s)", "Executed (UTC)", "Status"]
    table = nodes.table(classes=["colwidths-auto"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in headers]
    head = nodes.thead()
    head += nodes.row("", *[_cell(h) for h in headers])
    group += head
    body = nodes.tbody()
    group += body
    docs = sorted(d for d in env.found_docs if d.startswith(COURSE_DIRS))
    for doc in docs:
        banner = _store(env).get(doc, {})
        data = exec_data.get(doc) or {}
        link = pending_xref(refdoc=parent, reftarget=posixpath.relpath(doc, posixpath.dirname(parent)),
                            reftype="doc", refdomain="std", refexplicit=True, refwarn=True)
        link += nodes.inline(text=doc)
        runtime = data.get("runtime")
        status = {True: "ok", False: "FAILED"}.get(data.get("succeeded"), "not executed")
        body += nodes.row("", _cell(link), _cell(banner.get("mode", "no banner")),
                          _cell(banner.get("GPU here", "-")), _cell(banner.get("reference", "-")),
                          _cell("-" if runtime is None else f"{runtime:.1f}"),
                          _cell(_when(data.get("mtime"))), _cell(status))
    return table


class RunTableTransform(SphinxPostTransform):
    default_priority = 8  # before the references are resolved

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(RunTableNode)):
            node.replace_self(make_table(self.env, self.env.docname))


def setup(app: Sphinx) -> dict:
    app.add_node(RunTableNode)
    app.add_directive("course-run-table", RunTable)
    app.add_post_transform(RunTableTransform)
    app.connect("doctree-read", read_banner)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("env-get-outdated", reread_tables)
    app.connect("env-updated", tables_to_update)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
