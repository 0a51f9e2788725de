"""Which version of the labs the site publishes: the student version, unless solutions are asked for.

    python -m tools.site.booklabs book/_toc.yml book/_build/_toc.yml [--labs student|solution]

The labs in labs/ are the instructor's versions with worked solutions; a public site must not give
them away. So by default (`student`) every toc entry `labs/labN_topic` is mapped to a student
version made by nbgrader (tools/grader/labgrade.py, the same one `make student` hands out) in book/labs/,
with a note at the top of the page saying so; the site executes those, so its checks report
"not written yet" the way a learner sees them. `solution` (an instructor's private site) publishes
labs/ as they are. The mode is `--labs`, else the environment's COURSE_BOOK_LABS, else student.

book/_toc.yml stays the one list of pages: the toc written here is that file with the lab entries
mapped, so a new lab added there is picked up without further changes. Beside it goes
booklabs.json (mode and mapping), which tools/site/bookcheck.py reads to check that no solution reached
the built site (`solution_leaks`). Pages of the other mode left from an earlier build are removed
from the build folder, so that switching back to student never keeps a solution page.
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODES = ("student", "solution")
ENV = "COURSE_BOOK_LABS"
LABS = "labs"           # the instructor versions (docnames labs/labN_topic)
SITE_LABS = "book/labs"  # the student versions the default site reads (generated, git-ignored)
STATE = "booklabs.json"
LAB_ENTRY = re.compile(r"^labs/lab\d+_[a-z0-9_]+$")
NOTE = """\
```{{note}}
**Student version.** This page is {lab} as a learner gets it: the code to write is a
`# YOUR CODE HERE` stub, and the checks, run when this site was built, report that it is
not written yet. To work on it, download it (the page's download button) into your copy of
the course. Its checks try your code on published examples; your instructor grades it with
hidden cases of the same kind (see *Teaching with this course*).
```
"""


class BookLabsError(SystemExit):
    """A toc or mode the site cannot be built from (the message names it)."""


def choose_mode(arg: str | None, env: dict[str, str]) -> str:
    """The labs mode: the argument, else COURSE_BOOK_LABS, else student; anything else is an error."""
    mode = (arg or env.get(ENV) or "student").strip().lower()
    if mode not in MODES:
        raise BookLabsError(f"booklabs: labs mode {mode!r} (from {'--labs' if arg else ENV}) "
                            f"is not one of {', '.join(MODES)}")
    return mode


def _entries(node) -> list[dict]:
    """Every dict with a `file` key in a toc tree (parts, chapters, sections at any depth)."""
    if isinstance(node, list):
        return [e for item in node for e in _entries(item)]
    if not isinstance(node, dict):
        return []
    found = [node] if "file" in node else []
    return found + [e for k, v in node.items() if k != "file" for e in _entries(v)]


def lab_entries(toc: dict) -> list[str]:
    """The toc's lab files ('labs/lab2_bandwidth_test'), in toc order."""
    return [str(e["file"]) for e in _entries(toc) if LAB_ENTRY.match(str(e["file"]))]


def map_toc(toc: dict, mapping: dict[str, str]) -> dict:
    """A copy of `toc` with each `file` found in `mapping` replaced by its value."""
    out = copy.deepcopy(toc)
    for e in _entries(out):
        e["file"] = mapping.get(str(e["file"]), e["file"])
    return out


def site_copy(nb, lab: str):
    """The student notebook with the note right under its title (or in a first cell, without one), its links
    to the book's pages made relative to where the site keeps it (book/labs/, not labs/)."""
    note = NOTE.format(lab=lab)
    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.startswith("# "):
        title, _, rest = first.source.partition("\n")
        first.source = f"{title}\n\n{note}\n{rest.lstrip()}"
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(note, id="booklabs-note"))
    for cell in nb.cells:  # labs/x.ipynb links ../book/page.md; the site's copy is book/labs/x.ipynb
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("](../book/", "](../")
    return nb


def _write_if_changed(path: Path, text: str) -> bool:
    """Write only a changed file: Sphinx re-reads (and the cache re-matches) only what changed."""
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True


def make_site_labs(labs: list[Path], out: Path) -> list[Path]:
    """Student versions of `labs` (nbgrader, via tools/grader/labgrade.py) with the note, into `out`."""
    from tools.grader import labgrade

    written = []
    with tempfile.TemporaryDirectory(prefix="booklabs-") as tmp:
        for made in labgrade.make_student(labs, Path(tmp)):
            nb = site_copy(nbformat.read(made, as_version=4), f"Lab {labgrade.lab_id(made)[3:]}")
            dst = out / made.name
            _write_if_changed(dst, nbformat.writes(nb) + "\n")
            written.append(dst)
    for stale in set(out.glob("*.ipynb")) - set(written):
        stale.unlink()
    return written


def remove_outputs(build: Path, docdir: str) -> None:
    """Delete a folder's pages, copied sources and executed notebooks from the build folder."""
    for d in (build / "html" / docdir, build / "html" / "_sources" / docdir, build / "jupyter_execute" / docdir):
        if d.is_dir():
            shutil.rmtree(d)


def prepare(toc_src: Path, toc_dst: Path, mode: str, root: Path = ROOT) -> dict:
    """Write the build's toc (and the student labs in student mode); returns the state written."""
    toc = yaml.safe_load(toc_src.read_text())
    entries = lab_entries(toc)
    missing = [e for e in entries if not (root / f"{e}.ipynb").is_file()]
    if missing:
        raise BookLabsError(f"booklabs: {toc_src} lists labs that do not exist: {', '.join(missing)}")
    build = toc_dst.parent
    if mode == "student":
        made = make_site_labs([root / f"{e}.ipynb" for e in entries], root / SITE_LABS)
        mapping = {e: f"{SITE_LABS}/{Path(e).name}" for e in entries}
        assert {root / f"{v}.ipynb" for v in mapping.values()} == set(made)
        remove_outputs(build, LABS)
    else:
        mapping = {e: e for e in entries}
        remove_outputs(build, SITE_LABS)
    header = (f"# Written by tools/site/booklabs.py from {toc_src} ({mode} versions of the labs); "
              "edit that file, not this one.\n")
    _write_if_changed(toc_dst, header + yaml.safe_dump(map_toc(toc, mapping), sort_keys=False))
    state = {"mode": mode, "labs": mapping}
    _write_if_changed(build / STATE, json.dumps(state, indent=1) + "\n")
    return state


def read_state(build: Path) -> dict | None:
    """What prepare() wrote for the build in `build` (book/_build), or None."""
    p = build / STATE
    return json.loads(p.read_text()) if p.is_file() else None


# --------------------------------------------------------------------------- leak check
def _regions(source: str) -> tuple[list[str], list[str]]:
    """(lines inside BEGIN/END SOLUTION or BEGIN/END HIDDEN TESTS regions, lines outside them), stripped.

    Hidden tests are the instructor's grading cases: a student site must not show them either."""
    inside, outside, on = [], [], False
    for ln in source.splitlines():
        if "BEGIN SOLUTION" in ln or "BEGIN HIDDEN TESTS" in ln:
            on = True
        elif "END SOLUTION" in ln or "END HIDDEN TESTS" in ln:
            on = False
        else:
            (inside if on else outside).append(ln.strip())
    return inside, outside


def solution_lines(lab: Path, min_len: int = 24) -> set[str]:
    """Distinctive lines of a lab's solution regions: long enough, and found nowhere else in it
    (a line the instructions quote as a hint is no secret of the solution)."""
    nb = nbformat.read(lab, as_version=4)
    inside, outside = [], []
    for c in nb.cells:
        i, o = _regions(c.source)
        inside += i
        outside += o
    rest = "\n".join(outside)
    return {ln for ln in inside if len(ln) >= min_len and ln not in rest}


def page_text(path: Path) -> str:
    """The text a reader could see in a built file: HTML without tags, a notebook's cell sources."""
    raw = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        try:
            return "\n".join("".join(c.get("source", "")) for c in json.loads(raw).get("cells", []))
        except ValueError:
            return raw
    if path.suffix in (".html", ".htm"):
        return html.unescape(re.sub(r"<[^>]+>", "", raw))
    return raw


def public_lines(root: Path = ROOT) -> set[str]:
    """The stripped lines of the course code a learner already has and the chapters show: the
    helpers and the kernel lab's guest programs (Chapter 4b prints them). A solution line that one
    of them contains (a wait loop's deadline test, opening /dev/vfio/vfio) gives nothing away;
    whole copied functions are what tools/dist/studentdist.py's fingerprints catch."""
    files = [*(root / "helpers").rglob("*.py"), *(root / "helpers" / "measure" / "kernel_vm" / "guest").glob("*.py")]
    return {ln.strip() for f in files for ln in f.read_text().splitlines() if ln.strip()}


def taught(line: str, public: set[str]) -> bool:
    """True when `line` stands in one of the course's public lines (as itself or inside one:
    `container = os.open(...)` inside `self.container = os.open(...)`)."""
    return line in public or any(line in p for p in public)


def solution_leaks(site: Path, labs: list[Path], root: Path = ROOT) -> list[str]:
    """'page: lab's solution line' for every solution line of `labs` found in the built `site`,
    leaving out the lines the course's own public code contains (`public_lines`)."""
    public = public_lines(root)
    lines = {ln: lab.name for lab in labs for ln in solution_lines(lab) if not taught(ln, public)}
    out = []
    for f in sorted(site.rglob("*")):
        rel = f.relative_to(site)
        if (f.suffix not in (".html", ".htm", ".ipynb", ".txt", ".js") or not f.is_file()
                or rel.parts[0] == "_static"):  # the site's copied JavaScript libraries
            continue
        text = page_text(f)
        found = [ln for ln in lines if ln in text]
        if found:
            out.append(f"{rel}: solution code of {lines[found[0]]} "
                       f"({len(found)} line(s)), e.g. {found[0]!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("toc", type=Path, help="the book's toc (book/_toc.yml)")
    ap.add_argument("out", type=Path, help="the toc to build with (book/_build/_toc.yml)")
    ap.add_argument("--labs", choices=MODES, help=f"default: ${ENV}, else student")
    a = ap.parse_args(argv)
    mode = choose_mode(a.labs, dict(os.environ))
    state = prepare(a.toc, a.out, mode)
    what = ("student versions (solutions removed by nbgrader) from " + SITE_LABS if mode == "student"
            else "SOLUTIONS (instructor versions from labs/): do not publish this site to a class")
    print(f"booklabs: {a.out}: {len(state['labs'])} labs, {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
