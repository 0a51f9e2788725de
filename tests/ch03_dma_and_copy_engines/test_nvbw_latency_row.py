"""tools/bwcheck/nvbw_compare.py's GPU->host latency row: it compares nvbandwidth's statistic as the
course measures it (mmio.gpu_read_latency's `nvbw` field), never the course's own 128 MiB random chase,
against real `nvbandwidth -j` output (two v0.8 runs on an H100, 2026-11-28, kept unchanged in fixtures/)."""

from __future__ import annotations

import json
from pathlib import Path

from tools.bwcheck import nvbw_compare as nvbw

RUNS = [json.loads((Path(__file__).parent / "fixtures" / f"nvbw_h100_run{i}.json").read_text()) for i in (1, 2)]
LAT = "GPU read of host memory, nvbandwidth's chase (ns)"


def _rec(course_ns: float | None, own_ns: float = 1240.0) -> dict:
    data = {"host_median_ns": own_ns}
    if course_ns is not None:
        data["nvbw"] = {"host_median_ns": course_ns}
    return {"experiments": {"mmio.gpu_read_latency": {"data": data}}}


def test_real_nvbandwidth_output_gives_the_median_of_its_runs():
    runs = nvbw.nvbw_runs(RUNS)
    assert [round(v, 2) for v in runs["host_device_latency_sm"]] == [1208.23, 1207.47]
    assert abs(nvbw.nvbw_values(RUNS)["host_device_latency_sm"] - (1208.2339879125357 + 1207.4748789891601) / 2) < 1e-9


def test_the_row_reads_the_nvbw_field_and_judges_it():
    (row,) = [r for r in nvbw.rows([_rec(1215.0)], RUNS) if r[0] == LAT]
    assert row[1] == 1215.0 and row[4][2] == 2 and abs(row[5] - 0.0059) < 1e-4 and row[6]
    (far,) = [r for r in nvbw.rows([_rec(1240.0, own_ns=1208.0)], RUNS) if r[0] == LAT]
    assert far[1] == 1240.0 and not far[6]  # +2.7%: the nvbw field is judged, not the own chase's 1208


def test_a_recording_without_nvbandwidths_statistic_has_no_latency_row():
    assert [r for r in nvbw.rows([_rec(None, own_ns=1208.0)], RUNS) if r[0] == LAT] == []
