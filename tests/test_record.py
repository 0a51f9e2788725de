"""The recorder refuses to run without a GPU, and what it writes validates (checked with a
stand-in experiment and a faked provenance, since CI has no GPU)."""


import pytest

from helpers.core import experiments, recorder, reference


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
