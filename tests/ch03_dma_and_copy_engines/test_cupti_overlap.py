"""Chapter 3b's CUPTI experiment (helpers/ch03_dma_and_copy_engines/cupti_overlap.py): the page's
traced code on stand-ins, the skip without CUPTI, and the overlap figures computed from records
(SIMULATED records)."""

from __future__ import annotations

import types

import fake_cupy
import pytest
from conftest import needs_gpu
from fake_cupti import ActivityMemcpyKind as MK
from fake_cupti import FakeCupti, memcpy

from helpers.ch03_dma_and_copy_engines import cupti_overlap as co
from helpers.core.errors import InputError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import cupti_trace as ct
from helpers.presentation.figures import CourseFigure


def pair(h2d, d2h, h2d_channel=10, d2h_channel=13):
    fake = FakeCupti()
    return [ct.record_from_activity(a, fake) for a in (
        memcpy(MK.HTOD, *h2d, stream=13, channel=h2d_channel, corr=1),
        memcpy(MK.DTOH, *d2h, stream=14, channel=d2h_channel, corr=2))]


def evidence(*repeats, mode=Mode.REPLAY, source="H100 test machine"):
    return Evidence("copy_engines.cupti_bidirectional", {"nbytes": 64 << 20,
                                                         "repeats": [{"records": r} for r in repeats]},
                    mode, source, why="a test")


def test_one_repeat_overlap_in_ns_and_fractions():
    p = co.repeat_overlap(pair((0, 1000), (200, 1500)))
    assert p["overlap_us"] == pytest.approx(0.8)
    assert p["frac_h2d"] == pytest.approx(0.8) and p["frac_d2h"] == pytest.approx(800 / 1300)
    assert p["h2d_channels"] == [10] and p["d2h_channels"] == [13]


def test_serial_copies_do_not_overlap():
    assert co.repeat_overlap(pair((0, 1000), (1000, 2000)))["overlap_us"] == 0


def test_a_repeat_without_both_directions_is_an_input_error():
    with pytest.raises(InputError, match="HtoD and a DtoH"):
        co.repeat_overlap(pair((0, 1), (0, 1))[:1])


def test_summary_gives_median_and_range_over_repeats():
    s = co.summary(evidence(pair((0, 1000), (0, 1000)), pair((0, 1000), (500, 1500)),
                            pair((0, 1000), (900, 1900), d2h_channel=10)).data)
    assert s["n"] == 3
    assert s["frac_h2d"] == {"median": pytest.approx(0.5), "min": pytest.approx(0.1), "max": pytest.approx(1.0)}
    assert s["d2h_channels"] == [10, 13] and s["apart"] is False


def test_no_repeats_is_an_input_error():
    with pytest.raises(InputError):
        co.summary({"nbytes": 1, "repeats": []})


def test_lines_follow_the_data_and_name_the_recording():
    ev = evidence(pair((0, 1000), (100, 1100)), pair((0, 1000), (300, 1300)), pair((0, 1000), (200, 1200)))
    lines = co.overlap_lines(ev, ev)
    assert lines[0].startswith("3 repeats, recorded on H100 test machine: the h2d copies ran on copy channel(s) 10 "
                               "and the d2h on 13 (never the same channel)")
    assert "They overlapped for 0 µs" not in lines[1] and "80% of the h2d copy's time (70%–90%)" in lines[1]


def test_figure_picks_the_median_repeat_and_says_replayed():
    ev = evidence(pair((0, 1000), (100, 1100)), pair((0, 1000), (900, 1900)), pair((0, 1000), (500, 1500)))
    fig = co.lanes_figure(ev)
    assert isinstance(fig, CourseFigure)
    assert "repeat 3 of 3" in fig.fig.layout.title.text and "REPLAY · recorded on H100 test machine" in fig.fig.layout.title.text
    assert {y for tr in fig.fig.data for y in tr.y} == {"copy channel 10", "copy channel 13"}
    for bad in (3, -1, True, "1"):
        with pytest.raises(InputError):
            co.lanes_figure(ev, repeat=bad)


def test_rows_one_per_repeat():
    rows = co.rows(evidence(pair((0, 1000), (0, 500)), pair((0, 1000), (0, 1000))))
    assert rows == [("1", "10 / 13", "1", "0", "0", "50%", "100%"), ("2", "10 / 13", "1", "1", "1", "100%", "100%")]


def test_no_cupti_is_a_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(ct, "unavailable_reason", lambda: "pyelftools is missing, and ...")
    with pytest.raises(SkipExperiment, match="pyelftools is missing"):
        co.record_cupti_bidirectional(quick=True)


def test_the_pages_code_issues_both_copies_inside_one_trace(monkeypatch):
    fake = FakeCupti()
    monkeypatch.setattr(ct._State, "callbacks_registered", False)
    monkeypatch.setattr(ct, "unavailable_reason", lambda: None)
    monkeypatch.setattr(ct, "_load_cupti", lambda: fake)
    monkeypatch.setattr(co, "cp", types.SimpleNamespace(cuda=types.SimpleNamespace(Event=fake_cupy.Event)))
    up, down = fake_cupy.Stream(), fake_cupy.Stream()
    up.ptr, down.ptr = 13, 14
    dev_in = types.SimpleNamespace(set=lambda h, stream: fake.pending.append(
        memcpy(MK.HTOD, 0, 100, stream=stream.ptr, channel=10, corr=1)))
    dev_out = types.SimpleNamespace(get=lambda stream, out, blocking=True: None if blocking else fake.pending.append(
        memcpy(MK.DTOH, 5, 95, stream=stream.ptr, channel=13, corr=2)))
    order = []
    gate = types.SimpleNamespace(block=lambda s: order.append(("block", s.ptr)), release=lambda: order.append("release"),
                                 check=lambda: order.append("check"))
    dev_in.set, set_in = (lambda h, stream: (order.append(("h2d", stream.ptr)), set_in(h, stream))), dev_in.set
    recs = co.both_directions_under_cupti(gate, (up, down), None, dev_in, dev_out, None)
    assert [(r["copy"], r["stream"]) for r in recs] == [("HtoD", 13), ("DtoH", 14)]
    # both streams are shut before the first copy is queued, released after both, checked at the end
    assert order == [("block", 13), ("block", 14), ("h2d", 13), "release", "check"]
    assert "enable MEMCPY" in fake.calls and not any("KERNEL" in c for c in fake.calls)


@needs_gpu
def test_live_quick_run_records_both_directions_each_repeat():
    """On the GPU machine: every repeat has an h2d and a d2h record of the recorded size."""
    data = co.record_cupti_bidirectional(quick=True)
    s = co.summary(data)
    assert s["n"] == 3
    for rep in data["repeats"]:
        assert {r["bytes"] for r in rep["records"] if r["kind"] == "memcpy"} == {data["nbytes"]}
