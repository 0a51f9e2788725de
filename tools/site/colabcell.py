"""The Colab block at the top of each notebook's first code cell: fetch the course, install what Colab lacks.

    python -m tools.site.colabcell --repo https://github.com/ORG/REPO [--branch main]   # write or update it
    python -m tools.site.colabcell --remove                                            # take it out
    python -m tools.site.colabcell --show                                              # the repository it names

Colab opens one notebook from GitHub, without the repository: `from helpers import course` fails
and the recordings the notebook replays (data/) are missing. In Colab (and only there: the block
does nothing elsewhere) the block clones the repository into /content/course once per runtime,
installs the course with `pip install -e` (pip adds what Colab lacks: numba-cuda, the pinned
NumPy, Numba and plotly), puts the clone first on `sys.path` and moves into its notebooks folder.
If Colab had already imported NumPy before the install replaced it, the block says to restart
the session and run the cell again (the clone is then found and nothing is installed twice).

The repository's public address differs for every copy of the course, so it is written by this
tool, not by hand; `make book` offers a Colab button only when every notebook's block names the
repository the site is built for (tools/site/bookconfig.py). The block sits between two marker
comments, so writing it again replaces it (idempotent), and `--remove` restores the cell.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "# --- Colab: fetch the course and install what Colab lacks (tools/site/colabcell.py writes this block)"
END = "# --- end of the Colab block"
CLONE = "/content/course"
_BLOCK = re.compile(rf"^{re.escape(BEGIN)}\n.*?^{re.escape(END)}\n", re.S | re.M)
_URL = re.compile(r"--branch (\S+) (https://\S+) ")
_GITHUB = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def block(repo: str, branch: str = "main") -> str:
    """The lines for one repository and branch (only a github.com repository: Colab opens no other)."""
    if not _GITHUB.fullmatch(repo) or not re.fullmatch(r"[A-Za-z0-9_./-]+", branch):
        raise ValueError(f"--repo must be https://github.com/ORG/REPO and --branch a branch name: {repo!r} {branch!r}")
    return "\n".join([
        BEGIN,
        "import os",
        "import sys",
        f'if "google.colab" in sys.modules and not os.path.isdir("{CLONE}"):',
        "    _before = set(sys.modules)",
        f"    !git clone -q --depth 1 --branch {branch} {repo} {CLONE}",
        f"    %pip install -q -e {CLONE}",
        '    if "numpy" in _before:',
        '        raise SystemExit("The course is installed. Restart the session (Runtime > Restart session), "',
        '                         "then run this cell again.")',
        'if "google.colab" in sys.modules:',
        f'    sys.path.insert(0, "{CLONE}")',
        f"    %cd {CLONE}/notebooks",
        END,
    ]) + "\n"


def first_code_cell(nb: dict) -> dict:
    cell = next((c for c in nb["cells"] if c["cell_type"] == "code"), None)
    if cell is None:
        raise ValueError("no code cell")
    return cell


def rewrite(source: str, new_block: str) -> str:
    """`source` with its Colab block replaced by `new_block` (added on top if absent; '' removes it)."""
    return new_block + _BLOCK.sub("", source, count=1)


def named_repo(path: Path) -> str | None:
    """The repository a notebook's Colab block clones, or None without a block."""
    src = "".join(first_code_cell(json.loads(path.read_text()))["source"])
    m = _BLOCK.search(src)
    return _URL.search(m.group(0)).group(2) if m else None


def notebooks() -> list[Path]:
    return sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("labs/*.ipynb"))


def colab_repo(pages: list[Path] | None = None) -> str | None:
    """The repository every notebook's block names, or None when any has none or they differ."""
    repos = {named_repo(p) for p in pages or notebooks()}
    return repos.pop() if len(repos) == 1 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--repo", help="https://github.com/ORG/REPO, the public copy Colab opens")
    g.add_argument("--remove", action="store_true")
    g.add_argument("--show", action="store_true")
    ap.add_argument("--branch", default="main")
    ap.add_argument("pages", nargs="*", type=Path)
    a = ap.parse_args(argv)
    pages = a.pages or notebooks()
    if a.show:
        repo = colab_repo(pages)
        print(repo or "no Colab block, or notebooks naming different repositories")
        return 0 if repo else 1
    try:
        new = "" if a.remove else block(a.repo, a.branch)
    except ValueError as exc:
        print(f"colabcell: {exc}", file=sys.stderr)
        return 2
    for p in pages:
        nb = json.loads(p.read_text())
        cell = first_code_cell(nb)
        src = "".join(cell["source"])
        out = rewrite(src, new)
        if out != src:
            cell["source"] = out.splitlines(keepends=True)
            p.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
            print(f"colabcell: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
