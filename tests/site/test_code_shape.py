"""The shape of the code (issue 40, items 5 and 6), read with `ast` from helpers/ and tools/:

* no module over MAX_MODULE_LINES lines, except a data table: a module that says so on a line of
  its own near the top (``# data table: <what it tabulates>``) AND is listed in DATA_TABLES here,
  so the exemption cannot be taken silently;
* no function (method, nested function) over MAX_FUNCTION_LINES lines, from its ``def`` line to
  its last line;
* a dataclass or NamedTuple with more than MAX_POSITIONAL_FIELDS fields takes them by keyword
  (``@dataclass(kw_only=True)``; a NamedTuple cannot, so it becomes such a dataclass), and so
  does an ``__init__`` with that many parameters;
* no ``sys.path.insert`` / ``sys.path.append`` in helpers/, tools/ or tests/ (packages are run
  with ``python -m``; tests import through the installed package and conftest);
* one name per role in every chapter package (helpers/chNN_*): the chapter's pictures (functions
  returning a ``Diagram`` or named ``*_diagram``) live in ``diagrams.py``; a module that boots
  the VM (imports helpers.measure.kernel_vm) is named ``real_*.py``, and a ``real_*.py`` module is
  backed by the VM (it imports kernel_vm or another real_* module of its package); exercise
  checks (``helpers.learning.checks``) live in ``exercises.py`` or, for the VM part, ``real_exercises.py``;
  a module named after a role (view, picture, diagram, exercise, finding) uses its one name
  (``views.py``, ``diagrams.py``, ``exercises.py``, ``findings.py``).

Every failure names file:line. Each rule is also run on a tiny module written to break it, so
each can fail.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 60
MAX_POSITIONAL_FIELDS = 4
DATA_TABLE_MARK = re.compile(r"^# data table: \S")
DATA_TABLE_HEAD = 40  # the marker must be within the module's first lines
# Modules allowed over MAX_MODULE_LINES because they are tables of data (each also carries the
# marker). Adding one here is a review decision: say in the marker what it tabulates.
DATA_TABLES: frozenset[str] = frozenset()
ROLE_NAMES = {"view": "views.py", "picture": "diagrams.py", "diagram": "diagrams.py",
              "exercise": "exercises.py", "finding": "findings.py"}
VM_MODULE = "helpers.measure.kernel_vm"
CHECKS_MODULE = "helpers.learning.checks"


# ----------------------------------------------------------------------------- reading the code
def python_files(root: Path, tops: tuple[str, ...]) -> list[Path]:
    return sorted(p for top in tops for p in (root / top).rglob("*.py")
                  if "__pycache__" not in p.parts and "_build" not in p.parts)


def parse(path: Path) -> tuple[str, ast.Module]:
    text = path.read_text(encoding="utf-8")
    return text, ast.parse(text, filename=str(path))


def where(root: Path, path: Path, line: int) -> str:
    return f"{path.relative_to(root).as_posix()}:{line}"


# ----------------------------------------------------------------------------- the rules
def module_size(root: Path, tops=("helpers", "tools")) -> list[str]:
    out = []
    for p in python_files(root, tops):
        text = p.read_text(encoding="utf-8")
        n = len(text.splitlines())
        rel = p.relative_to(root).as_posix()
        marked = any(DATA_TABLE_MARK.match(line) for line in text.splitlines()[:DATA_TABLE_HEAD])
        if marked != (rel in DATA_TABLES):
            out.append(f"{where(root, p, 1)}: {'marked a data table but not listed in DATA_TABLES' if marked else 'listed in DATA_TABLES but not marked'}")
        if n > MAX_MODULE_LINES and not (marked and rel in DATA_TABLES):
            out.append(f"{where(root, p, 1)}: {n} lines (at most {MAX_MODULE_LINES}; split it by concept)")
    return out


def function_size(root: Path, tops=("helpers", "tools")) -> list[str]:
    out = []
    for p in python_files(root, tops):
        _, tree = parse(p)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{where(root, p, node.lineno)}: {node.name} is {n} lines "
                               f"(at most {MAX_FUNCTION_LINES})")
    return out


def _positional_fields(cls: ast.ClassDef) -> int:
    n = 0
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = ast.unparse(stmt.annotation)
        if ann in ("KW_ONLY", "dataclasses.KW_ONLY"):
            break  # everything after the marker is keyword-only
        if "ClassVar" in ann:
            continue
        if isinstance(stmt.value, ast.Call) and any(k.arg == "init" and isinstance(k.value, ast.Constant)
                                                    and k.value.value is False for k in stmt.value.keywords):
            continue
        if isinstance(stmt.value, ast.Call) and any(k.arg == "kw_only" and isinstance(k.value, ast.Constant)
                                                    and k.value.value is True for k in stmt.value.keywords):
            continue
        n += 1
    return n


def _dataclass_decorator(cls: ast.ClassDef) -> ast.expr | None:
    for d in cls.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if ast.unparse(f) in ("dataclass", "dataclasses.dataclass"):
            return d
    return None


def keyword_constructors(root: Path, tops=("helpers", "tools")) -> list[str]:
    out = []
    for p in python_files(root, tops):
        _, tree = parse(p)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                out += _class_constructor(root, p, node)
    return out


def _class_constructor(root: Path, p: Path, cls: ast.ClassDef) -> list[str]:
    out = []
    dec = _dataclass_decorator(cls)
    named_tuple = any(ast.unparse(b) in ("NamedTuple", "typing.NamedTuple") for b in cls.bases)
    if dec is not None or named_tuple:
        kw = isinstance(dec, ast.Call) and any(k.arg == "kw_only" and isinstance(k.value, ast.Constant)
                                               and k.value.value is True for k in dec.keywords)
        n = _positional_fields(cls)
        if n > MAX_POSITIONAL_FIELDS and not kw:
            fix = "make it a @dataclass(kw_only=True)" if named_tuple else "add kw_only=True"
            out.append(f"{where(root, p, cls.lineno)}: {cls.name} has {n} positional fields "
                       f"(more than {MAX_POSITIONAL_FIELDS}): {fix} and call it with keywords")
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            positional = len(stmt.args.posonlyargs) + len(stmt.args.args) - 1  # less self
            if positional > MAX_POSITIONAL_FIELDS:
                out.append(f"{where(root, p, stmt.lineno)}: {cls.name}.__init__ takes {positional} positional "
                           f"parameters (more than {MAX_POSITIONAL_FIELDS}): put them after `*`")
    return out


def path_hacks(root: Path, tops=("helpers", "tools", "tests")) -> list[str]:
    out = []
    for p in python_files(root, tops):
        _, tree = parse(p)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path"):
                out.append(f"{where(root, p, node.lineno)}: sys.path.{node.func.attr} (run it with python -m, "
                           "import through the package)")
    return out


def _imports(tree: ast.Module) -> set[str]:
    """Every module a file imports, and every `from X import y` as X and X.y."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _role_of_name(stem: str) -> str | None:
    bare = stem.removeprefix("real_")
    for word, name in ROLE_NAMES.items():
        if word in bare and bare != name.removesuffix(".py"):
            return name
    return None


def chapter_roles(root: Path) -> list[str]:
    out = []
    for p in sorted((root / "helpers").glob("ch[0-9]*/*.py")):
        _, tree = parse(p)
        name, stem, pkg = p.name, p.stem, p.parent.name
        imports = _imports(tree)
        right = _role_of_name(stem)
        if right:
            out.append(f"{where(root, p, 1)}: a {right.removesuffix('.py')} module is called {right}")
        boots = any(m == VM_MODULE or m.startswith(VM_MODULE + ".") for m in imports)
        if boots and not stem.startswith("real_"):
            out.append(f"{where(root, p, 1)}: imports {VM_MODULE} (boots the VM) but is not named real_*.py")
        if stem.startswith("real_") and not boots and not any(
                m.startswith(f"helpers.{pkg}.real_") for m in imports):
            out.append(f"{where(root, p, 1)}: named real_*.py but neither boots the VM nor builds on a real_ module")
        if CHECKS_MODULE in imports and name not in ("exercises.py", "real_exercises.py"):
            out.append(f"{where(root, p, 1)}: exercise checks ({CHECKS_MODULE}) belong in exercises.py "
                       "(real_exercises.py for the VM part)")
        if name != "diagrams.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and (
                        node.name.endswith("_diagram") or (node.returns is not None
                                                           and ast.unparse(node.returns).endswith("Diagram"))):
                    out.append(f"{where(root, p, node.lineno)}: {node.name} draws a Diagram: it belongs in "
                               f"helpers/{pkg}/diagrams.py")
    return out


RULES = {"module size": module_size, "function size": function_size, "keyword constructors": keyword_constructors,
         "sys.path": path_hacks, "chapter roles": chapter_roles}


# ----------------------------------------------------------------------------- the repository
@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_repository_keeps_the_rule(rule):
    problems = RULES[rule](ROOT)
    assert not problems, f"{rule}: {len(problems)} offender(s)\n" + "\n".join(problems)


def test_every_listed_data_table_exists():
    missing = sorted(t for t in DATA_TABLES if not (ROOT / t).is_file())
    assert not missing, f"DATA_TABLES lists files that do not exist: {missing}"


# ----------------------------------------------------------------------------- each rule can fail
def _write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_a_long_module_fails_unless_it_is_a_listed_and_marked_table(tmp_path, monkeypatch):
    body = "X = 1\n" * (MAX_MODULE_LINES + 1)
    _write(tmp_path, "helpers/big.py", body)
    _write(tmp_path, "helpers/ok.py", "X = 1\n" * MAX_MODULE_LINES)
    _write(tmp_path, "tools/marked.py", "# data table: the register map\n" + body)
    assert module_size(tmp_path) == [
        f"helpers/big.py:1: {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES}; split it by concept)",
        "tools/marked.py:1: marked a data table but not listed in DATA_TABLES",
        f"tools/marked.py:1: {MAX_MODULE_LINES + 2} lines (at most {MAX_MODULE_LINES}; split it by concept)"]
    monkeypatch.setattr(sys.modules[__name__], "DATA_TABLES", frozenset({"tools/marked.py", "helpers/ok.py"}))
    assert module_size(tmp_path) == [
        f"helpers/big.py:1: {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES}; split it by concept)",
        "helpers/ok.py:1: listed in DATA_TABLES but not marked"]


def test_a_long_function_fails_and_a_long_nested_one_too(tmp_path):
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    _write(tmp_path, "helpers/a.py", "def fits():\n" + long_body + "\n\ndef too_long():\n" + long_body + "    return 1\n")
    _write(tmp_path, "tools/b.py", "class K:\n    def outer(self):\n        def inner():\n"
           + "".join(f"            y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES)) + "        return inner\n")
    assert function_size(tmp_path) == [
        f"helpers/a.py:{MAX_FUNCTION_LINES + 3}: too_long is {MAX_FUNCTION_LINES + 1} lines (at most {MAX_FUNCTION_LINES})",
        f"tools/b.py:2: outer is {MAX_FUNCTION_LINES + 3} lines (at most {MAX_FUNCTION_LINES})",
        f"tools/b.py:3: inner is {MAX_FUNCTION_LINES + 1} lines (at most {MAX_FUNCTION_LINES})"]


def test_wide_positional_constructors_fail(tmp_path):
    fields5 = "".join(f"    f{i}: int\n" for i in range(5))
    _write(tmp_path, "helpers/c.py",
           "from dataclasses import KW_ONLY, dataclass, field\nfrom typing import ClassVar, NamedTuple\n\n\n"
           "@dataclass(frozen=True)\nclass Wide:\n" + fields5 + "\n\n"
           "@dataclass(kw_only=True)\nclass Fine:\n" + fields5 + "\n\n"
           "@dataclass\nclass Marker:\n    a: int\n    _: KW_ONLY\n" + fields5 + "\n\n"
           "@dataclass\nclass Four:\n" + "".join(f"    f{i}: int\n" for i in range(4))
           + "    c: ClassVar[int] = 0\n    d: int = field(init=False, default=0)\n\n\n"
           "class Row(NamedTuple):\n" + fields5 + "\n\n"
           "class Plain:\n    def __init__(self, a, b, c, d, e):\n        pass\n\n\n"
           "class Star:\n    def __init__(self, a, *, b, c, d, e):\n        pass\n")
    assert keyword_constructors(tmp_path) == [
        "helpers/c.py:6: Wide has 5 positional fields (more than 4): add kw_only=True and call it with keywords",
        "helpers/c.py:44: Row has 5 positional fields (more than 4): make it a @dataclass(kw_only=True) and call it "
        "with keywords",
        "helpers/c.py:53: Plain.__init__ takes 5 positional parameters (more than 4): put them after `*`"]


def test_sys_path_edits_fail(tmp_path):
    _write(tmp_path, "tools/t.py", "import sys\n\nsys.path.insert(0, '.')\n")
    _write(tmp_path, "tests/test_t.py", "import sys\nsys.path.append('x')\nprint(sys.path)\n")
    _write(tmp_path, "helpers/h.py", "import sys\nP = list(sys.path)\n")
    assert path_hacks(tmp_path) == [
        "tests/test_t.py:2: sys.path.append (run it with python -m, import through the package)",
        "tools/t.py:3: sys.path.insert (run it with python -m, import through the package)"]


def test_chapter_roles_fail_when_broken(tmp_path):
    ch = "helpers/ch42_test"
    _write(tmp_path, f"{ch}/__init__.py", '"""Chapter 42."""\n')
    _write(tmp_path, f"{ch}/diagrams.py", "from helpers.presentation.diagrams import Diagram\n\n\n"
           "def a_diagram() -> Diagram:\n    return Diagram('t', 'd')\n")
    _write(tmp_path, f"{ch}/view.py", "X = 1\n")
    _write(tmp_path, f"{ch}/cost_view.py", "X = 1\n")
    _write(tmp_path, f"{ch}/pictures.py", "def bars_diagram():\n    return None\n")
    _write(tmp_path, f"{ch}/vfio.py", "from helpers.measure import kernel_vm\n\nR = kernel_vm.run\n")
    _write(tmp_path, f"{ch}/real_fake.py", "X = 1\n")
    _write(tmp_path, f"{ch}/real_ok.py", "from helpers.measure.kernel_vm import transcript\n")
    _write(tmp_path, f"{ch}/real_exercises.py", "from helpers.ch42_test import real_ok\nfrom helpers.learning import checks\n")
    _write(tmp_path, f"{ch}/probe.py", "from helpers.learning import checks\nfrom helpers.presentation.diagrams import Diagram\n\n\n"
           "def picture() -> Diagram:\n    return Diagram('t', 'd')\n")
    assert chapter_roles(tmp_path) == [
        f"{ch}/cost_view.py:1: a views module is called views.py",
        f"{ch}/pictures.py:1: a diagrams module is called diagrams.py",
        f"{ch}/pictures.py:1: bars_diagram draws a Diagram: it belongs in helpers/ch42_test/diagrams.py",
        f"{ch}/probe.py:1: exercise checks (helpers.learning.checks) belong in exercises.py (real_exercises.py for "
        "the VM part)",
        f"{ch}/probe.py:5: picture draws a Diagram: it belongs in helpers/ch42_test/diagrams.py",
        f"{ch}/real_fake.py:1: named real_*.py but neither boots the VM nor builds on a real_ module",
        f"{ch}/vfio.py:1: imports helpers.measure.kernel_vm (boots the VM) but is not named real_*.py",
        f"{ch}/view.py:1: a views module is called views.py"]
