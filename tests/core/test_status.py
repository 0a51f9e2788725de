"""The status page's matrix table: committed tools/matrix.py results, ordered, bad files named."""

from __future__ import annotations

import json

import pytest

from helpers.core import status
from helpers.core.errors import ReferenceDataError


def _result(path, machine, mode, requested, gpus, passed=15, total=15, leaks=0, date="2026-11-21 22:00 UTC", **kw):
    path.write_text(json.dumps({"machine": machine, "mode": mode, "requested_mode": requested, "gpus": gpus,
                                "passed": passed, "total": total, "leaks": leaks, "date": date, **kw}))


def test_rows_go_from_no_gpu_to_several_gpus(tmp_path):
    _result(tmp_path / "a.json", "2× NVIDIA H200", "live", "live", ["H200", "H200"])
    _result(tmp_path / "b.json", "1× NVIDIA H100", "live", "live", ["H100"], leaks=2)
    _result(tmp_path / "c.json", "no GPU", "no GPU (replay)", "auto", [])
    _result(tmp_path / "d.json", "1× NVIDIA H100", "replay forced", "replay", ["H100"], passed=12,
            not_reached=["x", "y", "z"])
    rows = status.matrix_table(tmp_path).rows
    assert [r[:2] for r in rows] == [("no GPU", "no GPU (replay)"), ("1× NVIDIA H100", "replay forced"),
                                     ("1× NVIDIA H100", "live"), ("2× NVIDIA H200", "live")]
    assert rows[1][2] == "12/15 (3 not reached)" and rows[2][3] == "2"


@pytest.mark.parametrize("text", ['{"machine": "x"', '{"machine": "x", "mode": "live"}', "[]"])
def test_a_file_that_is_not_a_result_is_named(tmp_path, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ReferenceDataError, match="bad.json: not a matrix result"):
        status.matrix_table(tmp_path)


def test_the_committed_results_are_readable_and_green():
    """What the status page shows: every committed row passed every notebook, no leak."""
    results = status.matrix_results()
    assert results, "data/matrix/ holds no results"
    for d in results:
        assert (d["passed"], d["leaks"]) == (d["total"], 0), d.get("row")
