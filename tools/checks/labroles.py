"""Rewrite the MyST roles JupyterLab cannot resolve into plain links that render in both places.

    python -m tools.checks.labroles [--check] [notebooks/*.ipynb labs/*.ipynb]

In JupyterLab (jupyterlab-myst) a notebook is rendered on its own: `{term}` finds no glossary,
`{cite}` no bibliography (it shows the key under "Citation Not Found") and `{doc}` no other page.
Jupyter Book resolves them, but a learner who works in JupyterLab reads the notebook, not the
site. So the notebooks use plain markdown links instead, which both resolve:

* ``{term}`PCIe` `` -> ``[PCIe](../book/glossary.md#term-pcie)`` (``{term}`text <term>` `` keeps
  its text): JupyterLab opens the glossary, the site jumps to the entry;
* ``{cite}`nv-mmap` `` -> ``([NVIDIA, nv-mmap.c](../book/bibliography.md#cite-nv-mmap))``: a
  readable reference (author and short title from book/references.bib, or the entry's
  `shorthand` field) linking to the bibliography entry;
* ``{doc}`part 2 <03b_copy_engines_and_the_link>` `` -> ``[part 2](03b_copy_engines_and_the_link.ipynb)``
  (a bare ``{doc}`name` `` gets the page's title as its text).

The `#term-...` and `#cite-...` fragments are resolved on the site by book/_ext/link_targets.py
(glossary terms and bibliography entries as markdown link targets, `bibtex_cite_id` in
book/_config.yml). Admonitions and `:::` fences need no rewrite: jupyterlab-myst renders them.

The rewrite is idempotent (a rewritten notebook has no role left), touches only markdown cells
and leaves code spans and fenced code alone; an unknown term, key or page is an error, so a typo
is never turned into a dead link. --check changes nothing and exits 1 if any role is left.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "book" / "glossary.md"
BIBLIOGRAPHY = ROOT / "book" / "bibliography.md"
BIBFILE = ROOT / "book" / "references.bib"
ROLE = r"\{(?P<kind>term|cite|doc)\}`(?P<body>[^`\n]+)`"
# Inline text is scanned left to right, so a role is found where it starts and a code span is
# skipped whole; fenced code is skipped by segments() (a directive's body is text).
_CODE_SPAN = r"(?<!`)(?P<ticks>`+)[^`].*?(?<!`)(?P=ticks)(?!`)"
SCAN = re.compile(f"{ROLE}|{_CODE_SPAN}", re.S)
_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$")
_EXPLICIT = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)


class RoleError(ValueError):
    """A role that cannot be rewritten: unknown term, citation key or page."""


def slug(text: str) -> str:
    """The fragment for a term or key: lower case, runs of other characters as one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def glossary_terms(text: str) -> list[str]:
    """The terms of every ```{glossary} block of a MyST page (a term line starts in column 1)."""
    terms = []
    for block in re.findall(r"^```\{glossary\}[^\n]*\n(.*?)^```[ \t]*$", text, re.S | re.M):
        terms += [ln.strip() for ln in block.splitlines()
                  if ln.strip() and not ln[0].isspace() and not ln.startswith(":")]
    return terms


def bib_entries(text: str) -> dict[str, dict[str, str]]:
    """{key: {field: value}} of a BibTeX file, values with their outer braces and quotes removed."""
    out = {}
    for m in re.finditer(r"^@\w+\{([^,\s]+),(.*?)^\}", text, re.S | re.M):
        fields = {}
        for f in re.finditer(r"^\s*(\w+)\s*=\s*(.*?),?\s*$", m.group(2), re.M):
            fields[f.group(1).lower()] = re.sub(r"[{}]", "", f.group(2)).strip().strip('"')
        out[m.group(1)] = fields
    return out


def short_reference(key: str, fields: dict[str, str]) -> str:
    """A readable citation: the `shorthand` field, else 'author, short title' (source questions by number)."""
    if fields.get("shorthand"):
        return fields["shorthand"]
    m = re.search(r"Source question (\d{3})", fields.get("title", "") + " " + fields.get("note", ""))
    if m:
        return f"source question {m.group(1)}"
    authors = [a.strip() for a in fields.get("author", "").split(" and ") if a.strip()]
    who = authors[0].split(",")[0] if authors else ""
    if who == "The Linux kernel developers":
        who = "Linux"
    if len(authors) > 1 and "," in authors[0]:
        who += " et al."
    if fields.get("year") and who:
        return f"{who} {fields['year']}"  # a paper: author and year
    title = fields.get("title", key)
    title = title.split(": ", 1)[0]
    if "/" in title and " " not in title:
        title = title.rsplit("/", 1)[-1]  # a source file: its name (the entry gives the path)
    return f"{who}, {title}" if who else title


@dataclass
class Targets:
    """What the roles may point at: glossary terms, bibliography entries and pages."""

    terms: dict[str, str]          # lower-cased term -> term as the glossary spells it
    refs: dict[str, str]           # citation key -> readable reference

    @classmethod
    def load(cls) -> Targets:
        terms: dict[str, str] = {}
        for t in glossary_terms(GLOSSARY.read_text()):
            clash = next((o for o in terms.values() if slug(o) == slug(t)), None)
            if clash:
                raise RoleError(f"glossary terms {clash!r} and {t!r} would share the link #term-{slug(t)}")
            terms[t.lower()] = t
        refs = {k: short_reference(k, f) for k, f in bib_entries(BIBFILE.read_text()).items()}
        return cls(terms, refs)


def page_title(path: Path) -> str:
    """The first heading of a notebook or markdown page."""
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    m = re.search(r"^#\s+(.+)$", text, re.M)
    if not m:
        raise RoleError(f"{path}: no title to use as a link's text")
    return m.group(1).strip()


def _link_path(target: Path, page: Path) -> str:
    return os.path.relpath(target, page.parent).replace(os.sep, "/")


def rewrite_role(kind: str, body: str, page: Path, targets: Targets) -> str:
    """The markdown link that replaces one role found on `page`."""
    m = _EXPLICIT.match(body)
    text, target = (m.group(1), m.group(2)) if m else (None, body.strip())
    if kind == "term":
        term = targets.terms.get(target.lower())
        if term is None:
            raise RoleError(f"{page}: {{term}}`{body}`: no such term in {GLOSSARY.relative_to(ROOT)}")
        return f"[{text or target}]({_link_path(GLOSSARY, page)}#term-{slug(term)})"
    if kind == "cite":
        links = []
        for key in (k.strip() for k in target.split(",")):
            if key not in targets.refs:
                raise RoleError(f"{page}: {{cite}}`{body}`: no entry {key!r} in {BIBFILE.relative_to(ROOT)}")
            links.append(f"[{targets.refs[key]}]({_link_path(BIBLIOGRAPHY, page)}#cite-{slug(key)})")
        return "(" + "; ".join(links) + ")"
    base = (page.parent / target).resolve() if not target.startswith("/") else ROOT / target.lstrip("/")
    found = next((p for p in (base.with_name(base.name + s) for s in (".ipynb", ".md")) if p.is_file()), None)
    if found is None:
        raise RoleError(f"{page}: {{doc}}`{body}`: no page {target}.ipynb or {target}.md")
    return f"[{text or page_title(found)}]({_link_path(found, page)})"


def segments(text: str) -> list[tuple[bool, str]]:
    """`text` cut into (is_text, piece): fence lines and fenced code are not text; a directive's
    body (```{name} ... ```) is."""
    out: list[tuple[bool, str]] = []
    stack: list[tuple[str, bool]] = []  # open fences: (marker, is_directive)
    for line in text.splitlines(keepends=True):
        m = _FENCE_LINE.match(line.rstrip("\n"))
        in_code = any(not d for _, d in stack)
        if m and stack and m.group(1).startswith(stack[-1][0]) and not m.group(2).strip():
            stack.pop()
            is_text = False
        elif m and not in_code:
            stack.append((m.group(1), m.group(2).lstrip().startswith("{")))
            is_text = False
        else:
            is_text = not in_code
        if out and out[-1][0] == is_text:
            out[-1] = (is_text, out[-1][1] + line)
        else:
            out.append((is_text, line))
    return out


def rewrite_markdown(text: str, page: Path, targets: Targets) -> str:
    """`text` with every term, cite and doc role outside code replaced by its link."""
    def one(m: re.Match) -> str:
        return rewrite_role(m["kind"], m["body"], page, targets) if m["kind"] else m[0]
    return "".join(SCAN.sub(one, piece) if is_text else piece for is_text, piece in segments(text))


def rewrite_notebook(path: Path, targets: Targets) -> tuple[str, int]:
    """The notebook's new file text (same JSON layout as nbformat writes) and how many cells changed."""
    raw = path.read_text()
    nb = json.loads(raw)
    changed = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        src = "".join(cell["source"])
        new = rewrite_markdown(src, path, targets)
        if new != src:
            cell["source"] = new.splitlines(keepends=True)
            changed += 1
    if not changed:
        return raw, 0
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", changed


def remaining_roles(path: Path) -> list[str]:
    """The roles left in a notebook's markdown cells (outside code)."""
    nb = json.loads(path.read_text())
    return [f"{path} cell {i}: {m[0]}" for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "markdown"
            for is_text, piece in segments("".join(cell["source"])) if is_text
            for m in SCAN.finditer(piece) if m["kind"]]


def default_pages() -> list[Path]:
    return sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("labs/*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a role is left")
    args = ap.parse_args(argv)
    pages = [p.resolve() for p in args.pages] or default_pages()
    if args.check:
        left = [r for p in pages for r in remaining_roles(p)]
        print("\n".join(left) if left else f"labroles: no term/cite/doc role left in {len(pages)} notebooks")
        if left:
            print(f"labroles: {len(left)} roles JupyterLab cannot resolve; run `python -m tools.checks.labroles`")
        return 1 if left else 0
    try:
        targets = Targets.load()
        for p in pages:
            text, n = rewrite_notebook(p, targets)
            if n:
                p.write_text(text)
                print(f"labroles: {p.relative_to(ROOT)}: {n} markdown cells rewritten")
    except RoleError as exc:
        print(f"labroles: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
