"""The light learner install: `make lab` installs the core and the `lab` extra (CuPy only where an
NVIDIA driver is found or CUDA_EXTRA asks), `make test` adds the test and book extras to the same
environment. Checked on the Makefile's dry runs and on what the notebooks import."""

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed here")

# import name -> the distribution in pyproject that provides it, for every third-party module a
# notebook or lab imports. A new import must be added here and to the core or the `lab` extra.
PROVIDED_BY = {
    "numpy": "numpy",
    "numba": "numba",
    "plotly": "plotly",
    "ipywidgets": "ipywidgets",
    "IPython": "ipykernel",  # IPython comes with ipykernel
    "hypothesis": "hypothesis",
    "cupy": None,  # optional: the cuda12/cuda13 extras; the course runs without it (replay)
}


def _dist(req: str) -> str:
    return re.split(r"[<>=!~\[;]", req, maxsplit=1)[0].strip().lower()


def learner_distributions() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_dist(r) for r in meta["dependencies"] + meta["optional-dependencies"]["lab"]}


def notebook_imports(paths) -> dict[str, set[str]]:
    """Top-level module names imported by the code cells of `paths` (IPython magics skipped)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for cell in json.loads(Path(path).read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            src = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(src)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                         else [])
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(Path(path).name)
    return found


def test_import_scan_finds_imports_in_a_made_up_notebook(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": ["%matplotlib inline\n", "import numpy as np\n",
                                                      "from scipy.linalg import svd\n", "from . import x\n"]},
                    {"cell_type": "markdown", "source": ["import pandas"]}]}
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    assert notebook_imports([tmp_path / "x.ipynb"]) == {"numpy": {"x.ipynb"}, "scipy": {"x.ipynb"}}


def test_learner_install_covers_every_notebook_import():
    notebooks = sorted(ROOT.glob("notebooks/**/*.ipynb")) + sorted(ROOT.glob("labs/**/*.ipynb"))
    assert notebooks
    have = learner_distributions()
    problems = []
    for module, where in sorted(notebook_imports(notebooks).items()):
        if module in sys.stdlib_module_names or module in ("helpers", "instructor"):
            continue  # the course's own packages (instructor/: answers only solution cells and hidden tests import)
        if module not in PROVIDED_BY:
            problems.append(f"{module} (imported by {sorted(where)}) is not in PROVIDED_BY")
        elif PROVIDED_BY[module] and PROVIDED_BY[module] not in have:
            problems.append(f"{module} needs {PROVIDED_BY[module]} in the core or the lab extra")
    assert problems == []


def test_learner_set_is_light():
    """The learner set has no test or book tooling, and no CuPy by default."""
    have = learner_distributions()
    assert not have & {"jupyter-book", "nbgrader", "pytest", "nbval", "ruff", "websocket-client"}
    assert not any(d.startswith("cupy") for d in have)
    assert "jsonschema" in have  # helpers.reference validates every recording with it


def _dry_run(target: str, tmp_path: Path, **make_vars: str) -> str:
    """`make -n target` in the repository with a throw-away VENV; returns the commands it would run."""
    args = ["make", "-n", "--no-print-directory", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}",
            "NVIDIA_SMI=/nonexistent/nvidia-smi", f"NVIDIA_DRIVER_FILES={tmp_path / 'no-driver'}"]
    args += [f"{k}={v}" for k, v in make_vars.items()]
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout


def _extras(out: str) -> list[str]:
    return re.findall(r'-e "\.\[([^\]]*)\]"', out)


def test_lab_without_a_driver_installs_no_cupy(tmp_path):
    out = _dry_run("venv-lab", tmp_path)
    assert _extras(out) == ["lab"] and "--inherit" not in out
    assert "no NVIDIA driver found" in out


def test_lab_with_a_driver_installs_cupy(tmp_path):
    (tmp_path / "driver").write_text("NVRM version: made up\n")
    out = _dry_run("venv-lab", tmp_path, NVIDIA_DRIVER_FILES=str(tmp_path / "driver"))
    assert _extras(out) == ["lab,cuda12"] and "an NVIDIA driver was found" in out
    smi = tmp_path / "bin" / "nvidia-smi"  # or nvidia-smi alone
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    assert _extras(_dry_run("venv-lab", tmp_path, NVIDIA_SMI=str(smi))) == ["lab,cuda12"]


@pytest.mark.parametrize("line, extras, version", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build", "lab,cuda13", 580),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  610.12  Release Build", "lab,cuda13", 610),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:15:33 UTC 2024", "lab,cuda12", 550)])
def test_lab_picks_cuda13_with_cupti_for_a_580_driver(tmp_path, line, extras, version):
    """A driver that runs CUDA 13 gets the cuda13 extra (with CUPTI); an older one CUDA 12."""
    (tmp_path / "driver").write_text(line + "\n")
    out = _dry_run("venv-lab", tmp_path, NVIDIA_DRIVER_FILES=str(tmp_path / "driver"))
    assert _extras(out) == [extras]
    assert f"driver was found (version {version})" in out


@pytest.mark.parametrize("value, extras, inherit", [("cuda13", "lab,cuda13", False), ("none", "lab", False),
                                                     ("", "lab", True)])
def test_cuda_extra_overrides_detection(tmp_path, value, extras, inherit):
    (tmp_path / "driver").write_text("NVRM version: made up\n")
    out = _dry_run("venv-lab", tmp_path, CUDA_EXTRA=value, NVIDIA_DRIVER_FILES=str(tmp_path / "driver"))
    assert _extras(out) == [extras] and ("--inherit" in out) == inherit


def test_test_after_lab_adds_only_the_test_stamp(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".course-lab").touch()  # `make lab` has run
    out = _dry_run("venv", tmp_path)
    assert _extras(out) == ["lab,test,book"] and "touch" in out and ".course-test" in out
    assert "pip install" not in _dry_run("venv-lab", tmp_path)  # the learner stamp is up to date
    assert "--no-index --find-links wh" in _dry_run("venv", tmp_path, WHEELHOUSE="wh")  # offline path kept


def test_installs_write_no_bytecode_up_front(tmp_path):
    """Every pip install of `make lab` passes --no-compile: compiling every module of every package
    up front would add about 130 MB to the learner's environment (README, 'What make lab installs')."""
    out = _dry_run("venv-lab", tmp_path)
    installs = [line for line in out.splitlines() if "pip install" in line]
    assert len(installs) >= 2 and all("--no-compile" in line for line in installs), installs
