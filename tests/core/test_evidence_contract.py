"""The one evidence contract (helpers.core.evidence): the same rules for every experiment."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import write_reference

from helpers import course
from helpers.core import evidence, experiments, reference, validate
from helpers.core.errors import InputError, InputTypeError, ReferenceDataError, SkipExperiment
from helpers.core.mode import Mode


def _ctx(live: bool, ref_name: str = "h100-pcie") -> course.Context:
    return course.Context(Mode.LIVE if live else Mode.REPLAY, "test", gpu_name="Test GPU" if live else None,
                          reference_name=ref_name)


@pytest.fixture
def demo(monkeypatch):
    """A registry of stand-in experiments, so the contract is tested without a GPU."""
    calls = []
    reg = {}

    def add(id, fn, **kw):
        reg[id] = experiments.Experiment(id, 0, "demo", fn, **kw)

    def sweep(quick, frames=10):
        calls.append(("sweep", frames))
        return {"frames": frames, "t": (1, 2)}  # a tuple: JSON gives back a list

    def skipper(quick):
        calls.append(("skip",))
        raise SkipExperiment("no widget here")

    def broken(quick, n=1):
        calls.append(("broken", n))
        raise InputError("the experiment itself refused n")

    add("transfers.pinned_vs_pageable", sweep, params={"frames": validate.count(1, 100)})
    add("demo.skip", skipper)
    add("demo.broken", broken, params={"n": validate.count(0, 5)})
    add("demo.two", lambda quick: calls.append(("two",)) or {}, needs=(experiments.TWO_GPUS,))
    monkeypatch.setattr(experiments, "discover", lambda: dict(reg))
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: calls.append(("released",)))
    return calls


def test_live_runs_round_trips_json_and_releases_pools(demo):
    ev = _ctx(True).get("transfers.pinned_vs_pageable", frames=7)
    assert ev.mode is Mode.LIVE and ev.source == "Test GPU" and ev.data == {"frames": 7, "t": [1, 2]}
    assert demo == [("sweep", 7), ("released",)]
    assert "measured now" in ev.why and ev.params == {"frames": 7}


def test_replay_reads_the_recording_and_says_its_parameters_are_not_yours(demo):
    ev = _ctx(False).get("transfers.pinned_vs_pageable", frames=7)
    assert ev.mode is Mode.REPLAY and "series" in ev.data and demo == []
    assert "frames=7" in ev.why and "test" in ev.why
    assert ev.provenance["gpu"]["name"].startswith("NVIDIA H100")


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("bad, exc", [(0, InputError), (101, InputError), (2.5, InputTypeError),
                                      (True, InputTypeError), ("10", InputTypeError)])
def test_bad_parameters_raise_in_both_modes_and_never_run_or_replay(demo, live, bad, exc):
    with pytest.raises(exc, match="transfers.pinned_vs_pageable: frames"):
        _ctx(live).get("transfers.pinned_vs_pageable", frames=bad)
    assert demo == []


def test_unknown_parameter_and_unknown_experiment_raise(demo):
    with pytest.raises(InputError, match="takes frames; not rounds"):
        _ctx(True).get("transfers.pinned_vs_pageable", rounds=3)
    with pytest.raises(InputError, match="no experiment 'nope.x'"):
        _ctx(False).get("nope.x")


def test_bad_input_raised_inside_a_live_run_is_not_replayed(demo):
    with pytest.raises(InputError, match="refused n"):
        _ctx(True).get("demo.broken", n=2)


def test_skip_falls_back_to_replay_with_the_reason(demo, tmp_path, monkeypatch):
    write_reference(tmp_path, "h100-pcie", add={"demo.skip": {"x": 1}})
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    ev = _ctx(True).get("demo.skip")
    assert ev.mode is Mode.REPLAY and ev.data == {"x": 1} and "skipped: no widget here" in ev.why
    assert demo == [("skip",), ("released",)]


def test_missing_need_replays_with_the_reason(demo, tmp_path, monkeypatch):
    write_reference(tmp_path, "h100-pcie", add={"demo.two": {"y": 2}})
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(evidence.gpu, "probe", lambda: evidence.gpu.GPUProbe(True, "x", device_count=1, name="x"))
    ev = _ctx(True).get("demo.two")
    assert ev.mode is Mode.REPLAY and "needs two" in ev.why and demo == []


def test_missing_recording_raises_naming_the_fix_unless_declared_optional(demo, monkeypatch):
    with pytest.raises(ReferenceDataError, match=r"no recording of 'demo.skip'.*--only demo.skip"):
        _ctx(False).get("demo.skip")
    with pytest.raises(InputError, match="takes no parameters; not optional"):
        _ctx(False).get("demo.skip", optional=True)  # a page cannot declare it: the experiment does, once
    registry = experiments.discover()
    monkeypatch.setitem(registry, "demo.skip", dataclasses.replace(registry["demo.skip"],
                                                                   optional_on=(experiments.DEFAULT_REFERENCE,)))
    monkeypatch.setattr(experiments, "discover", lambda: registry)
    ev = _ctx(False).get("demo.skip")
    assert not ev.ok and "no recording" in ev.missing
    with pytest.raises(ReferenceDataError, match="no recording"):
        ev.require()


def test_a_skip_in_the_recording_replays_as_missing_with_its_reason(demo, tmp_path, monkeypatch):
    from helpers.recording import store

    folder = write_reference(tmp_path, "h100-pcie", only_added=True, add={"demo.one": {}})
    ref = reference.load(folder)
    prov = ref.recording("demo.one").provenance
    store.write(ref, store.recording_doc(ref, "demo.skip", {"title": "s", "chapter": 0, "duration_s": 0.0,
                                                              "quick": False, "skipped": "no widget"}, prov))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(ReferenceDataError, match="demo.skip was not recorded there: no widget"):
        _ctx(False).get("demo.skip")


def test_replay_names_the_recordings_own_driver_and_date(demo):
    ev = _ctx(False).get("transfers.pinned_vs_pageable")
    rec = reference.load("h100-pcie").recording("transfers.pinned_vs_pageable")
    assert ev.source == rec.label and ev.provenance == rec.provenance
    assert rec.provenance["driver"] in ev.caption("x") and rec.provenance["date"][:10] in ev.caption("x")


def test_recorded_gives_the_reference_even_when_live(demo):
    ev = _ctx(True).get("transfers.pinned_vs_pageable", recorded=True)
    assert ev.mode is Mode.REPLAY and demo == [] and "series" in ev.data


def test_caption_names_mode_and_machine(demo):
    assert _ctx(True).get("transfers.pinned_vs_pageable").caption("x") == "x (LIVE: measured now on Test GPU)"
    assert "REPLAY: recorded on NVIDIA H100" in _ctx(False).get("transfers.pinned_vs_pageable").caption("x")


def test_registration_checks_the_declaration():
    with pytest.raises(experiments.RegistryError, match="needs must be from"):
        experiments.experiment("demo.bad_need", chapter=0, title="t", needs=("gpu", "quantum"))
    with pytest.raises(experiments.RegistryError, match="must take quick and its declared parameters"):
        experiments.experiment("demo.bad_params", chapter=0, title="t",
                               params={"n": validate.count(1, 2)})(lambda quick: {})


def test_cpu_only_experiments_run_live_without_a_gpu_but_not_under_forced_replay(monkeypatch):
    calls = []
    exp = experiments.Experiment("demo.cpu", 0, "cpu", lambda quick: calls.append(1) or {"here": 1}, needs=(),
                                 recorded_in="system.report", from_recording=lambda data: {"recorded": "report"})
    monkeypatch.setattr(experiments, "discover", lambda: {"demo.cpu": exp})
    monkeypatch.setattr(evidence.gpu, "release_pools", lambda: None)
    ev = _ctx(False).get("demo.cpu")
    assert ev.mode is Mode.LIVE and ev.data == {"here": 1} and ev.source == "this machine"
    forced = course.Context(Mode.REPLAY, "COURSE_MODE=replay forces replay", gpu_name=None,
                            reference_name="h100-pcie", forced_replay=True)
    ev = forced.get("demo.cpu")
    assert ev.mode is Mode.REPLAY and ev.data == {"recorded": "report"} and "forces replay" in ev.why
    assert calls == [1]


def test_a_whole_parameter_check_runs_before_the_mode_is_chosen(monkeypatch):
    def both(params):
        if params.get("lo", 0) > params.get("hi", 10):
            raise InputError("lo must not exceed hi")
    exp = experiments.Experiment("demo.range", 0, "r", lambda quick, lo=0, hi=10: {"x": 1},
                                 params={"lo": validate.count(0, 10), "hi": validate.count(0, 10)},
                                 params_check=both)
    monkeypatch.setattr(experiments, "discover", lambda: {"demo.range": exp})
    for live in (True, False):
        with pytest.raises(InputError, match="lo must not exceed hi"):
            _ctx(live).get("demo.range", lo=5, hi=2)


def test_the_system_report_and_the_write_census_replay_from_inside_the_recording():
    """Both are recorded by the recorder inside the file (the system report beside the
    experiments, the write(2) census as half of path.syscall_census): replay finds them there."""
    forced = course.Context(Mode.REPLAY, "COURSE_MODE=replay forces replay", gpu_name=None,
                            reference_name="h100-pcie", forced_replay=True)
    report = forced.get("system.report")
    assert report.mode is Mode.REPLAY and report.data["gpus"][0]["pci_id"].startswith("10de:")
    writes = forced.get("path.write_census")
    assert writes.data["workload"] == "writes" and writes.data["runs"]
    with pytest.raises(InputError, match="rounds"):
        forced.get("path.write_census", rounds=[-5])
