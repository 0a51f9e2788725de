"""Chapter 1's replay path, against a reference file built here from real captured output
(strace summaries, maps lines and an ioctl trace taken on the course's H100): it renders every
figure and verdict once recorded, and fails with a clear message while not recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_reference

from helpers import course
from helpers.ch01_path_of_a_copy import cpu_time, diagrams, driver_maps, findings, ioctls, syscalls
from helpers.core import errors, evidence
from helpers.core.mode import Mode
from helpers.presentation import figures

DATA = Path(__file__).parent / "data"


def census_from_captures() -> dict:
    runs = []
    for n in (0, 10, 100, 1000, 0):
        raw = (DATA / f"strace_h100_census_n{n}.txt").read_text()
        counts = {k: vars(v) for k, v in syscalls.parse_summary(raw).items()}
        runs.append({"rounds": n, "counts": counts, "raw": raw, "child": {"data_ok": True}})
    return {"workload": "census", "nbytes": 1 << 20, "strace": "strace -- version 6.1", "runs": runs}


def maps_from_captures() -> dict:
    init = (DATA / "maps_h100_after_init.txt").read_text().splitlines()
    managed = (DATA / "maps_h100_after_managed.txt").read_text().splitlines()
    st = [("after import cupy (no CUDA call yet)", [], 1 << 30, 0),
          ("after CUDA initialisation (context, one allocation, one kernel)", init, 14 << 30, 13 << 30),
          ("after cudaHostAlloc of 67108864 bytes (pinned host memory)", init, (14 << 30) + (64 << 20), 13 << 30),
          ("after cudaMallocManaged of 67108864 bytes (unified memory)", managed, (14 << 30) + (128 << 20), 13 << 30)]
    return {"nbytes": 64 << 20, "stages": [{"stage": s, "lines": ln, "mapped_bytes": m, "reserved_noaccess_bytes": r}
                                           for s, ln, m, r in st]}


def cpu_runs(sched: str) -> dict:
    def run(kind, d, wall, user):
        return {"host_kind": kind, "direction": d, "nbytes": 1 << 28, "reps": 5, "wall": wall, "user": user,
                "sys": 0.0002, "thread_user": user, "thread_sys": 0.0002}
    spin = sched == "auto"
    return {"sched": sched, "set_flags_rc": 0, "runs": [
        run("pageable", "h2d", 0.19, 0.19), run("pageable", "d2h", 0.14, 0.14),
        run("pinned", "h2d", 0.025, 0.025 if spin else 0.0004), run("pinned", "d2h", 0.025, 0.025 if spin else 0.0003)]}


@pytest.fixture
def fake_reference(tmp_path, monkeypatch, no_gpu):
    write_reference(tmp_path, only_added=True, chapter=1, add={
        "path.syscall_census": {"gpu": census_from_captures()},
        "path.driver_maps": maps_from_captures(),
        "path.cpu_time": {"nbytes": 1 << 28, "reps": 5, "scheds": [cpu_runs("auto"), cpu_runs("blocking")]},
        "path.ioctl_trace": {"rounds": 10, "markers": 0, "phases": {},
                             "raw": (DATA / "strace_h100_ioctl_y_n10.txt").read_text()},
    })
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    return tmp_path


def test_every_chapter1_figure_and_verdict_renders_in_replay(fake_reference, monkeypatch):
    monkeypatch.setattr(syscalls, "census", lambda *a, **k: pytest.fail("must not run live"))
    ctx = course.start("test", quiet=True)
    assert not ctx.live
    census = ctx.get("path.syscall_census")
    assert census.mode is Mode.REPLAY and "H100" in census.source
    g = census.data["gpu"]
    maps = ctx.get("path.driver_maps", nbytes=64 << 20)
    cpu = ctx.get("path.cpu_time")
    t = ioctls.from_data(ctx.get("path.ioctl_trace", rounds=100).data)
    figs = [syscalls.figure(census, "gpu"), cpu_time.figure(cpu)]
    for f in figs:
        assert isinstance(f, figures.CourseFigure) and "text/html" in f._repr_mimebundle_()
    assert figs[1].modes == [Mode.REPLAY]
    pic = diagrams.path_diagram(census, maps)
    assert "REPLAY" in pic.description and "ioctl calls at start-up" in pic.description
    assert "mappings of /dev/nvidia0" in pic.description and "REPLAY" in pic.svg()
    assert "measured" not in diagrams.path_diagram().description.lower()
    assert "no ioctl at all" in ioctls.loop_summary(t)
    assert len(driver_maps.stage_changes(maps.data["stages"])) == 3
    v = findings.verdicts(g, maps.data, cpu.data, [])
    assert v[0].verdict.startswith("refuted") and v[1].verdict.startswith("supported")
    assert v[4].verdict.startswith("does not hold")


def test_missing_recording_fails_with_a_clear_message(fake_reference):
    write_reference(fake_reference, drop=("path.driver_maps",), base=fake_reference / "h100-pcie")
    ctx = course.start("test", quiet=True)
    with pytest.raises(errors.ReferenceDataError,
                       match=r"no recording of 'path.driver_maps'.*helpers.record --only path.driver_maps"):
        ctx.get("path.driver_maps")


def _live_ctx() -> course.Context:
    return course.Context(Mode.LIVE, "test", gpu_name="Test GPU", reference_name="h100-pcie")


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("eid, params, exc", [
    ("path.syscall_census", {"rounds": [-5]}, errors.InputError),
    ("path.syscall_census", {"rounds": []}, errors.InputError),
    ("path.syscall_census", {"rounds": 10}, errors.InputTypeError),
    ("path.ioctl_trace", {"rounds": True}, errors.InputTypeError),
    ("path.driver_maps", {"nbytes": 100}, errors.InputError),
])
def test_bad_parameters_raise_in_both_modes_and_never_replay(fake_reference, monkeypatch, live, eid, params, exc):
    monkeypatch.setattr(syscalls, "census", lambda *a, **k: pytest.fail("must not run"))
    ctx = _live_ctx() if live else course.start("test", quiet=True)
    with pytest.raises(exc, match=eid):
        ctx.get(eid, **params)


def test_without_strace_the_census_replays_and_says_why(fake_reference, monkeypatch):
    """A live GPU but no strace: the evidence contract replays the census, naming the fix."""
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    monkeypatch.setattr(syscalls, "census", lambda *a, **k: pytest.fail("must not run without strace"))
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    got = _live_ctx().get("path.syscall_census")
    assert got.mode is Mode.REPLAY and "strace is not installed" in got.why and "COURSE_STRACE" in got.why


def test_with_strace_and_a_gpu_the_census_runs_the_recorders_function(fake_reference, monkeypatch, tmp_path):
    fake = tmp_path / "strace"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("COURSE_STRACE", str(fake))
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    seen = []
    monkeypatch.setattr(syscalls, "census", lambda ns, **k: seen.append((tuple(ns), k.get("workload"))) or {"n": 1})
    got = _live_ctx().get("path.syscall_census", rounds=[3, 30])
    assert got.mode is Mode.LIVE and got.data == {"gpu": {"n": 1}, "writes": {"n": 1}}
    assert seen == [((3, 30), None), ((3, 30), "writes")]
