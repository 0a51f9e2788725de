"""Reference data: the committed machines and their recordings validate; edits, truncation,
malformed files, recordings moved between machines or made on another GPU are refused with an
error naming the file."""

import copy
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import write_reference
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import config, reference
from helpers.core.errors import ReferenceDataError
from helpers.recording import store

DATA = Path(__file__).resolve().parents[2] / "data" / "reference"
MACHINES = sorted(p.parent for p in DATA.glob(f"*/{reference.MANIFEST}"))
RECORDINGS = [(m, p) for m in MACHINES for p in sorted(m.glob("*.json")) if p.name != reference.MANIFEST]


def test_there_is_reference_data():
    assert MACHINES, "data/reference must hold at least one recorded machine for replay mode"
    assert config.DEFAULT_REFERENCE in [m.name for m in MACHINES]
    assert not list(DATA.glob("*.json")), "whole-machine files are split: `python -m helpers.record --split`"


@pytest.mark.parametrize("machine,path", RECORDINGS, ids=lambda p: getattr(p, "name", p))
def test_every_recording_validates_with_its_own_provenance(machine, path):
    rec = reference.load(machine).recording(path.stem)
    assert rec.id == path.stem and rec.doc["machine"] == machine.name
    assert rec.provenance["command_line"][:3] == ["python", "-m", "helpers.record"], \
        "reference files are written only by the recorder"
    assert rec.provenance["driver"] in rec.label and rec.provenance["date"][:10] in rec.label


@pytest.mark.parametrize("machine", MACHINES, ids=lambda p: p.name)
def test_crosscheck_agrees_within_tolerance(machine):
    """The course's event-timed 256 MiB bandwidth agrees with the C program from the same run."""
    ref = reference.load(machine)
    if not ref.has("crosscheck.bwcheck"):
        # a partial recording (e.g. a two-GPU machine recorded for Chapter 8's p2p.* only) has no
        # host<->device transfer data; one that has any must have the cross-check too
        transfers = [e for e in ref.ids() if e.startswith(("transfers.", "copy_engines.")) and ref.has(e)]
        assert not transfers, f"{machine.name} records {transfers} but has no crosscheck.bwcheck"
        return
    data = ref.experiment("crosscheck.bwcheck")
    assert data["nbytes"] == 256 << 20, "the cross-check must be recorded at full size, not --quick"
    for d in ("h2d", "d2h"):
        diff = crosscheck.agreement(data["course_gbps"][d], data["c_gbps"][d])
        assert diff <= crosscheck.TOLERANCE, f"{d}: course {data['course_gbps'][d]:.2f} vs C {data['c_gbps'][d]:.2f} GB/s"


@pytest.fixture
def machine(tmp_path) -> Path:
    """A small machine folder written as the recorder writes it: two recordings."""
    return write_reference(tmp_path, "small", only_added=True, add={"demo.one": {"v": [1.0, 2.0]},
                                                                   "demo.two": {"w": 3}})


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_hand_edit_is_detected(machine):
    _edit(machine / "demo.one.json", lambda d: d["data"]["v"].__setitem__(1, 1.5))  # "improve" a number by hand
    with pytest.raises(ReferenceDataError, match=r"small/demo\.one\.json: checksum mismatch"):
        reference.load(machine).experiment("demo.one")
    assert reference.load(machine).experiment("demo.two") == {"w": 3}  # the others still replay


def test_an_edited_manifest_is_refused(machine):
    _edit(machine / reference.MANIFEST, lambda d: d["machine"]["gpu"].__setitem__("name", "NVIDIA B200"))
    with pytest.raises(ReferenceDataError, match=r"small/manifest\.json: checksum mismatch"):
        reference.load(machine)


def test_a_recording_renamed_or_moved_to_another_machine_is_refused(machine, tmp_path):
    shutil.copy(machine / "demo.one.json", machine / "demo.three.json")
    with pytest.raises(ReferenceDataError, match="holds 'demo.one' of machine 'small'"):
        reference.load(machine).experiment("demo.three")
    other = write_reference(tmp_path, "other", only_added=True, add={"demo.two": {"w": 4}})
    shutil.copy(machine / "demo.one.json", other / "demo.one.json")
    with pytest.raises(ReferenceDataError, match="of machine 'small'"):
        reference.load(other).experiment("demo.one")


def test_a_recording_from_another_gpu_is_refused_even_with_a_valid_checksum(machine):
    ref = reference.load(machine)
    doc = copy.deepcopy(ref.recording("demo.one").doc)
    doc["provenance"]["gpu"]["pci_id"] = "10de:2335"  # an H200's recording, resealed by a careless script
    (machine / "demo.one.json").write_text(store.as_text(store.sealed(doc, "recording", "x")))
    with pytest.raises(ReferenceDataError, match=r"another GPU.*gpu\.pci_id: machine '10de:2330', recording '10de:2335'"):
        ref.experiment("demo.one")


def test_truncated_recording_names_itself(machine):
    text = (machine / "demo.one.json").read_text()
    (machine / "demo.one.json").write_text(text[: len(text) // 2])
    with pytest.raises(ReferenceDataError, match=r"demo\.one\.json: not valid JSON.*truncated"):
        reference.load(machine).experiment("demo.one")


def test_missing_machine_lists_available(monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(DATA))
    with pytest.raises(ReferenceDataError, match="no reference machine here.*available: .*h100-pcie"):
        reference.load("no-such-machine")


def test_manifest_not_an_object(machine):
    (machine / reference.MANIFEST).write_text("[1, 2]")
    with pytest.raises(ReferenceDataError, match="top level must be an object"):
        reference.load(machine)


def test_missing_experiment_is_clear(machine):
    with pytest.raises(ReferenceDataError, match="no recording of experiment 'nope.x'.*--only nope.x"):
        reference.load(machine).experiment("nope.x")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["schema_version", "id", "machine", "provenance", "data", "quick", "chapter"]),
       junk=st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2)))
def test_schema_rejects_broken_fields(machine, key, junk):
    # junk that happens to be valid is not junk: a one-letter machine name, a small chapter number
    assume(not (key == "machine" and isinstance(junk, str) and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", junk)))
    assume(not (key == "chapter" and isinstance(junk, int) and junk >= 0 and not isinstance(junk, bool)))
    doc = copy.deepcopy(reference.load(machine).recording("demo.one").doc)
    doc[key] = junk
    doc["checksum"] = reference.checksum(doc)  # a well-formed checksum: only the schema can object
    with pytest.raises(ReferenceDataError, match="schema violation"):
        reference.validate(doc, "recording", "mutated")


def test_data_and_skipped_exclude_each_other(machine):
    doc = copy.deepcopy(reference.load(machine).recording("demo.one").doc)
    doc["skipped"] = "no strace"
    doc["checksum"] = reference.checksum(doc)
    with pytest.raises(ReferenceDataError, match="schema violation"):
        reference.validate(doc, "recording", "both")


def test_default_reference_env(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert reference.default_reference_name() is None
    write_reference(tmp_path, "other-gpu", only_added=True, add={"demo.one": {}})
    assert reference.default_reference_name() == "other-gpu"
    monkeypatch.setenv("COURSE_REFERENCE", "chosen")
    assert reference.default_reference_name() == "chosen"


# --- any corruption, found by hypothesis -------------------------------------------------------

@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(cut=st.floats(min_value=0.0, max_value=0.999))
def test_any_truncation_is_named(machine, cut):
    p = machine / "demo.two.json"
    text = reference.load(machine).recording("demo.one").path.read_text()
    p.write_text(text[:int(len(text) * cut)])
    with pytest.raises(ReferenceDataError, match=r"demo\.two\.json"):
        reference.load(machine).experiment("demo.two")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(junk=st.binary(min_size=1, max_size=200))
def test_binary_junk_is_named(machine, junk):
    (machine / "demo.two.json").write_bytes(junk)
    with pytest.raises(ReferenceDataError, match=r"demo\.two\.json"):
        reference.load(machine).experiment("demo.two")


def test_a_directory_or_a_device_is_named(machine):
    (machine / "demo.two.json").unlink()
    (machine / "demo.two.json").mkdir()
    with pytest.raises(ReferenceDataError, match=r"demo\.two\.json"):
        reference.load(machine).experiment("demo.two")
    with pytest.raises(ReferenceDataError, match="no reference machine here"):
        reference.load(os.devnull + "/x")
