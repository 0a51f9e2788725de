"""Chapter 9's CUPTI timeline (radar.cupti_timeline) on fake records: the frames are matched to their
own CUPTI records (not the warm-up's, not another stream's), the differences between the two timelines
are the ones built into the fake, the overhead verdict follows the repeats' spread, the figure and
sentences follow the Evidence's mode, the experiment skips with CUPTI's reason where CUPTI cannot run,
the page says 'not recorded' only when the recording is truly absent, and Exercise 9.6's check."""

from __future__ import annotations

import copy
import inspect
import json

import numpy as np
import pytest
from conftest import needs_gpu, write_reference

from helpers import course
from helpers.ch09_radar_pipeline import cupti_timeline as ct
from helpers.ch09_radar_pipeline import exercises
from helpers.core import errors, experiments
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import cupti_trace
from helpers.presentation.figures import CourseFigure

T0 = 1_790_000_000_000_000_000  # CUPTI's clock: close to CLOCK_REALTIME in ns
OFFSET_NS = 3_250_000  # where the events' origin sits on CUPTI's clock, from the trace's start
FRAME = 16 << 20


def _rec(kind, start, end, *, stream, channel, ctype, corr, copy_kind="", nbytes=0, name=""):
    return {"kind": kind, "name": name or kind, "copy": copy_kind, "bytes": nbytes, "stream": stream,
            "channel": channel, "channel_type": ctype, "start_ns": int(start), "end_ns": int(end),
            "correlation": corr, "device": 0}


def fake_run(design="pipelined", frames=8, buffers=3, *, copy_short_ns=2000, gap_ns=7000, done_late_ns=1500,
             kernels=3, wander_ns=0, memset=False):
    """A run as run_pipeline returns it (its event timeline) and the CUPTI records of the same frames, built
    so that every difference is known: CUPTI's copy is copy_short_ns shorter than the events' bar, the first
    kernel starts gap_ns after the copy ends, the done event comes done_late_ns after the last kernel, and the
    clocks' offset grows by wander_ns per frame. A warm-up copy of the same size and its kernels come first,
    on the default stream (7)."""
    tl, recs, corr = [], [], 10
    recs.append(_rec("memcpy", T0 + 100, T0 + 400_000, stream=7, channel=9, ctype="async_memcpy", corr=1,
                     copy_kind="HtoD", nbytes=FRAME))
    recs.append(_rec("kernel", T0 + 500_000, T0 + 600_000, stream=7, channel=1, ctype="compute", corr=2))
    for f in range(frames):
        b = f % buffers
        a = 5.0 + 4.0 * f  # ms from the origin event
        copy_ms = [a, a + 0.330]
        cs = T0 + OFFSET_NS + f * wander_ns + round(a * 1e6)
        ce = cs + 330_000 - copy_short_ns
        recs.append(_rec("memcpy", cs, ce, stream=13 + b, channel=10 + b, ctype="async_memcpy", corr=corr,
                         copy_kind="HtoD", nbytes=FRAME))
        corr += 1
        if memset:  # a memset of the processing's, between the copy and the first kernel
            recs.append(_rec("memset", ce + 1000, ce + 2000, stream=13 + b, channel=1 + b, ctype="compute", corr=corr,
                             nbytes=4096))
            corr += 1
        k = ce + gap_ns
        for _ in range(kernels):
            recs.append(_rec("kernel", k, k + 40_000, stream=13 + b, channel=1 + b, ctype="compute", corr=corr))
            corr += 1
            k += 45_000
        last_end = k - 5_000
        done_ms = (last_end + done_late_ns - (T0 + OFFSET_NS + f * wander_ns)) / 1e6
        tl.append({"seq": f, "buffer": b, "copy_ms": copy_ms, "kernels_ms": [copy_ms[1], done_ms],
                   "ready_ms": a - 0.1, "seen_ms": done_ms + 0.02})
    run = {"design": design, "frame_bytes": FRAME, "period_s": 4e-3, "buffers": buffers,
           "latency_us": [500 + f for f in range(frames)], "copy_us_p50": 330.0, "kernel_us_p50": 150.0,
           "dropped": 0, "cpu_s": 0.01, "extra": {"timeline": list(reversed(tl))}}  # completion order differs
    return run, sorted(recs, key=lambda r: r["start_ns"])


def matched_run(**kw) -> dict:
    run, recs = fake_run(**kw)
    run["cupti"] = ct.match_frames(run, recs, T0)
    return run


def _evidence(data: dict, mode=Mode.REPLAY, source="NVIDIA H100 80GB HBM3 · h100-pcie") -> Evidence:
    return Evidence(ct.EXPERIMENT_ID, json.loads(json.dumps(data)), mode, source, why="a test")


def fake_data() -> dict:
    runs = [matched_run(design="registered", buffers=1), matched_run(design="pipelined", buffers=3)]
    over = [{"design": d, "cupti": on, "repeat": r, "frames": 100, "p50_us": base + (30.0 if on else 0.0) + r,
             "q1_us": 0.0, "q3_us": 0.0, "copy_us_p50": 330.0, "kernel_us_p50": 150.0, "dropped": 0, "cpu_s": 0.1,
             "records": 900 if on else 0}
            for r in range(3) for d, base in (("registered", 800.0), ("pipelined", 820.0)) for on in (True, False)]
    return {"frames": 8, "frame_bytes": FRAME, "period_s": 4e-3, "runs": runs,
            "overhead": {"frames": 100, "repeats": 3, "runs": over}}


# ---------------------------------------------------------------- matching the records to the frames

def test_each_frame_gets_its_own_copy_and_kernels_not_the_warm_ups():
    run, recs = fake_run(frames=9, buffers=3)
    m = ct.match_frames(run, recs, T0)
    assert m["problems"] == []
    assert [f["seq"] for f in m["frames"]] == list(range(9))
    for f in m["frames"]:
        assert f["stream"] == 13 + f["buffer"]
        assert ct.item(f["copy"])["channel"] == 10 + f["buffer"]
        assert [ct.item(w)["channel"] for w in f["work"]] == [1 + f["buffer"]] * 3
        assert ct.item(f["copy"])["start_ns"] == OFFSET_NS + round((5.0 + 4.0 * f["seq"]) * 1e6)
    assert m["unmatched_records"] == 2  # the warm-up's copy and kernel


def test_a_run_with_fewer_frame_copies_than_frames_is_not_matched():
    run, recs = fake_run(frames=4)
    recs = [r for r in recs if not (r["kind"] == "memcpy" and r["stream"] != 7)][:3]
    m = ct.match_frames(run, recs, T0)
    assert m["frames"] == [] and "for 4 frames" in m["problems"][0]
    assert ct.run_differences(dict(run, cupti=m))["frames"] == 0


def test_a_matching_that_mixes_streams_says_so():
    run, recs = fake_run(frames=6, buffers=2)
    for f in run["extra"]["timeline"]:
        f["buffer"] = 0  # the events say one buffer; CUPTI saw two streams
    problems = ct.match_frames(run, recs, T0)["problems"]
    assert any("buffer 0's frames were matched to CUPTI streams [13, 14]" in p for p in problems)


def test_bad_records_are_refused():
    run, recs = fake_run(frames=2)
    recs[3] = dict(recs[3], end_ns=recs[3]["start_ns"] - 1)
    with pytest.raises(errors.InputError):
        ct.match_frames(run, recs, T0)


# ---------------------------------------------------------------- what differs

def test_the_differences_are_the_ones_built_in():
    d = ct.run_differences(matched_run(copy_short_ns=2000, gap_ns=7000, done_late_ns=1500, kernels=3))
    assert d["frames"] == 8 and d["streams"] == 3
    assert d["copy_diff"]["median"] == pytest.approx(2.0, abs=0.01)
    assert d["gap"]["median"] == pytest.approx(7.0, abs=0.01)
    # events: copied → done starts 2 µs after CUPTI's copy end and ends 1.5 µs after its last kernel
    assert d["processing_diff"]["median"] == pytest.approx(1.5 - 2.0, abs=0.01)
    assert d["busy"]["median"] == pytest.approx(120.0, abs=0.01)
    assert d["offset_ns"] == pytest.approx(OFFSET_NS, abs=1) and d["offset_wander"] == pytest.approx(0.0, abs=0.01)
    assert d["channels"] == [("async_memcpy", 10), ("async_memcpy", 11), ("async_memcpy", 12),
                             ("compute", 1), ("compute", 2), ("compute", 3)]


def test_a_memset_in_the_processing_is_work_but_not_the_first_kernel():
    run = matched_run(frames=3, buffers=1, memset=True)
    assert [ct.item(w)["kind"] for w in run["cupti"]["frames"][0]["work"]] == ["memset", "kernel", "kernel", "kernel"]
    d = ct.run_differences(run)
    assert d["gap"]["median"] == pytest.approx(7.0, abs=0.01) and d["busy"]["median"] == pytest.approx(121.0, abs=0.01)
    fig = ct.beside_figure(_evidence({"runs": [run]}), "pipelined")
    assert len(next(tr for tr in fig.fig.data if tr.name == "memsets (CUPTI)").base) == 3


def test_a_wandering_clock_offset_is_measured():
    d = ct.run_differences(matched_run(frames=5, wander_ns=800))
    assert d["offset_wander"] == pytest.approx(3.2, abs=0.01)
    assert d["copy_diff"]["median"] == pytest.approx(2.0, abs=0.01)  # per-frame alignment is unaffected


def test_overlap_of_copies_and_kernels_by_each_timeline():
    run = matched_run(frames=2, buffers=2)
    ev0, ev1 = sorted(run["extra"]["timeline"], key=lambda f: f["seq"])
    ev1["copy_ms"][0] = ev0["kernels_ms"][0] + 0.010  # by the events, frame 1's copy starts 10 µs into frame 0's processing
    ev1["copy_ms"][1] = ev1["copy_ms"][0] + 0.330
    d = ct.run_differences(run)
    want = (min(ev0["kernels_ms"][1], ev1["copy_ms"][1]) - ev1["copy_ms"][0]) * 1e3
    assert d["overlap_events_us"] == pytest.approx(want, abs=0.01)
    assert d["overlap_cupti_us"] == 0.0  # CUPTI's copies never ran under a kernel in this fake


def test_channels_used_counts_copy_and_compute_channels():
    ev = _evidence(fake_data())
    assert ct.channels_used(ev, "registered") == 2 and ct.channels_used(ev, "pipelined") == 6
    with pytest.raises(errors.InputError):
        ct.channels_used(ev, "staged")


def test_the_sentences_carry_the_numbers_and_the_mode():
    lines = ct.difference_lines(_evidence(fake_data()))
    assert lines[0].startswith("The same frames recorded on NVIDIA H100")
    assert "+2.0 µs (median; +2.0 to +2.0)" in lines[2] and "more than the events' stated 0.5 µs" in lines[2]
    assert "7.0 µs (median) between the copy's end" in lines[2]
    live = ct.difference_lines(_evidence(fake_data(), Mode.LIVE, "Test GPU"))
    assert live[0].startswith("The same frames measured now on Test GPU") and "recorded" not in " ".join(live)
    near = fake_data()
    near["runs"] = [matched_run(copy_short_ns=300)]
    assert "within the events' stated" in ct.difference_lines(_evidence(near))[1]
    skipped = Evidence(ct.EXPERIMENT_ID, fake_data(), Mode.REPLAY, "NVIDIA H100 80GB HBM3 · h100-pcie",
                       why="the live run was skipped: CUPTI cannot trace here: cupti-python is not installed")
    assert ct.difference_lines(skipped)[0] == f"(This page replays: {skipped.why}.)"
    rows = ct.difference_rows(_evidence(fake_data()))
    assert [r[0] for r in rows] == ["registered", "pipelined"] and all(len(r) == len(ct.DIFFERENCE_HEADERS) for r in rows)


def test_overhead_verdict_follows_the_spread_of_the_repeats():
    lines = ct.overhead_lines(_evidence(fake_data()))
    assert "3 runs of 100 frames each way" in lines[0]
    assert "registered: median 0.831 ms with CUPTI, 0.801 ms without (+30.0 µs" in lines[1]
    assert "beyond the spread" in lines[1]
    close = fake_data()
    for r in close["overhead"]["runs"]:
        r["p50_us"] += -30.0 if r["cupti"] else 0.0
        r["p50_us"] += 5.0 * r["repeat"] if r["cupti"] else 0.0
    assert all("within the spread" in line for line in ct.overhead_lines(_evidence(close))[1:])
    assert len(ct.overhead_rows(_evidence(fake_data()))) == 4


def test_the_figure_has_a_lane_per_stream_and_per_channel_on_one_clock():
    ev = _evidence(fake_data(), Mode.LIVE, "Test GPU")
    fig = ct.beside_figure(ev, "pipelined", first=4)
    assert isinstance(fig, CourseFigure) and fig.modes == [Mode.LIVE] and "LIVE" in fig.description()
    lanes = {y for tr in fig.fig.data for y in tr.y}
    assert {"events: stream 0", "events: stream 1", "events: stream 2"} <= lanes
    assert "CUPTI: copy channel 10" in lanes and "CUPTI: compute channel 1" in lanes
    order = list(fig.fig.layout.yaxis.categoryarray)
    assert order.index("CUPTI: copy channel 10") < order.index("events: stream 2")  # events above
    assert "A timeline (Gantt chart)" in fig.description()
    cupti_copy = next(tr for tr in fig.fig.data if tr.name == "copy H→D (CUPTI)")
    event_copy = next(tr for tr in fig.fig.data if tr.name == "copy H→D (events)")
    assert np.allclose(cupti_copy.base, event_copy.base, atol=1e-6)  # aligned: both copies start together here
    assert len(cupti_copy.base) == 4
    assert "REPLAY" in ct.beside_figure(_evidence(fake_data()), "registered").description()


# ---------------------------------------------------------------- the experiment

@pytest.fixture
def stand_in_cupti(monkeypatch):
    """CUPTI that can 'trace', a pipeline that returns the fake runs; the calls are kept."""
    calls = []

    def code(cfg, cupti=True):
        calls.append((cfg.design, cfg.frames, cupti))
        run, recs = fake_run(design=cfg.design, frames=cfg.frames, buffers=3 if cfg.design == "pipelined" else 1)
        return run, ({"t0_ns": T0, "records": recs} if cupti else None)

    monkeypatch.setattr(cupti_trace, "unavailable_reason", lambda: None)
    return code, calls


def test_the_experiment_runs_both_designs_traced_then_alternates_cupti_on_and_off(stand_in_cupti):
    code, calls = stand_in_cupti
    data = experiments.get(ct.EXPERIMENT_ID).run(True, code=code)
    json.dumps(data)  # it goes into a recording
    assert [r["design"] for r in data["runs"]] == ["registered", "pipelined"]
    assert all(r["cupti"]["problems"] == [] and len(r["cupti"]["frames"]) == ct.QUICK_TIMELINE_FRAMES
               for r in data["runs"])
    assert calls[:2] == [("registered", ct.QUICK_TIMELINE_FRAMES, True), ("pipelined", ct.QUICK_TIMELINE_FRAMES, True)]
    over = data["overhead"]["runs"]
    assert len(over) == 2 * 2 * ct.QUICK_OVERHEAD_REPEATS
    assert [c[2] for c in calls[2:6]] == [True, False, True, False] and [c[2] for c in calls[6:10]] == [False, True] * 2
    assert {r["records"] > 0 for r in over if r["cupti"]} == {True} and {r["records"] for r in over if not r["cupti"]} == {0}


def test_a_live_page_can_ask_for_shorter_overhead_runs(stand_in_cupti):
    """overhead_frames sets the frames of every run with and without CUPTI (not the traced timeline's);
    the recorder's default stays OVERHEAD_FRAMES, and a length outside 20..1000 is refused."""
    code, calls = stand_in_cupti
    data = experiments.get(ct.EXPERIMENT_ID).run(False, overhead_frames=40, code=code)
    assert data["overhead"]["frames"] == 40 and data["frames"] == ct.TIMELINE_FRAMES
    assert {c[1] for c in calls[2:]} == {40} and len(calls[2:]) == 2 * 2 * ct.OVERHEAD_REPEATS
    assert inspect.signature(ct.cupti_timeline_experiment).parameters["overhead_frames"].default == ct.OVERHEAD_FRAMES
    for bad in (19, 1001, 2.5):
        with pytest.raises((errors.InputError, errors.InputTypeError), match="overhead_frames"):
            experiments.get(ct.EXPERIMENT_ID).check_params({"overhead_frames": bad})


def test_the_experiment_skips_with_cuptis_reason(monkeypatch):
    monkeypatch.setattr(cupti_trace, "unavailable_reason", lambda: "cupti-python is not installed (pip install …)")
    with pytest.raises(errors.SkipExperiment, match="cupti-python is not installed"):
        experiments.get(ct.EXPERIMENT_ID).run(True)


def test_a_trace_refused_mid_run_is_a_skip(monkeypatch):
    monkeypatch.setattr(cupti_trace, "unavailable_reason", lambda: None)

    def refused(cfg, cupti=True):
        raise errors.NoGPUError("CUPTI cannot trace here: the driver refuses CUPTI to this user")

    with pytest.raises(errors.SkipExperiment, match="refuses CUPTI"):
        experiments.get(ct.EXPERIMENT_ID).run(True, code=refused)


# ---------------------------------------------------------------- the page's Evidence

def _ctx(folder) -> course.Context:
    return course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name=str(folder))


def test_the_page_replays_the_recording_through_ctx_get(tmp_path):
    present = write_reference(tmp_path, "present", add={ct.EXPERIMENT_ID: fake_data()}, chapter=9)
    ev = _ctx(present).get(ct.EXPERIMENT_ID)
    assert ev.ok and ev.mode is Mode.REPLAY and ct.channels_used(ev, "pipelined") == 6


def test_a_damaged_recording_still_raises(tmp_path):
    folder = write_reference(tmp_path, "damaged", add={ct.EXPERIMENT_ID: fake_data()}, chapter=9)
    path = folder / f"{ct.EXPERIMENT_ID}.json"
    doc = json.loads(path.read_text())
    doc["data"]["frames"] = 9  # an edit by hand: the checksum no longer holds
    path.write_text(json.dumps(doc))
    with pytest.raises(errors.ReferenceDataError):
        _ctx(folder).get(ct.EXPERIMENT_ID)


# ---------------------------------------------------------------- Exercise 9.6

def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def right_overlap(records):
    copies = _union([(r["start_ns"], r["end_ns"]) for r in records if r["kind"] == "memcpy"])
    kernels = _union([(r["start_ns"], r["end_ns"]) for r in records if r["kind"] == "kernel"])
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in copies for s2, e2 in kernels)


def pairwise_overlap(records):
    return sum(max(0, min(c["end_ns"], k["end_ns"]) - max(c["start_ns"], k["start_ns"]))
               for c in records if c["kind"] == "memcpy" for k in records if k["kind"] == "kernel")


def test_exercise_96_ticks_a_union_and_names_the_double_count(capsys):
    assert exercises.copy_kernel_overlap(right_overlap) is True
    assert exercises.copy_kernel_overlap(pairwise_overlap) is False
    assert "counted twice" in capsys.readouterr().out
    assert exercises.copy_kernel_overlap(lambda records: 0) is False


def test_exercise_96_starter_is_not_answered_and_its_input_is_a_copy(capsys):
    def starter(records):
        raise NotImplementedError

    assert exercises.copy_kernel_overlap(starter) is None
    assert "not answered" in capsys.readouterr().out

    def spoils(records):
        n = right_overlap(records)
        records.clear()  # the check's own cases must survive a learner who empties the list
        return n

    assert exercises.copy_kernel_overlap(spoils) is True
    cases = exercises._overlap_cases()
    assert copy.deepcopy(cases) == exercises._overlap_cases()  # seeded: the same cases every run


def test_traced_run_wraps_the_run_in_one_trace_and_only_when_asked(monkeypatch):
    import contextlib

    from helpers.models.radar import pipeline

    opened = []
    run, recs = fake_run(frames=3, buffers=1)

    @contextlib.contextmanager
    def trace():
        t = cupti_trace.Trace(t0_ns=T0)
        opened.append(t)
        yield t
        t.records = recs  # filled on exit, as cupti_trace does

    class Result:
        def to_dict(self):
            assert len(opened) in (0, 1)
            return copy.deepcopy(run)

    monkeypatch.setattr(cupti_trace, "trace", trace)
    monkeypatch.setattr(pipeline, "run_pipeline", lambda cfg: Result())
    got, tr = ct.traced_run(object())
    assert got == run and tr == {"t0_ns": T0, "records": recs} and len(opened) == 1
    got, tr = ct.traced_run(object(), cupti=False)
    assert tr is None and len(opened) == 1


@needs_gpu
def test_live_quick_run_matches_every_frame_to_its_cupti_records():
    """On the GPU machine: the recorder's quick run, with CUPTI installed, matches every frame of both designs
    to a copy on a copy channel and kernels on a compute channel, on one stream per device buffer."""
    data = json.loads(json.dumps(experiments.get(ct.EXPERIMENT_ID).run(True)))
    ev = _evidence(data, Mode.LIVE, "this GPU")
    for run in data["runs"]:
        assert run["cupti"]["problems"] == [], run["cupti"]["problems"]
        d = ct.run_differences(run)
        assert d["frames"] == len(run["extra"]["timeline"]) > 0
        assert d["streams"] == run["buffers"]
        assert {t for t, _ in d["channels"]} >= {"async_memcpy", "compute"}
    assert len(data["overhead"]["runs"]) == 2 * 2 * ct.QUICK_OVERHEAD_REPEATS
    assert ct.difference_lines(ev) and ct.overhead_lines(ev)


def test_exercise_9_6_cannot_read_the_expected_value_from_the_checkers_frame():
    """A learner function that looks up the checker's local `want` (sys._getframe) finds nothing to copy."""
    import sys

    def peeks(records):
        return sys._getframe(1).f_locals.get("want", 0)

    assert exercises.copy_kernel_overlap(peeks) is False
