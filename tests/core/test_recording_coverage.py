"""Every registered experiment has a recording with data on its reference machine, or declares once,
in its registration, that it is optional there; and no recording file outlives its experiment."""

import dataclasses

from conftest import write_reference

from helpers.core import coverage, experiments, reference


def test_every_experiment_is_recorded_on_its_machine_or_declared_optional():
    assert coverage.gaps(experiments.discover(), coverage.committed) == []


def test_every_recording_belongs_to_a_registered_experiment():
    refs = [reference.load(name) for name in coverage.MACHINES.values()]
    assert coverage.strays(experiments.discover(), refs) == []


def test_the_check_flags_a_missing_file_a_skip_and_honours_a_declaration(tmp_path):
    registry = {e.id: e for e in (
        experiments.Experiment("demo.here", 0, "t", lambda quick: {}),
        experiments.Experiment("demo.gone", 0, "t", lambda quick: {}),
        experiments.Experiment("demo.part", 0, "t", lambda quick: {}, recorded_in="demo.here",
                               from_recording=lambda d: d),
        experiments.Experiment("demo.pair", 8, "t", lambda quick: {}, reference=experiments.P2P_REFERENCE))}
    folder = write_reference(tmp_path, "m", only_added=True, add={"demo.here": {"v": 1}})
    machine = lambda role: reference.load(folder)  # noqa: E731 - one machine plays both roles here
    found = coverage.gaps(registry, machine)
    assert [line.split(":")[0] for line in found] == ["demo.gone", "demo.pair"]
    assert "--only demo.gone" in found[0] and "optional_on=('default',)" in found[0]
    from helpers.recording import store

    ref = reference.load(folder)
    store.write(ref, store.recording_doc(ref, "demo.gone", {"title": "t", "chapter": 0, "duration_s": 0.0,
                                                             "quick": False, "skipped": "no strace here"},
                                         ref.recording("demo.here").provenance))
    assert "is a skip (no strace here)" in coverage.gaps(registry, machine)[0]
    registry["demo.pair"] = dataclasses.replace(registry["demo.pair"], optional_on=(experiments.P2P_REFERENCE,))
    assert [line.split(":")[0] for line in coverage.gaps(registry, machine)] == ["demo.gone"]
    registry["demo.gone"] = dataclasses.replace(registry["demo.gone"], optional_on=(experiments.DEFAULT_REFERENCE,))
    assert coverage.gaps(registry, machine) == []
    assert coverage.strays({"demo.gone": registry["demo.gone"]}, [ref]) == ["m/demo.here.json"]
