"""Configuration: every environment variable is read in helpers/core/config.py and listed in the
README's table; no other module of the package reads the environment.

The rule the AST scan enforces on helpers/ (core/config.py excepted):

* a READ is refused: `os.getenv(...)`, `os.environ.get(...)`, `os.environ[...]` as a value,
  `... in os.environ`, iterating it, passing `os.environ` itself anywhere, and importing
  `environ` or `getenv` from os (which would hide reads from this scan);
* allowed, because they are not configuration reads:
  - `dict(os.environ, ...)`: a copy of this process's environment for a child process, the
    whole call included (what the child gets, e.g. PYTHONPATH extended, is built there);
  - writes: `os.environ[NAME] = value`, `del os.environ[NAME]`, `os.environ.update(...)`
    (course.start switches Numba to its simulator this way).

tools/ are scripts outside the package (some run without it): the variables they read must be
in config.TOOL_VARIABLES and the README's table too (system ones, PATH and PYTHONPATH, aside).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers.core import config

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = {"PATH", "PYTHONPATH", "HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"}  # the OS's and Python's own, not the course's


def readme_table() -> list[str]:
    """The variable names in the first column of README's configuration table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", section, re.M)


def _is_os_attr(node, attr: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def environment_reads(source: str) -> list[int]:
    """Line numbers where `source` reads the environment, by the rule in the module docstring."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os" and \
                any(a.name in ("environ", "getenv", "getenvb", "environb") for a in node.names):
            bad.append(node.lineno)
        elif _is_os_attr(node, "getenv") or _is_os_attr(node, "getenvb") or _is_os_attr(node, "environb"):
            bad.append(node.lineno)
        elif _is_os_attr(node, "environ") and not _allowed(node, parents):
            bad.append(node.lineno)
    return sorted(set(bad))


def _allowed(node: ast.AST, parents: dict) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, (ast.Store, ast.Del)):
        return True
    if isinstance(parent, ast.Attribute) and parent.attr == "update" and isinstance(parents.get(parent), ast.Call):
        return True
    ancestor = node
    while ancestor in parents:  # inside dict(os.environ, ...): a child's environment being built
        ancestor = parents[ancestor]
        if isinstance(ancestor, ast.Call) and isinstance(ancestor.func, ast.Name) and ancestor.func.id == "dict" \
                and ancestor.args and _is_os_attr(ancestor.args[0], "environ"):
            return True
    return False


@pytest.mark.parametrize("code, reads", [
    ("import os\nx = os.environ.get('A')", True),
    ("import os\nx = os.getenv('A')", True),
    ("import os\nx = os.environ['A']", True),
    ("import os\nx = 'A' in os.environ", True),
    ("import os\nenv = os.environ", True),
    ("import os\nenv = os.environ.copy()", True),
    ("from os import environ", True),
    ("from os import getenv", True),
    ("import os\nenv = dict(os.environ)", False),
    ("import os\nenv = dict(os.environ, A='1', P=os.environ.get('PYTHONPATH', ''))", False),
    ("import os\nos.environ['NUMBA_ENABLE_CUDASIM'] = '1'", False),
    ("import os\ndel os.environ['A']", False),
    ("import os\nos.environ.update(A='1')", False),
    ("env = {}\nx = env.get('A')", False),
])
def test_the_scan_tells_reads_from_copies_and_writes(code, reads):
    assert bool(environment_reads(code)) is reads


def test_only_config_reads_the_environment():
    offenders = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "helpers/core/config.py":
            continue
        lines = environment_reads(path.read_text())
        if lines:
            offenders[rel] = lines
    assert not offenders, ("these modules read the environment themselves; read it through "
                           f"helpers.core.config instead (file: lines): {offenders}")


def test_every_variable_config_reads_is_declared():
    tree = ast.parse((ROOT / "helpers" / "core" / "config.py").read_text())
    read = {n.args[0].value for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_get"
            and n.args and isinstance(n.args[0], ast.Constant)}
    assert read and read <= set(config.VARIABLES), read - set(config.VARIABLES)


def tool_variables() -> dict[str, str]:
    """{name: file} for each environment variable a script in tools/ reads (os.environ / env)."""
    found = {}
    for path in sorted(p for p in (ROOT / "tools").rglob("*.py") if (p.parent / "__init__.py").exists()):
        tree = ast.parse(path.read_text())
        consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}

        def is_env(node):
            return _is_os_attr(node, "environ") or (isinstance(node, ast.Name) and node.id == "env")

        for n in ast.walk(tree):
            key = None
            if isinstance(n, ast.Call) and n.args and (
                    (isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "pop") and is_env(n.func.value))
                    or _is_os_attr(n.func, "getenv")):
                key = n.args[0]
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and is_env(n.value):
                key = n.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found[key.value] = path.name
            elif isinstance(key, ast.Name) and isinstance(consts.get(key.id), str):
                found[consts[key.id]] = path.name
    return found


def test_the_tools_variables_are_declared():
    found = tool_variables()
    assert {"CHROMIUM", "COURSE_BOOK_LABS", "COURSE_REPO_URL", "WHEELHOUSE"} <= set(found)  # the scan works
    undeclared = {k: v for k, v in found.items()
                  if k not in SYSTEM and k not in config.VARIABLES + config.TOOL_VARIABLES}
    assert not undeclared, f"add these to config.TOOL_VARIABLES and the README's table: {undeclared}"


def test_the_readme_table_lists_every_variable_once():
    rows = readme_table()
    declared = config.VARIABLES + config.TOOL_VARIABLES
    assert sorted(rows) == sorted(set(rows)), "a variable has two rows"
    assert not set(declared) - set(rows), f"missing from README's table: {set(declared) - set(rows)}"
    assert not set(rows) - set(declared), f"README lists variables nothing reads: {set(rows) - set(declared)}"
