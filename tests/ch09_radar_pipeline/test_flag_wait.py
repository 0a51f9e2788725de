"""Chapter 9's flag design: the consumer's bookkeeping on a stand-in GPU whose stream really waits for the
flag (a thread blocked on the word stands in for the GPU's wait), the timeouts, the teardown that releases
queued waits, bad parameters, the driver's support check, and the views on a made-up recording."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time

import numpy as np
import pytest
from conftest import needs_gpu

from helpers.ch09_radar_pipeline import flag_wait
from helpers.core.errors import DeviceTimeoutError, InputError, InputTypeError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import driver_api
from helpers.models.radar import flagwait

BAD = (InputError, InputTypeError)


class FakeMemOps:
    """The GPU's flag operations on host memory. wait_geq blocks the launcher until the word reaches the
    value (GEQ, cyclic as on the GPU), so the copy behind it reads the slot only once the frame is there."""

    def __init__(self, *, wait=True, write=True, problem=None):
        self.do_wait, self.do_write, self.problem = wait, write, problem
        self.freed = self.allocated = 0
        self.writes: list[int] = []

    def support_problem(self):
        return self.problem

    @contextlib.contextmanager
    def words(self, count):
        arr = np.zeros(count, np.uint32)
        self.allocated += 1
        try:
            yield arr, arr.ctypes.data
        finally:
            self.freed += 1

    @contextlib.contextmanager
    def context(self):
        yield

    def wait_geq(self, stream_ptr, addr, value):
        word = ctypes.c_uint32.from_address(addr)
        deadline = time.monotonic() + 20
        while self.do_wait and ctypes.c_int32((word.value - value) & 0xFFFFFFFF).value < 0:
            assert time.monotonic() < deadline, "the stand-in GPU waited 20 s: nothing released the wait"
            time.sleep(1e-4)

    def write(self, stream_ptr, addr, value):
        self.writes.append(value)
        if self.do_write:
            ctypes.c_uint32.from_address(addr).value = value

    def idle(self, stream_ptr):
        return True


def _launchers() -> list:
    return [t for t in threading.enumerate() if t.name == "flag-launcher"]


@pytest.mark.parametrize("depth", [1, 3])
def test_flag_design_processes_every_frame_from_the_right_slot(fake_cupy_gpu, depth):
    ops = FakeMemOps()
    r = flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, period_s=30e-3, frames=20, depth=depth,
                                                       check_every=3, memops=ops))
    assert len(r.seq) + r.dropped == 20 and r.seq == sorted(r.seq)
    assert r.checked >= 5 and r.max_error < 1e-4
    assert r.design == "flag" and r.extra["depth"] == depth and r.extra["queued"] == 20
    assert fake_cupy_gpu.registered == {} and ops.freed == ops.allocated == 1
    assert ops.writes == list(range(1, 21))  # one completion per frame, in order
    assert not _launchers()


def test_a_wait_that_does_not_wait_is_caught_by_the_map_check(fake_cupy_gpu):
    # queued ahead without the flag, a frame's copy reads its slot before the card has written it
    r = flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, period_s=30e-3, frames=12, depth=3,
                                                       slots=3, check_every=1, memops=FakeMemOps(wait=False)))
    assert r.max_error > 1e-2


def test_a_gpu_that_never_completes_times_out_and_frees_everything(fake_cupy_gpu):
    ops = FakeMemOps(write=False)
    t0 = time.monotonic()
    with pytest.raises(DeviceTimeoutError, match="no progress"):
        flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, period_s=10e-3, frames=30, depth=2,
                                                       timeout_s=0.5, check_every=0, memops=ops))
    assert time.monotonic() - t0 < 15
    assert ops.freed == ops.allocated == 1 and fake_cupy_gpu.registered == {}
    assert not _launchers()


def test_teardown_releases_a_wait_for_a_frame_that_never_came(fake_cupy_gpu, monkeypatch):
    # the capture side fails right after frame 0 while the launcher is blocked in frame 1's wait (frames come
    # every 100 ms): teardown must set READY past it, else the launcher never stops and the run times out
    def failing(a, b):
        raise RuntimeError("event failed")

    monkeypatch.setattr(fake_cupy_gpu.cuda, "get_elapsed_time", failing)
    ops = FakeMemOps()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="event failed"):
        flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, period_s=0.1, frames=30, depth=2,
                                                       check_every=0, timeout_s=3.0, memops=ops))
    assert time.monotonic() - t0 < 2.5
    assert not _launchers() and ops.freed == 1 and fake_cupy_gpu.registered == {}


def test_a_failing_launch_stops_the_run(fake_cupy_gpu):
    class Failing(FakeMemOps):
        def write(self, stream_ptr, addr, value):
            super().write(stream_ptr, addr, value)
            if value == 2:
                raise RuntimeError("launch failed")

    ops = Failing()
    with pytest.raises(RuntimeError, match="launch failed"):
        flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, period_s=20e-3, frames=30, depth=2,
                                                       check_every=0, memops=ops))
    assert not _launchers() and ops.freed == 1 and fake_cupy_gpu.registered == {}


def test_a_launcher_that_fails_to_start_is_an_error_not_a_wait(fake_cupy_gpu):
    class NoContext(FakeMemOps):
        def context(self):
            raise RuntimeError("no context in this thread")

    ops = NoContext()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="no context"):
        flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=1 << 20, frames=10, check_every=0, memops=ops))
    assert time.monotonic() - t0 < 10 and ops.freed == 1 and fake_cupy_gpu.registered == {}


def test_unsupported_memory_operations_skip_with_the_reason(fake_cupy_gpu):
    with pytest.raises(SkipExperiment, match="cannot map pinned host memory"):
        flagwait.run_flag_pipeline(flagwait.FlagConfig(
            frames=10, memops=FakeMemOps(problem=driver_api.memop_unsupported(
                {"calls": {"cuStreamWaitValue32": True}, "CAN_MAP_HOST_MEMORY": 0}))))


def test_memop_support_reasons():
    ok = {"calls": dict.fromkeys(driver_api.MEMOP_CALLS, True), "CAN_MAP_HOST_MEMORY": 1,
          "CAN_USE_64_BIT_STREAM_MEM_OPS": 0, "CAN_USE_STREAM_WAIT_VALUE_NOR": 0}
    assert driver_api.memop_unsupported(ok) is None  # 32-bit GEQ needs neither NOR nor 64-bit operations
    lacking = dict(ok, calls=dict(ok["calls"], cuStreamWaitValue32=False))
    assert "cuStreamWaitValue32" in driver_api.memop_unsupported(lacking)
    assert "CAN_MAP_HOST_MEMORY" in driver_api.memop_unsupported(dict(ok, CAN_MAP_HOST_MEMORY=None))


@pytest.mark.parametrize("kw", [{"depth": 0}, {"depth": 9}, {"depth": True}, {"depth": 2.5}, {"depth": "3"},
                                {"frames": 0}, {"frame_bytes": 1000}, {"period_s": 0}, {"timeout_s": -1},
                                {"code": "queue_frame"}])
def test_bad_flag_config_is_refused(kw):
    with pytest.raises(BAD):
        flagwait.FlagConfig(**kw)


def test_run_takes_only_a_flag_config():
    with pytest.raises(InputError):
        flagwait.run_flag_pipeline({"depth": 3})


def test_mapped_words_refuses_a_bad_count():
    for bad in (0, 2000, True, 1.5):
        with pytest.raises(InputError):
            with driver_api.mapped_words(bad):  # refused before any driver call
                pass


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("kw", [{"depth": 0}, {"depth": 99}, {"depth": 1.5}, {"repeats": 1}, {"frames": 5},
                                {"frame_bytes": 4 << 20}])
def test_experiment_parameters_are_checked(monkeypatch, live, kw):
    from helpers import course

    ran = []
    monkeypatch.setattr(flag_wait, "run_flag_pipeline", lambda cfg: ran.append(cfg))
    monkeypatch.setattr(flag_wait, "run_pipeline", lambda cfg: ran.append(cfg))
    ctx = course.Context(Mode.LIVE if live else Mode.REPLAY, "test", gpu_name="Test GPU" if live else None,
                         reference_name="h100-pcie")
    with pytest.raises(BAD):
        ctx.get("radar.flag_wait", **kw)
    assert ran == []


# ---------------------------------------------------------------- the views, on a made-up recording

def _run(design, n, lat_ms, cpu_s, repeat):
    lat = np.rint(np.asarray(lat_ms) * 1e3).astype(int).tolist()
    return {"design": design, "frame_bytes": n, "period_s": 8e-3, "frames": len(lat), "latency_us": lat,
            "dropped": 0, "cpu_s": cpu_s, "wall_s": 1.0, "buffers": 1, "extra": {"repeat": repeat}}


def _evidence(flag_ms, reg_ms):
    runs = []
    for i in range(3):
        for n in flag_wait.SEED_SIZES:
            runs.append(_run("registered", n, [reg_ms + 0.01 * i] * 99 + [9.0], 0.05, i))
            runs.append(_run("pipelined", n, [reg_ms] * 100, 0.06, i))
            runs.append(_run("flag", n, [flag_ms + 0.01 * i] * 100, 0.02, i))
    data = {"runs": runs, "frames": 100, "repeats": 3, "depth": 3, "support": {}}
    return Evidence("radar.flag_wait", data, Mode.REPLAY, "a test machine", why="a test")


def test_verdicts_rank_only_beyond_the_spread():
    far = flag_wait.flag_verdicts(_evidence(1.0, 2.0))
    assert len(far) == 2 and "median: 1.010 ms against 2.010 ms, lower, beyond" in far[0]
    assert "Misses 0 vs 3" in far[0]  # the registered runs' 9 ms frame, once per repeat
    near = flag_wait.flag_verdicts(_evidence(2.0, 2.005))
    assert "median" in near[0] and "not ranked" in near[0].split(";")[0]


def test_rows_and_figure_carry_every_design_and_its_spread():
    ev = _evidence(1.0, 2.0)
    rows = flag_wait.flag_rows(ev)
    assert [r[0] for r in rows] == ["registered", "pipelined", "flag"] * 2
    flag4 = rows[2]
    assert flag4[2] == 3 and flag4[3] == "1.010 [1.000–1.020]" and flag4[7] == "200 [200–200]"
    fig = flag_wait.flag_figure(ev)
    assert len(fig.fig.data) == 6


# ---------------------------------------------------------------- live (GPU)

@needs_gpu
@pytest.mark.gpu
def test_live_flag_design_processes_frames_correctly():
    from helpers.measure import host_memory

    before = host_memory.pinned_bytes_of_process()
    r = flagwait.run_flag_pipeline(flagwait.FlagConfig(frame_bytes=4 << 20, period_s=8e-3, frames=80, depth=3,
                                                       check_every=7))
    assert len(r.seq) + r.dropped == 80
    assert r.checked >= 10 and r.max_error < 1e-4
    assert host_memory.pinned_bytes_of_process() - before < 1 << 20
    assert not _launchers()


def test_the_experiment_runs_every_design_at_both_sizes_in_each_repeat(monkeypatch):
    from helpers.core import experiments
    from helpers.models.radar.metrics import RunResult

    seen = []

    def fake_run(cfg):
        design = getattr(cfg, "design", "flag")
        seen.append((design, cfg.frame_bytes, cfg.frames, getattr(cfg, "depth", None)))
        return RunResult(design=design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=4, buffers=1,
                         frames=cfg.frames, latency_us=[1000] * cfg.frames, seq=list(range(cfg.frames)), dropped=0,
                         cpu_s=0.01, wall_s=1.0)

    class Host(contextlib.nullcontext):
        pass

    monkeypatch.setattr(flag_wait, "run_pipeline", fake_run)
    monkeypatch.setattr(flag_wait, "run_flag_pipeline", fake_run)
    monkeypatch.setattr(flag_wait, "CardHost", Host)
    monkeypatch.setattr(driver_api, "memop_support", lambda: {"CAN_MAP_HOST_MEMORY": 1})
    out = experiments.get("radar.flag_wait").run(False, frames=30, repeats=2, depth=4)
    one_round = [(d, n, 30, 4 if d == "flag" else None) for n in flag_wait.SEED_SIZES for d in flag_wait.COMPARED]
    assert seen == one_round * 2
    assert [r["extra"]["repeat"] for r in out["runs"]] == [0] * 6 + [1] * 6 and "seq" not in out["runs"][0]
    assert out["depth"] == 4 and out["repeats"] == 2 and out["support"] == {"CAN_MAP_HOST_MEMORY": 1}
    quick = experiments.get("radar.flag_wait").run(True)
    assert quick["frames"] == flag_wait.QUICK["frames"] and quick["repeats"] == flag_wait.QUICK["repeats"]
    ev = Evidence("radar.flag_wait", out, Mode.LIVE, "Test GPU", why="a test")
    assert len(flag_wait.flag_rows(ev)) == 6 and all("not ranked" in line for line in flag_wait.flag_verdicts(ev))
