"""Copy-engine helpers: argument checks and verdicts everywhere; the gate, its timeout path
and the gated/concurrent measurements on a real GPU (skipped with a reason elsewhere)."""

import numpy as np
import pytest
from conftest import needs_gpu

from helpers.ch03_dma_and_copy_engines import copy_engines as ce
from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core.errors import (
    CourseError,
    DeviceTimeoutError,
    InputError,
    InputTypeError,
    NoGPUError,
)


@pytest.mark.parametrize("t, exc", [(0, InputError), (-1, InputError), (0.0, InputError),
                                    (float("nan"), InputError), (61, InputError), ("5", InputTypeError),
                                    (True, InputTypeError), (None, InputTypeError)])
def test_gate_timeout_is_bounded(t, exc):
    with pytest.raises(exc, match="gate timeout"):
        ce.check_gate_timeout(t)


@pytest.mark.parametrize("count, exc", [(0, InputError), (-3, InputError), (ce.MAX_GATED_COPIES + 1, InputError),
                                        (2.5, InputTypeError), (True, InputTypeError)])
def test_gated_copy_count_is_checked(count, exc):
    with pytest.raises(exc, match="whole number|copies must be from"):
        ce.check_count(count)


def test_copy_engine_input_errors_are_input_errors():
    assert issubclass(ce.CopyEngineInputError, InputError)


def test_pageable_cannot_be_gated():
    with pytest.raises(ce.CopyEngineInputError, match="pinned"):
        ce.gated_copies(64, "h2d", 10, host_kind="pageable")


@pytest.mark.parametrize("direction", ["up", "H2D", "d2d"])
def test_wrong_direction(direction):
    with pytest.raises(InputError, match="direction"):
        ce.gated_copies(64, direction, 10)


def test_gate_without_gpu_says_so(no_gpu):
    with pytest.raises(NoGPUError, match="usable CUDA GPU"):
        ce.Gate(1.0)


def test_timeout_error_is_a_course_and_timeout_error():
    assert issubclass(ce.GateTimeoutError, DeviceTimeoutError)
    assert issubclass(ce.GateTimeoutError, CourseError) and issubclass(ce.GateTimeoutError, TimeoutError)


def fake_bidir(h2d, d2h, both, engines=3):
    return {"h2d": {"median_gbps": h2d}, "d2h": {"median_gbps": d2h}, "both": {"median_gbps": both},
            "async_engine_count": engines}


@pytest.mark.parametrize("both,word", [(108.0, "yes"), (80.0, "partly"), (56.0, "no")])
def test_bidirectional_verdict_follows_the_numbers(both, word):
    text = ce.bidirectional_verdict(fake_bidir(55.0, 54.0, both))
    assert f"verdict: {word}" in text
    assert f"{both / 55.0:.2f}x" in text


def test_the_yes_verdict_says_both_directions_share_the_lanes():
    text = ce.bidirectional_verdict(fake_bidir(55.0, 54.0, 108.0))
    assert "separate link lanes" not in text and "same lanes" in text and "receive" in text


def test_which_cost_dominates():
    assert ce.which_cost_dominates(3e-6, 1e-6).startswith("host-bound")
    assert ce.which_cost_dominates(1e-6, 3e-6).startswith("device-bound")
    with pytest.raises(ce.CopyEngineInputError):
        ce.which_cost_dominates(0, 1e-6)


def small(iso, gated):
    return {d: {"4": {"isolated_median_s": iso, "gated_median_s": gated}} for d in ("h2d", "d2h")}


def test_small_copy_comparison_within_and_outside_tolerance():
    ok = crosscheck.small_copy_comparison(small(2.0e-6, 1.0e-6), small(2.2e-6, 1.1e-6))
    assert ok["ok"] and ok["worst"] == pytest.approx(0.1 / 1.1)
    assert ok["ungated_worst"] == pytest.approx(0.2 / 2.2)
    bad = crosscheck.small_copy_comparison(small(2.0e-6, 1.0e-6), small(2.0e-6, 1.5e-6))
    assert not bad["ok"] and bad["worst"] == pytest.approx(1 / 3)


def test_only_the_device_side_figure_decides_agreement():
    """An ungated time inflated by a slow host does not fail the device-side check, and is reported."""
    r = crosscheck.small_copy_comparison(small(5.0e-6, 1.0e-6), small(3.0e-6, 1.05e-6))
    assert r["ok"] and r["ungated_worst"] == pytest.approx(2 / 3)


def test_small_copy_comparison_needs_matching_sizes():
    c = {d: {"64": {"isolated_median_s": 1e-6, "gated_median_s": 1e-6}} for d in ("h2d", "d2h")}
    with pytest.raises(ValueError, match="no h2d figure for 4 bytes"):
        crosscheck.small_copy_comparison(small(1e-6, 1e-6), c)


# --- on a real GPU -------------------------------------------------------------------------

@needs_gpu
@pytest.mark.gpu
def test_gate_times_out_instead_of_hanging():
    cp = ce.gpu.cupy()
    s = cp.cuda.Stream(non_blocking=True)
    done = cp.cuda.Event()
    with ce.Gate(timeout_s=0.05) as g:
        g.block(s)  # never released
        done.record(s)
        ce.wait_event(done, 10.0, "a gate that was never released")
        assert g.timed_out
        with pytest.raises(ce.GateTimeoutError, match="not valid"):
            g.check()


@needs_gpu
@pytest.mark.gpu
def test_gate_holds_until_released():
    cp = ce.gpu.cupy()
    s = cp.cuda.Stream(non_blocking=True)
    done = cp.cuda.Event()
    with ce.Gate(timeout_s=5.0) as g:
        g.block(s)
        done.record(s)
        import time
        time.sleep(0.05)
        assert not done.done, "the stream ran past a shut gate"
        g.release()
        ce.wait_event(done, 10.0)
        g.check()


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_gated_copies_measure_both_sides(direction):
    r = ce.gated_copies(1024, direction, 50)
    assert r["gate_held"]
    assert len(r["enqueue_s"]) == len(r["device_s"]) == 50
    assert all(t > 0 for t in r["enqueue_s"]) and all(t >= 0 for t in r["device_s"])
    assert r["span_s"] == pytest.approx(sum(r["device_s"]), rel=0.05)


@needs_gpu
@pytest.mark.gpu
def test_concurrent_copies_and_engine_count():
    assert ce.async_engine_count() >= 1
    r = ce.concurrent_copies(8 << 20, 2, ("h2d", "d2h"))
    assert set(r["per_stream_gbps"]) == {"h2d", "d2h"} and r["aggregate_gbps"] > 0


@needs_gpu
@pytest.mark.gpu
def test_cpu_cost_reports_every_kind_and_direction():
    r = ce.cpu_cost_of_copies(8 << 20, reps=2)
    assert set(r["results"]) == {f"{k}/{d}" for k in ("pageable", "pinned") for d in ("h2d", "d2h")}
    assert all(v["wall_s"] > 0 and v["cpu_s"] >= 0 for v in r["results"].values())


@needs_gpu
@pytest.mark.gpu
def test_nothing_pinned_or_allocated_is_left_behind():
    from helpers import course
    from helpers.core import gpu
    before = gpu.cupy().cuda.runtime.memGetInfo()[0]
    ce.gated_copies(4096, "h2d", 20)
    ce.concurrent_copies(8 << 20, 2)
    stats = course.finish(quiet=True)
    assert stats["locked_host_bytes"] == 0
    assert abs(gpu.cupy().cuda.runtime.memGetInfo()[0] - before) < (8 << 20)
    assert np.isfinite(before)


def fake_cpu(pageable_share, pinned_share):
    return {"results": {f"{k}/{d}": {"cpu_share": s, "user_s": 0.02, "sys_s": 0.0}
                        for k, s in (("pageable", pageable_share), ("pinned", pinned_share)) for d in ("h2d", "d2h")}}


def test_cpu_cost_verdict_follows_the_numbers():
    assert "the pageable copies cost CPU time" in ce.cpu_cost_verdict(fake_cpu(1.0, 0.1))
    assert "does not separate" in ce.cpu_cost_verdict(fake_cpu(0.3, 0.1))
    assert "mostly user time" in ce.cpu_cost_verdict(fake_cpu(1.0, 0.1))
