"""Lab 5's published examples: the inputs a learner tries their code on, with the answers.

The expected values were computed once by the instructor's reference and are written here as
numbers (tests/labs check them against it). They are examples to learn from: the grade comes
from hidden cases the learner has not seen, so copying these numbers earns nothing.
"""

from __future__ import annotations

from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.labs.grading.cases import Case
from helpers.models import routes

PARTS = ("route_time", "makespan", "best_routes", "order")
MiB = 1 << 20

# (seed of routes.synthetic, GPUs, path, bytes) -> seconds
_ROUTE_TIME = [
    ((4, 1), ("GPU0", "host", "GPU2"), 8 * MiB, 0.0003292264997893287),
    ((4, 2), ("GPU1", "host", "GPU3"), 8 * MiB, 0.00048813455276741814),
    ((4, 3), ("GPU0", "host", "GPU1"), 1, 6.2191607552424045e-06),
]
_MAKESPAN_TRANSFERS = [(0, 1, 32 * MiB), (0, 1, 16 * MiB), (2, 1, 8 * MiB)]
_MAKESPAN = [  # (GPUs, seed), the route index chosen per transfer, seconds
    ((3, 4), (0, 0, 0), 0.00046939887689028716),
    ((3, 5), (1, 0, 1), 0.0013267357891244842),
    ((3, 6), (-1, -1, 0), 0.0016738207003462306),
]
_BEST = [  # (GPUs, seed), transfers, optimal makespan in seconds
    ((3, 21), [(0, 1, 64 * MiB), (0, 1, 32 * MiB), (2, 0, 8 * MiB)], 0.0004229061847485676),
    ((4, 22), [(0, 3, 128 * MiB), (1, 3, 16 * MiB), (3, 0, 4 * MiB), (2, 1, 1 * MiB)], 0.000685335169155683),
    ((3, 23), [(1, 2, 96 * MiB), (1, 2, 96 * MiB)], 0.003729224215896661),
]
_ORDER = [  # (GPUs, seed), src, dst, bytes, fastest first
    ((3, 31), 0, 1, 1 * MiB, ("direct", "host")),
    ((3, 30), 0, 1, 64 * MiB, ("host", "direct")),
    ((3, 33), 1, 2, 256 * MiB, ("direct", "host")),
]


def _matrix(spec: tuple[int, int]) -> routes.LinkMatrix:
    return routes.synthetic(*spec)


def _nth(options: list, k: int):
    return options[k % len(options)]


def examples(part: str) -> list[Case]:
    """The published examples of `part` (one of PARTS), each with its expected result."""
    if part == "route_time":
        return [Case(f"simulated matrix {s}: {n} B along {p}", {"M": _matrix(s), "path": p, "nbytes": n}, w)
                for s, p, n, w in _ROUTE_TIME]
    if part == "makespan":
        out = []
        for s, pick, w in _MAKESPAN:
            m = _matrix(s)
            paths = [_nth(routes.routes(m, a, b), k) for (a, b, _), k in zip(_MAKESPAN_TRANSFERS, pick, strict=True)]
            out.append(Case(f"simulated matrix {s}, routes {paths}",
                            {"M": m, "transfers": list(_MAKESPAN_TRANSFERS), "paths": paths}, w))
        return out
    if part == "best_routes":
        return [Case(f"simulated matrix {s}, transfers {t}", {"M": _matrix(s), "transfers": list(t)}, w)
                for s, t, w in _BEST]
    if part == "order":
        return [Case(f"simulated matrix {s}, GPU{a}->GPU{b}, {n} B", {"M": _matrix(s), "src": a, "dst": b, "nbytes": n},
                     list(w)) for s, a, b, n, w in _ORDER]
    raise InputError(f"Lab 5 has no part {part!r}; parts: {PARTS}")


def measured_cases(matrices: Evidence) -> list[Case]:
    """Part 4's measured cases from a `p2p.matrices` Evidence: for each pair of GPUs with peer
    access, the order of the direct and the via-host route as measured at the medium size
    (a size the link fit never saw), with the matrix fitted from the same Evidence."""
    data = matrices.require()
    m = routes.from_recording(data)
    n = data["sizes"]["medium"]
    mats = data["matrices"]
    out = []
    for s in range(m.n_gpus):
        for d in range(m.n_gpus):
            direct = mats["peer"]["one"]["medium"][s][d] if s != d else None
            host = mats["staged"]["one"]["medium"][s][d] if s != d else None
            if direct is None or host is None or not m.has(f"GPU{s}", f"GPU{d}"):
                continue
            t = {"direct": direct, "host": host}
            note = f"direct {direct * 1e6:.1f} µs, via host {host * 1e6:.1f} µs, {matrices.mode.value} on {matrices.source}"
            out.append(Case(f"GPU{s}→GPU{d}, {n} B ({matrices.mode.value})",
                            {"M": m, "src": s, "dst": d, "nbytes": n, "note": note}, sorted(t, key=t.get)))
    return out


# ----------------------------------------------------------------------------- stand-ins
def _route_time(M: routes.LinkMatrix, path, nbytes: int) -> float:
    """The course's stand-in for route_time: the model's own per-link cost (LinkMatrix.cost),
    added over the links, exactly the rule the route_time check states in its feedback."""
    return sum(M.cost(a, b, nbytes) for a, b in zip(path, path[1:], strict=False))


def _makespan(M: routes.LinkMatrix, transfers, paths) -> float:
    """The course's stand-in for makespan: looked up for the published best_routes examples
    (lab5_makespans, numbers only: no code of the part), refused elsewhere."""
    import itertools

    from helpers.labs.lab5_makespans import MAKESPANS

    for spec, t, _ in _BEST:
        if list(transfers) != list(t) or _matrix(spec) != M:
            continue
        options = [routes.routes(M, a, b) for a, b, _ in t]
        wanted = [tuple(p) for p in paths]
        for k, combo in enumerate(itertools.product(*options)):
            if list(combo) == wanted:
                return MAKESPANS[spec][k]
    raise InputError("the course's stand-in for makespan knows only the published best_routes examples, one "
                     "route per transfer, from src to dst; with other inputs, best_routes needs your own makespan")


#: the earlier parts each check builds on
BUILDS_ON = {"route_time": (), "makespan": ("route_time",), "best_routes": ("route_time", "makespan"),
             "order": ("route_time",)}


def stand_ins(part: str) -> dict:
    """The course's stand-ins for the parts `part` builds on, for the visible checks: a learner
    stuck on route_time still gets feedback on makespan and predicted_order, and one stuck on
    makespan on best_routes. The grade uses the instructor's reference instead, in the grader."""
    if part not in BUILDS_ON:
        raise InputError(f"Lab 5 has no part {part!r}; parts: {PARTS}")
    course = {"route_time": _route_time, "makespan": _makespan}
    return {name: course[name] for name in BUILDS_ON[part]}
