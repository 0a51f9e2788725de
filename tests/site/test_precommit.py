""".pre-commit-config.yaml runs what `make test-lint` runs, at the versions the project pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())


def _hooks() -> dict[str, dict]:
    return {h["id"]: {**h, "repo": r["repo"], "rev": r.get("rev")} for r in CONFIG["repos"] for h in r["hooks"]}


def _pin(name: str) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    specs = [d for extra in project["project"]["optional-dependencies"].values() for d in extra]
    (spec,) = {d for d in specs if re.match(rf"{name}==", d)}
    return spec.split("==")[1]


def test_ruff_hook_is_the_pinned_ruff():
    ruff = _hooks()["ruff"]
    assert ruff["repo"].endswith("/ruff-pre-commit") and ruff["rev"] == f"v{_pin('ruff')}"


def test_local_hooks_run_the_lint_target_s_own_commands():
    lint = (ROOT / "Makefile").read_text().split("\ntest-lint:")[1].split("\n\n")[0]
    hooks = _hooks()
    for hook in ("nbhygiene", "labroles"):
        entry = hooks[hook]["entry"]
        assert hooks[hook]["repo"] == "local" and entry.startswith("python -m tools.checks.")
        assert entry.removeprefix("python ") in lint, (entry, lint)


def test_notebook_hooks_see_every_chapter_and_lab_and_nothing_built():
    pattern = re.compile(_hooks()["nbhygiene"]["files"])
    notebooks = [p.relative_to(ROOT).as_posix() for d in ("notebooks", "labs") for p in (ROOT / d).glob("*.ipynb")]
    assert notebooks and all(pattern.search(n) for n in notebooks)
    assert not pattern.search("book/_build/jupyter_execute/notebooks/00_your_machine.ipynb")
    assert not pattern.search("my_labs/lab1_toy_driver.ipynb")
