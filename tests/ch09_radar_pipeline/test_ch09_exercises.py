"""Chapter 9's exercises: expected values from the model and the recording, wrong answers and kernels caught."""

from __future__ import annotations

from conftest import run_on_simulator

from helpers.ch09_radar_pipeline import exercises
from helpers.models.radar import simulator


def _params():
    return simulator.MachineParams(pinned_t0_s=10e-6, pinned_Bps=50e9, pageable_t0_s=20e-6, pageable_Bps=10e9,
                               memcpy_Bps=8e9, kernel_s_per_byte=0.0, kernel_t0_s=300e-6, overhead_s=60e-6, source="t")


def test_registered_frame_ms_and_its_hints(capsys):
    p = _params()
    n = 16 << 20
    want = (10e-6 + n / 50e9 + 300e-6 + 60e-6) * 1e3
    assert exercises.registered_frame_ms(want, p) is True
    assert exercises.registered_frame_ms(want * 1000, p) is False
    assert "µs" in capsys.readouterr().out
    assert exercises.registered_frame_ms(want - 0.06, p) is False
    assert "overhead" in capsys.readouterr().out


def test_dropped_frames_follows_the_model():
    slow = simulator.MachineParams(pinned_t0_s=5e-3, pinned_Bps=1e30, pageable_t0_s=5e-3, pageable_Bps=1e30,
                                   memcpy_Bps=1e30, kernel_s_per_byte=0.0, kernel_t0_s=0.0, overhead_s=0.0, source="x")
    want = simulator.simulate(slow, "registered", 1 << 20, 2e-3, 100, slots=2)["dropped"]
    assert 55 <= want <= 62
    assert exercises.dropped_frames(want) is True and exercises.dropped_frames(want + 5) is False


def test_ranking_question():
    assert exercises.rank_from_one_run("b") is True and exercises.rank_from_one_run("a") is False


def test_queue_depth_question():
    assert exercises.queue_depth("b") is True
    assert all(exercises.queue_depth(x) is False for x in "acd")
    assert exercises.queue_depth(None) is None


def test_detect_kernel_check():
    run_on_simulator('''
from helpers.ch09_radar_pipeline import exercises
from numba import cuda

@cuda.jit
def good(power, threshold, out):
    i, j = cuda.grid(2)
    if i < power.shape[0] and j < power.shape[1]:
        out[i, j] = 1 if power[i, j] > threshold else 0

@cuda.jit
def swapped(power, threshold, out):
    j, i = cuda.grid(2)
    if i < power.shape[0] and j < power.shape[1]:
        out[i, j] = 1 if power[i, j] > threshold else 0

@cuda.jit
def no_bounds(power, threshold, out):
    i, j = cuda.grid(2)
    out[i, j] = 1 if power[i, j] > threshold else 0

@cuda.jit
def unfinished(power, threshold, out):
    raise NotImplementedError

assert exercises.detect_kernel(good) is True
assert exercises.detect_kernel(swapped) is False
assert exercises.detect_kernel(no_bounds) is False  # threads past the map's edge: a crash or a stray write
assert exercises.detect_kernel(unfinished) is None
''')
