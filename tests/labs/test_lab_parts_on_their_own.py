"""Labs 2-5, visible checks part by part (issue 37, item 5), run the way a learner meets them.

Each lab notebook is run cell by cell as its student version has it (nbgrader's hidden tests
removed, every `### BEGIN SOLUTION` region replaced by `raise NotImplementedError()`), except
the solution cell(s) of ONE part, kept as the instructor wrote them. Every check of that part
must then pass: the checks of a later part use the course's stand-ins for earlier parts
(lab2.stand_ins, lab5.stand_ins), and the labs whose parts are independent (3, 4) call only
their own part. With every part stubbed, each check must report its own part's function.
Lab 1 has its own, device-backed test (test_lab1_parts_on_their_own.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.labs import grading

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[^\n]*\n?", re.S)
SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[^\n]*\n?", re.S | re.M)
#: lab -> {solution cell: (the functions it defines, the checks it alone must pass)}
PARTS = {
    "lab2_bandwidth_test": {
        "timed_copy": (("timed_copy",), ("timed_copy_events",)),
        "benchmark": (("benchmark",), ("benchmark_warmup", "benchmark_agrees")),
        "fit_line": (("fit_line",), ("fit_synthetic",)),
        "predict": (("predict_time", "batch_slowdown"), ("predict_reference", "batch_slowdown")),
    },
    "lab3_realtime_pipeline": {
        "range_doppler_code": (("range_doppler",), ("rd_matches_reference", "rd_finds_target")),
        "deadline_report_code": (("deadline_report",), ("deadline_report",)),
        "choose_design_code": (("choose_design",), ("choose_design", "choose_design_cheapest")),
    },
    "lab4_buddy_eviction": {
        "buddy_impl": (("Buddy", "__init__"), ("buddy_examples", "buddy_properties")),
        "policy_impl": (("make_policy",), ("policy_cyclic", "policy_hot_cold", "policy_priority")),
        "kernel_impl": (("kernel_victim",), ("kernel_match",)),
    },
    "lab5_p2p_routing": {
        "route_time": (("route_time",), ("check_route_time",)),
        "makespan": (("makespan",), ("check_makespan",)),
        "best_routes": (("best_routes",), ("check_best_routes",)),
        "predicted_order": (("predicted_order",), ("check_order",)),
    },
}


def run_student(lab: str, solved: tuple[str, ...]) -> dict[str, str]:
    """Run the lab as a learner with only `solved` solution cells written: each check's failure
    message ('' when it passes)."""
    nb = json.loads((ROOT / "labs" / f"{lab}.ipynb").read_text())
    ns: dict = {"display": lambda *a, **k: None}  # what Jupyter provides
    verdicts = {}
    for cell in (c for c in nb["cells"] if c["cell_type"] == "code"):
        meta, src = cell["metadata"].get("nbgrader", {}), "".join(cell["source"])
        if meta.get("grade"):
            try:
                exec(HIDDEN.sub("", src), ns)  # noqa: S102 - the lab's own check cell
                verdicts[meta["grade_id"]] = ""
            except grading.CheckFailed as exc:
                verdicts[meta["grade_id"]] = str(exc)
        elif meta.get("solution") and meta["grade_id"] not in solved:
            exec(SOLUTION.sub(lambda m: f"{m.group(1)}raise NotImplementedError()\n", src), ns)  # noqa: S102
        elif "course.finish" not in src:
            exec(src, ns)  # noqa: S102 - the lab's given cells, and the solved part as the instructor wrote it
    return verdicts


@pytest.fixture(autouse=True)
def failures_raise(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")  # a failed check raises CheckFailed
    monkeypatch.setenv("COURSE_MODE", "replay")


CASES = [(lab, cell) for lab, cells in PARTS.items() for cell in cells]


@pytest.mark.parametrize("lab,cell", CASES, ids=[f"{lab[:4]}-{cell}" for lab, cell in CASES])
def test_a_part_alone_passes_its_checks_with_every_other_part_stubbed(lab, cell):
    got = run_student(lab, (cell,))
    own = PARTS[lab][cell][1]
    assert {k: got[k] for k in own} == dict.fromkeys(own, ""), got


@pytest.mark.parametrize("lab", PARTS)
def test_with_everything_stubbed_each_check_reports_its_own_part(lab):
    got = run_student(lab, ())
    assert set(got) == {c for _fns, checks in PARTS[lab].values() for c in checks}, "a check is not listed"
    for _cell, (functions, checks) in PARTS[lab].items():
        for check in checks:
            assert "not written yet" in got[check], (check, got[check])
            assert any(f"in {fn}," in got[check] for fn in functions), f"{check} did not name {functions}: {got[check]}"
