"""tools/hub/atlas.py: the class's recordings beside the reference machines; tampered files refused."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from conftest import write_reference

from helpers.core import reference
from tools.hub import atlas

ROOT = Path(__file__).resolve().parents[2]


def _submissions(tmp_path: Path) -> Path:
    sub = tmp_path / "submitted"
    for student in ("alice", "bob", "carol"):
        (sub / student / "atlas").mkdir(parents=True)
    write_reference(sub / "alice" / "atlas", "alice-workstation")
    write_reference(sub / "bob" / "atlas", "bob-h200", base=ROOT / "data" / "reference" / "h200x2-nvlink")
    carol = write_reference(sub / "carol" / "atlas", "carol-edited", only_added=True, add={"demo.x": {}})
    bad = json.loads((carol / "manifest.json").read_text())
    bad["machine"]["gpu"]["name"] = "NVIDIA B200 (typed in by hand)"  # the checksum no longer matches
    (carol / "manifest.json").write_text(json.dumps(bad))
    return sub


def test_three_recordings_two_accepted_and_the_edited_one_refused(tmp_path):
    rows, refused = atlas.collect(_submissions(tmp_path))
    class_rows = {r["machine"]: r for r in rows if r["kind"].startswith("class")}
    assert set(class_rows) == {"alice-workstation", "bob-h200"} and len(rows) == len(class_rows) + 2
    assert len(refused) == 1 and refused[0].startswith("carol/atlas/carol-edited/manifest.json") and "checksum" in refused[0]
    alice = class_rows["alice-workstation"]
    # the fit against the raw recording: B near the largest copy's bandwidth, t0 near the smallest copy's time
    sweep = reference.load(ROOT / "data" / "reference" / "h100-pcie").experiment("transfers.pinned_vs_pageable")
    s = next(x for x in sweep["series"]
             if x["host_kind"] == "pinned" and x["direction"] == "h2d")
    assert abs(alice["h2d B (GB/s)"] / (s["nbytes"][-1] / s["median_s"][-1] / 1e9) - 1) < 0.05
    assert abs(alice["h2d t0 (us)"] / (s["median_s"][0] * 1e6) - 1) < 0.15
    assert "BAR2 128 GiB" in alice["BARs"] and alice["kind"] == "class (alice)"


def test_the_page_and_csv_are_written(tmp_path, capsys):
    sub = _submissions(tmp_path)
    out, table = tmp_path / "atlas.html", tmp_path / "atlas.csv"
    assert atlas.main(["build", str(sub), "--out", str(out), "--csv", str(table)]) == 0
    page = out.read_text()
    assert "Class GPU atlas" in page and "carol/atlas/carol-edited/manifest.json" in page and 'aria-label="Figure: ' in page
    assert "<script src=" not in page  # offline: plotly.js is inside the page
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert {r["machine"] for r in rows} >= {"alice-workstation", "bob-h200", "h100-pcie"}
    assert "1 refused" in capsys.readouterr().out


def test_a_missing_folder_is_refused(tmp_path):
    assert atlas.main(["build", str(tmp_path / "nope")]) == 2
