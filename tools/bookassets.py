"""Put the JavaScript the site needs into book/_static, so no page fetches from a CDN.

    python tools/bookassets.py book/_static [--search wheelhouse ...]

* plotly.min.js, copied from the installed plotly package (the version the figures were made with);
* the standalone Jupyter widgets manager (@jupyter-widgets/html-manager, `dist/embed.js` with its
  font files), which renders the widget state myst-nb stores in each page. It comes from the npm
  registry at build time (`npm pack` of an exact version, checked against a pinned sha512), or
  from a tarball already in one of the --search folders (`make wheelhouse` puts it there for GPU
  nodes without internet). The bundle contains the ipywidgets core controls and the Output
  widget; it never loads a module from the network (no loader is configured).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# ipywidgets 8.1 speaks widget protocol 2.1; html-manager 1.0.x is its embedder.
HTML_MANAGER = "@jupyter-widgets/html-manager"
HTML_MANAGER_VERSION = "1.0.15"
HTML_MANAGER_INTEGRITY = ("sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTo"
                          "pvFi//SABeNz1yp47bCrJ3CQA==")
TARBALL = f"jupyter-widgets-html-manager-{HTML_MANAGER_VERSION}.tgz"
WIDGETS_DIR = "jupyter-widgets"  # under _static: embed.js and its fonts


class AssetError(RuntimeError):
    """An asset could not be found, fetched or verified."""


def integrity(data: bytes) -> str:
    """npm's Subresource-Integrity string of a tarball."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def copy_plotly(static: Path) -> Path:
    """plotly.min.js from the installed plotly package."""
    import plotly

    src = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not src.is_file():
        raise AssetError(f"{src} missing: the installed plotly has no bundled plotly.js")
    dst = static / "plotly.min.js"
    shutil.copyfile(src, dst)
    return dst


def find_tarball(search: list[Path]) -> bytes | None:
    """The pinned html-manager tarball from a local folder, if one has it."""
    for folder in search:
        p = folder / TARBALL
        if p.is_file():
            return p.read_bytes()
    return None


def npm_pack() -> bytes:
    """Download the pinned html-manager tarball with npm (registry access at build time)."""
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError("npm not found: install Node.js/npm (Debian: apt-get install -y npm), or put "
                         f"{TARBALL} in a folder given with --search (make wheelhouse does)")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([npm, "pack", f"{HTML_MANAGER}@{HTML_MANAGER_VERSION}", "--json",
                               "--pack-destination", tmp], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssetError(f"npm pack {HTML_MANAGER}@{HTML_MANAGER_VERSION} failed:\n{proc.stderr[-2000:]}")
        name = json.loads(proc.stdout)[0]["filename"]
        return (Path(tmp) / name).read_bytes()


def install_widgets(static: Path, search: list[Path]) -> Path:
    """Unpack embed.js and its fonts into static/jupyter-widgets (skipped when already there)."""
    dst = static / WIDGETS_DIR
    stamp = dst / "VERSION"
    if stamp.is_file() and stamp.read_text().strip() == HTML_MANAGER_VERSION and (dst / "embed.js").is_file():
        return dst / "embed.js"
    data = find_tarball(search)
    source = "local tarball" if data is not None else "npm registry"
    if data is None:
        data = npm_pack()
    got = integrity(data)
    if got != HTML_MANAGER_INTEGRITY:
        raise AssetError(f"{TARBALL} from the {source} has integrity {got}, expected {HTML_MANAGER_INTEGRITY}")
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("package/")
            if not m.isfile() or not name.startswith("dist/") or name.endswith((".map", "amd.js")):
                continue
            (dst / Path(name).name).write_bytes(tar.extractfile(m).read())
    stamp.write_text(HTML_MANAGER_VERSION + "\n")
    return dst / "embed.js"


def save_tarball(out: Path) -> Path:
    """Store the verified tarball in `out` (for `make wheelhouse`: offline builds on a node)."""
    data = find_tarball([out]) or npm_pack()
    if integrity(data) != HTML_MANAGER_INTEGRITY:
        raise AssetError(f"{TARBALL}: integrity mismatch")
    out.mkdir(parents=True, exist_ok=True)
    (out / TARBALL).write_bytes(data)
    return out / TARBALL


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("static", type=Path, help="the book's _static folder")
    ap.add_argument("--search", type=Path, nargs="*", default=[],
                    help="folders that may hold the html-manager tarball (offline builds)")
    ap.add_argument("--save-tarball", type=Path, help="only store the verified tarball in this folder")
    args = ap.parse_args(argv)
    try:
        if args.save_tarball:
            print(f"bookassets: {save_tarball(args.save_tarball)}")
            return 0
        args.static.mkdir(parents=True, exist_ok=True)
        search = args.search + [Path(p) for p in os.environ.get("WHEELHOUSE", "").split() if p]
        plotly_js = copy_plotly(args.static)
        embed = install_widgets(args.static, search)
    except AssetError as exc:
        print(f"bookassets: {exc}", file=sys.stderr)
        return 1
    print(f"bookassets: {plotly_js} and {embed} ({HTML_MANAGER}@{HTML_MANAGER_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
