"""Chapter 7's live part (helpers/ch07_command_submission/launch.py): the analysis of recorded
data, replay through ctx.get, the clear note when a recording lacks an experiment, bad input, and (on a GPU)
the behaviour of the measurements themselves — ordering, correctness, events. No timing
thresholds: speed claims live in recorded data."""

import json
import math

import numpy as np
import pytest
from conftest import declare_optional, needs_gpu, write_reference

from helpers import course
from helpers.ch07_command_submission import launch
from helpers.core import evidence, experiments
from helpers.core.errors import InputError, InputTypeError, NoGPUError, ReferenceDataError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.presentation.figures import CourseFigure

IDS = ("submission.launch_overhead", "submission.streams", "submission.graphs")


# -- synthetic recordings, shaped like the measurements (SIMULATED numbers) --------------------
def fake_launch_overhead(host=(3.0, 3.5, 9.0), device=(1.2, 1.4, 2.0), sys_s=0.0) -> dict:
    kinds = {}
    for (k, h, d) in zip(launch.LAUNCH_KINDS, host, device, strict=True):
        kinds[k] = {"queued": {"kind": k, "n": 10, "blocks": 3, "host_us": [h] * 3, "device_us": [d] * 3,
                               "ahead": [True, True, False], "host_us_median": h, "device_us_median": d,
                               "result_ok": True},
                    "round_trip": {"kind": k, "reps": 3, "us": [h + 10] * 3, "us_median": h + 10}}
    return {"kinds": kinds, "cpu_time": {"n": 1000, "user_s": 0.2, "sys_s": sys_s, "wall_s": 0.21},
            "device_files": {"/dev/nvidia0": 5, "/dev/nvidiactl": 9}}


def fake_streams(other=(0, 0, 0)) -> dict:
    return {"ordering": {"hold_s": 0.005, "trials": 3, "seen": {"same": [1, 1, 1], "other": list(other),
                                                                "event": [1, 1, 1]}},
            "events": {"requested_s": [0.001, 0.002], "measured_s": [0.00101, 0.00201]},
            "overlap": {"hold_s": 0.01, "reps": 3, "span_s": {"independent": 0.0101, "dependent": 0.0201}}}


def fake_graphs(per_kernel_individual=4.0, per_kernel_graph=1.0, ok=True) -> dict:
    chains = []
    for n in (1, 10, 100):
        ind = per_kernel_individual * n
        gra = per_kernel_graph * n + (5.0 if n == 1 else 0.0)
        chains.append({"n": n, "reps": 2, "capture_us": 50.0, "result_ok": ok,
                       "individual": {"submit_us": [ind] * 2, "wall_us": [ind + 2] * 2, "device_us": [n * 1.0] * 2},
                       "graph": {"submit_us": [3.0] * 2, "wall_us": [gra + 2] * 2, "device_us": [n * 1.0] * 2}})
    return {"chains": chains}


def obtained(eid: str, data: dict) -> Evidence:
    return Evidence(eid, data, Mode.REPLAY, "a test recording", why="a test")


def replay_ctx(name: str = "h100-pcie") -> course.Context:
    return course.Context(Mode.REPLAY, "no GPU in this test", gpu_name=None, reference_name=name)


# -- analysis --------------------------------------------------------------------------------
def test_launch_summary_and_rows_come_from_the_data():
    ob = obtained("submission.launch_overhead", fake_launch_overhead(host=(3.0, 4.0, 10.0), device=(1.5, 2.0, 2.5)))
    s = launch.launch_summary(ob.data)
    assert s["tiny"] == {"host_us": 4.0, "device_us": 2.0, "round_trip_us": 14.0}
    rows = launch.launch_rows(ob)
    assert [r[4] for r in rows] == ["2.0x", "2.0x", "4.0x"]
    assert rows[0][5] == "2/3"
    assert isinstance(launch.launch_figure(ob), CourseFigure)


@pytest.mark.parametrize("sys_s, word", [(0.0, "user-space work"), (0.01, "user-space work"),
                                         (0.2, "entered the kernel often")])
def test_syscall_verdict_is_decided_by_the_time_split(sys_s, word):
    text = launch.syscall_verdict(obtained("submission.launch_overhead", fake_launch_overhead(sys_s=sys_s)))
    assert word in text
    assert "/dev/nvidia0 x5" in text


def test_syscall_verdict_with_no_cpu_time():
    data = fake_launch_overhead()
    data["cpu_time"].update(user_s=0.0, sys_s=0.0)
    assert "too little CPU time" in launch.syscall_verdict(obtained("submission.launch_overhead", data))


@pytest.mark.parametrize("other, verdict", [((0, 0, 0), "never saw A's store"), ((1, 1, 1), "always after A"),
                                            ((0, 1, 0), "raced: saw A's store 1 of 3 times")])
def test_ordering_verdicts(other, verdict):
    rows = launch.ordering_rows(obtained("submission.streams", fake_streams(other)))
    assert rows[0][2] == "always after A" and rows[2][2] == "always after A"
    assert rows[1][2] == verdict


def test_overlap_rows_ratios():
    rows = launch.overlap_rows(obtained("submission.streams", fake_streams()))
    assert rows[-2][2] == "1.01" and rows[-1][2] == "2.01"


def test_graph_summary_and_verdict_follow_the_numbers():
    good = obtained("submission.graphs", fake_graphs(4.0, 1.0))
    lo = obtained("submission.launch_overhead", fake_launch_overhead())
    rows = launch.graph_summary(good.data)
    big = rows[-1]
    assert math.isclose(big["individual_wall_us_per_kernel"], 4.02)
    assert math.isclose(big["speedup_wall"], 4.02 / 1.02)
    text = launch.graph_verdict(good, lo, 0.06)
    assert "1.02 µs per kernel against 4.02" in text and "not the doorbell" in text
    assert "CPU's pace: 4.00 µs" in text  # one by one, submit 4.0 µs/kernel > the GPU's 1.4 µs ('tiny')
    assert isinstance(launch.graph_figure(good), CourseFigure)
    assert "no clear gain" in launch.graph_verdict(obtained("submission.graphs", fake_graphs(1.0, 1.0)), lo, 0.06)
    assert "wrong" in launch.graph_verdict(obtained("submission.graphs", fake_graphs(ok=False)), lo, 0.06)


def test_graph_gain_splits_cpu_and_gpu_work():
    g = launch.graph_gain(obtained("submission.graphs", fake_graphs(4.0, 1.0)),
                          obtained("submission.launch_overhead", fake_launch_overhead()), 0.06)
    assert g["n"] == 100 and g["cpu_one_by_one_us"] == 4.0 and math.isclose(g["cpu_graph_us"], 0.03)
    assert g["gpu_separate_us"] == 1.4 and g["gpu_graph_us"] == 1.0
    rows = launch.graph_gain_rows(g)
    assert rows[0] == ("CPU: submitting one kernel", "4.00", "0.030") and rows[-1][1] == "0.060"


def test_graph_verdict_on_the_recording_says_what_the_gain_is():
    """The H100 recording at N = 1000: the verdict quotes the medians of the recorded wall times
    per kernel (graph vs one by one), and the doorbell is a sliver of the gain."""
    import statistics

    ctx = replay_ctx()
    graphs = ctx.get("submission.graphs")
    chain = next(c for c in graphs.data["chains"] if c["n"] == 1000)
    graph, one_by_one = (statistics.median(chain[k]["wall_us"]) / 1000 for k in ("graph", "individual"))
    text = launch.graph_verdict(graphs, ctx.get("submission.launch_overhead"), 0.06)
    assert f"{graph:.2f} µs per kernel against {one_by_one:.2f}" in text and "not the doorbell" in text


def test_device_file_mappings_parses_proc_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 rw-s 00000000 00:05 12 /dev/nvidiactl\n"
        "7f01-7f02 rw-s 00000000 00:05 13 /dev/nvidia0\n"
        "7f02-7f03 rw-s 00000000 00:05 13 /dev/nvidia0\n"
        "7f03-7f04 r-xp 00000000 08:01 99 /usr/lib/libcuda.so.1\n"
        "7f04-7f05 rw-p 00000000 00:00 0\n")
    assert launch.device_file_mappings(str(maps)) == {"/dev/nvidia0": 2, "/dev/nvidiactl": 1}
    assert launch.device_file_mappings(str(tmp_path / "missing")) == {}


# -- replay through the evidence contract ------------------------------------------------------
def test_experiments_declare_a_gpu():
    for eid in IDS:
        exp = experiments.get(eid)
        assert exp.needs == (experiments.GPU,) and exp.reference == experiments.DEFAULT_REFERENCE
        assert exp.params == {}


def test_replay_without_the_experiment_says_why(tmp_path, monkeypatch):
    """A machine without the recording: an error naming the fix, or, where the experiment is declared
    optional there, figures that say what is missing."""
    write_reference(tmp_path, "old", drop=("submission.graphs",))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(ReferenceDataError, match="--only submission.graphs"):
        replay_ctx("old").get("submission.graphs")
    declare_optional(monkeypatch, "submission.graphs")
    ev = replay_ctx("old").get("submission.graphs")
    assert not ev.ok and "no recording of 'submission.graphs'" in ev.missing
    assert launch.graph_figure(ev) is ev and launch.graph_rows(ev) == [] and launch.table(ev, [], ("a",), "x") is ev
    assert launch.graph_verdict(ev, ev, 0.06) == ev.missing
    with pytest.raises(ReferenceDataError, match="submission.graphs"):
        ev.require()


def test_replay_reads_a_recording(tmp_path, monkeypatch):
    """A recording with the three experiments (built here, checksummed like the recorder's)."""
    fake = {"submission.launch_overhead": fake_launch_overhead(), "submission.streams": fake_streams(),
            "submission.graphs": fake_graphs()}
    write_reference(tmp_path, add=fake, chapter=7)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    ctx = replay_ctx()
    for eid in IDS:
        ev = ctx.get(eid)
        assert ev.ok and ev.mode is Mode.REPLAY and ev.source == ctx.reference().recording(ev.experiment_id).label
        assert ev.require() == fake[eid]
    caption = launch.table(ev, launch.graph_rows(ev), ("n",) * 8, "x").caption
    assert caption == ev.caption("x") and "REPLAY" in caption


def test_live_runs_the_recorders_function(monkeypatch):
    """Live, ctx.get runs the very function the recorder runs (a stand-in here, no GPU)."""
    calls = []
    monkeypatch.setattr(launch, "measure_streams", lambda quick: calls.append(quick) or fake_streams())
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    ctx = course.Context(Mode.LIVE, "test", gpu_name="Test GPU", reference_name="h100-pcie")
    ev = ctx.get("submission.streams", quick=True)
    assert calls == [True] and ev.live and ev.source == "Test GPU"
    assert launch.ordering_rows(ev)[0][2] == "always after A"


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: launch.queued_launches("huge"), "kind must be one of"),
    (lambda: launch.queued_launches("empty", 0), "n must be"),
    (lambda: launch.queued_launches("empty", 10, hold_s=-1), "hold_s"),
    (lambda: launch.graph_vs_launches(launch.MAX_CHAIN + 1), "n must be"),
    (lambda: launch.graph_vs_launches(10, 0), "reps must be"),
    (lambda: launch.ordering_trials(0), "trials must be"),
    (lambda: launch.overlap(reps=51), "reps must be"),
])
def test_bad_input_is_refused(call, match):
    with pytest.raises(InputError, match=match):
        call()


@pytest.mark.parametrize("call", [lambda: launch.round_trips("empty", True), lambda: launch.queued_launches("empty", 2.0),
                                  lambda: launch.queued_launches("empty", 10, hold_s="1")])
def test_wrong_kinds_of_value_are_type_errors(call):
    with pytest.raises(InputTypeError):
        call()


def test_unknown_experiment_and_parameters_are_refused_by_the_contract():
    ctx = replay_ctx()
    with pytest.raises(InputError, match="no experiment 'submission.nothing'"):
        ctx.get("submission.nothing")
    with pytest.raises(InputError, match="takes no parameters; not frames"):
        ctx.get("submission.graphs", frames=3)


def test_no_gpu_is_a_clear_error(no_gpu):
    with pytest.raises(NoGPUError, match="usable CUDA GPU"):
        launch.queued_launches("empty", 10)


# -- live behaviour (GPU machine) ----------------------------------------------------------------
@needs_gpu
def test_queued_launches_run_every_kernel():
    r = launch.queued_launches("tiny", n=50, blocks=2)
    assert r["result_ok"] and len(r["host_us"]) == 2 and all(v > 0 for v in r["device_us"])
    assert any(r["ahead"]), "the spin kernel should hold the GPU while 50 launches are queued"


@needs_gpu
def test_cupy_kind_counts_too():
    assert launch.queued_launches("cupy", n=20, blocks=1)["result_ok"]


@needs_gpu
def test_streams_order_and_events_join():
    r = launch.ordering_trials(3)
    assert r["seen"]["same"] == [1, 1, 1], "work on one stream must run in order"
    assert r["seen"]["event"] == [1, 1, 1], "waiting on an event recorded after A must order B after A"


@needs_gpu
def test_events_see_the_spin():
    r = launch.event_timing((0.002,))
    assert r["measured_s"][0] >= 0.002 * 0.95


@needs_gpu
def test_graph_chain_computes_the_right_count():
    r = launch.graph_vs_launches(20, 3)
    assert r["result_ok"], "the chain launched one by one and as a graph must add 1 per kernel"
    assert len(r["graph"]["wall_us"]) == 3


@needs_gpu
def test_experiments_return_json():
    for run in (launch.record_launch_overhead, launch.record_streams, launch.record_graphs):
        json.dumps(run(True))
    assert np.isfinite(launch.cpu_time_of_launches(100)["wall_s"])
