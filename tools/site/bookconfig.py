"""Write the config `make book` builds with: book/_config.yml plus where this copy is published.

    python -m tools.site.bookconfig book/_config.yml book/_build/_config.yml

The launch buttons (Binder, Colab, the class's JupyterHub) link to the repository that holds
the notebooks, and that address differs for every copy of the course, so no URL is committed:

* COURSE_REPO_URL      the repository's public URL (https://github.com/ORG/REPO); if unset, the
                       clone's `origin` remote is used (git@github.com:ORG/REPO.git is rewritten
                       to https). Without either the site has no launch buttons, and says why here.
* COURSE_REPO_BRANCH   the branch the buttons open (default: the config's, else main).
* COURSE_REPO_PROVIDER github, gitlab or bitbucket: the kind of host, for a self-hosted one
                       (default: from the host name; any other host counts as gitlab).
* COURSE_JUPYTERHUB_URL the class's JupyterHub (https://hub.example.edu); adds a JupyterHub button
                       (it needs nbgitpuller on the hub, which environment.yml has; see book/teaching.md).

The Colab button is offered only for a GitHub repository whose notebooks carry the Colab block
naming it (tools/site/colabcell.py): without it, a notebook opened in Colab cannot import the course.

Relative paths of local Sphinx extensions are made absolute, since the written file lives
elsewhere than the source config.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

def https_url(remote: str) -> str | None:
    """A browsable https URL for a git remote ('git@github.com:o/r.git' -> 'https://github.com/o/r')."""
    remote = remote.strip()
    m = re.fullmatch(r"(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?/?", remote)
    if m:
        return f"https://{m.group(1)}/{m.group(2)}"
    m = re.fullmatch(r"https?://(?:[^@/]+@)?(.+?)(?:\.git)?/?", remote)
    if m:
        return f"https://{m.group(1)}"
    return None


def provider(url: str) -> str:
    """The theme's provider kind for a repository URL (unknown hosts: gitlab, the common self-hosted one)."""
    host = re.sub(r"^https?://", "", url).split("/", 1)[0].lower()
    if host.endswith("github.com"):
        return "github"
    if host.endswith("bitbucket.org"):
        return "bitbucket"
    return "gitlab"


def origin_url(root: Path = ROOT) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return https_url(out.stdout) if out.returncode == 0 and out.stdout.strip() else None


def derive(config: dict, env: dict[str, str], origin: str | None, config_dir: Path,
           colab_repo: str | None = None) -> tuple[dict, str]:
    """The build config and a one-line note on where its launch buttons point.

    `colab_repo` is the repository the notebooks' Colab block clones (tools/site/colabcell.py): the Colab
    button is offered only when it is this site's repository, since without the block a notebook
    opened in Colab cannot import the course."""
    cfg = dict(config)
    repo = dict(cfg.get("repository") or {})
    url = env.get("COURSE_REPO_URL") or origin
    if env.get("COURSE_REPO_BRANCH"):
        repo["branch"] = env["COURSE_REPO_BRANCH"]
    repo.setdefault("branch", "main")
    launch = dict(cfg.get("launch_buttons") or {})
    if env.get("COURSE_JUPYTERHUB_URL"):
        launch["jupyterhub_url"] = env["COURSE_JUPYTERHUB_URL"].rstrip("/")
    if url:
        repo["url"] = https_url(url) or url
        cfg["repository"] = repo
        skipped = ""
        if not repo["url"].startswith("https://github.com/") and launch.pop("colab_url", None):
            skipped = "; no Colab button (Colab opens notebooks from GitHub only)"
        elif colab_repo != repo["url"] and launch.pop("colab_url", None):
            skipped = (f"; no Colab button (the notebooks' Colab block clones {colab_repo or 'nothing'}: "
                       f"run `python -m tools.site.colabcell --repo {repo['url']}` and commit)")
        cfg["launch_buttons"] = launch
        sphinx_cfg = dict((cfg.get("sphinx") or {}).get("config") or {})
        theme = dict(sphinx_cfg.get("html_theme_options") or {})
        theme["repository_provider"] = env.get("COURSE_REPO_PROVIDER") or provider(repo["url"])
        sphinx_cfg["html_theme_options"] = theme
        cfg["sphinx"] = {**(cfg.get("sphinx") or {}), "config": sphinx_cfg}
        kinds = [k.removesuffix("_url") for k in ("binderhub_url", "jupyterhub_url", "colab_url") if launch.get(k)]
        note = f"launch buttons ({', '.join(kinds)}) open {repo['url']} at branch {repo['branch']}{skipped}"
    else:
        repo.pop("url", None)
        cfg["repository"] = repo
        cfg.pop("launch_buttons", None)
        note = ("no launch buttons: set COURSE_REPO_URL (or give the clone an `origin` remote) "
                "to add Binder/Colab/JupyterHub buttons")
    sphinx = dict(cfg.get("sphinx") or {})
    if sphinx.get("local_extensions"):
        sphinx["local_extensions"] = {k: str((config_dir / v).resolve())
                                      for k, v in sphinx["local_extensions"].items()}
        cfg["sphinx"] = sphinx
    return cfg, note


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__)
        return 2
    src, dst = Path(argv[0]), Path(argv[1])
    config = yaml.safe_load(src.read_text())
    from tools.site import colabcell

    cfg, note = derive(config, dict(os.environ), origin_url(), src.parent, colabcell.colab_repo())
    dst.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Written by tools/site/bookconfig.py from {src}; edit that file, not this one.\n"
    text = header + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)
    if not dst.exists() or dst.read_text() != text:  # unchanged config: Sphinx keeps its cache
        dst.write_text(text)
    print(f"bookconfig: {dst}: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
