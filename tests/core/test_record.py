"""The recorder refuses to run without a GPU, and what it writes validates (checked with a
stand-in experiment and a faked provenance, since CI has no GPU): one file per experiment in the
machine's folder, each with its own provenance; `--only` adds or replaces those files whatever
driver the others were recorded with, and refuses another GPU's folder."""

import json

import pytest
from conftest import write_reference

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import config, experiments, reference, validate
from helpers.recording import live, recorder


def test_refuses_without_gpu(no_gpu, tmp_path, capsys):
    assert recorder.main(["--out", str(tmp_path / "x")]) == 2
    assert "refusing to record without a live GPU" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_refuses_under_forced_replay(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COURSE_MODE", "replay")
    assert recorder.main(["--out", str(tmp_path / "x")]) == 2


def test_lists_experiments(capsys):
    assert recorder.main(["--list"]) == 0
    out = capsys.readouterr().out
    for eid in ("transfers.pinned_vs_pageable", "transfers.large_copy", "crosscheck.bwcheck"):
        assert eid in out
    assert "helpers/ch03_dma_and_copy_engines/crosscheck.py:record_crosscheck" in out
    assert "reference: default (h100-pcie/path.syscall_census.json)" in out  # path.write_census's home


def test_list_says_where_needs_params_and_reference(stand_in_recorder, capsys):
    def sweep(quick, frames=200):
        return {}

    stand_in_recorder({"demo.sweep": experiments.Experiment(
        "demo.sweep", 4, "a sweep", sweep, needs=(experiments.GPU, experiments.STRACE),
        reference=experiments.P2P_REFERENCE, params={"frames": validate.count(1, 2000)},
        optional_on=(experiments.P2P_REFERENCE,))})
    assert recorder.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "demo.sweep  [ch4] a sweep" in out
    assert f"where:     {__name__.replace('.', '/')}.py:sweep" in out
    assert "needs:     gpu, strace" in out
    assert "params:    frames=200 (a whole number from 1 to 2000)" in out
    assert f"reference: p2p ({config.DEFAULT_P2P_REFERENCE}/demo.sweep.json) (optional there: p2p)" in out


def test_writes_one_valid_file_per_experiment(stand_in_recorder, tmp_path):
    def skipper(quick):
        raise recorder.SkipExperiment("needs two GPUs")

    stand_in_recorder({
        "demo.one": experiments.Experiment("demo.one", 0, "demo", lambda quick: {"x": [1, 2], "quick": quick}),
        "demo.skip": experiments.Experiment("demo.skip", 0, "skip", skipper)})
    out = tmp_path / "my-gpu"
    assert recorder.main(["--out", str(out), "--quick", "--by", "a tester"]) == 0
    ref = reference.load(out)  # validates the manifest
    assert sorted(p.name for p in out.iterdir()) == ["demo.one.json", "demo.skip.json", "manifest.json"]
    one = ref.recording("demo.one")
    assert one.data == {"x": [1, 2], "quick": True} and one.doc["quick"] is True
    assert one.provenance["recorded_by"] == "a tester" and one.provenance["command_line"][:3] == [
        "python", "-m", "helpers.record"]
    assert not ref.has("demo.skip") and ref.recording("demo.skip").skipped == "needs two GPUs"
    assert ref.machine["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and "driver" not in ref.machine
    # readable by everyone who replays them (a grader's worker runs as another user), writable by the recorder
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()} == dict.fromkeys(
        ["demo.one.json", "demo.skip.json", "manifest.json"], 0o644)


def test_the_command_line_module_is_the_recorder():
    """`python -m helpers.record` runs helpers.recording.recorder.main; the SkipExperiment it
    re-exports is the one experiments raise."""
    import runpy

    from helpers.core import errors

    runpy.run_module("helpers.record", run_name="not_main")
    assert recorder.SkipExperiment is errors.SkipExperiment


def test_warms_up_before_the_first_experiment(stand_in_recorder, monkeypatch, tmp_path):
    calls = []
    stand_in_recorder({"demo.one": experiments.Experiment("demo.one", 0, "demo",
                                                          lambda quick: calls.append("run") or {})})
    monkeypatch.setattr(recorder, "warm_up", lambda: calls.append("warm-up"))
    assert recorder.main(["--out", str(tmp_path / "w")]) == 0
    assert calls == ["warm-up", "run"]


def _bwcheck(course: float, c: float):
    return lambda quick: {"nbytes": 256 << 20, "reps": 30, "tolerance": 0.02,
                          "course_gbps": {"h2d": course, "d2h": c}, "c_gbps": {"h2d": c, "d2h": c}}


def test_the_cross_check_is_registered_by_its_chapter_not_imported_by_the_recorder():
    import ast
    import inspect

    assert crosscheck.disagreements in experiments.recording_checks()
    tree = ast.parse(inspect.getsource(recorder))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and m.startswith("helpers.ch")]


def test_registered_recording_checks_see_what_was_recorded(stand_in_recorder, monkeypatch, tmp_path, capsys):
    seen = []
    monkeypatch.setattr(experiments, "_CHECKS", {})
    experiments.recording_check(lambda data: seen.append(data) or ["demo.one looks wrong"])
    stand_in_recorder({"demo.one": experiments.Experiment("demo.one", 0, "demo", lambda quick: {"x": 1})})
    assert recorder.main(["--out", str(tmp_path / "c")]) == recorder.EXIT_CROSSCHECK_FAILED
    assert seen == [{"demo.one": {"x": 1}}] and "demo.one looks wrong" in capsys.readouterr().err


def test_a_run_that_fails_its_cross_check_says_so(stand_in_recorder, tmp_path, capsys):
    """The recorder writes what it measured, but exits 3 and says not to commit it."""
    stand_in_recorder({"crosscheck.bwcheck": experiments.Experiment("crosscheck.bwcheck", 0, "x",
                                                                    _bwcheck(49.3, 55.0))})
    out = tmp_path / "noisy"
    assert recorder.main(["--out", str(out)]) == recorder.EXIT_CROSSCHECK_FAILED
    err = capsys.readouterr().err
    assert "do not commit" in err and "crosscheck.bwcheck h2d" in err and "d2h" not in err.split("h2d", 1)[1]
    assert reference.load(out).has("crosscheck.bwcheck")


def test_a_run_within_tolerance_exits_zero(stand_in_recorder, tmp_path):
    stand_in_recorder({"crosscheck.bwcheck": experiments.Experiment("crosscheck.bwcheck", 0, "x",
                                                                    _bwcheck(54.9, 55.0))})
    assert recorder.main(["--out", str(tmp_path / "ok")]) == 0


# -- --only adds or replaces one file; the machine is the GPU, not its software ----------------

def _registry(**data):
    return {eid.replace("_", "."): experiments.Experiment(eid.replace("_", "."), 0, "new " + eid,
                                                          lambda quick, d=d: d)
            for eid, d in data.items()}


def test_only_replaces_one_file_after_a_driver_update_and_keeps_the_others(stand_in_recorder, monkeypatch,
                                                                          tmp_path):
    folder = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}, "demo.keep": {"v": "kept"}},
                             only_added=True)
    kept_before = (folder / "demo.keep.json").read_bytes()
    stand_in_recorder(_registry(demo_old={"v": "new"}, demo_other={"v": "not chosen"}))
    newer = live.live_provenance  # the stand-in's provenance, on a newer driver and CUDA
    monkeypatch.setattr(live, "live_provenance", lambda argv, by=None: dict(
        newer(argv, by), driver="590.10.01", cuda_runtime="13.3", cuda_driver_api="13.3"))
    assert recorder.main(["--only", "demo.old", "--out", str(folder)]) == 0
    ref = reference.load(folder)
    old = ref.recording("demo.old")
    assert old.data == {"v": "new"} and old.doc["title"] == "new demo_old"
    assert old.provenance["driver"] == "590.10.01" and "driver 590.10.01 · CUDA 13.3" in old.label
    assert (folder / "demo.keep.json").read_bytes() == kept_before and ref.recording("demo.keep").provenance[
        "driver"] == "580.159.04"
    assert not (folder / "demo.other.json").exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "no temporary file left behind"


def test_a_skip_never_replaces_data(stand_in_recorder, tmp_path, capsys):
    folder = write_reference(tmp_path, "machine", add={"demo.census": {"v": 1}}, only_added=True)

    def no_strace(quick):
        raise recorder.SkipExperiment("strace is not installed")

    stand_in_recorder({"demo.census": experiments.Experiment("demo.census", 0, "c", no_strace)})
    assert recorder.main(["--only", "demo.census", "--out", str(folder)]) == 0
    assert reference.load(folder).experiment("demo.census") == {"v": 1}
    assert "a skip never replaces data" in capsys.readouterr().out


@pytest.mark.parametrize("field,value", [("name", "NVIDIA H200"), ("pci_id", "10de:2331")])
def test_another_gpu_is_refused_and_the_folder_left_alone(stand_in_recorder, monkeypatch, tmp_path, capsys,
                                                          field, value):
    folder = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}}, only_added=True)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    ran = []
    stand_in_recorder({"demo.old": experiments.Experiment("demo.old", 0, "x", lambda quick: ran.append(1) or {})})
    here = live.live_provenance
    monkeypatch.setattr(live, "live_provenance", lambda argv, by=None: (
        lambda p: dict(p, gpu=dict(p["gpu"], **{field: value})))(here(argv, by)))
    assert recorder.main(["--only", "demo.old", "--out", str(folder)]) == recorder.EXIT_REFUSED
    err = capsys.readouterr().err
    assert "this GPU is another" in err and f"gpu.{field}: machine" in err and repr(value) in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before and ran == []


def test_a_damaged_manifest_is_refused(stand_in_recorder, tmp_path, capsys):
    folder = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}}, only_added=True)
    manifest = folder / reference.MANIFEST
    manifest.write_text(manifest.read_text().replace("x86_64", "aarch64"))
    stand_in_recorder(_registry(demo_old={"v": "new"}))
    assert recorder.main(["--only", "demo.old", "--out", str(folder)]) == recorder.EXIT_REFUSED
    assert "checksum mismatch" in capsys.readouterr().err
    assert json.loads((folder / "demo.old.json").read_text())["data"] == {"v": "old"}


def test_a_damaged_recording_is_replaced_by_recording_it_again(stand_in_recorder, tmp_path):
    folder = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}}, only_added=True)
    (folder / "demo.old.json").write_text("{ cut short")
    stand_in_recorder(_registry(demo_old={"v": "new"}))
    assert recorder.main(["--only", "demo.old", "--out", str(folder)]) == 0
    assert reference.load(folder).experiment("demo.old") == {"v": "new"}


def test_a_folder_name_that_is_no_machine_name_is_refused(stand_in_recorder, tmp_path, capsys):
    stand_in_recorder(_registry(demo_old={"v": "new"}))
    assert recorder.main(["--out", str(tmp_path / "My GPU.json")]) == recorder.EXIT_REFUSED
    assert "a machine folder is named in lower-case" in capsys.readouterr().err


def test_two_recorders_starting_at_once_share_one_manifest(stand_in_recorder, tmp_path):
    """The manifest is created exclusively (a link that fails when it exists): the second recorder
    reads the first one's, and both recordings land whole."""
    from helpers.recording import store

    stand_in_recorder(_registry(demo_a={"v": 1}, demo_b={"v": 2}))
    prov = live.live_provenance(["python", "-m", "helpers.record"])
    first, second = store.machine(tmp_path / "m", prov), store.machine(tmp_path / "m", prov)
    assert first.manifest == second.manifest
    for ref, eid in ((first, "demo.a"), (second, "demo.b")):
        store.write(ref, store.recording_doc(ref, eid, {"title": eid, "chapter": 0, "duration_s": 0.0,
                                                        "quick": False, "data": {"v": eid}}, prov))
    assert reference.load(tmp_path / "m").ids() == ["demo.a", "demo.b"]
