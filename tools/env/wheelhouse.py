"""Build an offline folder of wheels for a GPU node without internet (`make wheelhouse`).

    python -m tools.env.wheelhouse --out wheelhouse --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --extras test,book --installed tools/env/nodes/cuda-image.txt

Downloads, for the chosen Python version and platform, every wheel the course and the named
extras need (plus its build requirements, so `pip install -e .` works with --no-index),
then deletes the wheels whose exact name and version the node already has (from a
`pip list --format=freeze` of the node, passed with --installed). On the node:

    make test WHEELHOUSE=wheelhouse CUDA_EXTRA= PYTHON=/path/to/node/python3
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# manylinux tags are matched exactly by pip download: offer the common ones for a platform
_MANYLINUX = ["manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014",
              "manylinux_2_5", "manylinux1"]


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(req: str) -> str:
    """The normalised project name of a requirement string ('numpy==2.4.6' -> 'numpy')."""
    return normalize(re.split(r"[<>=!~\[;]", req, maxsplit=1)[0])


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requirements(extras: list[str]) -> list[str]:
    """The course's requirements for the chosen extras, plus its build requirements."""
    meta = _pyproject()
    reqs = list(meta["project"]["dependencies"]) + build_requirements()
    optional = meta["project"]["optional-dependencies"]
    for e in extras:
        if e not in optional:
            raise SystemExit(f"wheelhouse: unknown extra {e!r} (known: {', '.join(optional)})")
        reqs += optional[e]
    return list(dict.fromkeys(reqs))


def build_requirements() -> list[str]:
    """The course's PEP 517 build requirements (setuptools, wheel)."""
    return list(_pyproject()["build-system"]["requires"])


def installed(freeze_file: Path | None) -> set[tuple[str, str]]:
    """(name, version) pairs from a `pip list --format=freeze` file (comments allowed)."""
    if freeze_file is None:
        return set()
    out = set()
    for line in freeze_file.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out.add((normalize(name), version.strip()))
    return out


def download(cmd: list[str], reqs: list[str], have: set[tuple[str, str]], out: Path) -> None:
    """pip download, preferring the node's versions; a preference pip finds in conflict with
    the course's requirements is dropped and the download retried."""
    dropped: set[str] = set()
    for _ in range(25):
        constraints = node_constraints(have, reqs, out, dropped)
        extra = ["--constraint", str(constraints)] if constraints else []
        proc = subprocess.run(cmd + extra + reqs, capture_output=True, text=True)
        if constraints:
            constraints.unlink()
        if proc.returncode == 0:
            print(proc.stdout.strip().splitlines()[-1])
            return
        clash = set(re.findall(r"The user requested \(constraint\) ([A-Za-z0-9_.-]+)==", proc.stdout + proc.stderr))
        if not clash or clash <= dropped:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit("wheelhouse: pip download failed (see above)")
        print(f"wheelhouse: node versions of {', '.join(sorted(clash))} conflict; downloading newer ones")
        dropped |= {normalize(c) for c in clash}
    raise SystemExit("wheelhouse: too many conflicting node versions")


def node_constraints(have: set[tuple[str, str]], reqs: list[str], out: Path,
                     dropped: set[str] = frozenset()) -> Path | None:
    """A constraints file that steers dependencies to the versions the node already has.

    Packages the course pins itself keep the course's pin (numpy stays below 2.5 even where
    the node has 2.5); for everything else the node's version is preferred, so its wheel
    need not travel.
    """
    if not have:
        return None
    pinned = {requirement_name(r) for r in reqs}
    lines = [f"{n}=={v}" for n, v in sorted(have) if n not in pinned and n not in dropped]
    path = out / ".node-constraints.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def platforms(platform: str) -> list[str]:
    """Expand e.g. manylinux_2_28_x86_64 into the tags pip should accept for it."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if not m:
        return [platform]
    glibc, arch = (int(m.group(1)), int(m.group(2))), m.group(3)
    tags = [platform]
    for t in _MANYLINUX:
        mm = re.fullmatch(r"manylinux_(\d+)_(\d+)", t)
        ok = (int(mm.group(1)), int(mm.group(2))) <= glibc if mm else True
        if ok:
            tags.append(f"{t}_{arch}")
    return list(dict.fromkeys(tags + ["any"]))


def wheel_key(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return normalize(name), version


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "wheelhouse")
    ap.add_argument("--python-version", default="3.12")
    ap.add_argument("--platform", default="manylinux_2_28_x86_64")
    ap.add_argument("--extras", default="test,book", help="comma-separated extras (cuda12, cuda13, lab, test, book)")
    ap.add_argument("--installed", type=Path, help="pip freeze of the node: wheels it already has are left out")
    args = ap.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    reqs = requirements(extras)
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(args.out),
           "--python-version", args.python_version, "--implementation", "cp"]
    for p in platforms(args.platform):
        cmd += ["--platform", p]
    print("wheelhouse: downloading", len(reqs), "requirements and their dependencies", flush=True)
    have = installed(args.installed)
    download(cmd, reqs, have, args.out)
    # The build requirements always travel, even where the node has them: `make test
    # WHEELHOUSE=...` installs them from the wheelhouse before building the course.
    build = {requirement_name(r) for r in build_requirements()}
    kept, dropped, size = [], [], 0
    for whl in sorted(args.out.glob("*.whl")):
        if wheel_key(whl) in have and wheel_key(whl)[0] not in build:
            whl.unlink()
            dropped.append(whl.name)
        else:
            kept.append(whl.name)
            size += whl.stat().st_size
    print(f"wheelhouse: {len(kept)} wheels ({size / 2**20:.1f} MiB) in {args.out}; "
          f"left out {len(dropped)} the node already has")
    if "book" in extras:
        # the site's npm assets (npm's cache of package-lock.json's tarballs): `make book WHEELHOUSE=...`
        # installs them from here with `npm ci --offline`
        from tools.env import npm

        try:
            print(f"wheelhouse: {npm.save_cache(args.out)}")
        except npm.NpmError as exc:
            print(f"wheelhouse: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
