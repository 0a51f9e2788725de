"""The course's JavaScript from npm: package.json pins each package exactly, package-lock.json the
whole tree with its sha512 hashes, and `npm ci` installs exactly that into node_modules/.

Used by tools/site/bookassets.py (the site's assets) and tools/hub/hubclass.py (JupyterHub's
proxy). Offline (GPU nodes): `make wheelhouse` stores npm's cache of the locked tarballs in
wheelhouse/npm-cache (save_cache), and npm_ci installs from a folder that holds one with --offline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = "npm-cache"  # the folder of npm's cache inside a wheelhouse
NPM_FLAGS = ("--ignore-scripts", "--no-audit", "--no-fund")  # no package's install script runs


class NpmError(RuntimeError):
    """npm is missing, `npm ci` failed, or package.json pins a version loosely."""


def pins(root: Path = ROOT) -> dict[str, str]:
    """{package: version} from package.json; each must be an exact version (the lockfile holds the rest)."""
    deps = json.loads((root / "package.json").read_text())["dependencies"]
    loose = [f"{n}@{v}" for n, v in deps.items() if not v[:1].isdigit()]
    if loose:
        raise NpmError(f"package.json must pin exact versions, not {', '.join(loose)}")
    return deps


def installed_is_locked(root: Path) -> bool:
    """Whether node_modules already holds exactly what package-lock.json names: npm's own record of the
    tree agrees, and every package it names is there at its version (`npm install --package-lock-only`
    rewrites the record without installing anything, so the record alone is not enough)."""
    try:
        have = json.loads((root / "node_modules" / ".package-lock.json").read_text())["packages"]
        want = {k: v for k, v in json.loads((root / "package-lock.json").read_text())["packages"].items() if k}
        if have != want:
            return False
        return all(json.loads((root / path / "package.json").read_text())["version"] == entry["version"]
                   for path, entry in want.items() if not entry.get("optional"))
    except (OSError, ValueError, KeyError):
        return False


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise NpmError("npm not found: install Node.js/npm (Debian: apt-get install -y npm), which `npm ci` "
                         "needs to install the site's JavaScript from package-lock.json")
    return npm


def npm_ci(search: list[Path], root: Path = ROOT) -> Path:
    """node_modules as package-lock.json pins it: `npm ci` (offline from a --search folder's npm cache
    when one has it), skipped when node_modules already matches the lockfile."""
    if installed_is_locked(root):
        return root / "node_modules"
    cache = next((f / CACHE for f in search if (f / CACHE).is_dir()), None)
    cmd = [_npm(), "ci", *NPM_FLAGS, *(("--offline", "--cache", str(cache)) if cache else ())]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise NpmError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return root / "node_modules"


def save_cache(out: Path, root: Path = ROOT) -> Path:
    """npm's cache of every locked tarball in out/npm-cache (for `make wheelhouse`: offline builds)."""
    cache = out / CACHE
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(root / name, Path(tmp) / name)
        cmd = [_npm(), "ci", *NPM_FLAGS, "--cache", str(cache)]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise NpmError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return cache
