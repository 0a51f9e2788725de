"""Chapter 1's replay path, against a reference file built here from real captured output
(strace summaries, maps lines and an ioctl trace taken on the course's H100): it renders every
figure and verdict once recorded, and fails with a clear message while not recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_reference

from helpers import course
from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, ioctls, syscalls, view
from helpers.core import errors, figures
from helpers.core.mode import Mode

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


def test_every_chapter1_figure_and_verdict_renders_in_replay(fake_reference):
    ctx = course.start("test", quiet=True)
    assert not ctx.live
    census = view.obtain(ctx, "path.syscall_census", lambda: pytest.fail("must not run live"))
    assert census.mode is Mode.REPLAY and "H100" in census.source
    g = census.data["gpu"]
    maps = view.obtain(ctx, "path.driver_maps").data
    cpu = view.obtain(ctx, "path.cpu_time").data
    t = ioctls.from_data(view.obtain(ctx, "path.ioctl_trace").data)
    figs = [syscalls.figure(g, census.mode, census.source), cpu_time.figure(cpu, Mode.REPLAY, "ref"),
            view.diagram(g, census.mode, census.source)]
    for f in figs:
        assert isinstance(f, figures.CourseFigure) and "text/html" in f._repr_mimebundle_()
    assert figs[2].modes == [Mode.SIMULATED, Mode.REPLAY]
    assert "no ioctl at all" in ioctls.loop_summary(t)
    assert len(driver_maps.stage_changes(maps["stages"])) == 3
    v = view.verdicts(g, maps, cpu, [])
    assert v[0].verdict.startswith("refuted") and v[1].verdict.startswith("supported")
    assert v[4].verdict.startswith("does not hold")


def test_missing_recording_fails_with_a_clear_message(fake_reference):
    write_reference(fake_reference, drop=("path.driver_maps",), base=fake_reference / "h100-pcie.json")
    ctx = course.start("test", quiet=True)
    with pytest.raises(errors.ReferenceDataError, match="path.driver_maps.*re-record"):
        view.obtain(ctx, "path.driver_maps")


def test_cpu_only_census_runs_live_without_a_gpu(fake_reference, monkeypatch, capsys):
    ctx = course.start("test", quiet=True)
    got = view.obtain(ctx, "path.syscall_census", lambda: {"writes": "measured"}, needs_gpu=False)
    assert got.mode is Mode.LIVE and got.data == {"writes": "measured"}
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    got = view.obtain(ctx, "path.syscall_census", lambda: syscalls.census(workload="writes"), needs_gpu=False)
    assert got.mode is Mode.REPLAY  # strace missing: said so, then replayed
    out = capsys.readouterr().out
    assert "apt-get install strace" in out and "replaying" in out
