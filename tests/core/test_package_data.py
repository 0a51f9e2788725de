"""The installed package reads nothing from a checkout's tools/: the sources it compiles or sends
into a VM are package data, declared in pyproject.toml so a wheel carries them."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

from helpers.measure import bwcheck
from helpers.measure.kernel_vm import bundle

ROOT = Path(__file__).resolve().parents[2]


def _declared(path: Path) -> bool:
    """Whether pyproject's [tool.setuptools.package-data] puts `path` into the wheel."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package, globs in data.items():
        base = ROOT / package.replace(".", "/")
        if base in path.parents and any(fnmatch.fnmatch(path.relative_to(base).as_posix(), g) for g in globs):
            return True
    return False


def test_every_guest_and_cross_check_source_is_package_data():
    files = [p for d in (bundle.SOURCES, bwcheck.SOURCE.parent) for p in sorted(d.iterdir())
             if p.is_file() and p.suffix != ".pyc" and p.name != "__init__.py"]
    assert bwcheck.SOURCE in files and bwcheck.HEADER in files
    assert {p.name for p in bundle.source_files()} <= {p.name for p in files}
    assert [p.relative_to(ROOT).as_posix() for p in files if not _declared(p)] == []


def test_no_module_of_the_package_builds_a_path_into_tools():
    """`X / "tools"` or a "tools/..." string joined onto a path: the package would work only from a checkout."""
    found = []
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        if bundle.SOURCES in path.parents:  # guest programs run in the VM, with their own paths
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                    and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str) \
                    and (node.right.value == "tools" or node.right.value.startswith("tools/")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
