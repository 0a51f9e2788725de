"""A notebook opened in Colab runs to the end: a simulated Colab, the notebook's own Colab block.

The simulation: a fresh virtual environment holding only packages Colab preinstalls (NumPy,
plotly, ipywidgets, jsonschema, Numba, ipykernel, not this course), a `google.colab` module the
kernel imports at start as Colab's does, no PYTHONPATH, and a working folder outside the
repository. Chapter 0 gets the block tools/site/colabcell.py writes; the test points its clone at this
repository (file://, its committed HEAD) and /content at a temporary folder, the only changes, and
runs the notebook with nbclient. It needs a package index for pip (`make test-colab`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.site import colabcell

ROOT = Path(__file__).resolve().parents[2]

COLAB_LIKE = ["numpy", "plotly", "ipywidgets", "jsonschema", "numba", "ipykernel"]


def test_block_is_idempotent_and_removable():
    src = "from helpers import course\nctx = course.start('x')\n"
    b = colabcell.block("https://github.com/org/course", "fall")
    once = colabcell.rewrite(src, b)
    assert once.startswith(colabcell.BEGIN) and once.endswith(src)
    assert "--branch fall https://github.com/org/course /content/course" in once
    assert colabcell.rewrite(once, b) == once
    assert colabcell.rewrite(once, colabcell.block("https://github.com/new/copy")).count(colabcell.BEGIN) == 1
    assert colabcell.rewrite(once, "") == src


@pytest.mark.parametrize("repo, branch", [("https://gitlab.com/a/b", "main"), ("https://github.com/a/b; rm -rf /", "main"),
                                          ("https://github.com/a/b", "main && evil")])
def test_block_refuses_what_colab_cannot_open_or_a_shell_would_run(repo, branch):
    with pytest.raises(ValueError):
        colabcell.block(repo, branch)


def test_colab_repo_needs_every_notebook(tmp_path):
    nbs = []
    for i in range(2):
        p = tmp_path / f"n{i}.ipynb"
        p.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1\n"], "metadata": {},
                                            "outputs": [], "execution_count": None}], "metadata": {}}))
        nbs.append(p)
    assert colabcell.colab_repo(nbs) is None
    colabcell.main(["--repo", "https://github.com/o/r", str(nbs[0])])
    assert colabcell.named_repo(nbs[0]) == "https://github.com/o/r" and colabcell.colab_repo(nbs) is None
    colabcell.main(["--repo", "https://github.com/o/r", str(nbs[1])])
    assert colabcell.colab_repo(nbs) == "https://github.com/o/r"


@pytest.mark.colab
def test_chapter0_runs_in_a_simulated_colab(tmp_path):
    from nbclient import NotebookClient

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # this checkout stays out of reach
    venv = tmp_path / "colab"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", *COLAB_LIKE], check=True, env=env)
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "google" / "colab").mkdir(parents=True)
    (Path(site) / "google" / "colab" / "__init__.py").write_text('"""Stands in for Colab\'s module."""\n')
    assert subprocess.run([py, "-c", "import helpers"], capture_output=True, env=env, cwd=tmp_path).returncode != 0

    kernels = tmp_path / "jupyter" / "kernels" / "colabsim"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.exec_lines=import google.colab"],
        "display_name": "simulated Colab", "language": "python",
        "env": {"PYTHONPATH": "", "COURSE_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}}))

    content = tmp_path / "content"
    nb = json.loads((ROOT / "notebooks" / "00_your_machine.ipynb").read_text())
    cell = colabcell.first_code_cell(nb)
    src = colabcell.rewrite("".join(cell["source"]), colabcell.block("https://github.com/sim/course"))
    src = src.replace("https://github.com/sim/course", f"file://{ROOT}").replace("/content", str(content))
    cell["source"] = src
    nb["cells"].append({"cell_type": "code", "id": "colab-check", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "import helpers, os\nprint('HELPERS', helpers.__file__)\nprint('CWD', os.getcwd())"})
    import nbformat

    node = nbformat.reads(json.dumps(nb), as_version=4)
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    try:
        NotebookClient(node, timeout=600, kernel_name="colabsim", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.pop("JUPYTER_PATH", None)
    errors = [f"cell {i}: {o.ename}: {o.evalue}" for i, c in enumerate(node.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    text = "".join(o.get("text", "") for o in node.cells[-1].outputs)
    assert f"HELPERS {content}/course/helpers/" in text and f"CWD {content}/course/notebooks" in text
    first = "".join(o.get("text", "") for o in colabcell.first_code_cell(node)["outputs"])
    assert "REPLAY" in first or "LIVE" in first
