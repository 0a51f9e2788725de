"""python -m tools.shown [--check] [notebook ...]: write (or check) the cells that show package code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.shown.generate import ROOT, ShownError, rewrite, stale_cells


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """Rewrite every stale marked cell, or with --check list them and exit 1; 2 on a ShownError."""
    parser = argparse.ArgumentParser(prog="python -m tools.shown", description=__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell would change")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted((root / "notebooks").glob("*.ipynb"))
    changed = []
    try:
        for path in paths:
            stale = stale_cells(path, root)
            changed += [f"{path.name} cell {i}" for i in stale]
            if stale and not args.check:
                rewrite(path, stale)
    except ShownError as exc:
        print(f"shown: {exc}", file=sys.stderr)
        return 2
    if args.check and changed:
        print("shown: these cells differ from the package's text (run `make shown`, after editing the package, "
              "not the cell):\n  " + "\n  ".join(changed), file=sys.stderr)
        return 1
    verb = "would rewrite" if args.check else "rewrote"
    print(f"shown: {verb} {len(changed)} cell(s)" if changed else "shown: every marked cell is the package's text")
    return 0


if __name__ == "__main__":
    sys.exit(main())
