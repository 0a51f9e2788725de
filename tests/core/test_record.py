"""The recorder refuses to run without a GPU, and what it writes validates (checked with a
stand-in experiment and a faked provenance, since CI has no GPU); `--only` merges into an
existing file of the same machine and refuses another machine's."""

import json

import pytest
from conftest import write_reference

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import experiments, recorder, reference, validate


def test_refuses_without_gpu(no_gpu, tmp_path, capsys):
    assert recorder.main(["--out", str(tmp_path / "x.json")]) == 2
    assert "refusing to record without a live GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_refuses_under_forced_replay(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COURSE_MODE", "replay")
    assert recorder.main(["--out", str(tmp_path / "x.json")]) == 2


def test_lists_experiments(capsys):
    assert recorder.main(["--list"]) == 0
    out = capsys.readouterr().out
    for eid in ("transfers.pinned_vs_pageable", "transfers.large_copy", "crosscheck.bwcheck"):
        assert eid in out
    assert "helpers/ch03_dma_and_copy_engines/crosscheck.py:record_crosscheck" in out


def test_list_says_where_needs_params_and_reference(stand_in_recorder, capsys):
    def sweep(quick, frames=200):
        return {}

    stand_in_recorder({"demo.sweep": experiments.Experiment(
        "demo.sweep", 4, "a sweep", sweep, needs=(experiments.GPU, experiments.STRACE),
        reference=experiments.P2P_REFERENCE, params={"frames": validate.count(1, 2000)})})
    assert recorder.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "demo.sweep  [ch4] a sweep" in out
    assert f"where:     {__name__.replace('.', '/')}.py:sweep" in out
    assert "needs:     gpu, strace" in out
    assert "params:    frames=200 (a whole number from 1 to 2000)" in out
    assert "reference: p2p (h200x2-nvlink.json)" in out


def test_writes_a_valid_file(stand_in_recorder, tmp_path):
    def skipper(quick):
        raise recorder.SkipExperiment("needs two GPUs")

    stand_in_recorder({
        "demo.one": experiments.Experiment("demo.one", 0, "demo", lambda quick: {"quick": quick, "x": [1, 2]}),
        "demo.skip": experiments.Experiment("demo.skip", 0, "skip", skipper)})
    out = tmp_path / "stand-in.json"
    assert recorder.main(["--out", str(out), "--quick"]) == 0
    ref = reference.load(out)
    assert ref.experiment("demo.one") == {"quick": True, "x": [1, 2]}
    assert not ref.has("demo.skip") and ref.doc["system"]["skipped_experiments"]["demo.skip"] == "needs two GPUs"


def test_duplicate_registration_rejected():
    with pytest.raises(experiments.RegistryError, match="registered twice"):
        @experiments.experiment("transfers.pinned_vs_pageable", chapter=0, title="again")
        def other(quick):
            return {}


@pytest.mark.parametrize("bad", ["", "has space", "semi;colon"])
def test_bad_experiment_ids(bad):
    with pytest.raises(experiments.RegistryError, match="dotted lower-case words"):
        experiments.experiment(bad, chapter=0, title="t")


def test_skip_experiment_is_one_class_when_run_as_main():
    """`python -m helpers.record` executes recorder.py as __main__; the SkipExperiment the recorder
    catches must be the class experiments raise, or a skip aborts the whole recording (seen on a
    GPU machine without strace)."""
    import runpy

    from helpers.core import errors, recorder

    runpy.run_module("helpers.record", run_name="not_main")  # the command line, executed afresh
    assert recorder.SkipExperiment is errors.SkipExperiment


def test_warms_up_before_the_first_experiment(stand_in_recorder, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(recorder, "warm_up", lambda: calls.append("warm-up"))
    stand_in_recorder({"demo.one": experiments.Experiment("demo.one", 0, "demo",
                                                          lambda quick: calls.append("demo.one") or {})})
    assert recorder.main(["--out", str(tmp_path / "w.json")]) == 0
    assert calls == ["warm-up", "demo.one"]


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
    assert recorder.main(["--out", str(tmp_path / "c.json")]) == recorder.EXIT_CROSSCHECK_FAILED
    assert seen == [{"demo.one": {"x": 1}}] and "demo.one looks wrong" in capsys.readouterr().err


def test_a_run_that_fails_its_cross_check_says_so(stand_in_recorder, tmp_path, capsys):
    """The recorder writes what it measured, but exits 3 and says not to commit it."""
    stand_in_recorder({"crosscheck.bwcheck": experiments.Experiment("crosscheck.bwcheck", 0, "x",
                                                                    _bwcheck(49.3, 55.0))})
    out = tmp_path / "noisy.json"
    assert recorder.main(["--out", str(out)]) == recorder.EXIT_CROSSCHECK_FAILED
    err = capsys.readouterr().err
    assert "do not commit" in err and "crosscheck.bwcheck h2d" in err and "d2h" not in err.split("h2d", 1)[1]
    assert reference.load(out).has("crosscheck.bwcheck")


def test_a_run_within_tolerance_exits_zero(stand_in_recorder, tmp_path):
    stand_in_recorder({"crosscheck.bwcheck": experiments.Experiment("crosscheck.bwcheck", 0, "x",
                                                                    _bwcheck(54.9, 55.0))})
    assert recorder.main(["--out", str(tmp_path / "ok.json")]) == 0


# -- --only merges into an existing file of the same machine ------------------------------------

def _registry(**data):
    return {eid.replace("_", "."): experiments.Experiment(eid.replace("_", "."), 0, "new " + eid,
                                                          lambda quick, d=d: d)
            for eid, d in data.items()}


def test_only_merges_keeping_the_others(stand_in_recorder, tmp_path):
    path = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}, "demo.keep": {"v": "kept"}},
                           only_added=True)
    before = len(reference.load(path).provenance.get("merged", []))  # the base file's own earlier merges
    stand_in_recorder(_registry(demo_old={"v": "new"}, demo_other={"v": "not chosen"}))
    assert recorder.main(["--only", "demo.old", "--out", str(path)]) == 0
    ref = reference.load(path)  # validates schema and checksum
    assert ref.experiment("demo.old") == {"v": "new"} and ref.experiment("demo.keep") == {"v": "kept"}
    assert not ref.has("demo.other") and ref.doc["experiments"]["demo.old"]["title"] == "new demo_old"
    assert len(ref.provenance["merged"]) == before + 1
    entry = ref.provenance["merged"][-1]
    assert entry["experiments"] == ["demo.old"] and entry["command_line"][-3:] == ["demo.old", "--out", str(path)]
    assert ref.name == "machine" and ref.doc["checksum"] == reference.checksum(ref.doc)


def test_a_second_merge_adds_to_the_list_and_clears_an_old_skip(stand_in_recorder, tmp_path):
    path = write_reference(tmp_path, "machine", add={"demo.keep": {"v": 1}}, only_added=True)
    doc = json.loads(path.read_text())
    doc["system"]["skipped_experiments"] = {"demo.new": "no strace"}
    doc["checksum"] = reference.checksum(doc)
    path.write_text(json.dumps(doc))
    stand_in_recorder(_registry(demo_new={"v": 2}))
    assert recorder.main(["--only", "demo.new", "--out", str(path)]) == 0
    assert recorder.main(["--only", "demo.*", "--out", str(path), "--quick"]) == 0
    ref = reference.load(path)
    assert [m["experiments"] for m in ref.provenance["merged"]] == [["demo.new"], ["demo.new"]]
    assert "skipped_experiments" not in ref.doc["system"] and ref.experiment("demo.keep") == {"v": 1}
    assert ref.doc["experiments"]["demo.new"]["quick"] is True


def test_without_only_an_existing_file_is_replaced(stand_in_recorder, tmp_path):
    path = write_reference(tmp_path, "machine", add={"demo.keep": {"v": 1}}, only_added=True)
    stand_in_recorder(_registry(demo_new={"v": 2}))
    assert recorder.main(["--out", str(path)]) == 0
    ref = reference.load(path)
    assert list(ref.doc["experiments"]) == ["demo.new"] and "merged" not in ref.provenance


@pytest.mark.parametrize("field, value", [(("gpu", "name"), "NVIDIA A100-SXM4-80GB"),
                                          (("gpu", "pci_id"), "10de:20b2"),
                                          (("driver",), "550.54.15"),
                                          (("cuda_runtime",), "12.4"),
                                          (("cuda_driver_api",), "12.4")])
def test_only_refuses_another_machines_file_and_leaves_it_alone(stand_in_recorder, tmp_path, capsys,
                                                                 field, value):
    path = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}}, only_added=True)
    doc = json.loads(path.read_text())
    *parents, last = field
    node = doc["provenance"]
    for key in parents:
        node = node[key]
    node[last] = value
    doc["checksum"] = reference.checksum(doc)
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    ran = []
    stand_in_recorder({"demo.old": experiments.Experiment("demo.old", 0, "x", lambda quick: ran.append(1) or {})})
    assert recorder.main(["--only", "demo.old", "--out", str(path)]) == recorder.EXIT_REFUSED
    err = capsys.readouterr().err
    assert "refusing to merge" in err and f"{'.'.join(field)}: file {value!r}" in err
    assert path.read_bytes() == before and ran == [] and not path.with_suffix(".json.tmp").exists()


def test_only_refuses_a_damaged_file(stand_in_recorder, tmp_path, capsys):
    path = write_reference(tmp_path, "machine", add={"demo.old": {"v": "old"}}, only_added=True)
    path.write_text(path.read_text().replace('"old"', '"edited"'))
    before = path.read_bytes()
    stand_in_recorder(_registry(demo_old={"v": "new"}))
    assert recorder.main(["--only", "demo.old", "--out", str(path)]) == recorder.EXIT_REFUSED
    assert "checksum mismatch" in capsys.readouterr().err and path.read_bytes() == before


def test_the_committed_files_merge_with_their_own_machine_only():
    h100 = reference.load("h100-pcie").provenance
    h200 = reference.load("h200x2-nvlink").provenance
    assert recorder.machine_differences(h100, h100) == []
    assert recorder.machine_differences(h100, h200)[:2] == [
        "gpu.name: file 'NVIDIA H100 80GB HBM3', here 'NVIDIA H200'", "gpu.pci_id: file '10de:2330', here '10de:2335'"]
