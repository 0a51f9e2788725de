"""`python -m helpers.record --split OLD.json`: a whole-machine file of recorder 0.1 becomes a machine
folder, one file per experiment with the provenance of the run that recorded it; the old checksum
is verified first, every new file read back and compared, and any doubt refuses with the old file kept."""

import json

import pytest
from conftest import REFERENCE

from helpers.core import reference
from helpers.recording import recorder


def _old_file(tmp_path, name="old-gpu"):
    """A schema-1 file as recorder 0.1 wrote it: a full run, one later --only merge, a skip, a system report."""
    prov = {k: v for k, v in reference.load(REFERENCE).recording("system.report").provenance.items()
            if k not in ("git_commit", "recorded_by", "split_from")}
    prov["merged"] = [{"date": "2026-12-01T10:00:00+00:00", "command_line": ["python", "-m", "helpers.record",
                       "--only", "demo.b"], "experiments": ["demo.b"], "recorder_version": "0.1.0",
                       "packages": dict(prov["packages"], numba="0.69.0")}]
    doc = {"schema_version": 1, "name": name, "provenance": prov,
           "system": {"gpus": [{"name": "x"}], "skipped_experiments": {"p2p.topology": "needs two GPUs"}},
           "experiments": {"demo.a": {"title": "a", "chapter": 3, "duration_s": 1.5, "quick": False,
                                      "data": {"v": [0.1, 1e-9, 3]}},
                           "demo.b": {"title": "b", "chapter": 4, "duration_s": 2.0, "quick": True, "data": {"w": "x"}}}}
    doc["checksum"] = reference.checksum(doc)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path, doc


def test_split_writes_one_file_per_experiment_with_its_own_provenance(tmp_path, capsys):
    path, old = _old_file(tmp_path)
    assert recorder.main(["--split", str(path)]) == 0
    ref = reference.load(tmp_path / "old-gpu")
    assert ref.ids() == ["demo.a", "demo.b", "p2p.topology", "system.report"] and not path.exists()
    for eid in ("demo.a", "demo.b"):
        rec = ref.recording(eid)
        assert rec.data == old["experiments"][eid]["data"] and rec.doc["quick"] == old["experiments"][eid]["quick"]
        assert rec.provenance["split_from"]["checksum"] == old["checksum"]
    assert ref.recording("demo.a").provenance["date"] == old["provenance"]["date"]
    b = ref.recording("demo.b").provenance
    assert b["date"] == "2026-12-01T10:00:00+00:00" and b["packages"]["numba"] == "0.69.0" and "--only" in b[
        "command_line"]
    assert ref.experiment("system.report") == {"gpus": [{"name": "x"}]}
    assert ref.recording("p2p.topology").skipped == "needs two GPUs"
    assert "removed" in capsys.readouterr().out


def test_a_damaged_old_file_is_refused_and_kept(tmp_path, capsys):
    path, old = _old_file(tmp_path)
    old["experiments"]["demo.a"]["data"]["v"][0] = 0.2  # edited after the recorder wrote it
    path.write_text(json.dumps(old))
    assert recorder.main(["--split", str(path)]) == recorder.EXIT_REFUSED
    assert "checksum mismatch" in capsys.readouterr().err and path.exists() and not (tmp_path / "old-gpu").exists()


def test_a_folder_that_holds_files_is_not_split_into(tmp_path, capsys):
    path, _ = _old_file(tmp_path)
    (tmp_path / "old-gpu").mkdir()
    (tmp_path / "old-gpu" / "demo.a.json").write_text("{}")
    assert recorder.main(["--split", str(path)]) == recorder.EXIT_REFUSED
    assert "already holds files" in capsys.readouterr().err and path.exists()


@pytest.mark.parametrize("text", ['{"schema_version": 2}', "[1]", "{ cut"])
def test_what_is_no_schema_1_file_is_refused(tmp_path, capsys, text):
    path = tmp_path / "odd.json"
    path.write_text(text)
    assert recorder.main(["--split", str(path)]) == recorder.EXIT_REFUSED
    assert "odd.json" in capsys.readouterr().err and path.exists()
