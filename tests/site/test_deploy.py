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
                 "tools/atlas.py", "matrix.py load"):
        assert name in page, name
    assert "book/jupyterhub" in (ROOT / "book" / "_toc.yml").read_text()
