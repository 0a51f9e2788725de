"""The student distribution: what a class hands out, and the scan that proves it holds no answer.

    python -m tools.dist.studentdist build DEST     # write it (make student-repo DEST=...), then scan it
    python -m tools.dist.studentdist scan DEST      # scan a distribution (exit 1 on any finding)

`build` writes the chapters (notebooks/), the student versions of the labs (nbgrader's, the same
`make student` makes, into labs/), the `helpers` package, the recorded data (data/), what
`make lab` needs to install it (pyproject.toml, Makefile, tools/env/mkvenv.py, environment.yml,
postBuild, the licences), Chapter 3's C cross-check source, and a README for students. It
never copies instructor/ (reference implementations, hidden grading cases, the answers of
per-learner problems, instructor notes) nor the labs' instructor versions.

`scan` fails on
- any path named instructor, or any file identical to one under instructor/;
- nbgrader markers (BEGIN/END SOLUTION, BEGIN/END HIDDEN TESTS) in any text file;
- any distinctive line of a lab's solution or hidden-test region (tools/site/booklabs.py) in a notebook
  or text file (Python files are judged by their functions instead: a line such as
  `deadline = time.monotonic() + timeout` is a solution's and every helper's idiom);
- any function whose normalised syntax tree — docstring, annotations, decorators and every
  name (function, arguments, variables, globals) stripped, attributes and constants kept —
  equals that of a function in instructor/ or in a lab's solution cells (so a renamed,
  re-documented copy of a reference implementation is still found).
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.site import booklabs

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTOR = ROOT / "instructor"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MIN_NODES = 15  # smaller functions (a getter, `return candidates[0]`) are too common to call a copy
TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".txt", ".json", ".toml", ".yml", ".yaml", ".cfg", ".cu", ".c", ".h", ""}
#: what `build` copies besides the generated parts: (source, destination), relative to the roots
COPIED = ("helpers", "notebooks", "data", "pyproject.toml", "Makefile", "environment.yml", "postBuild",
          "LICENSE", "LICENSE-CONTENT", "CITATION.cff", "tools/__init__.py", "tools/env/__init__.py", "tools/env/mkvenv.py")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")

README = """\
# How data moves between CPU and GPU memory on Linux — student copy

This folder is what your class hands out: the chapters (`notebooks/`), the labs (`labs/`, the
versions you fill in), the course's `helpers` package and the recorded data the notebooks
replay when there is no GPU (`data/`).

```bash
make lab     # creates .venv, installs the course, opens JupyterLab on Chapter 0
```

Nothing but `python3` (3.11 or newer) and `make` is needed; without an NVIDIA GPU every notebook
replays data recorded on real GPUs and says so. (`make lab` is the one make target of this copy
that works here; the others belong to the instructor's copy.)

**Labs.** Write your code where a cell says `# YOUR CODE HERE`. Each check cell prints
`✔ name: PASS` or `✘ name: FAIL — what went wrong`; run it as often as you like. The checks try
your code on published examples; your instructor grades with hidden cases of the same kind, drawn
when grading, and grades each part on its own, so a bug in one part costs only that part.

**Your own problem.** Some labs and chapter exercises come in a version with your own numbers:

```bash
python -m helpers.problems --lab 2 --learner YOUR-ID
```

The recorded data in `data/` is CC BY 4.0 (LICENSE-CONTENT); the code is MIT (LICENSE).
"""


# --------------------------------------------------------------------------- build
def build(dest: Path, labs: list[Path] | None = None) -> list[str]:
    """Write the distribution into `dest` (which must not exist or be empty); returns its file list."""
    from tools.grader import labgrade

    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"{dest}: not empty; give a new folder for the student distribution")
    dest.mkdir(parents=True, exist_ok=True)
    for rel in COPIED:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=IGNORED)
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    labgrade.make_student(labgrade.source_labs([str(p) for p in labs] if labs else None), dest / "labs")
    (dest / "README.md").write_text(README)
    return files(dest)


def files(dest: Path) -> list[str]:
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


# --------------------------------------------------------------------------- normalised functions
class _Normalise(ast.NodeTransformer):
    """Docstrings, annotations, decorators and every identifier removed; attributes and constants kept."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, n: str) -> str:
        return self.names.setdefault(n, f"v{len(self.names)}")

    def _function(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:] or [ast.Pass()]
        node.body, node.name, node.decorator_list, node.returns = body, "f", [], None
        if hasattr(node, "type_params"):
            node.type_params = []
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function  # noqa: N815

    def visit_ClassDef(self, node):  # noqa: N802
        node.name, node.decorator_list = "C", []
        self.generic_visit(node)
        return node

    def visit_Name(self, node):  # noqa: N802
        return ast.copy_location(ast.Name(id=self._name(node.id), ctx=ast.Load()), node)

    def visit_arg(self, node):
        return ast.copy_location(ast.arg(arg=self._name(node.arg), annotation=None), node)

    def visit_AnnAssign(self, node):  # noqa: N802
        new = ast.Assign(targets=[node.target], value=node.value or ast.Constant(None))
        return self.generic_visit(ast.copy_location(new, node))


def fingerprint(fn: ast.AST) -> tuple[str, int] | None:
    """(normalised dump, size) of a function or class node; None when it is too small to judge."""
    import copy

    node = _Normalise().visit(copy.deepcopy(fn))
    size = sum(1 for _ in ast.walk(node))
    if size < MIN_NODES:
        return None
    return ast.dump(node, annotate_fields=False, include_attributes=False), size


def _functions(source: str) -> list[ast.AST]:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics, or not Python
        return []
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def code_of(path: Path) -> list[tuple[str, str]]:
    """(where, Python source) of a .py file, or of each code cell of a notebook."""
    if path.suffix == ".py":
        return [(str(path), path.read_text(errors="replace"))]
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(path.read_text(errors="replace"))
        except ValueError:
            return []
        return [(f"{path} cell {i}", "".join(c.get("source", ""))) for i, c in enumerate(nb.get("cells", []))
                if c.get("cell_type") == "code"]
    return []


def _solution_cells(lab: Path) -> str:
    nb = json.loads(lab.read_text())
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c.get("cell_type") == "code"
                       and c.get("metadata", {}).get("nbgrader", {}).get("solution"))


def reference_functions(instructor: Path = INSTRUCTOR, labs: list[Path] | None = None) -> dict[str, str]:
    """{fingerprint: 'where'} of every function of the instructor package and of the labs' solution cells."""
    out: dict[str, str] = {}
    for py in sorted(instructor.rglob("*.py")):
        for _where, src in code_of(py):
            for fn in _functions(src):
                fp = fingerprint(fn)
                if fp:
                    out.setdefault(fp[0], f"{py.relative_to(instructor.parent)}:{fn.lineno} {fn.name}")
    for lab in labs if labs is not None else sorted((ROOT / "labs").glob("lab*.ipynb")):
        for fn in _functions(_solution_cells(lab)):
            fp = fingerprint(fn)
            if fp:
                out.setdefault(fp[0], f"{lab.relative_to(lab.parent.parent)} solution {fn.name}")
    return out


# --------------------------------------------------------------------------- scan
@dataclass(frozen=True)
class Finding:
    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def _hidden_lines(lab: Path, min_len: int = 24) -> set[str]:
    """Distinctive lines of a lab's hidden-test regions (the instructor's grading code)."""
    nb = json.loads(lab.read_text())
    inside, on = [], False
    for c in nb["cells"]:
        for ln in "".join(c["source"]).splitlines():
            if "BEGIN HIDDEN TESTS" in ln:
                on = True
            elif "END HIDDEN TESTS" in ln:
                on = False
            elif on:
                inside.append(ln.strip())
    return {ln for ln in inside if len(ln) >= min_len}


def scan(dest: Path, instructor: Path = INSTRUCTOR, labs: list[Path] | None = None) -> list[Finding]:
    """Everything in `dest` that a student distribution must not contain (empty: clean)."""
    labs = labs if labs is not None else sorted((ROOT / "labs").glob("lab*.ipynb"))
    refs = reference_functions(instructor, labs)
    secret_lines = {ln: lab.name for lab in labs for ln in booklabs.solution_lines(lab) | _hidden_lines(lab)}
    # a line the distribution's own course code already contains (a wait loop's deadline test) gives
    # nothing away; whole functions are what the fingerprints below compare
    public = booklabs.public_lines(dest)
    secret_lines = {ln: lab for ln, lab in secret_lines.items() if not booklabs.taught(ln.strip(), public)}
    instructor_files = {p.read_bytes(): p for p in instructor.rglob("*") if p.is_file() and "__pycache__" not in p.parts} \
        if instructor.is_dir() else {}
    found: list[Finding] = []
    for p in sorted(dest.rglob("*")):
        rel = p.relative_to(dest)
        if "instructor" in rel.parts:
            found.append(Finding(str(rel), "an instructor-only path"))
            continue
        if not p.is_file() or "__pycache__" in rel.parts:
            continue
        data = p.read_bytes()
        if data in instructor_files and data.strip():
            found.append(Finding(str(rel), f"a copy of {instructor_files[data].relative_to(instructor.parent)}"))
        if p.suffix not in TEXT_SUFFIXES:
            continue
        text = booklabs.page_text(p) if p.suffix == ".ipynb" else data.decode(errors="replace")
        for m in MARKERS:
            if m in text:
                found.append(Finding(str(rel), f"an nbgrader {m!r} marker"))
        leaked = [ln for ln in secret_lines if ln in text] if p.suffix != ".py" else []
        if leaked:
            found.append(Finding(str(rel), f"{len(leaked)} line(s) of {secret_lines[leaked[0]]}'s solution or hidden "
                                           f"tests, e.g. {leaked[0]!r}"))
        for _where, src in code_of(p):
            for fn in _functions(src):
                fp = fingerprint(fn)
                if fp and fp[0] in refs:
                    found.append(Finding(str(rel), f"function {fn.name} (line {fn.lineno}) is the reference "
                                                   f"implementation {refs[fp[0]]}"))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=("build", "scan"))
    ap.add_argument("dest", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        listing = build(a.dest)
        tops = sorted({f.split("/")[0] for f in listing})
        print(f"student distribution {a.dest}: {len(listing)} files ({', '.join(tops)})")
    found = scan(a.dest)
    print("\n".join(str(f) for f in found) if found else
          f"scan: clean — no instructor file, solution marker, solution or hidden-test line, nor any function "
          f"matching one of {len(reference_functions())} reference implementations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
