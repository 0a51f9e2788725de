"""The status page's matrix table: committed tools/matrix/runner.py results, ordered, bad files named."""

from __future__ import annotations

import json

import pytest

from helpers.core.errors import ReferenceDataError
from helpers.presentation import status


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
    assert rows[1][2] == "12/15 (3 not reached)" and rows[2][4] == "2"


def _ran(*names):
    return [{"notebook": n, "passed": True} for n in names]


def test_a_row_from_an_older_tree_names_what_it_did_not_run(tmp_path):
    today = ["labs/lab1.ipynb", "notebooks/00_a.ipynb", "notebooks/03b_new.ipynb"]
    _result(tmp_path / "old.json", "1× H100", "live", "live", ["H100"], passed=3, total=3,
            notebooks=_ran("labs/lab1.ipynb", "notebooks/00_a.ipynb", "notebooks/06_old_name.ipynb"))
    _result(tmp_path / "new.json", "no GPU", "no GPU (replay)", "auto", [], passed=3, total=3,
            notebooks=_ran(*today))
    _result(tmp_path / "load.json", "1× H100", "live, 2 kernels", "live", ["H100"], passed=2, total=2,
            kernel_results=[{"kernel": 0, "notebooks": _ran("notebooks/00_a.ipynb")},
                            {"kernel": 1, "notebooks": _ran("labs/lab1.ipynb")}])
    _result(tmp_path / "bare.json", "2× H200", "live", "live", ["H200", "H200"])
    cover = {r[0] + r[1]: r[3] for r in status.matrix_table(tmp_path, today=today).rows}
    assert cover["no GPUno GPU (replay)"] == "all 3 of today's"
    assert cover["1× H100live"] == "2 of today's 3; not run: 03b_new; since renamed or removed: 06_old_name"
    assert cover["1× H100live, 2 kernels"] == "2 of today's 3; not run: 03b_new"
    few = status.coverage({"notebooks": _ran("notebooks/00_a.ipynb")}, today)
    assert few == "1 of today's 3; ran only: 00_a"  # a few chosen notebooks: named, not the rest
    assert cover["2× H200live"] == "not recorded"


def test_today_is_the_trees_chapters_and_labs():
    today = status.course_notebooks()
    assert "notebooks/00_your_machine.ipynb" in today and "labs/lab1_toy_driver.ipynb" in today
    assert all(n.endswith(".ipynb") and n.split("/")[0] in ("notebooks", "labs") for n in today)


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
