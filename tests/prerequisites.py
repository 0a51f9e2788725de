"""What each marked kind of test needs from the machine, and the pytest hooks that act on it.

A bare `pytest` on a laptop without Chromium, QEMU or a GPU passes: a test whose prerequisite is
absent is skipped with the reason, naming what to install. CI must not pass that way, so
`make test` sets COURSE_REQUIRE (a comma-separated list of markers, or `all`): a selected test
whose marker is required and whose prerequisite is absent then fails the run instead of skipping.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIRE_VAR = "COURSE_REQUIRE"


def _chromium() -> str | None:
    from tools.site.cdp import BrowserError, find_chromium

    try:
        exe = find_chromium()
    except BrowserError as exc:
        return str(exc)
    return None if shutil.which(exe) else f"CHROMIUM={exe} is not an executable program"


def _kernel_vm() -> str | None:
    from helpers.core import config
    from helpers.measure.kernel_vm import bundle

    hint = config.qemu_missing()
    if hint:
        return hint
    if bundle.existing() is None and bundle.missing_tools():
        return "the kernel lab's bundle is not built and cannot be (make kernel-lab) without " + "; ".join(bundle.missing_tools())
    return None


def _hub() -> str | None:
    if shutil.which("npm") is None:
        return "npm is not installed (JupyterHub's proxy comes from the npm registry; Debian: apt-get install npm)"
    return _chromium()


def _built_site() -> str | None:
    index = ROOT / "book" / "_build" / "html" / "index.html"
    return None if index.is_file() else "no built site in book/_build/html (run `make book`)"


def _colab(config: pytest.Config) -> str | None:
    wanted = "colab" in (config.getoption("markexpr", "") or "")
    return None if wanted else "it installs from the package index, so it runs only when asked for (`make test-colab`, -m colab)"


# marker -> what is missing (None: present)
CHECKS: dict[str, Callable[[pytest.Config], str | None]] = {
    "browser": lambda config: _chromium(),
    "hub": lambda config: _hub(),
    "kernel_vm": lambda config: _kernel_vm(),
    "built_site": lambda config: _built_site(),
    "colab": _colab,
}


def required(env: dict[str, str] | None = None) -> set[str]:
    """The markers whose prerequisites must be present (COURSE_REQUIRE)."""
    text = (os.environ if env is None else env).get(REQUIRE_VAR, "")
    names = {n.strip() for n in text.split(",") if n.strip()}
    return set(CHECKS) | {"gpu"} if "all" in names else names


def missing(marker: str, config: pytest.Config, cache: dict[str, str | None]) -> str | None:
    """Why tests marked `marker` cannot run here (None: they can); each check runs once."""
    if marker not in cache:
        cache[marker] = CHECKS[marker](config)
    return cache[marker]


def apply(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip each selected item whose prerequisite is absent; fail the run if that marker is required."""
    must = required()
    cache: dict[str, str | None] = {}
    absent: dict[str, str] = {}
    for item in items:
        for marker in CHECKS:
            if item.get_closest_marker(marker) is None:
                continue
            why = missing(marker, config, cache)
            if why and marker in must:
                absent[marker] = why
            elif why:
                item.add_marker(pytest.mark.skip(reason=f"{marker} test not run here: {why}"))
    if absent:
        lines = "\n".join(f"  {m}: {why}" for m, why in sorted(absent.items()))
        raise pytest.UsageError(f"{REQUIRE_VAR} requires these tests to run, but this machine lacks:\n{lines}")
