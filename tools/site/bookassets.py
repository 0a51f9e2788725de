"""Put the JavaScript the site needs into book/_static, so no page fetches from a CDN.

    python -m tools.site.bookassets book/_static [--search wheelhouse ...]

* plotly.min.js, copied from the installed plotly package (the version the figures were made with);
* MathJax 3 (the `mathjax` npm package's es5 build), for LaTeX math, also from the npm registry;
* axe-core (its axe.min.js), the accessibility engine tools/site/sitecheck.py runs in every page;
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
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NpmAsset:
    """One npm package version, checked against its registry integrity, unpacked into _static/dest."""

    name: str
    version: str
    integrity: str
    dest: str
    prefix: str            # the part of the package copied (a folder inside it)
    flatten: bool = False  # copy the prefix's files without their sub-folders
    skip: tuple[str, ...] = ()  # file-name endings left out

    @property
    def tarball(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


# ipywidgets 8.1 speaks widget protocol 2.1; html-manager 1.0.x is its embedder (dist/embed.js and
# its font files; no loader is configured, so it never fetches a module from the network).
WIDGETS = NpmAsset("@jupyter-widgets/html-manager", "1.0.15",
                   "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
                   "jupyter-widgets", "dist/", flatten=True, skip=(".map", "amd.js"))
# MathJax 3 for LaTeX math in chapters (Sphinx's mathjax_path points here instead of a CDN); the
# whole es5 build, since MathJax loads its extensions and fonts from beside tex-chtml.js.
MATHJAX = NpmAsset("mathjax", "3.2.2",
                   "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
                   "mathjax", "es5/")
# axe-core, the standard accessibility engine: not used by any page, but tools/site/sitecheck.py injects
# dist axe.min.js into every page of the built site (so the check runs offline, like the site).
AXE = NpmAsset("axe-core", "4.14.1",
               "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
               "axe-core", "", skip=(".d.ts", ".md", ".json", "axe.js", "gather-internals.js", "LICENSE-3RD-PARTY.txt"))
ASSETS = (WIDGETS, MATHJAX, AXE)
# kept for callers that name the widget manager directly
HTML_MANAGER, HTML_MANAGER_VERSION, HTML_MANAGER_INTEGRITY = WIDGETS.name, WIDGETS.version, WIDGETS.integrity
TARBALL = WIDGETS.tarball
WIDGETS_DIR = WIDGETS.dest


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


def find_tarball(search: list[Path], asset: NpmAsset = WIDGETS) -> bytes | None:
    """The pinned tarball from a local folder, if one has it."""
    for folder in search:
        p = folder / asset.tarball
        if p.is_file():
            return p.read_bytes()
    return None


def npm_pack(asset: NpmAsset = WIDGETS) -> bytes:
    """Download the pinned tarball with npm (registry access at build time)."""
    npm = shutil.which("npm")
    if npm is None:
        raise AssetError("npm not found: install Node.js/npm (Debian: apt-get install -y npm), or put "
                         f"{asset.tarball} in a folder given with --search (make wheelhouse does)")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([npm, "pack", f"{asset.name}@{asset.version}", "--json",
                               "--pack-destination", tmp], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssetError(f"npm pack {asset.name}@{asset.version} failed:\n{proc.stderr[-2000:]}")
        name = json.loads(proc.stdout)[0]["filename"]
        return (Path(tmp) / name).read_bytes()


def _verified(asset: NpmAsset, search: list[Path]) -> bytes:
    data = find_tarball(search, asset)
    source = "local tarball" if data is not None else "npm registry"
    if data is None:
        data = npm_pack(asset)
    got = integrity(data)
    if got != asset.integrity:
        raise AssetError(f"{asset.tarball} from the {source} has integrity {got}, expected {asset.integrity}")
    return data


def install(static: Path, search: list[Path], asset: NpmAsset = WIDGETS) -> Path:
    """Unpack the asset into static/<dest> (skipped when that version is already there)."""
    dst = static / asset.dest
    stamp = dst / "VERSION"
    if stamp.is_file() and stamp.read_text().strip() == asset.version:
        return dst
    data = _verified(asset, search)
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("package/")
            if not m.isfile() or not name.startswith(asset.prefix) or (asset.skip and name.endswith(asset.skip)):
                continue
            rel = Path(name).name if asset.flatten else name.removeprefix(asset.prefix)
            if ".." in Path(rel).parts:
                raise AssetError(f"{asset.tarball}: unsafe path {m.name}")
            out = dst / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(m).read())
    stamp.write_text(asset.version + "\n")
    return dst


def install_widgets(static: Path, search: list[Path]) -> Path:
    """The widget manager's embed.js in static/jupyter-widgets."""
    return install(static, search, WIDGETS) / "embed.js"


def save_tarball(out: Path) -> list[Path]:
    """Store every verified tarball in `out` (for `make wheelhouse`: offline builds on a node)."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for asset in ASSETS:
        data = _verified(asset, [out])
        (out / asset.tarball).write_bytes(data)
        saved.append(out / asset.tarball)
    return saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("static", type=Path, help="the book's _static folder")
    ap.add_argument("--search", type=Path, nargs="*", default=[],
                    help="folders that may hold the html-manager tarball (offline builds)")
    ap.add_argument("--save-tarball", type=Path, help="only store the verified tarball in this folder")
    args = ap.parse_args(argv)
    try:
        if args.save_tarball:
            print("bookassets: " + ", ".join(map(str, save_tarball(args.save_tarball))))
            return 0
        args.static.mkdir(parents=True, exist_ok=True)
        search = args.search + [Path(p) for p in os.environ.get("WHEELHOUSE", "").split() if p]
        plotly_js = copy_plotly(args.static)
        done = [f"{install(args.static, search, a)} ({a.name}@{a.version})" for a in ASSETS]
    except AssetError as exc:
        print(f"bookassets: {exc}", file=sys.stderr)
        return 1
    print(f"bookassets: {plotly_js}; " + "; ".join(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
