"""Put the JavaScript the site needs into book/_static, so no page fetches from a CDN.

    python -m tools.site.bookassets book/_static [--search wheelhouse ...]
    python -m tools.site.bookassets --save-cache wheelhouse     # for offline builds (make wheelhouse)

* plotly.min.js, copied from the installed plotly package (the version the figures were made with);
* from npm, pinned by package.json and package-lock.json at the repository root and installed with
  `npm ci` (exactly the lockfile, each tarball checked against its sha512) into node_modules/:
  - MathJax 3 (the `mathjax` package's es5 build), for LaTeX math;
  - axe-core (its axe.min.js), the accessibility engine tools/site/sitecheck.py runs in every page;
  - the standalone Jupyter widgets manager (@jupyter-widgets/html-manager, `dist/embed.js` with its
    font files), which renders the widget state myst-nb stores in each page. The bundle contains
    the ipywidgets core controls and the Output widget; it never loads a module from the network
    (no loader is configured).
Offline (GPU nodes without internet): `make wheelhouse` stores npm's cache of the locked tarballs in
wheelhouse/npm-cache, and `npm ci --offline` installs from a --search folder that holds one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from tools.env import npm


@dataclass(frozen=True)
class NpmAsset:
    """What one package (its version pinned in package.json) gives the site, copied into _static/dest."""

    name: str
    dest: str
    prefix: str            # the part of the package copied (a folder inside it)
    _: KW_ONLY
    flatten: bool = False  # copy the prefix's files without their sub-folders
    skip: tuple[str, ...] = ()  # file-name endings left out


# ipywidgets 8.1 speaks widget protocol 2.1; html-manager 1.0.x is its embedder (dist/embed.js and
# its font files; no loader is configured, so it never fetches a module from the network).
WIDGETS = NpmAsset("@jupyter-widgets/html-manager", "jupyter-widgets", "dist/", flatten=True,
                   skip=(".map", "amd.js"))
# MathJax 3 for LaTeX math in chapters (Sphinx's mathjax_path points here instead of a CDN); the
# whole es5 build, since MathJax loads its extensions and fonts from beside tex-chtml.js.
MATHJAX = NpmAsset("mathjax", "mathjax", "es5/")
# axe-core, the standard accessibility engine: not used by any page, but tools/site/sitecheck.py
# injects dist axe.min.js into every page of the built site (so the check runs offline, like the site).
AXE = NpmAsset("axe-core", "axe-core", "", skip=(".d.ts", ".md", ".json", "axe.js", "gather-internals.js",
                                                "LICENSE-3RD-PARTY.txt"))
ASSETS = (WIDGETS, MATHJAX, AXE)


class AssetError(RuntimeError):
    """An asset could not be installed, or is not the version package.json pins."""


def copy_plotly(static: Path) -> Path:
    """plotly.min.js from the installed plotly package."""
    import plotly

    src = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not src.is_file():
        raise AssetError(f"{src} missing: the installed plotly has no bundled plotly.js")
    dst = static / "plotly.min.js"
    shutil.copyfile(src, dst)
    return dst


def install(static: Path, modules: Path, asset: NpmAsset, version: str) -> Path:
    """Copy the asset from node_modules into static/<dest> (skipped when that version is already there)."""
    dst = static / asset.dest
    stamp = dst / "VERSION"
    if stamp.is_file() and stamp.read_text().strip() == version:
        return dst
    pkg = modules / asset.name
    try:
        got = json.loads((pkg / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        raise AssetError(f"{pkg} is missing: run `npm ci` at the repository root") from None
    if got != version:
        raise AssetError(f"node_modules has {asset.name}@{got}, package.json pins {version}: run `npm ci`")
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    root = pkg / asset.prefix
    for src in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith(asset.skip or ("\0",))):
        if src.is_symlink():
            raise AssetError(f"{asset.name}: {src} is a link")
        out = dst / (src.name if asset.flatten else src.relative_to(root))
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
    stamp.write_text(version + "\n")
    return dst


def install_all(static: Path, search: list[Path], root: Path = npm.ROOT) -> list[str]:
    """Every npm asset into static (after `npm ci`); one line per asset for the log."""
    versions = npm.pins(root)
    modules = npm.npm_ci(search, root)
    return [f"{install(static, modules, a, versions[a.name])} ({a.name}@{versions[a.name]})" for a in ASSETS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("static", type=Path, nargs="?", help="the book's _static folder")
    ap.add_argument("--search", type=Path, nargs="*", default=[],
                    help=f"folders that may hold npm's cache of the locked tarballs ({npm.CACHE}/, offline builds)")
    ap.add_argument("--save-cache", type=Path, help=f"only store npm's cache of the locked tarballs in DIR/{npm.CACHE}")
    args = ap.parse_args(argv)
    try:
        if args.save_cache:
            print(f"bookassets: {npm.save_cache(args.save_cache)}")
            return 0
        if args.static is None:
            ap.error("the _static folder is required")
        args.static.mkdir(parents=True, exist_ok=True)
        search = args.search + [Path(p) for p in os.environ.get("WHEELHOUSE", "").split() if p]
        plotly_js = copy_plotly(args.static)
        done = install_all(args.static, search)
    except (AssetError, npm.NpmError) as exc:
        print(f"bookassets: {exc}", file=sys.stderr)
        return 1
    print(f"bookassets: {plotly_js}; " + "; ".join(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
