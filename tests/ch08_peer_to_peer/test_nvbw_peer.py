"""tools/bwcheck/nvbw_peer.py through nvbw_compare: nvbandwidth's two-GPU matrices, entry by entry.

The fixture is written the way nvbandwidth v0.8's json_output.cpp writes a testcase (values as
strings, "N/A" off the diagonal's complement, a bidirectional testcase's three matrices appended
to one bandwidth_matrix, `sum` the last matrix's), with the figures of the 2x H100 run of
2026-11-27 (issue 42)."""

from __future__ import annotations

import json

import pytest

from tools.bwcheck import nvbw_compare as nvbw
from tools.bwcheck import nvbw_peer


def _tc(name, blocks):
    rows = [row for block in blocks for row in block]
    last = blocks[-1]
    total = sum(float(v) for row in last for v in row if v != "N/A")
    return {"name": name, "status": "Passed", "bandwidth_description": "x", "bandwidth_matrix": rows, "sum": total}


NVBW = {"nvbandwidth": {"version": "v0.8", "testcases": [
    _tc("device_to_device_memcpy_read_ce", [[["N/A", "391.2"], ["391.6", "N/A"]]]),
    _tc("device_to_device_memcpy_write_ce", [[["N/A", "396.0"], ["396.1", "N/A"]]]),
    _tc("device_to_device_bidirectional_memcpy_read_ce", [[["N/A", "387.1"], ["386.9", "N/A"]],
                                                         [["N/A", "386.8"], ["387.2", "N/A"]],
                                                         [["N/A", "773.9"], ["774.1", "N/A"]]]),
    _tc("device_to_device_latency_sm", [[["N/A", "828.4"], ["827.6", "N/A"]]]),
    _tc("device_local_copy", [[["1310.5", "1309.9"]]]),
    _tc("device_to_device_memcpy_read_sm", [[["N/A", "751.3"], ["750.8", "N/A"]]]),
    {"name": "device_to_device_memcpy_write_sm", "status": "Waived"},
]}}


def _course(**over):
    size = {"nbytes": 256 << 20, "loops": 16, "samples": 3, "rows": [
        {"test": "read", "row": 0, "col": 1, "gbps": 390.0, "parts": [390.0]},
        {"test": "read", "row": 1, "col": 0, "gbps": 380.0, "parts": [380.0]},  # 3% below nvbandwidth
        {"test": "write", "row": 0, "col": 1, "gbps": 395.5, "parts": [395.5]},
        {"test": "bidir_read", "row": 0, "col": 1, "gbps": 772.0, "parts": [386.0, 386.0]},
        {"test": "sm_read", "row": 1, "col": 0, "gbps": 740.0, "parts": [740.0]}]}
    exps = {"p2p.matrices": {"nvbw_size": size},
            "p2p.peer_read_latency": {"peer": [{"reader": 0, "memory": 1, "median_ns": 830.0},
                                               {"reader": 1, "memory": 0, "median_ns": 850.0}]},
            "p2p.d2d_copy": {"nbytes": 256 << 20, "times_s": {"copy engine": [(256 << 20) / 1.31e12] * 3}}}
    exps.update(over)
    return {"experiments": {k: {"data": v} for k, v in exps.items() if v is not None}}


def test_the_matrices_split_into_blocks_and_na_is_none():
    tc = NVBW["nvbandwidth"]["testcases"][2]
    blocks = nvbw_peer.matrices(tc)
    assert len(blocks) == 3 and blocks[2] == [[None, 773.9], [774.1, None]]
    assert nvbw_peer.matrices(NVBW["nvbandwidth"]["testcases"][4]) == [[[1310.5, 1309.9]]]


def test_each_ordered_pair_is_its_own_figure_and_row_is_the_reader():
    got = nvbw_peer.nvbw_figures(json.loads(json.dumps(NVBW)))  # through JSON, as the file is read
    assert got[nvbw_peer.copy_name("read", 0, 1)] == 391.2  # row 0 reads column 1
    assert got[nvbw_peer.copy_name("read", 1, 0)] == 391.6
    assert got[nvbw_peer.copy_name("bidir_read", 1, 0)] == 774.1  # the total block, not read1
    assert got[nvbw_peer.latency_name(1, 0)] == 827.6
    assert got[nvbw_peer.local_name(1)] == 1309.9
    assert got[nvbw_peer.copy_name("sm_read", 0, 1)] == 751.3
    assert not any("write" in k and "SM" in k for k in got)  # a waived testcase gives nothing


def test_peer_rows_hold_the_one_percent_bar_and_name_the_far_pair():
    found = {r[0]: r for r in nvbw.rows([_course()], [NVBW])}
    assert found[nvbw_peer.copy_name("read", 0, 1)][6]  # 390.0 vs 391.2: -0.3%
    assert not found[nvbw_peer.copy_name("read", 1, 0)][6]  # 380 vs 391.6: -3.0%
    assert found[nvbw_peer.latency_name(0, 1)][6] and not found[nvbw_peer.latency_name(1, 0)][6]  # +0.2% / +2.7%
    assert round(found[nvbw_peer.local_name(0)][1], 1) == 1310.0 and found[nvbw_peer.local_name(0)][6]
    assert not found[nvbw_peer.copy_name("sm_read", 1, 0)][6]  # 740.0 vs 750.8: -1.4%
    assert nvbw_peer.copy_name("write", 1, 0) not in found  # the course did not measure it: no row
    assert "| NO (1%) |" in nvbw.table(list(found.values()))


def test_a_one_gpu_folder_and_a_size_other_than_nvbandwidths_give_no_peer_rows():
    one_gpu = {"experiments": {"crosscheck.bwcheck": {"data": {"course_gbps": {"h2d": 55.0, "d2h": 54.0}}}}}
    assert nvbw.peer_rows([one_gpu], [NVBW]) == []
    small = _course(**{"p2p.matrices": {"nvbw_size": {"nbytes": 64 << 20, "rows": [
        {"test": "read", "row": 0, "col": 1, "gbps": 391.0}]}}, "p2p.d2d_copy": {"nbytes": 64 << 20,
                                                                               "times_s": {"copy engine": [1e-4]}}})
    names = [r[0] for r in nvbw.peer_rows([small], [NVBW])]
    assert names == [nvbw_peer.latency_name(0, 1), nvbw_peer.latency_name(1, 0)]


@pytest.mark.parametrize("runs", [(391.2, 380.0, 392.0)])
def test_several_nvbandwidth_runs_give_each_entrys_median(runs):
    docs = [{"nvbandwidth": {"testcases": [_tc("device_to_device_memcpy_read_ce", [[["N/A", str(v)], ["391.6", "N/A"]]])]}}
            for v in runs]
    row = {r[0]: r for r in nvbw.peer_rows([_course()], docs)}[nvbw_peer.copy_name("read", 0, 1)]
    assert row[3] == 391.2 and row[4] == (380.0, 392.0, 3)


def test_every_copy_the_recorder_makes_has_its_nvbandwidth_testcase_and_its_words():
    from helpers.ch08_peer_to_peer import p2p, views
    from helpers.core.evidence import Evidence
    from helpers.core.mode import Mode

    assert set(p2p.NVBW_TESTS) == set(nvbw_peer.TESTS)
    rows = [{"test": t, "row": 0, "col": 1, "gbps": 1.0, "parts": [1.0]} for t in p2p.NVBW_TESTS]
    ev = Evidence("p2p.matrices", {"nvbw_size": {"nbytes": 256 << 20, "loops": 16, "samples": 3, "rows": rows}},
                  Mode.REPLAY, "t", why="t")
    assert len(views.nvbw_size_table(ev).rows) == len(p2p.NVBW_TESTS)
    assert p2p.NVBW_BYTES == nvbw_peer.NVBW_MIB << 20


def test_a_file_that_is_not_nvbandwidths_matrices_is_refused_clearly(tmp_path, capsys):
    bad = {"nvbandwidth": {"testcases": [{"name": "device_to_device_memcpy_read_ce", "status": "Passed",
                                          "bandwidth_matrix": [["N/A", "fast"], ["391.6", "N/A"]], "sum": 391.6}]}}
    with pytest.raises(ValueError, match="'fast' is neither a number nor N/A"):
        nvbw_peer.nvbw_figures(bad)
    ragged = {"name": "x", "bandwidth_matrix": [["1.0", "2.0"], ["3.0"]]}
    with pytest.raises(ValueError, match="different lengths"):
        nvbw_peer.matrices(ragged)
    from helpers.core import reference

    (tmp_path / "n.json").write_text("{not json")
    (tmp_path / "ok.json").write_text(json.dumps(NVBW))
    one = str(reference.load(reference.list_names()[0]).path)
    assert nvbw.main(["--recordings", one, "--nvbw", str(tmp_path / "n.json")]) == 2
    assert "nvbw_compare:" in capsys.readouterr().err
    assert nvbw.main(["--recordings", str(tmp_path), "--nvbw", str(tmp_path / "ok.json")]) == 2  # no machine there
    assert "no reference machine here" in capsys.readouterr().err
