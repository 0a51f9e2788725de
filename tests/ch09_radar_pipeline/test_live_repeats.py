"""Chapter 9 runs radar.breaking_point live with fewer runs at a point than the recorder (each run is
about 0.3 s of frames at the load's rate, so the live course's time goes with them). The page says the
first runs of every point reach the same verdict as all of them: here that is checked on every
recording, with the number of runs the notebook's cell asks for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import recorded_machine

from helpers.ch09_radar_pipeline import breaking
from helpers.core import experiments

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "09_radar_pipeline.ipynb"
RECORDINGS = [p.parent for p in sorted((ROOT / "data" / "reference").glob("*/manifest.json"))
              if "radar.breaking_point" in recorded_machine(p.parent)["experiments"]]


def live_repeats() -> int:
    """The runs a point the page's live call asks for (the cell that shows the breaking points)."""
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    calls = [m for c in cells for m in re.findall(r'ctx\.get\("radar\.breaking_point", repeats=(\d+)\)', c)]
    assert len(calls) == 1, calls
    return int(calls[0])


def first_runs(data: dict, n: int) -> dict:
    """The sweep as it would have been with `n` runs at a point: the first n of each point's runs."""
    seen: dict = {}
    sweep = []
    for r in data["sweep"]:
        key = (r["design"], r["frame_bytes"], r["period_s"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= n:
            sweep.append(r)
    return dict(data, sweep=sweep, repeats=n)


def test_there_is_a_recording_to_check_against():
    assert RECORDINGS


def test_the_live_repeats_are_fewer_than_the_recorders_and_accepted():
    n = live_repeats()
    assert 2 <= n < breaking.REPEATS
    assert experiments.get("radar.breaking_point").check_params({"repeats": n}) == {"repeats": n}


@pytest.mark.parametrize("folder", RECORDINGS, ids=lambda p: p.name)
def test_the_pages_live_repeats_give_the_recordings_verdicts(folder):
    data = recorded_machine(folder)["experiments"]["radar.breaking_point"]["data"]
    n = live_repeats()
    assert data["repeats"] > n and breaking.miss_rule(data) == "pooled"
    head = first_runs(data, n)
    assert len(head["sweep"]) < len(data["sweep"])  # the cut removed runs: the comparison means something
    full_rows = {r[:2]: r[-1] for r in breaking.breaking_rows(data)}
    head_rows = {r[:2]: r[-1] for r in breaking.breaking_rows(head)}
    assert {k: v.startswith("BREAKS") for k, v in head_rows.items()} == {
        k: v.startswith("BREAKS") for k, v in full_rows.items()}
    assert breaking.breaking_points(head) == breaking.breaking_points(data)


def test_fewer_runs_can_change_a_verdict():
    """The check above can fail: a point whose late frames sit in its last runs holds on its first."""
    late = [9000] * 3 + [1000] * 37  # 3 of 40 frames over an 8 ms period
    calm = [1000] * 40
    runs = [{"design": "staged", "frame_bytes": 16 << 20, "period_s": 8e-3, "frames": 40, "dropped": 0,
             "latency_us": lat, "cpu_s": 0.1, "wall_s": 0.3} for lat in (calm, calm, calm, late, late)]
    data = {"sweep": runs, "rule": "pooled", "repeats": 5, "ladder": [[16 << 20, 8e-3]]}
    assert breaking.breaking_points(data)["staged"].startswith("breaks")
    assert not breaking.breaking_points(first_runs(data, 3))["staged"].startswith("breaks")
