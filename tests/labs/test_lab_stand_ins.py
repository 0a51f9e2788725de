"""The course's stand-ins for Labs 2 and 5 (lab2.stand_ins, lab5.stand_ins): what the visible
checks use for the earlier parts (test_lab_parts_on_their_own.py runs the checks with them).
Where they answer, they agree with the instructor's reference; where they cannot, they say so."""

from __future__ import annotations

import itertools

import pytest

from helpers.core.errors import InputError
from helpers.labs import lab2, lab5
from helpers.models import routes
from instructor.labs import lab2 as ref2
from instructor.labs import lab5 as ref5


def test_the_makespan_table_matches_the_reference_on_every_assignment():
    for c in lab5.examples("best_routes"):
        m, t = c.inputs["M"], c.inputs["transfers"]
        for combo in itertools.product(*[routes.routes(m, a, b) for a, b, _ in t]):
            assert lab5.stand_ins("best_routes")["makespan"](m, t, list(combo)) == ref5.makespan(m, t, list(combo))


def test_route_time_and_fit_line_stand_ins_agree_with_the_reference():
    for c in lab5.examples("route_time"):
        got = lab5.stand_ins("order")["route_time"](c.inputs["M"], c.inputs["path"], c.inputs["nbytes"])
        assert got == pytest.approx(c.want, rel=1e-12)
    n, t = [4096, 1 << 20, 64 << 20], [1e-5, 5e-5, 2.7e-3]
    assert lab2.stand_ins("batch")["fit_line"](n, t) == pytest.approx(ref2.fit_line(n, t), rel=1e-6)
    assert lab2.stand_ins("batch")["predict_time"](4096, 1e-5, 2e10) == pytest.approx(ref2.predict_time(4096, 1e-5, 2e10))


def test_the_stand_ins_cover_only_earlier_parts():
    assert set(lab5.stand_ins("makespan")) == {"route_time"} and lab5.stand_ins("route_time") == {}
    assert set(lab2.stand_ins("predict")) == {"fit_line"} and lab2.stand_ins("fit") == {}
    with pytest.raises(InputError):
        lab5.stand_ins("telepathy")


def test_the_makespan_stand_in_refuses_what_it_does_not_know():
    m = routes.synthetic(3, 99)
    with pytest.raises(InputError, match="published best_routes examples"):
        lab5.stand_ins("best_routes")["makespan"](m, [(0, 1, 1 << 20)], [("GPU0", "GPU1")])
