"""No false 0: every correct answer gets full marks whatever its Python type (issue 39, item 4).

A property test: the worked solution of every lab (1 to 5; Lab 6's results are judged in its VM
from the device, not from returned values) is graded by the real graded parts, through the real
wire (tests/labs/representations.py: the worker in this process, every message as JSON), with
every value its functions return re-represented at random — NumPy arrays and scalars, 0-d arrays,
tuples, namedtuples, defaultdicts, OrderedDicts, read-only mappings, Fortran-ordered and strided
arrays — and must keep every point. The closing note reports its size (`EXAMPLES` per lab; the
representations drawn are counted in `representations.COUNT`).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
import redteam  # noqa: E402
import representations as rep  # noqa: E402

from helpers.labs import grading  # noqa: E402
from helpers.labs.grading import CheckFailed, wire  # noqa: E402
from tools.grader.api import Student, StudentRaised  # noqa: E402
from tools.grader.classrun import lab_parts, lab_wire_types, part_seed  # noqa: E402
from tools.grader.submission import lab_source, solution_cells  # noqa: E402

EXAMPLES = 8  # hypothesis examples per lab (each grades every part of the lab)
LABS = tuple(redteam.FUNCTIONS)


def _session(lab: str, rng: random.Random) -> rep.InProcess:
    src = redteam.source(lab)
    source = lab_source(src)
    s = rep.InProcess(list(source.setup), solution_cells(src, source))
    assert not s.errors, s.errors
    ns = s.worker.ns
    for funcs in redteam.FUNCTIONS[lab].values():
        for name, kind in funcs:
            ns[name] = {"def": rep.wrap, "class": rep.wrap_class, "factory": rep.wrap_factory}[kind](ns[name], rng)
    return s


def _lost(lab: str, seed: int) -> dict[str, str]:
    """{part: why} of the parts the re-represented worked solution does not get full marks on."""
    rng = random.Random(seed)
    wire.allow(lab_wire_types(lab))  # as classrun.grade_lab does for the lab it grades, before loading
    session = _session(lab, rng)
    lost = {}
    for part in lab_parts(lab):
        student = Student(session, 60.0, None, lab_seed=seed)
        try:
            part.run(grading.check(part.grade_id), student, part_seed(seed, part.grade_id))
        except (CheckFailed, AssertionError, StudentRaised) as exc:
            lost[part.grade_id] = str(exc)[:300]
    return lost


pytestmark = pytest.mark.slow  # 40 gradings of the worked solutions through the real wire


@pytest.mark.parametrize("lab", LABS)
def test_a_correct_answer_in_any_python_type_keeps_full_marks(lab):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**31 - 1))
    def prop(seed):
        assert _lost(lab, seed) == {}, f"seed {seed}"

    before = sum(rep.COUNT.values())
    prop()
    assert sum(rep.COUNT.values()) > before  # values were re-represented (the test tested something)
    print(f"{lab}: {EXAMPLES} examples, {sum(rep.COUNT.values()) - before} values re-represented")


def test_the_representations_include_every_kind_the_issue_names():
    rng = random.Random(1)
    kinds = set()
    for _ in range(400):
        for v in (1.5, 3, [1.0, 2.0], (1, 2), {"a": [1, 2]}, {1: [0]}):
            out = rep.represent(v, rng)
            kinds.add(type(out).__name__)
    assert {"ndarray", "float64", "int64", "tuple", "defaultdict", "OrderedDict", "mappingproxy"} <= kinds
    assert any(k.startswith("Answer") for k in kinds)  # a namedtuple
