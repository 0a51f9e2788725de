"""The per-channel CUPTI timeline (helpers/presentation/channel_lanes.py), on SIMULATED records."""

from __future__ import annotations

import pytest
from fake_cupti import ActivityMemcpyKind as MK
from fake_cupti import FakeCupti, kernel, memcpy

from helpers.core.errors import InputError
from helpers.core.mode import Mode
from helpers.measure import cupti_trace as ct
from helpers.presentation import channel_lanes


def recs():
    fake = FakeCupti()
    return [ct.record_from_activity(a, fake) for a in (
        memcpy(MK.HTOD, 5_000, 6_000, stream=14, channel=11, nbytes=3 << 19),
        memcpy(MK.HTOD, 1_000, 3_000, stream=13, channel=10),
        kernel("k", 3_500, 4_000, stream=13, channel=1))]


def test_bars_start_at_the_first_record_in_microseconds_and_lanes_put_compute_on_top():
    fig = channel_lanes.lanes_figure(recs(), [(Mode.LIVE, "this GPU")], "t", {13: "A"})
    a, b = fig.fig.data
    assert a.name == "A" and b.name == "stream 14"  # first appearance orders the streams
    assert list(a.base) == [0.0, 2.5] and list(a.x) == [2.0, 0.5]
    assert list(b.text) == ["HtoD 1.5 MiB"] and list(a.text) == ["HtoD 64 MiB", "kernel"]
    assert list(fig.fig.layout.yaxis.categoryarray) == ["copy channel 11", "copy channel 10", "compute channel 1"]
    assert a.marker.pattern.shape != b.marker.pattern.shape  # told apart by more than colour
    assert "LIVE" in fig.fig.layout.title.text


def test_no_records_or_bad_records_are_input_errors():
    with pytest.raises(InputError, match="no CUPTI records"):
        channel_lanes.lanes_figure([], [(Mode.REPLAY, "m")], "t")
    with pytest.raises(InputError):
        channel_lanes.lanes_figure([{"kind": "memcpy"}], [(Mode.REPLAY, "m")], "t")
