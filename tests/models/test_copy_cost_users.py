"""One copy-cost model for the whole course: the same recording gives the same t0 and B through
every chapter that fits it (Chapter 3's sweep fits, Chapter 6's TTM link model, Chapter 9's
radar model); where a chapter fits a sub-range, the test says which."""

from __future__ import annotations

import pytest

from helpers import course
from helpers.core.mode import Mode
from helpers.models import copy_cost, routes, ttm
from helpers.models.radar import designs, simulator

RADAR_FROM = 1 << 16  # Chapter 9 fits the copies of 64 KiB and more (its frames' sizes)


@pytest.fixture(scope="module")
def recorded():
    """The committed reference machine's pinned_vs_pageable sweep, as the notebooks get it."""
    ctx = course.Context(Mode.REPLAY, "test", gpu_name=None, reference_name="h100-pcie")
    return ctx.get("transfers.pinned_vs_pageable", recorded=True)


def test_chapter3_and_the_ttm_link_model_give_the_same_fit(recorded):
    ch3 = copy_cost.fit_all(recorded.data)  # Chapter 3: every size, 4 B to 256 MiB
    link = ttm.LinkModel.from_sweep(recorded.data, recorded.source)  # Chapter 6 / Lab 4: every size too
    assert link.h2d_bytes_per_s == ch3[("pinned", "h2d")].bandwidth_Bps
    assert link.d2h_bytes_per_s == ch3[("pinned", "d2h")].bandwidth_Bps
    assert link.latency_s == pytest.approx((ch3[("pinned", "h2d")].t0_s + ch3[("pinned", "d2h")].t0_s) / 2,
                                           rel=1e-12)


def test_the_radar_model_is_the_same_fit_over_64_kib_and_up(recorded):
    ctx = course.Context(Mode.REPLAY, "test", gpu_name=None, reference_name="h100-pcie")
    params = simulator.machine_params(recorded, [ctx.get(f"radar.{d}") for d in designs.DESIGNS])
    sub = copy_cost.fit_all(recorded.data, lo=RADAR_FROM)
    assert (params.pinned_t0_s, params.pinned_Bps) == (sub[("pinned", "h2d")].t0_s, sub[("pinned", "h2d")].bandwidth_Bps)
    assert (params.pageable_t0_s, params.pageable_Bps) == (sub[("pageable", "h2d")].t0_s,
                                                         sub[("pageable", "h2d")].bandwidth_Bps)
    whole = copy_cost.fit_all(recorded.data)[("pinned", "h2d")]
    assert params.pinned_t0_s != whole.t0_s  # the sub-range is a different fit, which the page says


def test_routes_fit_two_sizes_with_the_same_estimator():
    small, big = 4, 64 << 20
    data = {"sizes": {"small": small, "large": big}, "devices": [0, 1], "peer_access": [[False, True], [True, False]],
            "matrices": {"peer": {"one": {"small": [[None, 2e-5], [2e-5, None]],
                                          "large": [[None, 2e-4], [2e-4, None]]}}},
            "host": {d: {"small": [5e-6, 5e-6], "large": [1.2e-3, 1.2e-3]} for d in ("h2d", "d2h")}}
    m = routes.from_recording(data)
    f = copy_cost.fit([small, big], [5e-6, 1.2e-3])
    assert m.latency_s[("host", "GPU0")] == f.t0_s and m.bandwidth_Bps[("host", "GPU0")] == f.bandwidth_Bps
    assert m.cost("host", "GPU0", big) == pytest.approx(1.2e-3, rel=1e-9)  # exact through both points
