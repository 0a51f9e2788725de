"""The hub deployment files parse and say what book/jupyterhub.md says they do (no cluster here)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = yaml.safe_load((ROOT / "deploy" / "z2jh" / "values.yaml").read_text())


def _profiles() -> dict:
    return {p["slug"]: p for p in VALUES["singleuser"]["profileList"]}


def test_a_gpu_and_a_cpu_profile_with_one_default():
    profiles = _profiles()
    assert set(profiles) == {"gpu", "cpu"} and [s for s, p in profiles.items() if p.get("default")] == ["cpu"]
    gpu = profiles["gpu"]["kubespawner_override"]
    assert gpu["extra_resource_limits"] == {"nvidia.com/gpu": "1"} and gpu["environment"]["COURSE_MODE"] == "auto"
    cpu = profiles["cpu"]["kubespawner_override"]
    assert "extra_resource_limits" not in cpu and cpu["environment"] == {"COURSE_MODE": "replay",
                                                                          "CUDA_VISIBLE_DEVICES": ""}


def test_every_server_mounts_the_exchange_where_nbgrader_looks():
    su = VALUES["singleuser"]
    mount = su["storage"]["extraVolumeMounts"][0]
    assert mount["mountPath"] == "/srv/nbgrader/exchange"
    assert su["storage"]["extraVolumes"][0]["name"] == mount["name"]
    config = su["extraFiles"]["nbgrader-config"]["stringData"]
    assert f'c.Exchange.root = "{mount["mountPath"]}"' in config


def test_the_course_variables_the_profiles_set_are_the_course_s_own():
    from helpers.core import config

    for p in _profiles().values():
        for var in p["kubespawner_override"].get("environment", {}):
            assert var in config.VARIABLES or var == "CUDA_VISIBLE_DEVICES", var
        if "COURSE_MODE" in p["kubespawner_override"].get("environment", {}):
            assert p["kubespawner_override"]["environment"]["COURSE_MODE"] in config.MODES


def test_the_image_recipe_is_repo2docker_s_and_the_page_names_the_files():
    assert (ROOT / "environment.yml").is_file() and (ROOT / "postBuild").is_file()
    assert "pip install --no-deps -e ." in (ROOT / "postBuild").read_text()
    page = (ROOT / "book" / "jupyterhub.md").read_text()
    for name in ("deploy/z2jh/values.yaml", "environment.yml", "postBuild", "/srv/nbgrader/exchange",
                 "python -m tools.hub.atlas build", "python -m tools.matrix.runner load"):
        assert name in page, name
    assert "book/jupyterhub" in (ROOT / "book" / "_toc.yml").read_text()


def _helm_version(text: str) -> str:
    import re

    found = re.findall(r"helm upgrade --install course jupyterhub/jupyterhub --version (\S+) -f deploy/z2jh/values.yaml",
                       text)
    assert found, "no pinned `helm upgrade --install ... --version X` command"
    assert len(set(found)) == 1, found
    return found[0]


def test_the_chart_version_is_pinned_where_the_deploy_file_and_the_page_name_it():
    """Issue 39: the deploy files named no chart version, so `helm upgrade` took whatever was newest."""
    import re

    values_text = (ROOT / "deploy" / "z2jh" / "values.yaml").read_text()
    chart = _helm_version(values_text)
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart), chart
    assert _helm_version((ROOT / "book" / "jupyterhub.md").read_text()) == chart


def test_the_image_s_jupyterhub_is_a_security_release_of_the_chart_s_line():
    """The single-user image's jupyterhub (environment.yml = pyproject.toml, tests/site/test_environment.py)
    is at least 5.4.4 (CVE-2026-33709) and of the same minor line as the hub the pinned chart runs."""
    import re
    import tomllib

    values_text = (ROOT / "deploy" / "z2jh" / "values.yaml").read_text()
    chart = _helm_version(values_text)
    m = re.search(rf"Chart {re.escape(chart)} runs JupyterHub (\d+)\.(\d+)\.(\d+)", values_text)
    assert m, "values.yaml must say which JupyterHub its chart version runs"
    hub = tuple(int(x) for x in m.groups())
    pins = [r for extra in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"].values()
            for r in extra if r.startswith("jupyterhub==")]
    assert len(set(pins)) == 1, pins
    image = tuple(int(x) for x in pins[0].split("==")[1].split("."))
    assert image >= (5, 4, 4) and hub >= (5, 4, 4)
    assert image[:2] == hub[:2], f"image's jupyterhub {image} and the chart's hub {hub} differ in their minor line"
