"""Live figures say when other processes share the GPU (a class on one hub node)."""

from __future__ import annotations

import os
import stat

import pytest

from helpers import course
from helpers.core import evidence, experiments, gpu
from helpers.core.mode import Mode


def _smi(tmp_path, body: str) -> str:
    p = tmp_path / "nvidia-smi"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


@pytest.fixture
def live_demo(monkeypatch):
    exp = experiments.Experiment("demo.live", 0, "demo", lambda quick: {"x": 1})
    monkeypatch.setattr(experiments, "discover", lambda: {"demo.live": exp})
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    return course.Context(Mode.LIVE, "test", gpu_name="Test GPU", reference_name="h100-pcie")


def test_other_contexts_on_the_gpu_are_named_in_the_source(tmp_path, monkeypatch, live_demo):
    monkeypatch.setenv("COURSE_NVIDIA_SMI", _smi(tmp_path, f"echo 111; echo 222; echo {os.getpid()}"))
    ev = live_demo.get("demo.live")
    assert ev.source == "Test GPU (contended: 2 other processes)" and ev.provenance["other_processes"] == 2
    assert "contended: 2 other processes" in ev.caption("Bandwidth")


def test_an_unshared_gpu_and_an_unknown_count_say_nothing(tmp_path, monkeypatch, live_demo):
    monkeypatch.setenv("COURSE_NVIDIA_SMI", _smi(tmp_path, f"echo {os.getpid()}"))
    assert live_demo.get("demo.live").source == "Test GPU"
    (tmp_path / "failing").mkdir()
    monkeypatch.setenv("COURSE_NVIDIA_SMI", _smi(tmp_path / "failing", "exit 9"))
    ev = live_demo.get("demo.live")
    assert ev.source == "Test GPU" and ev.provenance["other_processes"] is None


def test_contention_note_wording():
    assert gpu.contention_note(None) == gpu.contention_note(0) == ""
    assert gpu.contention_note(1) == "contended: 1 other process"
