"""helpers.labs.lab2: the simulated CUDA clock, the timers and the reference-data readers."""

import numpy as np
import pytest

from helpers import course
from helpers.core.errors import CourseError, ReferenceDataError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.labs import lab2


def _time(job, wait=True):
    cuda = job.cuda
    start, end = cuda.Event(), cuda.Event()
    start.record(job.stream)
    cuda.runtime.memcpyAsync(job.dst, job.src, job.nbytes, job.kind, job.stream.ptr)
    end.record(job.stream)
    if wait:
        end.synchronize()
    return cuda.get_elapsed_time(start, end)


@pytest.mark.parametrize("n", [1, 4096, 1 << 30])
def test_fake_cuda_times_a_copy_by_its_model(n):
    with lab2.simulated_copy(n, t0_s=5e-6, bw_Bps=10e9) as job:
        assert _time(job) == pytest.approx((5e-6 + n / 10e9) * 1e3)
        assert job.simulated


def test_fake_cuda_refuses_an_unwaited_event():
    with lab2.simulated_copy(1 << 20) as job:
        with pytest.raises(lab2.NotReadyError, match="cudaErrorNotReady"):
            _time(job, wait=False)


def test_fake_cuda_stream_synchronize_also_completes_events():
    with lab2.simulated_copy(1 << 20, t0_s=1e-6, bw_Bps=1e9) as job:
        c = job.cuda
        a, b = c.Event(), c.Event()
        a.record(job.stream)
        c.runtime.memcpyAsync(job.dst, job.src, job.nbytes, job.kind, job.stream.ptr)
        b.record(job.stream)
        job.stream.synchronize()
        assert c.get_elapsed_time(a, b) == pytest.approx((1e-6 + (1 << 20) / 1e9) * 1e3)


def test_fake_cuda_rejects_bad_copy_kind():
    with lab2.simulated_copy(16) as job:
        with pytest.raises(ValueError, match="kind 7"):
            job.cuda.runtime.memcpyAsync(0, 0, 16, 7, 0)


def test_replay_timer_serves_in_order_then_says_it_ran_out():
    t = lab2.replay_timer([1.0, 2.0])
    assert (t(), t(), t.calls) == (1.0, 2.0, 2)
    with pytest.raises(CourseError, match="only 2 timings"):
        t()


def test_warmup_timer_first_calls_slow_rest_near_steady():
    t = lab2.warmup_timer(1e-3, 10, slow_calls=2, slow_factor=40, seed=1)
    vals = np.array(t.times_s)
    assert (vals[:2] > 30e-3).all() and np.allclose(vals[2:], 1e-3, rtol=0.1)


def test_synthetic_line_is_reproducible_and_noisy_around_the_model():
    n = np.logspace(2, 8, 50)
    a, b = lab2.synthetic_line(5e-6, 20e9, n, seed=4), lab2.synthetic_line(5e-6, 20e9, n, seed=4)
    assert np.array_equal(a, b)
    rel = a / (5e-6 + n / 20e9) - 1
    assert 0.005 < rel.std() < 0.06


def _ev(experiment_id: str, data: dict | None) -> Evidence:
    return Evidence(experiment_id, data, Mode.REPLAY, "fake machine", why="test",
                    missing=None if data is not None else f"no recording of {experiment_id!r}")


def test_reference_readers_pick_the_right_series():
    sweep = _ev("transfers.pinned_vs_pageable", {"series": [
        {"host_kind": "pageable", "direction": "h2d", "nbytes": [4], "median_s": [9.0]},
        {"host_kind": "pinned", "direction": "h2d", "nbytes": [4, 8], "median_s": [1.0, 2.0]}]})
    large = _ev("transfers.large_copy", {"pinned/h2d": {"nbytes": 64, "times_s": [1.0, 3.0], "bandwidth_gbps": 5.0}})
    n, t = lab2.reference_sweep(sweep, "pinned", "h2d")
    assert n.tolist() == [4, 8] and t.tolist() == [1.0, 2.0]
    assert lab2.reference_reps(large) == (64, [1.0, 3.0], 5.0)
    with pytest.raises(CourseError, match="no pinned/d2h series"):
        lab2.reference_sweep(sweep, "pinned", "d2h")
    with pytest.raises(ReferenceDataError, match="transfers.large_copy .* has no 'pageable/d2h' copy"):
        lab2.reference_reps(large, "pageable/d2h")


def test_readers_take_the_reference_machines_recording_even_live(monkeypatch):
    """Lab 2 sets the reference machine's sweep beside a live run: ctx.get(..., recorded=True)."""
    ctx = course.Context(Mode.LIVE, "a GPU", gpu_name="Test GPU", reference_name="h100-pcie")
    sweep = ctx.get("transfers.pinned_vs_pageable", recorded=True)
    n, t = lab2.reference_sweep(sweep, "pinned", "h2d")
    assert sweep.mode is Mode.REPLAY and n.size == t.size > 10 and np.all(np.diff(n) > 0)
    nbytes, times, gbps = lab2.reference_reps(ctx.get("transfers.large_copy", recorded=True))
    assert nbytes > 0 and len(times) > 3 and gbps > 1


def test_missing_experiment_is_a_clear_error():
    with pytest.raises(ReferenceDataError, match="transfers.large_copy"):
        lab2.reference_reps(_ev("transfers.large_copy", None))


def test_live_copy_checks_direction_before_touching_a_gpu():
    with pytest.raises(ValueError, match="direction"):
        with lab2.live_copy(16, "sideways"):
            pass
