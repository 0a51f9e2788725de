"""Transfer measurement: arguments checked before any GPU work; statistics computed right."""

import numpy as np
import pytest

from helpers.core.errors import InputError, InputTypeError, NoGPUError
from helpers.measure import transfers
from helpers.measure.transfers import TransferResult


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"direction": "d2d"}, InputError, "direction must be one of"),
    ({"host_kind": "gpu"}, InputError, "host_kind must be one of"),
    ({"reps": 0}, InputError, "reps must be"),
    ({"reps": 2.5}, InputTypeError, "reps must be a whole number"),
    ({"reps": True}, InputTypeError, "reps must be a whole number"),
    ({"warmup": -1}, InputError, "warmup must be"),
    ({"reps": transfers.MAX_REPS + 1}, InputError, "reps must be"),
])
def test_bad_arguments(kwargs, exc, match, no_gpu):
    with pytest.raises(exc, match=match):
        transfers.measure_copy(4096, **kwargs)


def test_no_gpu_is_a_clear_error(no_gpu):
    with pytest.raises(NoGPUError):
        transfers.measure_copy(4096)


def test_result_statistics():
    r = TransferResult(direction="h2d", host_kind="pinned", nbytes=1_000_000, times_s=[4e-5, 1e-5, 2e-5], warmup=1)
    assert r.median_s == 2e-5 and r.min_s == 1e-5
    assert r.bandwidth_gbps == pytest.approx(50.0) and r.peak_gbps == pytest.approx(100.0)
    d = r.to_dict()
    assert d["bandwidth_gbps"] == pytest.approx(50.0) and d["mode"] == "live"


def test_sweep_sizes():
    assert transfers.sweep_sizes(4, 64) == [4, 8, 16, 32, 64]
    assert len(transfers.sweep_sizes()) == 27  # 4 B .. 256 MiB
    with pytest.raises(ValueError):
        transfers.sweep_sizes(0, 8)
    with pytest.raises(ValueError):
        transfers.sweep_sizes(64, 8)


def test_sweep_needs_sizes(no_gpu):
    with pytest.raises(ValueError, match="at least one size"):
        transfers.sweep([])


def test_adaptive_reps_bounds():
    reps = [transfers.adaptive_reps(1 << k) for k in range(2, 29)]
    assert max(reps) == 50 and min(reps) == 10 and reps == sorted(reps, reverse=True)


def test_results_to_series_groups():
    rs = [TransferResult(direction=d, host_kind=k, nbytes=n, times_s=[n * 1e-10],
                         warmup=0) for k in ("pinned", "pageable") for d in ("h2d", "d2h")
          for n in (4, 8)]
    out = transfers.results_to_series(rs)
    assert len(out["series"]) == 4
    s = out["series"][0]
    assert s["nbytes"] == [4, 8] and np.allclose(s["median_s"], [4e-10, 8e-10])


def test_wait_event_times_out():
    class Never:
        done = False

    with pytest.raises(transfers.DeviceTimeoutError, match="did not finish within 0.0"):
        transfers.wait_event(Never(), 0.02, "a stuck copy")
