"""Lab 5's graded parts, run by the grader (tools/grader) outside the learner's process.

Each part draws hidden cases here (instructor.labs.lab5.cases), calls the learner's function
in the sandboxed worker, and compares what comes back (plain data) with the reference's
answer computed here. Earlier parts the learner's function calls (`route_time` inside
`makespan`) are answered by the reference, through the worker's callbacks.
"""

from __future__ import annotations

from helpers.labs import lab5 as published
from helpers.models import routes
from instructor.labs import lab5 as ref
from instructor.labs.common import recorded
from tools.grader.api import Part, StudentRaised

ROUTE_HINT = "a store-and-forward route costs, on every link it crosses, that link's latency + nbytes / bandwidth"


def _links(path) -> list:
    return list(zip(path[:-1], path[1:], strict=True))


def route_time(c, student, seed: int) -> None:
    cases = ref.cases("route_time", seed)
    for case in cases:
        c.close(f"route_time on {case.name}", student.route_time(case.M, case.path, case.nbytes), case.want,
                1e-9, ROUTE_HINT)
    first = cases[0]
    one = student.route_time(first.M, first.path, 1)
    lat = sum(first.M.latency_s[link] for link in _links(first.path))
    c.close(f"route_time of 1 byte along {first.path}", one, ref.route_time(first.M, first.path, 1), 1e-9,
            f"a 1-byte transfer costs about the latencies of its links together ({lat:.3g} s)")
    missing = routes.LinkMatrix(2, {("GPU0", "host"): 1e-6}, {("GPU0", "host"): 1e9})
    try:
        got = student.route_time(missing, ("GPU0", "GPU1"), 8)
    except StudentRaised as exc:
        c.require(exc.isa("ValueError"), f"a path over a missing link must raise ValueError; yours raised "
                                         f"{exc.name}: {exc.message}")
    else:
        c.require(False, f"a path over a missing link must raise ValueError, yours returned {got!r}")


def makespan(c, student, seed: int) -> None:
    for case in ref.cases("makespan", seed):
        got = student.call("makespan", case.M, case.transfers, case.paths, bind=ref.earlier("makespan"))
        c.close(f"makespan on {case.name}", got, case.want, 1e-9,
                "the set is done when its busiest link has served everything routed over it, and never before "
                "its slowest single transfer")


def best_routes(c, student, seed: int) -> None:
    for case in ref.cases("best_routes", seed):
        m, transfers = case.M, case.transfers
        got = student.call("best_routes", m, transfers, bind=ref.earlier("best_routes"))
        c.require(isinstance(got, (list, tuple)) and all(isinstance(p, (list, tuple)) for p in got),
                  f"{case.name}: best_routes should return one route (a tuple of node names) per transfer, "
                  f"got {got!r}"[:300])
        paths = [tuple(p) for p in got]
        c.require(len(paths) == len(transfers), f"{case.name}: {len(transfers)} transfers but {len(paths)} routes")
        for (s, d, _), p in zip(transfers, paths, strict=True):
            c.require(len(p) >= 2 and p[0] == f"GPU{s}" and p[-1] == f"GPU{d}",
                      f"{case.name}: route {p} does not go from GPU{s} to GPU{d}")
            c.require(all(isinstance(x, str) for x in p) and all(m.has(a, b) for a, b in _links(p)),
                      f"{case.name}: route {p} uses a link this matrix does not have")
        c.close(f"{case.name}: makespan of your routes", ref.makespan(m, transfers, paths), case.want, 1e-9,
                f"the optimum is {case.want * 1e3:.3f} ms: are the via-host and via-GPU routes among your "
                "candidates, and do you compare whole assignments rather than each transfer alone?")


def order(c, student, seed: int) -> None:
    cases = ref.cases("order", seed) + published.measured_cases(recorded("p2p.matrices"))
    for case in cases:
        got = student.call("predicted_order", case.M, case.src, case.dst, case.nbytes, bind=ref.earlier("order"))
        c.require(isinstance(got, (list, tuple)), f"{case.name}: predicted_order should return a list, got {got!r}")
        c.require(list(got) == list(case.want), f"{case.name}: you predict {list(got)}, expected {list(case.want)}"
                  + (f" ({case.note})" if "note" in case.inputs else ""))


WIRE_TYPES = (routes.LinkMatrix,)  # the matrix every call hands the learner

GRADED = (
    Part("check_route_time", 5, ("route_time",), route_time),
    Part("check_makespan", 5, ("makespan",), makespan),
    Part("check_best_routes", 10, ("best_routes",), best_routes),
    Part("check_order", 5, ("predicted_order",), order),
)
