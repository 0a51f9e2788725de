"""pyproject.toml and environment.yml must name the same packages at the same versions."""

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _name(s: str) -> str:
    return re.sub(r"[-_.]+", "-", s).lower()


def pyproject_pins(extras=("lab", "test", "book", "cuda12", "hub")) -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"]) + [r for e in extras for r in meta["optional-dependencies"][e]]
    pins = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[a-z0-9,]+\])?==([A-Za-z0-9_.]+)", r.strip())
        assert m, f"pyproject requirement {r!r} is not an exact pin"
        pins[_name(m.group(1))] = m.group(2)
    return pins


def environment_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s+([A-Za-z0-9_.-]+)\s*(?:=|==)\s*([A-Za-z0-9_.]+)\s*$", line)
        if m and m.group(1) != "python":
            pins[_name(m.group(1))] = m.group(2)
    return pins


def test_same_packages_and_versions():
    py, env = pyproject_pins(), environment_pins()
    assert py == env, (f"only in pyproject: {sorted(set(py) - set(env))}; only in environment.yml: "
                       f"{sorted(set(env) - set(py))}; differing: "
                       f"{ {k: (py[k], env[k]) for k in set(py) & set(env) if py[k] != env[k]} }")


def test_numpy_below_2_5_with_reason():
    v = tuple(int(x) for x in pyproject_pins()["numpy"].split(".")[:2])
    assert v < (2, 5), "numba-cuda 0.30 cannot compile kernels under numpy 2.5"
    for f in ("pyproject.toml", "environment.yml"):
        assert "row_stack" in (ROOT / f).read_text(), f"{f} must say why numpy is pinned below 2.5"


@pytest.mark.parametrize("extra", ["cuda12", "cuda13"])
def test_cupy_extras_exist(extra):
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("cupy-cuda") for r in meta["optional-dependencies"][extra])


def test_cuda13_brings_cupti_and_what_its_import_needs():
    """CUPTI (helpers/measure/cupti_trace.py) comes with the CUDA 13 extra: the bindings, libcupti's
    wheel and pyelftools, without which `import cupti` fails."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {r.split("==")[0].split("[")[0] for r in meta["optional-dependencies"]["cuda13"]}
    assert {"cupti-python", "nvidia-cuda-cupti", "pyelftools"} <= names
