"""Create the course's virtual environment (used by the Makefile).

    python3 -m tools.env.mkvenv .venv            # a clean environment
    python3 -m tools.env.mkvenv .venv --inherit  # also see the packages of the Python running this

--inherit is for GPU nodes and clusters whose Python already has CuPy, Numba and the CUDA
libraries (perhaps itself a virtual environment, where --system-site-packages would reach
past it to the bare system Python): the parent's site-packages are appended to the new
environment's path with a .pth file, after its own, so pinned packages installed into the
new environment win and everything else is reused.
"""

from __future__ import annotations

import argparse
import os
import site
import subprocess
import sys
import venv
from pathlib import Path


def parent_site_dirs() -> list[str]:
    """The site-packages folders of the interpreter running this script."""
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--inherit", action="store_true", help="reuse this Python's installed packages")
    args = ap.parse_args(argv)
    py = args.path / "bin" / "python"
    if not py.exists():
        print(f"creating virtual environment {args.path} with {sys.executable}")
        try:
            venv.create(args.path, with_pip=True)
        except subprocess.CalledProcessError:
            # Debian/Ubuntu Pythons without python3-venv have no ensurepip. With --inherit
            # the parent's pip serves (it installs into the running interpreter's prefix).
            if not args.inherit:
                raise SystemExit("mkvenv: this Python cannot create environments with pip "
                                 "(on Debian/Ubuntu: apt install python3-venv)") from None
            venv.create(args.path, with_pip=False, clear=True)
    if args.inherit:
        purelib = subprocess.check_output(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
        pth = Path(purelib) / "_course_parent_env.pth"
        pth.write_text("\n".join(parent_site_dirs()) + "\n")
        print(f"{pth}: reusing packages from {', '.join(parent_site_dirs())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
