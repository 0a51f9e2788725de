"""Chapter 9: the capture ring and its drops (CPU-only consumer), process lifetime, the NumPy
reference, the discrete-event model, input checks, the radar experiments through ctx.get (their
declared parameters, replay, and the live path on a stand-in); the live pipeline on a real GPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_gpu

from helpers import course
from helpers.ch09_radar_pipeline import breaking, diagrams, findings, pipeline_runs
from helpers.core import errors, evidence, experiments
from helpers.core.errors import CourseError, InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.models.radar import card, designs, dsp, metrics, pipeline, ring, simulator
from helpers.presentation.figures import CourseFigure

DESIGN_IDS = tuple(f"radar.{d}" for d in designs.DESIGNS)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------- the ring

def test_fast_consumer_gets_every_frame_in_order():
    # a ring as deep as the card allows, so a consumer that a loaded machine stalls for a while still
    # loses nothing (the slots are reused: 100 frames through 64 of them)
    r = pipeline.run_cpu_consumer(1 << 20, 4e-3, 100, slots=card.MAX_SLOTS)
    assert r.dropped == 0
    assert r.seq == list(range(100))
    assert all(x >= 0 for x in r.latency_us)


def test_slow_consumer_loses_frames_and_counts_them():
    # each frame takes 2.5 periods to process: the card must drop, and nothing may go missing
    # unaccounted: taken + dropped = produced
    r = pipeline.run_cpu_consumer(1 << 20, 2e-3, 80, slots=2, work_s=5e-3)
    assert r.dropped > 0
    assert len(r.seq) + r.dropped == 80
    assert r.seq == sorted(r.seq) and len(set(r.seq)) == len(r.seq)
    assert np.diff(r.seq).max() > 1  # the gaps are the dropped frames


def test_consumer_that_never_releases_keeps_only_the_first_slots():
    r = pipeline.run_cpu_consumer(1 << 20, 2e-3, 30, slots=3, hold=1000, timeout_s=2)
    assert r.seq == [0, 1, 2]
    assert r.dropped == 27


def test_frames_carry_the_data_the_consumer_expects():
    # a slot per frame: the card never has to drop one, however late a loaded machine lets us read
    with ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, slots=8, frames=8, seed=5, variants=4) as c:
        got = []
        while c.wait_frame(5.0):
            s, q, _ = c.take()
            got.append((q, np.array(c.data[s])))
            c.release()
    assert [q for q, _ in got] == list(range(8))
    for q, x in got:
        np.testing.assert_array_equal(x, dsp.synth_frame(1 << 20, 5, q % 4).ravel())


def test_release_without_take_is_an_error():
    with ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, slots=2, frames=2) as c:
        with pytest.raises(designs.CaptureCardError, match="release"):
            c.release()


def test_close_stops_the_producer_and_frees_the_shared_memory():
    c = ring.CaptureCard(frame_bytes=1 << 20, period_s=5e-3, frames=100_000).start()
    pid, name = c.pid, c.shm.name
    assert _alive(pid)
    c.close()
    assert _wait_gone(pid, 3.0)
    assert not os.path.exists(f"/dev/shm/{name}")


# ---------------------------------------------------------------- a card process shared by several runs

def _drain(c) -> list[tuple[int, np.ndarray]]:
    got = []
    while c.wait_frame(5.0):
        s, q, _ = c.take()
        got.append((q, np.array(c.data[s])))
        c.release()
    return got


def test_a_host_fills_one_ring_after_another_with_the_right_frames():
    with ring.CardHost() as host:
        pid = host.pid
        for seed, n, frames in ((5, 1 << 20, 6), (7, 2 << 20, 5), (5, 1 << 20, 3)):
            with ring.CaptureCard(frame_bytes=n, period_s=3e-3, slots=frames, frames=frames, seed=seed, variants=4,
                                  host=host) as c:  # a slot per frame: nothing is dropped on a loaded machine
                assert c.pid == pid
                name = c.shm.name
                got = _drain(c)
                assert c.dropped == 0
            assert [q for q, _ in got] == list(range(frames))
            for q, x in got:
                np.testing.assert_array_equal(x, dsp.synth_frame(n, seed, q % 4).ravel())
            assert host.alive(), "closing a card must not stop a shared host"
            assert not os.path.exists(f"/dev/shm/{name}")
    assert _wait_gone(pid, 3.0), "closing the host stops its process"


def test_closing_a_card_mid_acquisition_frees_the_host_for_the_next():
    with ring.CardHost() as host:
        c = ring.CaptureCard(frame_bytes=1 << 20, period_s=5e-3, frames=100_000, host=host).start()
        c.wait_frame(5.0)
        c.close()  # the host stops producing into this ring and lets go of it
        assert host.alive(), "a host that let go of the ring within DETACH_TIMEOUT_S is kept, not stopped"
        with ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, frames=4, host=host) as c2:
            assert [q for q, _ in _drain(c2)] == [0, 1, 2, 3]


def test_a_host_skips_a_ring_that_is_already_gone():
    with ring.CardHost() as host:
        host.serve("course-radar-no-such-ring")  # closed before the card got to it
        with ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, frames=3, host=host) as c:
            assert [q for q, _ in _drain(c)] == [0, 1, 2]
        assert host.alive()


def test_a_dead_host_is_an_error_not_a_hang():
    host = ring.CardHost()
    os.kill(host.pid, signal.SIGKILL)
    assert _wait_gone(host.pid, 5.0)
    with pytest.raises(designs.CaptureCardError, match="capture-card process") as err:
        ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, frames=4, host=host, start_timeout_s=600).start()
    assert "within" not in str(err.value), "the dead process is seen at once, not after the start timeout"
    assert _rings_of(os.getpid()) == [], "the failed card's ring is unlinked"
    host.close()


def test_the_experiments_of_a_page_share_one_host_and_finish_stops_it():
    """shared_host gives every experiment of a process the same capture-card process (one start per page,
    not one per experiment); course.finish() stops it (no child left for the leak check); a failed series
    stops it too, and the next series starts a fresh one."""
    from tools.matrix import leakprobe

    ring.stop_shared_host()
    with ring.shared_host() as first:
        with ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, frames=3, host=first) as c:
            assert [q for q, _ in _drain(c)] == [0, 1, 2]
    with ring.shared_host() as second:
        assert second is first and second.alive()
        pid = second.pid
    assert pid in {c["pid"] for c in leakprobe.children()}
    course.finish(quiet=True)
    assert _wait_gone(pid, 3.0) and pid not in {c["pid"] for c in leakprobe.children()}
    with pytest.raises(RuntimeError, match="a failing run"), ring.shared_host() as third:
        assert third is not first and third.alive()
        pid = third.pid
        raise RuntimeError("a failing run")
    assert _wait_gone(pid, 3.0), "a series that failed stops the shared host"
    with ring.shared_host() as fourth:
        assert fourth.alive() and fourth.pid != pid
        pid = fourth.pid
    ring.stop_shared_host()
    assert _wait_gone(pid, 3.0) and not fourth.alive()


def test_breaking_point_warms_up_only_when_the_frame_size_changes(monkeypatch):
    """radar.breaking_point makes the FFT plans and kernels (the warm-up) before a run only when the run
    before it had another frame size (or there was none): the runs themselves, their number and their
    settings are those of the ladder, as before."""
    import contextlib

    cfgs = []

    def fake_run(cfg):
        cfgs.append(cfg)
        return metrics.RunResult(design=cfg.design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=4,
                                 buffers=1, frames=cfg.frames, latency_us=[1] * cfg.frames,
                                 seq=list(range(cfg.frames)), dropped=0, cpu_s=0.0, wall_s=0.0)

    monkeypatch.setattr(pipeline_runs, "run_pipeline", fake_run)
    monkeypatch.setattr(pipeline_runs, "shared_host", lambda: contextlib.nullcontext(None))
    data = pipeline_runs.breaking_point_experiment(quick=False)
    assert len(cfgs) == len(data["sweep"]) + len(data["realtime"])
    assert len(data["sweep"]) == len(designs.DESIGNS) * len(breaking.LADDER)  # every rung clear: one run each
    sizes = [c.frame_bytes for c in cfgs]
    assert [c.warm_up for c in cfgs] == [i == 0 or sizes[i - 1] != n for i, n in enumerate(sizes)]
    assert 0 < sum(c.warm_up for c in cfgs) < len(cfgs)


def test_host_must_be_a_card_host():
    with pytest.raises(InputError, match="CardHost"):
        ring.CaptureCard(frame_bytes=1 << 20, period_s=3e-3, host="card")


def _rings_of(pid: int) -> list[str]:
    return sorted(str(p) for p in Path("/dev/shm").glob(f"course-radar-{pid}-*"))


# ---------------------------------------------------------------- lifetime of the child

_PARENT = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, {root!r})

    from helpers.models.radar import ring

    host = ring.CardHost() if {shared!r} else None
    c = ring.CaptureCard(frame_bytes=1 << 20, period_s=5e-3, frames=1_000_000, host=host).start()
    print(json.dumps({{"pid": c.pid, "shm": c.shm.name}}), flush=True)
    {tail}
""")


def _start_parent(tail: str, shared: bool = False) -> tuple[subprocess.Popen, dict]:
    p = subprocess.Popen([sys.executable, "-c", _PARENT.format(root=ROOT, tail=tail, shared=shared)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return p, json.loads(line)


@pytest.mark.parametrize("shared", [False, True], ids=["own process", "shared host"])
def test_producer_dies_with_a_killed_parent(shared):
    p, info = _start_parent("time.sleep(60)", shared)
    assert _alive(info["pid"])
    p.kill()  # SIGKILL: no atexit, no finally in the parent
    p.wait(10)
    assert _wait_gone(info["pid"]), "the capture-card process outlived its parent"
    # a SIGKILLed parent cannot unlink its ring: the card does, on its way out
    assert not os.path.exists(f"/dev/shm/{info['shm']}"), "the ring outlived the killed parent"


def test_interrupt_leaves_no_child_and_no_shared_memory():
    p, info = _start_parent("""
try:
    c.wait_frame(5.0); c.take(); c.release()
    print("consuming", flush=True)
    while True:
        c.wait_frame(5.0); c.take(); c.release()
finally:
    c.close()
""")
    assert p.stdout.readline().strip() == "consuming", p.stderr.read()  # in its loop: now interrupt it
    p.send_signal(signal.SIGINT)
    p.wait(10)
    assert _wait_gone(info["pid"], 3.0)
    assert not os.path.exists(f"/dev/shm/{info['shm']}")


@pytest.mark.parametrize("shared", [False, True], ids=["own process", "shared host"])
def test_parent_exit_without_close_stops_the_child(shared):
    p, info = _start_parent("sys.exit(0)", shared)
    p.wait(10)
    assert _wait_gone(info["pid"], 5.0)
    assert not os.path.exists(f"/dev/shm/{info['shm']}")


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("n, exc", [(0, designs.RadarInputError), (-4096, designs.RadarInputError),
                                    (12345, designs.RadarInputError), (8192 + 8, designs.RadarInputError),
                                    (1 << 40, designs.RadarInputError), (2.5, InputTypeError), ("4MB", InputTypeError),
                                    (True, InputTypeError), (None, InputTypeError)])
def test_bad_frame_size_is_refused(n, exc):
    with pytest.raises(exc, match="frame size"):
        designs.check_frame_bytes(n)


@pytest.mark.parametrize("p, exc", [(0, InputError), (-8e-3, InputError), (float("nan"), InputError),
                                    (float("inf"), InputError), (1e-6, designs.RadarInputError),
                                    (5.0, designs.RadarInputError), ("fast", InputTypeError), (None, InputTypeError),
                                    (True, InputTypeError)])
def test_bad_rate_is_refused(p, exc):
    with pytest.raises(exc, match="period"):
        ring.CaptureCard(frame_bytes=4 << 20, period_s=p)


@pytest.mark.parametrize("slots, exc", [(0, InputError), (-1, InputError), (65, InputError), (10**6, InputError),
                                        (2.0, InputTypeError), (True, InputTypeError)])
def test_bad_slot_count_is_refused(slots, exc):
    with pytest.raises(exc, match="slots"):
        ring.CaptureCard(frame_bytes=4 << 20, period_s=8e-3, slots=slots)


@pytest.mark.parametrize("buffers", [0, -2, 9, 10**9])
def test_bad_buffer_count_is_refused_by_the_model(buffers):
    p = _params()
    with pytest.raises(InputError, match="buffers"):
        simulator.simulate(p, "pipelined", 4 << 20, 8e-3, 10, buffers=buffers)


def test_ring_bigger_than_memory_is_refused(monkeypatch):
    from helpers.measure import host_memory
    monkeypatch.setattr(host_memory, "available_host_bytes", lambda *a: 1 << 30)
    with pytest.raises(designs.RadarInputError, match="quarter"):
        ring.CaptureCard(frame_bytes=64 << 20, period_s=8e-3, slots=8)


def test_unknown_design_is_refused():
    with pytest.raises(designs.RadarInputError, match="design"):
        simulator.simulate(_params(), "zerocopy", 4 << 20, 8e-3, 10)


def test_errors_are_course_errors():
    assert issubclass(designs.RadarInputError, InputError) and issubclass(designs.RadarInputError, CourseError)
    assert not issubclass(designs.CaptureCardError, InputError)


# ---------------------------------------------------------------- the NumPy reference

def test_float32_map_matches_float64_reference():
    x = dsp.synth_frame(1 << 20, 3, 1)
    got = dsp.doppler_map(np, x, dsp.matched_filter(np))
    assert got.dtype == np.float32 and got.shape == x.shape
    assert dsp.map_error(got, dsp.reference_map(x)) < 1e-4


def test_reference_finds_a_single_target_where_it_was_put():
    pulses, ns = dsp.frame_shape(1 << 20)  # 128 pulses
    c = card.chirp()
    x = np.zeros((pulses, ns), np.complex64)
    rbin, dop_bin = 300, 16  # doppler 16/128 cycles per pulse
    x[:, rbin:rbin + c.size] = c[None, :] * np.exp(2j * np.pi * dop_bin / pulses * np.arange(pulses))[:, None]
    m = dsp.reference_map(x)
    d, r = np.unravel_index(np.argmax(m), m.shape)
    assert r == rbin and d == pulses // 2 + dop_bin


def test_map_error_sees_a_wrong_map():
    x = dsp.synth_frame(1 << 20, 3, 0)
    ref = dsp.reference_map(x)
    assert dsp.map_error(ref, ref) == 0
    assert dsp.map_error(np.fft.ifftshift(ref, axes=0), ref) > 0.1  # forgot the fftshift
    assert dsp.map_error(ref[:, :10], ref) == float("inf")


def test_summarize_counts_misses_against_the_period():
    s = metrics.summarize([1000, 7999, 8000, 8001, 20000], 8e-3, dropped=2, frames=7)
    assert s["misses"] == 2 and s["dropped"] == 2 and s["max_ms"] == 20.0 and s["p50_ms"] == 8.0


# ---------------------------------------------------------------- the model

def _params(**kw) -> simulator.MachineParams:
    base = dict(pinned_t0_s=10e-6, pinned_Bps=25e9, pageable_t0_s=10e-6, pageable_Bps=5e9, memcpy_Bps=8e9,
                kernel_s_per_byte=2e-11, kernel_t0_s=20e-6, overhead_s=50e-6)
    base.update(kw)
    return simulator.MachineParams(**base)


def test_model_latency_is_the_sum_of_the_steps_when_idle():
    p = _params()
    n = 4 << 20
    r = simulator.simulate(p, "registered", n, 8e-3, 50)
    want = p.copy_s(n, True) + p.kernel_s(n) + p.overhead_s
    assert r["dropped"] == 0 and r["summary"]["misses"] == 0
    assert abs(r["latency_us"][0] - want * 1e6) <= 1
    s = simulator.simulate(p, "staged", n, 8e-3, 50)
    assert abs(s["latency_us"][0] - (want + n / p.memcpy_Bps) * 1e6) <= 1


def test_model_queues_then_drops_when_service_exceeds_the_period():
    p = _params(kernel_s_per_byte=3e-9)  # ~12.6 ms per 4 MiB frame against an 8 ms period
    r = simulator.simulate(p, "registered", 4 << 20, 8e-3, 200, slots=4)
    assert r["dropped"] > 0 and r["summary"]["misses"] > 0
    assert len(r["latency_us"]) + r["dropped"] == 200
    more = simulator.simulate(p, "registered", 4 << 20, 8e-3, 200, slots=16)
    assert more["summary"]["max_ms"] > r["summary"]["max_ms"]  # a deeper ring trades drops for latency


def test_pipelining_helps_only_when_copy_and_compute_overlap():
    # copy 5 ms + kernel 5 ms per frame, 8 ms period: serial falls further behind every frame,
    # pipelined keeps up with a constant 10 ms latency (one period of extra delay, as in the thread)
    n = 4 << 20
    p = _params(pinned_t0_s=0, pinned_Bps=n / 5e-3, kernel_t0_s=5e-3, kernel_s_per_byte=0, overhead_s=0)
    serial = simulator.simulate(p, "registered", n, 8e-3, 100, slots=64)
    piped = simulator.simulate(p, "pipelined", n, 8e-3, 100, slots=64, buffers=2)
    assert serial["summary"]["misses"] > 90 and serial["summary"]["max_ms"] > 100
    assert piped["dropped"] == 0
    assert abs(piped["summary"]["max_ms"] - 10.0) < 0.01  # latency = copy + kernel, throughput = 1/8 ms
    assert abs(piped["summary"]["p50_ms"] - 10.0) < 0.01


def test_model_pageable_copy_is_slower_than_pinned():
    p = _params()
    a = simulator.simulate(p, "pageable", 16 << 20, 8e-3, 20)["summary"]["p50_ms"]
    b = simulator.simulate(p, "registered", 16 << 20, 8e-3, 20)["summary"]["p50_ms"]
    assert a > b


def test_model_jitter_is_seeded():
    p = _params()
    a = simulator.simulate(p, "staged", 4 << 20, 8e-3, 100, jitter=0.3, seed=1)["latency_us"]
    b = simulator.simulate(p, "staged", 4 << 20, 8e-3, 100, jitter=0.3, seed=1)["latency_us"]
    c = simulator.simulate(p, "staged", 4 << 20, 8e-3, 100, jitter=0.3, seed=2)["latency_us"]
    assert a == b and a != c


def test_fit_t0_bw_recovers_a_line():
    n = np.logspace(16, 28, 13, base=2)
    t0, bw = simulator.fit_t0_bw(n, 7e-6 + n / 20e9)
    assert abs(t0 - 7e-6) < 1e-7 and abs(bw / 20e9 - 1) < 1e-3


def test_machine_params_and_verdicts_from_a_fake_recording():
    """Evidence shaped like the recorder's, built from the model (simulated data)."""
    n = [1 << k for k in range(12, 27)]
    sweep = Evidence("transfers.pinned_vs_pageable", {"series": [
        {"direction": "h2d", "host_kind": "pinned", "nbytes": n, "median_s": [8e-6 + x / 25e9 for x in n]},
        {"direction": "h2d", "host_kind": "pageable", "nbytes": n, "median_s": [9e-6 + x / 6e9 for x in n]}]},
        Mode.REPLAY, "fake", why="a test")
    evs = []
    for d in designs.DESIGNS:
        runs = []
        for fb, per in designs.SEED_RATES:
            lat = [300 + fb // 40000] * 50 if d != "pageable" or fb < (8 << 20) else [9000] * 50
            runs.append({"design": d, "frame_bytes": fb, "period_s": per, "frames": 50, "buffers": 1,
                         "latency_us": lat, "seq": list(range(50)), "dropped": 0, "cpu_s": 0.1,
                         "wall_s": 1.0, "copy_us_p50": fb / 25e3, "kernel_us_p50": 20 + fb / 1e5,
                         "memcpy_us_p50": fb / 8e3 if d == "staged" else None})
        evs.append(Evidence(f"radar.{d}", {"runs": runs}, Mode.REPLAY, "fake", why="a test"))
    p = simulator.machine_params(sweep, evs)
    assert p.source == "fake"
    assert abs(p.pinned_Bps / 25e9 - 1) < 0.01 and abs(p.pageable_Bps / 6e9 - 1) < 0.01
    assert abs(p.memcpy_Bps / 8e9 - 1) < 0.01 and abs(p.kernel_s_per_byte / 1e-11 - 1) < 0.01
    v = findings.source_verdicts(metrics.runs_of(evs))
    assert "4 of 4 designs" in v[0] and "3 of 4" in v[1] and "pageable" in v[1]
    assert not any("lowest tail" in line for line in v) and "not ranked" in v[2]  # one run each: no ranking


# ---------------------------------------------------------------- live (GPU)

@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("design", designs.DESIGNS)
def test_live_pipeline_processes_frames_correctly(design):
    from helpers.measure import host_memory

    before = host_memory.pinned_bytes_of_process()
    r = pipeline.run_pipeline(pipeline.PipelineConfig(design=design, frame_bytes=4 << 20, period_s=8e-3,
                                                      frames=80, check_every=7))
    assert len(r.seq) + r.dropped == 80
    assert r.checked >= 10 and r.max_error < 1e-4
    assert r.kernel_us_p50 > 0 and r.copy_us_p50 > 0
    assert host_memory.pinned_bytes_of_process() - before < 1 << 20  # ring unregistered, staging freed


@needs_gpu
@pytest.mark.gpu
def test_live_pipeline_with_a_wrong_process_step_fails_the_check():
    def wrong(xp, frame, mf):
        return dsp.doppler_map(xp, frame[::-1], mf)

    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=4e-3,
                                                      frames=30, check_every=5, process=wrong))
    assert r.max_error > 1e-2


# ---------------------------------------------------------------- the consumer loop on a fake GPU

@pytest.mark.parametrize("design", designs.DESIGNS)
def test_consumer_loop_bookkeeping_on_a_fake_gpu(fake_cupy_gpu, design):
    # NumPy stands in for the GPU (tests/fake_cupy.py): every frame must be taken, processed
    # from the right slot, checked against the reference and released; the ring unregistered
    r = pipeline.run_pipeline(pipeline.PipelineConfig(design=design, frame_bytes=1 << 20, period_s=40e-3,
                                                      frames=24, check_every=4))
    assert len(r.seq) + r.dropped == 24
    assert r.checked >= 3 and r.max_error < 1e-4
    assert fake_cupy_gpu.registered == {}
    assert (r.memcpy_us_p50 is not None) == (design == "staged")


def test_consumer_loop_detects_a_wrong_processing_step(fake_cupy_gpu):
    def wrong(xp, frame, mf):
        return dsp.doppler_map(xp, frame[::-1], mf)

    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="pipelined", frame_bytes=1 << 20, period_s=6e-3,
                                                      frames=20, check_every=2, process=wrong))
    assert r.max_error > 1e-2


def test_correctness_check_runs_after_the_timed_loop(fake_cupy_gpu, monkeypatch):
    # comparing a map inside the loop stalls it (the first H100 recording showed misses right
    # after every checked frame); every comparison must wait until the card has finished
    cards, during_run = [], []
    real_error, real_start = dsp.map_error, ring.CaptureCard.start

    def spy(got, want):
        during_run.append(any(not c.ctl[card.CTL_DONE] for c in cards))
        return real_error(got, want)

    def start(self):
        cards.append(self)
        return real_start(self)

    monkeypatch.setattr(pipeline, "map_error", spy)
    monkeypatch.setattr(ring.CaptureCard, "start", start)
    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=40e-3,
                                                      frames=12, slots=12, check_every=3))  # no drop, however slow
    assert r.checked == 4 and during_run == [False] * 4


# ---------------------------------------------------------------- the panel

def test_panel_fills_its_output_and_reports_bad_choices():
    ctx = course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")
    box, run = diagrams.panel(ctx, _params())
    out = box.children[-1]
    run()
    assert len(out.outputs) == 2
    assert "SIMULATED" in out.outputs[0]["data"]["text/plain"]
    assert "model" in out.outputs[1]["data"]["text/plain"]
    box.children[1].children[1].value = 4  # buffers slider
    box.children[1].children[0].value = "pipelined"
    run()
    assert "pipelined" in out.outputs[1]["data"]["text/plain"]
    items = diagrams.panel_items(ctx, None, 4 << 20, 8e-3, "registered", 1)
    assert "nothing to show" in items[0]
    with pytest.raises(InputError, match="radar.registered: buffers"):
        diagrams.panel_items(ctx, _params(), 4 << 20, 8e-3, "registered", 0)
    with pytest.raises(InputError, match="design must be one of"):
        diagrams.panel_items(ctx, _params(), 4 << 20, 8e-3, "zerocopy", 1)
    with pytest.raises(designs.RadarInputError, match="frame size"):
        diagrams.panel_items(ctx, _params(), 12345, 8e-3, "registered", 1)


def _fake_run(cfg: pipeline.PipelineConfig) -> metrics.RunResult:
    """A stand-in for run_pipeline (no GPU): a run of the right shape, SIMULATED numbers."""
    return metrics.RunResult(design=cfg.design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=4,
                             buffers=cfg.buffers, frames=cfg.frames, latency_us=[500] * cfg.frames,
                             seq=list(range(cfg.frames)), dropped=0, cpu_s=0.1, wall_s=cfg.frames * cfg.period_s,
                             checked=1, max_error=0.0)


@pytest.fixture
def stand_in_pipeline(monkeypatch):
    calls = []

    def run(cfg):
        calls.append(cfg)
        return _fake_run(cfg)

    monkeypatch.setattr(pipeline_runs, "run_pipeline", run)
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    yield calls
    ring.stop_shared_host()  # the experiments' shared card process: no child left for the next test


def test_panel_runs_live_through_the_experiment(stand_in_pipeline):
    ctx = course.Context(Mode.LIVE, "a GPU", gpu_name="Test GPU", reference_name="h100-pcie")
    table, fig = diagrams.panel_items(ctx, None, 8 << 20, 4e-3, "pipelined", 2, frames=30)
    cfg, = stand_in_pipeline
    assert isinstance(cfg.host, ring.CardHost)
    assert (cfg.design, cfg.frame_bytes, cfg.period_s, cfg.frames, cfg.buffers, cfg.progress) == (
        "pipelined", 8 << 20, 4e-3, 30, 2, True)
    assert table.caption == "one run of 30 frames (LIVE: measured now on Test GPU)"
    assert isinstance(fig, CourseFigure) and fig.modes == [Mode.LIVE]


# ---------------------------------------------------------------- the experiments through ctx.get

def test_experiments_declare_a_gpu_and_their_parameters():
    for eid in DESIGN_IDS:
        exp = experiments.get(eid)
        assert exp.needs == (experiments.GPU,) and exp.reference == experiments.DEFAULT_REFERENCE
        assert set(exp.params) == {"frames", "frame_bytes", "period_s", "buffers"}


def test_the_recorder_runs_every_design_at_both_seed_rates(stand_in_pipeline):
    out = experiments.get("radar.staged").run(False)
    assert out["frames"] == pipeline_runs.RECORDED_FRAMES == 2000
    assert [(r["frame_bytes"], r["period_s"], r["frames"]) for r in out["runs"]] == [
        (4 << 20, 8e-3, 2000), (16 << 20, 8e-3, 2000)]
    hosts = {id(cfg.host): cfg.host for cfg in stand_in_pipeline}
    assert len(hosts) == 1, "both sizes' runs share one capture-card process"
    host = next(iter(hosts.values()))
    assert host.alive(), "the card process is kept for the page's next experiment"
    assert experiments.get("radar.pipelined").run(True, frames=5000)["frames"] == pipeline_runs.QUICK_FRAMES
    assert stand_in_pipeline[-1].host is host, "the next experiment's runs use the same process"
    course.finish(quiet=True)
    assert not host.alive(), "course.finish() stops the shared card process"


def test_live_get_runs_what_the_recorder_runs_with_the_learners_frames(stand_in_pipeline):
    ctx = course.Context(Mode.LIVE, "a GPU", gpu_name="Test GPU", reference_name="h100-pcie")
    measured = [ctx.get(eid, frames=20) for eid in DESIGN_IDS]
    runs = metrics.runs_of(measured)
    assert [(r["design"], r["frame_bytes"], r["frames"]) for r in runs] == [
        (d, n, 20) for d in designs.DESIGNS for n in designs.SEED_SIZES]
    assert all(ev.live for ev in measured) and metrics.parts_of(measured) == [(Mode.LIVE, "Test GPU")]
    assert metrics.caption_of(measured, "x") == "x, 20 frames per run (LIVE: measured now on Test GPU)"
    assert [r["frame_bytes"] for r in metrics.runs_of(measured, frame_bytes=16 << 20)] == [16 << 20] * 4


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("bad, exc", [({"frames": 0}, InputError), ({"frames": pipeline_runs.MAX_FRAMES + 1}, InputError),
                                      ({"frames": 2.0}, InputTypeError), ({"buffers": 9}, InputError),
                                      ({"frame_bytes": 12345}, designs.RadarInputError),
                                      ({"period_s": 2.0}, designs.RadarInputError), ({"period_s": "8ms"}, InputTypeError),
                                      ({"slots": 4}, InputError)])
def test_bad_parameters_raise_in_both_modes(stand_in_pipeline, live, bad, exc):
    ctx = course.Context(Mode.LIVE if live else Mode.REPLAY, "test", gpu_name="Test GPU" if live else None,
                         reference_name="h100-pcie")
    with pytest.raises(exc):
        ctx.get("radar.registered", **bad)
    assert stand_in_pipeline == []


def test_replay_reads_the_recorded_runs_and_says_they_are_the_recorders():
    ctx = course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")
    measured = [ctx.get(eid, frames=200) for eid in DESIGN_IDS]
    assert all(ev.mode is Mode.REPLAY for ev in measured)
    assert "not frames=200" in measured[0].why
    runs = metrics.runs_of(measured)
    assert {r["design"] for r in runs} == set(designs.DESIGNS) and len(runs) == 2 * len(designs.DESIGNS)
    caption = metrics.caption_of(measured, "x")
    assert caption.startswith("x, 2,000 frames per run (REPLAY: recorded on NVIDIA H100") and ";" not in caption
    assert len(metrics.summary_rows(runs)) == len(runs) and len(metrics.closing_rows(runs)) == len(designs.DESIGNS)


def test_closing_rows_give_every_design_at_both_rates():
    p = _params()
    runs = []
    for d in designs.DESIGNS:
        for n, per in designs.SEED_RATES:
            r = simulator.simulate(p, d, n, per, 50)
            r.update(cpu_s=0.1, wall_s=1.0)
            runs.append(r)
    rows = metrics.closing_rows(runs)
    assert [r[0] for r in rows] == list(designs.DESIGNS)
    assert all(len(r) == len(metrics.CLOSING_HEADERS) for r in rows)
    assert rows[0][2] == 0 and rows[0][3] == 0


def test_a_closed_card_leaves_the_process_without_children():
    """No producer and no helper daemon (such as multiprocessing's resource tracker) stays behind."""
    tail = ("c.close()\n"
            "kids = [k for t in os.listdir('/proc/self/task')\n"
            "        for k in open(f'/proc/self/task/{t}/children').read().split()]\n"
            "print(json.dumps(kids), flush=True)")
    p, info = _start_parent(tail)
    kids = json.loads(p.stdout.readline())
    p.wait(10)
    assert kids == [], f"child processes left after close(): {kids}"
    assert not os.path.exists(f"/dev/shm/{info['shm']}")


# ---------------------------------------------------------------- the page's step, waits, timeline, breaking points

def test_the_shown_step_is_the_loops_and_a_changed_step_runs(fake_cupy_gpu):
    seen = []

    def my_step(xp, src_ptr, dst, mf, stream, process):
        seen.append(dst.nbytes)
        return pipeline.process_frame(xp, src_ptr, dst, mf, stream, process)

    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=20e-3,
                                                      frames=8, check_every=3, step=my_step))
    assert len(seen) == len(r.seq) and set(seen) == {1 << 20} and r.max_error < 1e-4


@pytest.mark.parametrize("sync", pipeline.SYNC_MODES)
def test_every_wait_mode_runs_the_pipeline_and_is_recorded(fake_cupy_gpu, sync):
    waits = []

    def waiter(event, mode, timeout_s):
        waits.append(mode)
        pipeline.wait_done(event, mode, timeout_s)

    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=20e-3,
                                                      frames=8, check_every=0, sync=sync, waiter=waiter))
    assert len(r.seq) + r.dropped == 8 and r.extra["sync"] == sync
    assert set(waits) <= {sync}


def test_a_wait_that_never_ends_times_out():
    class Never:
        done = False

    with pytest.raises(errors.DeviceTimeoutError):
        pipeline.wait_done(Never(), "poll", 0.01)


def test_bad_sync_mode_is_refused(fake_cupy_gpu):
    with pytest.raises(InputError):
        pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=20e-3,
                                                      frames=4, sync="sleepy"))


def test_realtime_records_what_was_granted_and_restores_the_thread(fake_cupy_gpu):
    before = os.sched_getaffinity(0), os.sched_getscheduler(0)
    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="registered", frame_bytes=1 << 20, period_s=20e-3,
                                                      frames=6, check_every=0, realtime=True))
    granted = r.extra["realtime"]
    assert set(granted) == {"cpu_affinity", "sched_fifo"}
    assert granted["sched_fifo"] == "SCHED_FIFO priority 10" or granted["sched_fifo"].startswith("not permitted")
    assert (os.sched_getaffinity(0), os.sched_getscheduler(0)) == before


def test_timeline_puts_copy_before_kernels_on_one_clock(fake_cupy_gpu):
    r = pipeline.run_pipeline(pipeline.PipelineConfig(design="pipelined", frame_bytes=1 << 20, period_s=20e-3,
                                                      frames=6, check_every=0, timeline=True)).to_dict()
    tl = r["extra"]["timeline"]
    assert [f["seq"] for f in tl] == r["seq"]
    for f in tl:
        assert f["copy_ms"][0] <= f["copy_ms"][1] <= f["kernels_ms"][1] and f["ready_ms"] <= f["seen_ms"]
    ev = Evidence("radar.timeline", {"runs": [r], "frames": 6}, Mode.LIVE, "Test GPU", why="a test")
    fig = diagrams.timeline_figure(ev, "pipelined")
    assert isinstance(fig, CourseFigure) and "LIVE" in fig.description()
    with pytest.raises(designs.RadarInputError):
        diagrams.timeline_figure(ev, "staged")


def _run(design, n, period, lat_ms, dropped=0, sync=None, rt=None):
    extra = {"sync": sync or "poll-loop"} | ({"realtime": rt} if rt else {})
    return {"design": design, "frame_bytes": n, "period_s": period, "frames": len(lat_ms), "buffers": 1,
            "latency_us": [int(x * 1e3) for x in lat_ms], "dropped": dropped, "cpu_s": 0.1, "wall_s": 1.0,
            "extra": extra}


def test_bootstrap_interval_holds_the_mean_and_narrows_with_agreeing_runs():
    m, lo, hi = breaking.bootstrap_ci([1.0, 1.1, 0.9, 1.05, 0.95])
    assert lo <= m <= hi and hi - lo < 0.2
    m2, lo2, hi2 = breaking.bootstrap_ci([1.0, 3.0, 0.5, 2.0, 1.5])
    assert hi2 - lo2 > hi - lo
    with pytest.raises(designs.RadarInputError):
        breaking.bootstrap_ci([])


def test_breaking_points_and_separation_from_repeated_runs():
    fast, slow = [2.0] * 99 + [2.5], [2.0] * 80 + [9.0] * 20  # ms; a period of 8 ms
    data = {"sweep": [_run("registered", 4 << 20, 8e-3, fast) for _ in range(5)]
                     + [_run("pageable", 4 << 20, 8e-3, fast) for _ in range(5)]
                     + [_run("pageable", 16 << 20, 8e-3, slow) for _ in range(5)],
            "realtime": [_run("registered", 16 << 20, 4e-3, fast, sync="spin", rt={"sched_fifo": "not permitted (EPERM)"})]}
    bp = breaking.breaking_points(data)
    assert bp["pageable"].startswith("breaks at 16 MiB") and bp["registered"].startswith("held at every point it ran")
    assert bp["staged"].startswith("not run")
    top = breaking.breaking_points(data | {"ladder": [[4 << 20, 8e-3]]})  # the registered runs reached the top
    assert top["registered"].startswith("held up to 4 MiB") and "the top of the sweep" in top["registered"]
    cut = breaking.breaking_points(data | {"truncated": ["registered 16 MiB / 8 ms"]})
    assert "time budget ran out" in cut["registered"]
    rows = breaking.breaking_rows(data)
    assert [r[-1] for r in rows] == ["holds", "holds", "BREAKS"] and all(len(r) == len(breaking.BREAKING_HEADERS) for r in rows)
    a = breaking.tail_stats(data["sweep"][:5])
    b = breaking.tail_stats(data["sweep"][10:])
    assert breaking.separated(a, b) and not breaking.separated(a, breaking.tail_stats(data["sweep"][5:10]))
    rt = breaking.realtime_rows(data)
    assert rt[0][0] == "spin" and "EPERM" in rt[0][1]


def test_breaking_point_runs_a_point_that_is_not_clear_the_asked_number_of_times(monkeypatch):
    """repeats (a page's live run asks for fewer than the recorder's REPEATS) sets the runs of every rung
    that is not clear; the real-time runs keep RT_REPEATS."""
    calls = []

    def fake(cfg):
        calls.append((cfg.design, cfg.frame_bytes, cfg.period_s, cfg.sync))
        lat = [int(cfg.period_s * 0.7e6)] * cfg.frames  # never clear, never late: every rung repeated
        return metrics.RunResult(design=cfg.design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=4,
                                 buffers=1, frames=cfg.frames, latency_us=lat, seq=list(range(cfg.frames)), dropped=0,
                                 cpu_s=0.1, wall_s=1.0, extra={"sync": cfg.sync or "poll-loop"})

    monkeypatch.setattr(pipeline_runs, "run_pipeline", fake)
    monkeypatch.setattr(breaking, "frames_for", lambda period, quick: 20)
    out = experiments.get("radar.breaking_point").run(False, repeats=3)
    assert out["repeats"] == 3 and out["truncated"] == []
    assert len([c for c in calls if c[3] is None]) == len(designs.DESIGNS) * len(breaking.LADDER) * 3
    assert len(out["realtime"]) == len(breaking.RT_CONFIGS) * breaking.RT_REPEATS
    with pytest.raises(errors.InputError):
        experiments.get("radar.breaking_point").check_params({"repeats": 1})


def test_breaking_point_experiment_is_bounded_and_stops_climbing_a_broken_design(monkeypatch):
    calls = []
    share = {"pageable": 2.0, "staged": 0.7, "registered": 0.1, "pipelined": 0.1}  # slowest frame / period

    def fake(cfg):
        calls.append((cfg.design, cfg.frame_bytes, cfg.period_s, cfg.sync, cfg.realtime))
        lat = [int(cfg.period_s * share[cfg.design] * 1e6)] * cfg.frames  # pageable always misses
        return metrics.RunResult(design=cfg.design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=4,
                                 buffers=1, frames=cfg.frames, latency_us=lat, seq=list(range(cfg.frames)), dropped=0,
                                 cpu_s=0.1, wall_s=1.0, extra={"sync": cfg.sync or "poll-loop"})

    monkeypatch.setattr(pipeline_runs, "run_pipeline", fake)
    out = experiments.get("radar.breaking_point").run(True)
    assert [c for c in calls if c[0] == "pageable"] == [("pageable", 4 << 20, 8e-3, None, False)] * breaking.QUICK_REPEATS
    # near the deadline (0.7 of the period) every rung is repeated; far from it (0.1) one run is enough
    assert len([c for c in calls if c[0] == "staged"]) == len(breaking.QUICK_LADDER) * breaking.QUICK_REPEATS
    assert len([c for c in calls if c[0] == "registered" and c[3] is None]) == len(breaking.QUICK_LADDER)
    assert {(c[3], c[4]) for c in calls if c[3]} == set(breaking.RT_CONFIGS)
    assert out["truncated"] == [] and len(out["realtime"]) == len(breaking.RT_CONFIGS)
    rows = {(r[0], r[1]): r for r in breaking.breaking_rows(out)}
    assert str(rows[("registered", "4 MiB / 8 ms")][3]).startswith("1 (clear") and "(one run)" in rows[("registered", "4 MiB / 8 ms")][4]
    assert rows[("staged", "4 MiB / 8 ms")][3] == breaking.QUICK_REPEATS and "[" in rows[("staged", "4 MiB / 8 ms")][4]


def test_new_experiments_show_their_code_and_replay_their_recording():
    assert experiments.get("radar.timeline").shown is pipeline.process_frame
    assert experiments.get("radar.breaking_point").shown is pipeline.wait_done
    ctx = course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name="h100-pcie")
    for eid in ("radar.timeline", "radar.breaking_point"):
        ev = ctx.get(eid)
        assert ev.ok and ev.mode is Mode.REPLAY


def test_model_parameters_say_what_a_constant_kernel_time_means():
    flat = _params(kernel_s_per_byte=0.0, kernel_t0_s=300e-6).describe()
    assert any("the same for 4 MiB and 16 MiB" in line for line in flat)
    grows = _params().describe()
    assert any("for a 4 MiB frame" in line for line in grows)


def test_pipeline_diagram_names_the_stages():
    d = diagrams.pipeline_diagram()
    svg = d.svg()
    for word in ("capture card", "copy engine", "SMs", "ring slot"):
        assert word in svg
