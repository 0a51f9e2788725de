"""The latency/bandwidth fit: it recovers known parameters from noisy synthetic data, refuses
data it cannot use with a clear error, and reads the sweep's series format."""

import numpy as np
import pytest

from helpers.ch03_dma_and_copy_engines import views
from helpers.core.errors import CourseError, InputError
from helpers.measure.transfers import TransferResult, results_to_series, sweep_sizes
from helpers.models import copy_cost as lm

T0, B = 2.2e-6, 53e9  # an H100-like link: 2.2 us fixed cost, 53 GB/s


def synthetic(t0=T0, b=B, noise=0.03, seed=1, sizes=None):
    rng = np.random.default_rng(seed)
    n = np.array(sizes or sweep_sizes(4, 256 << 20), dtype=float)
    return n, (t0 + n / b) * (1 + noise * rng.standard_normal(n.size))


@pytest.mark.parametrize("seed", range(5))
def test_fit_recovers_known_parameters_from_noisy_data(seed):
    n, t = synthetic(seed=seed)
    f = lm.fit(n.astype(int), t)
    assert f.t0_s == pytest.approx(T0, rel=0.05)
    assert f.bandwidth_Bps == pytest.approx(B, rel=0.05)
    assert f.n_half == pytest.approx(T0 * B, rel=0.08)
    assert f.max_relative_residual() < 0.15


def test_weighting_keeps_t0_where_an_unweighted_fit_loses_it():
    n, t = synthetic(noise=0.02, seed=7)
    w = lm.fit(n.astype(int), t)
    A = np.stack([np.ones_like(n), n], axis=1)
    (t0_plain, _), *_ = np.linalg.lstsq(A, t, rcond=None)
    assert abs(w.t0_s - T0) / T0 < 0.05
    assert abs(t0_plain - T0) / T0 > 0.5  # decided by the 256 MiB copies' noise, not by t0


def test_model_predictions_are_consistent():
    f = lm.LinearFit(T0, B, (1, 2), (1.0, 2.0))
    assert f.predict_gbps(f.n_half) == pytest.approx(B / 2 / 1e9)  # the definition of n½
    assert f.predict_s(0) == pytest.approx(T0)


@pytest.mark.parametrize("sizes,times,match", [
    ([4096, 4096, 4096], [1e-6, 1.1e-6, 0.9e-6], "two distinct sizes"),
    ([4, -8, 16], [1e-6, 1e-6, 1e-6], "positive byte counts"),
    ([4, 8, 16], [1e-6, 0.0, 1e-6], "positive seconds"),
    ([4, 8, 16], [1e-6, float("nan"), 1e-6], "positive seconds"),
    ([4, 8], [1e-6], "equal length"),
    ([1 << 10, 1 << 20, 1 << 28], [3e-3, 2e-3, 1e-3], "must be\npositive|both must be"),
])
def test_bad_data_gets_a_clear_error(sizes, times, match):
    with pytest.raises(lm.ModelInputError, match=match.split("\n")[0]):
        lm.fit(sizes, times)


@pytest.mark.parametrize("t0,b", [(0.0, B), (T0, 0.0), (-1e-6, B), (T0, float("inf")), (float("nan"), B)])
def test_half_bandwidth_size_of_degenerate_parameters(t0, b):
    with pytest.raises(lm.ModelInputError, match="positive, finite"):
        lm.half_bandwidth_size(t0, b)


def test_errors_are_input_errors():
    assert issubclass(lm.ModelInputError, InputError)
    with pytest.raises(CourseError):
        lm.fit([1], [1.0])
    with pytest.raises(ValueError):
        lm.fit([1], [1.0])


def test_two_points_give_the_line_through_both():
    f = lm.fit([4, 1 << 26], [5e-6, 5e-6 + (1 << 26) / 40e9 - 4 / 40e9])
    assert f.t0_s == pytest.approx(5e-6 - 4 / 40e9, rel=1e-9) and f.bandwidth_Bps == pytest.approx(40e9, rel=1e-9)
    assert f.max_relative_residual() < 1e-9


def test_a_size_range_fits_only_the_sizes_in_it():
    n, t = synthetic(noise=0.0)
    t = np.where(n < 1 << 16, t * 0.5, t)  # the small copies are off the line the large ones are on
    series = {"host_kind": "pinned", "direction": "h2d", "nbytes": n.tolist(), "median_s": t.tolist()}
    part = lm.fit_series(series, lo=1 << 16)
    assert min(part.nbytes) == 1 << 16 and part.t0_s == pytest.approx(T0, rel=1e-6)
    assert lm.fit_series(series).t0_s < 0.9 * T0  # the whole series is pulled down by the small copies
    assert max(lm.fit_series(series, hi=1 << 10).nbytes) == 1 << 10
    with pytest.raises(lm.ModelInputError, match="a line needs two"):
        lm.fit_series(series, lo=256 << 20)


def fake_sweep(kinds=("pageable", "pinned")):
    out = []
    for kind in kinds:
        for d in ("h2d", "d2h"):
            b = B if kind == "pinned" else B / 4
            n, t = synthetic(b=b, noise=0.01, seed=3)
            for ni, ti in zip(n.astype(int), t, strict=True):
                out.append(TransferResult(direction=d, host_kind=kind, nbytes=int(ni),
                                          times_s=[ti * 0.99, ti, ti * 1.02], warmup=1))
    return results_to_series(out)


def test_series_from_a_sweep_round_trip_into_the_fit():
    data = fake_sweep()
    fits = lm.fit_all(data)
    assert set(fits) == {(k, d) for k in ("pageable", "pinned") for d in ("h2d", "d2h")}
    assert fits[("pinned", "h2d")].bandwidth_Bps == pytest.approx(B, rel=0.03)
    assert fits[("pageable", "d2h")].bandwidth_Bps == pytest.approx(B / 4, rel=0.03)
    assert lm.fit_series(lm.series_for(data, "pinned", "d2h")).to_dict()["points"] == len(sweep_sizes())


@pytest.mark.parametrize("kind,direction,match", [
    ("registered", "h2d", "memory kind"), ("pinned", "up", "direction"), ("pinned", "H2D", "direction")])
def test_wrong_kind_or_direction(kind, direction, match):
    with pytest.raises(lm.ModelInputError, match=match):
        lm.series_for(fake_sweep(), kind, direction)


def test_missing_series_is_named():
    with pytest.raises(lm.ModelInputError, match="no pageable/h2d series"):
        lm.series_for(fake_sweep(kinds=("pinned",)), "pageable", "h2d")


@pytest.mark.parametrize("n_half,word", [(10e3, "still holds"), (18e3, "still holds"),
                                         (110e3, "dated"), (2e3, "fewer bytes")])
def test_seed_verdict_follows_the_numbers(n_half, word):
    f = lm.LinearFit(2e-6, n_half / 2e-6, (1, 2), (1.0, 2.0))
    text = views.seed_verdict(f)
    assert word in text
    assert f"{n_half / 1e3:.1f} kB" in text


def test_seed_verdict_says_whether_the_fixed_cost_shrank():
    slower = views.seed_verdict(lm.LinearFit(4.5e-6, 53e9, (1, 2), (1.0, 2.0)))
    assert "did not shrink (1.4x)" in slower and "17x faster" in slower
    quicker = views.seed_verdict(lm.LinearFit(1.0e-6, 53e9, (1, 2), (1.0, 2.0)))
    assert "shrank 3.1x" in quicker
