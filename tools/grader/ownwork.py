"""The "your own work" rule, enforced where the learner's code cannot reach: the module file.

A part that must be the learner's own computation (Lab 2's `fit_line`, Lab 3's range-Doppler
map and deadline report) names the course functions that compute the same quantity
(`Part.own_work`: {module: names}). That part runs in its own worker whose sandbox holds
*redacted* copies of those modules: the named functions' bodies are replaced by a refusal, and
the module's compiled cache (`__pycache__`) is hidden, so the worker holds no copy of their
code at all. Whatever route the learner's code takes to them — a call, an alias, a default
argument, `types.FunctionType(f.__code__, f.__globals__)`, an import under another name,
patching the in-process check — it reaches only the refusal. The in-process check
(helpers.labs.grading.integrity.own_work, asked for by `forbid`) stays as the friendly explanation; it is
not what the rule rests on.

What it guarantees and what not: labs/README.md ("Your own work").
"""

from __future__ import annotations

import ast
from pathlib import Path

REFUSAL = ("{module}.{name} is not available in this part: the grader checks that this part is your own "
           "computation, so the course's implementation of it is not in your code's process")


def module_file(root: Path, module: str) -> Path:
    """The source file of course module `module` ("helpers.models.copy_cost") in checkout `root`."""
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file() or not module.startswith("helpers."):
        raise ValueError(f"{module} is not a module of the course's helpers ({path})")
    return path


def redacted_source(source: str, module: str, names: tuple[str, ...]) -> str:
    """`source` with the top-level functions `names` replaced by ones that only raise."""
    tree = ast.parse(source)
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            msg = REFUSAL.format(module=module, name=node.name)
            node.body = [ast.Raise(exc=ast.Call(func=ast.Name("RuntimeError", ast.Load()),
                                                args=[ast.Constant(msg)], keywords=[]), cause=None)]
            node.decorator_list = []
            found.add(node.name)
    missing = set(names) - found
    if missing:
        raise ValueError(f"{module} defines no top-level function {sorted(missing)} to redact")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def overlay(root: Path, own_work: dict[str, tuple[str, ...]], folder: Path) -> list[tuple[Path, str]]:
    """Redacted copies of the modules of `own_work`, written under `folder`: [(file, the module's
    path relative to the checkout)], what the sandbox binds over the course's own files."""
    out = []
    for module, names in sorted(own_work.items()):
        src = module_file(root, module)
        dst = folder / f"{module}.py"
        dst.write_text(redacted_source(src.read_text(), module, tuple(names)))
        dst.chmod(0o644)
        out.append((dst, str(src.relative_to(root))))
    return out
