"""tools/bwcheck/nvbw_compare.py: the course's recording against nvbandwidth -j output."""

from __future__ import annotations

import json
from pathlib import Path

from tools.bwcheck import nvbw_compare as nvbw

REC = {"experiments": {
    "crosscheck.bwcheck": {"data": {"course_gbps": {"h2d": 55.0, "d2h": 54.0}}},
    "mmio.gpu_read_latency": {"data": {"host_median_ns": 1240.0, "nvbw": {"host_median_ns": 1206.0}}},
}}
LAT = "GPU read of host memory, nvbandwidth's chase (ns)"


def _doc(**values):
    return {"nvbandwidth": {"testcases": [{"name": k, "status": "Passed", "sum": v} for k, v in values.items()]
                            + [{"name": "host_to_device_memcpy_sm", "status": "Waived"}]}}


def test_shared_figures_are_compared_and_a_far_one_fails():
    found = nvbw.rows([REC], [_doc(host_to_device_memcpy_ce=55.5, device_to_host_memcpy_ce=50.0,
                                   host_device_latency_sm=1190.0)])
    by = {r[0]: r for r in found}
    assert set(by) == {"CE copy h2d, 256 MiB (GB/s)", "CE copy d2h, 256 MiB (GB/s)", LAT}
    assert by["CE copy h2d, 256 MiB (GB/s)"][6] and not by["CE copy d2h, 256 MiB (GB/s)"][6]  # 8% apart
    assert "| NO (2%) |" in nvbw.table(found)


def test_both_ways_is_compared_as_the_aggregate_the_page_shows():
    rec = {"experiments": {"copy_engines.bidirectional": {"data": {"both": {"median_gbps": 102.2}}}}}
    found = nvbw.rows([rec], [_doc(host_to_device_bidirectional_memcpy_ce=50.3,
                                   device_to_host_bidirectional_memcpy_ce=50.6)])
    assert len(found) == 1 and found[0][1] == 102.2 and round(found[0][3], 1) == 100.9 and found[0][6]
    assert found[0][4][2] == 1 and round(found[0][4][0], 1) == 100.9  # one nvbandwidth run: its aggregate


def test_several_nvbandwidth_runs_give_the_median_of_each_testcase():
    docs = [_doc(host_device_latency_sm=v) for v in (1183.0, 1284.0, 1188.0)]  # one run far off
    assert nvbw.nvbw_values(docs)["host_device_latency_sm"] == 1188.0
    assert nvbw.nvbw_runs(docs)["host_device_latency_sm"] == [1183.0, 1284.0, 1188.0]
    found = nvbw.rows([REC], docs)
    assert found[0][3] == 1188.0 and not found[0][6]  # 1206 vs 1188: 1.5% apart, outside the latency's 1%
    assert found[0][4] == (1183.0, 1284.0, 3) and "3: 1,183.00-1,284.00" in nvbw.table(found)


def test_several_recordings_give_the_median_of_each_figure_and_their_range():
    recs = [{"experiments": {"mmio.gpu_read_latency": {"data": {"host_median_ns": 1300.0, "nvbw": {"host_median_ns": v}}}}}
            for v in (1252.0, 1210.0, 1215.0)]
    found = nvbw.rows(recs, [_doc(host_device_latency_sm=1205.0)])
    assert found[0][1] == 1215.0 and found[0][2] == (1210.0, 1252.0, 3) and found[0][6]  # the median: +0.83%
    assert not nvbw.rows(recs, [_doc(host_device_latency_sm=1190.0)])[0][6]  # 1215 vs 1190: +2.1%


def test_on_a_two_gpu_machine_the_host_rows_read_gpu_0_not_the_sum_of_both():
    """Real nvbandwidth v0.8 -j output of the two-H200 machine (2026-11-28): host_device_latency_sm has one
    entry per GPU and a 'sum' of both; the course measures GPU 0, so its entry is the figure."""
    doc = json.loads((Path(__file__).parent / "fixtures" / "nvbw_2xh200_peer_run1.json").read_text())
    tc = next(t for t in doc["nvbandwidth"]["testcases"] if t["name"] == "host_device_latency_sm")
    assert len(tc["bandwidth_matrix"][0]) == 2 and tc["sum"] > 2000
    assert nvbw.nvbw_runs([doc])["host_device_latency_sm"] == [float(tc["bandwidth_matrix"][0][0])]


def test_the_host_latency_is_held_to_one_percent_the_copies_to_two():
    assert nvbw.bar(LAT) == 0.01 and nvbw.bar("CE copy h2d, 256 MiB (GB/s)") == 0.02
    rec = {"experiments": {"mmio.gpu_read_latency": {"data": {"host_median_ns": 1240.0, "nvbw": {"host_median_ns": 1218.0}}}}}
    (row,) = nvbw.rows([rec], [_doc(host_device_latency_sm=1200.0)])  # +1.5%: inside 2%, outside 1%
    assert row[0] == LAT and row[-1] is False
