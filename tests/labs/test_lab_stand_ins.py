"""Labs 2 and 5, visible checks part by part (issue 37, item 5): a check that builds on earlier
parts runs the learner's code for its own part and the course's stand-ins for the earlier ones
(bwlab.stand_ins, lab5.stand_ins), so a learner stuck on fit_line or route_time still gets
feedback on the parts after it.

Each check cell is run as the student version has it (the hidden tests removed, as nbgrader
does), after the lab's first cell, with the own part solved by the instructor's reference code
(defined in the notebook's namespace, so it calls the other parts by their global names) and
every other part a stub that raises NotImplementedError, as nbgrader leaves it.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
from pathlib import Path

import pytest

from helpers.core import grading
from helpers.labs import bwlab, lab5
from helpers.models import routes
from instructor.labs import lab2 as ref2
from instructor.labs import lab5 as ref5

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[^\n]*\n?", re.S)
LABS = {
    "lab2": (ROOT / "labs" / "lab2_bandwidth_test.ipynb", ref2,
             ("timed_copy", "benchmark", "fit_line", "predict_time", "batch_slowdown"),
             {"predict_reference": ("predict_time",), "batch_slowdown": ("batch_slowdown",)}, ()),
    "lab5": (ROOT / "labs" / "lab5_p2p_routing.ipynb", ref5,
             ("route_time", "makespan", "best_routes", "predicted_order"),
             {"check_makespan": ("makespan",), "check_best_routes": ("best_routes",),
              "check_order": ("predicted_order",)}, ("optimal",)),
}


def _cells(path: Path) -> tuple[str, dict[str, str]]:
    """The lab's given cells that set up data (up to the first check), and its check cells, as
    the student version has them."""
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    meta = [c["metadata"].get("nbgrader", {}) for c in code]
    first_check = next(i for i, m in enumerate(meta) if m.get("grade"))
    given = [c for c, m in zip(code[:first_check], meta[:first_check], strict=True) if not m.get("solution")]
    checks = {m["grade_id"]: HIDDEN.sub("", "".join(c["source"])) for c, m in zip(code, meta, strict=True)
              if m.get("grade")}
    return "\n".join("".join(c["source"]) for c in given), checks


def stub(name: str):
    ns: dict = {}
    exec(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n", ns)  # noqa: S102 - a fixed stub
    return ns[name]


@pytest.fixture(scope="module")
def setups():
    out = {}
    for lab, (path, *_rest) in LABS.items():
        first, checks = _cells(path)
        ns: dict = {"display": lambda *a, **k: None}  # what Jupyter provides
        exec(first, ns)  # noqa: S102 - the lab's own first cell
        out[lab] = (ns, checks)
    return out


def run_check(setups, lab: str, check: str, solved: tuple[str, ...]) -> str:
    """The check's failure message ('' when it passes) with `solved` from the reference."""
    path, ref, functions, _, helpers_ = LABS[lab]
    base, checks = setups[lab]
    ns = dict(base)
    ns.update({n: stub(n) for n in functions})
    module_globals = {k: getattr(ref, k) for k in dir(ref) if not k.startswith("__")}
    for k, v in module_globals.items():
        ns.setdefault(k, v)
    for n in solved + (helpers_ if solved else ()):
        exec(inspect.getsource(getattr(ref, n)), ns)  # noqa: S102 - the instructor's reference, as pasted code
    try:
        exec(checks[check], ns)  # noqa: S102 - the lab's own check cell
    except grading.CheckFailed as exc:
        return str(exc)
    return ""


@pytest.fixture(autouse=True)
def failures_raise(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")


CASES = [(lab, check, own) for lab, (*_a, dep, _h) in LABS.items() for check, own in dep.items()]


@pytest.mark.parametrize("lab,check,own", CASES, ids=[c[1] for c in CASES])
def test_a_check_passes_with_only_its_own_part_solved(setups, lab, check, own):
    assert run_check(setups, lab, check, own) == ""


@pytest.mark.parametrize("lab,check,own", CASES, ids=[c[1] for c in CASES])
def test_with_everything_stubbed_a_check_reports_its_own_part(setups, lab, check, own):
    msg = run_check(setups, lab, check, ())
    assert "not written yet" in msg and f"in {own[0]}," in msg, msg


def test_stand_ins_match_the_reference_where_they_answer():
    for c in lab5.examples("best_routes"):
        m, t = c.inputs["M"], c.inputs["transfers"]
        for combo in itertools.product(*[routes.routes(m, a, b) for a, b, _ in t]):
            assert lab5.stand_ins("best_routes")["makespan"](m, t, list(combo)) == ref5.makespan(m, t, list(combo))
    for c in lab5.examples("route_time"):
        assert lab5.stand_ins("order")["route_time"](c.inputs["M"], c.inputs["path"], c.inputs["nbytes"]) == \
            pytest.approx(c.want, rel=1e-12)
    n, t = [4096, 1 << 20, 64 << 20], [1e-5, 5e-5, 2.7e-3]
    assert bwlab.stand_ins("batch")["fit_line"](n, t) == pytest.approx(ref2.fit_line(n, t), rel=1e-6)


def test_the_makespan_stand_in_refuses_what_it_does_not_know():
    from helpers.core.errors import InputError

    m = routes.synthetic(3, 99)
    with pytest.raises(InputError, match="published best_routes examples"):
        lab5.stand_ins("best_routes")["makespan"](m, [(0, 1, 1 << 20)], [("GPU0", "GPU1")])
