"""Chapter 7's CUPTI experiment (helpers/ch07_command_submission/channels.py): the page's traced
code on stand-ins (a fake cupti module and fake streams/arrays), the skip when CUPTI cannot trace,
and the summaries, sentences and figure computed from records (SIMULATED records)."""

from __future__ import annotations

import types

import fake_cupy
import pytest
from conftest import needs_gpu
from fake_cupti import ActivityMemcpyKind as MK
from fake_cupti import FakeCupti, kernel, memcpy

from helpers.ch07_command_submission import channels
from helpers.core.errors import InputError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import cupti_trace as ct
from helpers.presentation.figures import CourseFigure


def recs(acts):
    fake = FakeCupti()
    return [ct.record_from_activity(a, fake) for a in acts]


def two_case(kernel_b_channel=2, h2d_b_channel=11, offset_b=0):
    o = offset_b
    return recs([memcpy(MK.HTOD, 0, 1250, stream=13, channel=10, corr=1),
                 kernel("k", 1300, 1620, stream=13, channel=1, corr=2),
                 memcpy(MK.DTOH, 1700, 2930, stream=13, channel=12, corr=3),
                 memcpy(MK.HTOD, o + 10, o + 1260, stream=14, channel=h2d_b_channel, corr=4),
                 kernel("k", o + 1320, o + 1640, stream=14, channel=kernel_b_channel, corr=5),
                 memcpy(MK.DTOH, o + 1720, o + 2950, stream=14, channel=13, corr=6)])


def many_case(n=16, compute_channels=8):
    acts = []
    for i in range(n):
        acts.append(memcpy(MK.HTOD, 10 * i, 10 * i + 5, stream=20 + i, channel=10 + i % 4, corr=3 * i, nbytes=4 << 20))
        acts.append(kernel("k", 10 * i + 6, 10 * i + 8, stream=20 + i, channel=1 + i % compute_channels, corr=3 * i + 1))
        acts.append(memcpy(MK.DTOH, 10 * i + 9, 10 * i + 12, stream=20 + i, channel=30 + i % 4, corr=3 * i + 2,
                           nbytes=4 << 20))
    return recs(acts)


def evidence(two=None, many=None):
    data = {"two": {"streams": 2, "nbytes": 64 << 20, "records": two or two_case()},
            "many": {"streams": 16, "nbytes": 4 << 20, "records": many or many_case()}}
    return Evidence("submission.cupti_channels", data, Mode.REPLAY, "H100 test machine", why="a test")


# -- the page's code on stand-ins ------------------------------------------------------------------
class FakeDevArray:
    """Each call queues the activity CUPTI would report for it on the stream it was given."""

    def __init__(self, cupti, log):
        self.cupti, self.log = cupti, log

    def _add(self, act):
        act.correlation_id = len(self.cupti.pending)
        self.cupti.pending.append(act)

    def set(self, h, stream):
        self.log.append(("h2d", stream.ptr))
        self._add(memcpy(MK.HTOD, 10 * len(self.log), 10 * len(self.log) + 5, stream=stream.ptr, channel=10))

    def __imul__(self, k):
        self.log.append(("kernel", self.log[-1][1]))
        self._add(kernel("k", 10 * len(self.log), 10 * len(self.log) + 5, stream=self.log[-1][1], channel=1))
        return self

    def get(self, stream, out):
        self.log.append(("d2h", stream.ptr))
        self._add(memcpy(MK.DTOH, 10 * len(self.log), 10 * len(self.log) + 5, stream=stream.ptr, channel=12))


@pytest.fixture
def fake_cupti(monkeypatch):
    fake = FakeCupti()
    ct.unavailable_reason.cache_clear()
    monkeypatch.setattr(ct._State, "callbacks_registered", False)
    monkeypatch.setattr(ct, "unavailable_reason", lambda: None)
    monkeypatch.setattr(ct, "_load_cupti", lambda: fake)
    monkeypatch.setattr(channels, "cp", types.SimpleNamespace(cuda=types.SimpleNamespace(Event=fake_cupy.Event)))
    return fake


def test_the_pages_code_traces_each_streams_three_steps_in_order(fake_cupti):
    log = []
    streams = [fake_cupy.Stream(), fake_cupy.Stream()]
    for i, s in enumerate(streams):
        s.ptr = 13 + i
    devs = [FakeDevArray(fake_cupti, log) for _ in streams]
    got = channels.streams_on_channels(streams, [None, None], devs)
    assert log == [("h2d", 13), ("kernel", 13), ("d2h", 13), ("h2d", 14), ("kernel", 14), ("d2h", 14)]
    assert [(r["stream"], r["copy"] or r["kind"]) for r in got] == [
        (13, "HtoD"), (13, "kernel"), (13, "DtoH"), (14, "HtoD"), (14, "kernel"), (14, "DtoH")]
    assert fake_cupti.enabled == set()


def test_mismatched_buffers_are_refused(fake_cupti):
    with pytest.raises(ValueError):
        channels.streams_on_channels([fake_cupy.Stream()], [None, None], [])


def test_no_cupti_is_a_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(ct, "unavailable_reason", lambda: "cupti-python is not installed (pip ...)")
    with pytest.raises(SkipExperiment, match="cupti-python is not installed"):
        channels.record_channels(quick=True)


# -- what the records show -------------------------------------------------------------------------
def test_two_summary_reads_channels_and_overlap():
    s = channels.two_summary(two_case())
    assert s["streams"] == [13, 14]
    assert s["channels"][13] == {"DtoH": [12], "HtoD": [10], "kernel": [1]}
    assert s["apart"] == {"kernel": True, "HtoD": True, "DtoH": True}
    assert s["own_channels"][13] == [1, 10, 12]
    assert s["types"][13] == ["async_memcpy", "compute"]
    # A busy 0..1250, 1300..1620, 1700..2930; B 10..1260, 1320..1640, 1720..2950
    assert s["overlap"]["ns"] == 1240 + 300 + 1210


def test_shared_kernel_channel_is_seen():
    s = channels.two_summary(two_case(kernel_b_channel=1))
    assert s["apart"]["kernel"] is False and s["apart"]["HtoD"] is True


def test_serial_streams_do_not_overlap():
    assert channels.two_summary(two_case(offset_b=5000))["overlap"]["ns"] == 0


def test_one_stream_is_not_a_two_stream_case():
    with pytest.raises(InputError, match="two streams"):
        channels.two_summary([r for r in two_case() if r["stream"] == 13])


def test_pool_summary_counts_channels_and_sharing():
    p = channels.pool_summary(many_case(16, compute_channels=8))
    assert p["streams"] == 16
    assert p["kernel"] == {"channels": 8, "most_streams_on_one": 2}
    assert p["HtoD"] == {"channels": 4, "most_streams_on_one": 4}


def test_text_follows_the_data():
    text = channels.channels_text(evidence())
    assert text.startswith("Recorded on H100 test machine: stream A's work ran on 3 channels (1, 10, 12), "
                           "compute and copy channels")
    assert "kernels ran on different channels" in text and "16 streams" in text
    shared = channels.channels_text(evidence(two=two_case(kernel_b_channel=1)))
    assert "kernels ran on shared channels" in shared


def test_figure_has_a_lane_per_channel_and_says_replayed():
    fig = channels.lanes_figure(evidence())
    assert isinstance(fig, CourseFigure)
    lanes = {y for tr in fig.fig.data for y in tr.y}
    assert lanes == {"compute channel 1", "compute channel 2", "copy channel 10", "copy channel 11",
                     "copy channel 12", "copy channel 13"}
    assert [tr.name for tr in fig.fig.data] == ["stream A", "stream B"]
    assert "REPLAY · recorded on H100 test machine" in fig.fig.layout.title.text
    with pytest.raises(InputError):
        channels.lanes_figure(evidence(), case="three")


def test_rows_name_each_streams_channels():
    rows = channels.channel_rows(evidence())
    assert ("stream A (CUPTI id 13)", "kernel", "1") in rows and ("stream B (CUPTI id 14)", "HtoD", "11") in rows


def test_exercise_7_6_has_one_right_answer_and_feedback_for_each():
    from helpers.ch07_command_submission import exercises

    assert exercises.ex76_stream_order(None) is None
    assert exercises.ex76_stream_order("c") is True
    for wrong in "abd":
        assert exercises.ex76_stream_order(wrong) is False
    assert set(exercises.ORDER_WHY) == set(exercises.ORDER_OPTIONS)


@needs_gpu
def test_live_quick_run_puts_one_streams_work_on_several_channels():
    """On the GPU machine: the recorder's quick run, read by the page's own summaries."""
    data = channels.record_channels(quick=True)
    s = channels.two_summary(data["two"]["records"])
    a = s["streams"][0]
    assert set(s["channels"][a]) == {"HtoD", "kernel", "DtoH"}
    assert s["types"][a] == ["async_memcpy", "compute"]
    assert channels.pool_summary(data["many"]["records"])["streams"] == data["many"]["streams"]


def test_a_skipped_live_run_says_why_and_the_title_follows_the_stream_count():
    import dataclasses

    ev = dataclasses.replace(evidence(), why="the live run was skipped: CUPTI cannot trace here: the driver "
                                             "refuses CUPTI to this user")
    assert channels.channels_text(ev).startswith("(This page replays: the live run was skipped: CUPTI cannot")
    assert "more than CUDA's default 8 connections" in channels.lanes_figure(ev, "many").title
    few = evidence(many=many_case(4, compute_channels=4))
    few.data["many"]["streams"] = 4  # the data dict itself is not frozen
    assert "more than" not in channels.lanes_figure(few, "many").title
