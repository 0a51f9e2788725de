"""Reference data: committed files validate; edits, truncation and malformed files are refused
with an error naming the file."""

import copy
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import config, reference
from helpers.core.errors import ReferenceDataError

DATA = Path(__file__).resolve().parents[2] / "data" / "reference"
FILES = sorted(DATA.glob("*.json"))


def test_there_is_reference_data():
    assert FILES, "data/reference must hold at least one recorded file for replay mode"
    assert config.DEFAULT_REFERENCE in [f.stem for f in FILES]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_file_validates(path):
    ref = reference.load(path)
    assert ref.name == path.stem, "a reference file's name field must match its file name"
    assert ref.provenance["command_line"][:3] == ["python", "-m", "helpers.record"], \
        "reference files are written only by the recorder"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_crosscheck_agrees_within_tolerance(path):
    """The course's event-timed 256 MiB bandwidth agrees with the C program from the same run."""
    ref = reference.load(path)
    if not ref.has("crosscheck.bwcheck"):
        # a partial recording (e.g. a two-GPU machine recorded for Chapter 8's p2p.* only) has no
        # host<->device transfer data; one that has any must have the cross-check from the same run
        transfers = [e for e in ref.doc["experiments"] if not e.startswith("p2p.")]
        assert not transfers, f"{path.name} records {transfers} but has no crosscheck.bwcheck"
        return
    data = ref.experiment("crosscheck.bwcheck")
    assert data["nbytes"] == 256 << 20, "the cross-check must be recorded at full size, not --quick"
    for d in ("h2d", "d2h"):
        diff = crosscheck.agreement(data["course_gbps"][d], data["c_gbps"][d])
        assert diff <= crosscheck.TOLERANCE, f"{d}: course {data['course_gbps'][d]:.2f} vs C {data['c_gbps'][d]:.2f} GB/s"


@pytest.fixture
def valid_doc():
    return json.loads(FILES[0].read_text())


def test_hand_edit_is_detected(tmp_path, valid_doc):
    series = valid_doc["experiments"]["transfers.pinned_vs_pageable"]["data"]["series"][0]
    series["median_s"][-1] *= 0.9  # "improve" one number by hand
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(valid_doc))
    with pytest.raises(ReferenceDataError, match=r"edited\.json: checksum mismatch"):
        reference.load(p)


def test_truncated_file_names_itself(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(FILES[0].read_text()[:500])
    with pytest.raises(ReferenceDataError, match=r"cut\.json: not valid JSON.*truncated"):
        reference.load(p)


def test_missing_file_lists_available(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(DATA))
    with pytest.raises(ReferenceDataError, match="no such reference file.*available: .*h100-pcie"):
        reference.load("no-such-machine")


def test_not_an_object(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(ReferenceDataError, match="top level must be an object"):
        reference.load(p)


def test_missing_experiment_is_clear(valid_doc, tmp_path):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(valid_doc))
    with pytest.raises(ReferenceDataError, match="no recording of experiment 'nope'"):
        reference.load(p).experiment("nope")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["schema_version", "name", "provenance", "system", "experiments"]),
       junk=st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2)))
def test_schema_rejects_broken_fields(valid_doc, key, junk):
    # junk that happens to be valid is not junk: a one-letter name, or schema_version 1
    assume(not (key == "name" and isinstance(junk, str) and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", junk)))
    assume(not (key == "schema_version" and junk == 1))
    doc = copy.deepcopy(valid_doc)
    doc[key] = junk
    doc["checksum"] = reference.checksum(doc)  # a well-formed checksum: only the schema can object
    if key == "system" and isinstance(junk, dict):
        return
    with pytest.raises(ReferenceDataError, match="schema violation"):
        reference.validate(doc, "mutated")


def test_default_reference_env(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert reference.default_reference_name() is None
    shutil.copy(FILES[0], tmp_path / "other-gpu.json")
    assert reference.default_reference_name() == "other-gpu"
    monkeypatch.setenv("COURSE_REFERENCE", "chosen")
    assert reference.default_reference_name() == "chosen"


# --- any corruption, found by hypothesis -------------------------------------------------------

@pytest.fixture(scope="module")
def reference_text() -> str:
    return FILES[0].read_text()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(cut=st.floats(min_value=0.0, max_value=0.999))
def test_any_truncation_is_named(tmp_path, reference_text, cut):
    p = tmp_path / "cut-short.json"
    p.write_text(reference_text[:int(len(reference_text) * cut)])
    with pytest.raises(ReferenceDataError, match=r"cut-short\.json"):
        reference.load(p)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(junk=st.binary(min_size=1, max_size=200))
def test_binary_junk_is_named(tmp_path, junk):
    p = tmp_path / "junk.json"
    p.write_bytes(junk)
    try:
        doc = json.loads(junk)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and doc.get("schema_version") is not None:
        return  # a real document by chance: judged by the schema tests in test_reference.py
    with pytest.raises(ReferenceDataError, match=r"junk\.json"):
        reference.load(p)


def test_a_directory_or_a_number_is_named(tmp_path):
    d = tmp_path / "dir.json"
    d.mkdir()
    with pytest.raises(ReferenceDataError, match=r"dir\.json"):
        reference.load(d)
    with pytest.raises(ReferenceDataError, match="x.json"):
        reference.load(os.devnull + "/x.json")
