"""Lab 5 (routing over a measured topology): the reference answers and the hidden cases.

The model is in helpers.models.routes (LinkMatrix, the candidate routes, matrices from a
recording or simulated); what the learner writes — a route's time, a set's makespan, the best
routes, the predicted order of two routes — is here and only here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from helpers.models import routes as rt
from helpers.models.routes import HOST, LinkMatrix, RoutingError, RoutingInputError
from instructor.labs.common import Case, draw_seed

MAX_ASSIGNMENTS = 500_000
PARTS = ("route_time", "makespan", "best_routes", "order")


# ----------------------------------------------------------------------------- the answers
def route_time(m: LinkMatrix, path: tuple[str, ...], nbytes: int) -> float:
    """Seconds for one transfer along `path` with nothing else running (store and forward)."""
    if len(path) < 2:
        raise RoutingInputError(f"a route needs at least two nodes, got {path!r}")
    for a, b in zip(path, path[1:], strict=False):
        if not m.has(a, b):  # the lab asks for ValueError here (RoutingError is not one)
            raise ValueError(f"no link {a} -> {b} in this matrix")
    return sum(m.cost(a, b, nbytes) for a, b in zip(path, path[1:], strict=False))


def makespan(m: LinkMatrix, transfers: list[tuple[int, int, int]], paths: list[tuple[str, ...]]) -> float:
    """Completion time of `transfers` on `paths`: the busiest link's busy time or the longest
    single route time, whichever is larger."""
    if len(paths) != len(transfers):
        raise RoutingInputError(f"{len(transfers)} transfers but {len(paths)} routes")
    busy: dict[tuple[str, str], float] = {}
    for (s, d, n), path in zip(transfers, paths, strict=True):
        if path[0] != rt.gpu_name(s, m.n_gpus) or path[-1] != rt.gpu_name(d, m.n_gpus):
            raise RoutingInputError(f"route {path} does not go from GPU{s} to GPU{d}")
        for a, b in zip(path, path[1:], strict=False):
            busy[(a, b)] = busy.get((a, b), 0.0) + m.cost(a, b, n)
    longest = max((route_time(m, p, n) for (_, _, n), p in zip(transfers, paths, strict=True)), default=0.0)
    return max(max(busy.values(), default=0.0), longest)


def optimal(m: LinkMatrix, transfers: list[tuple[int, int, int]]) -> tuple[float, list[tuple[str, ...]]]:
    """The smallest makespan over every assignment of routes, and one assignment reaching it."""
    options = [rt.routes(m, s, d) for s, d, _ in transfers]
    total = math.prod(len(o) for o in options)
    if total > MAX_ASSIGNMENTS:
        raise RoutingError(f"{total} route assignments is too many to try them all (limit {MAX_ASSIGNMENTS})")
    best, best_paths = math.inf, None
    for combo in itertools.product(*options):
        t = makespan(m, transfers, list(combo))
        if t < best:
            best, best_paths = t, list(combo)
    return best, best_paths


def best_routes(m: LinkMatrix, transfers: list[tuple[int, int, int]]) -> list[tuple[str, ...]]:
    """One route per transfer minimising the makespan."""
    return optimal(m, transfers)[1]


def predicted_order(m: LinkMatrix, src: int, dst: int, nbytes: int) -> list[str]:
    """["direct", "host"] or ["host", "direct"]: the two routes, fastest first, by the model."""
    a, b = f"GPU{src}", f"GPU{dst}"
    t = {"direct": route_time(m, (a, b), nbytes), "host": route_time(m, (a, HOST, b), nbytes)}
    return sorted(t, key=t.get)


# ----------------------------------------------------------------------------- grading
def earlier(part: str) -> dict:
    """The reference for the parts `part` builds on, to put in place of the learner's."""
    return {"route_time": {}, "makespan": {"route_time": route_time},
            "best_routes": {"route_time": route_time, "makespan": makespan},
            "order": {"route_time": route_time}}[part]


def _transfers(rng, m: LinkMatrix, k: int) -> list[tuple[int, int, int]]:
    out = []
    for _ in range(k):
        a, b = (int(x) for x in rng.permutation(m.n_gpus)[:2])
        out.append((a, b, int(rng.integers(1, 256)) << int(rng.choice([10, 16, 20]))))
    return out


def _pick(rng, options: list):
    return options[int(rng.integers(len(options)))]


def cases(part: str, seed: int | None = None) -> list[Case]:
    """Hidden cases of `part` (one of PARTS), drawn from `seed` (fresh when None)."""
    if part not in PARTS:
        raise ValueError(f"lab5 has no part {part!r}; parts: {PARTS}")
    seed = draw_seed(f"lab5 {part}", seed)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(4):
        m = rt.synthetic(int(rng.integers(3, 6)), int(rng.integers(1 << 30)))
        name = f"hidden matrix {i + 1} ({m.n_gpus} GPUs)"
        if part == "route_time":
            s, d, n = _transfers(rng, m, 1)[0]
            path = _pick(rng, rt.routes(m, s, d))
            out.append(Case(f"{name}, {n} B along {path}", {"M": m, "path": path, "nbytes": n},
                            route_time(m, path, n)))
        elif part == "makespan":
            transfers = _transfers(rng, m, int(rng.integers(2, 5)))
            paths = [_pick(rng, rt.routes(m, s, d)) for s, d, _ in transfers]
            out.append(Case(f"{name}, routes {paths}", {"M": m, "transfers": transfers, "paths": paths},
                            makespan(m, transfers, paths)))
        elif part == "best_routes":
            transfers = _transfers(rng, m, int(rng.integers(2, 5)))
            out.append(Case(f"{name}, transfers {transfers}", {"M": m, "transfers": transfers},
                            optimal(m, transfers)[0]))
        else:
            pairs = [(int(a), int(b)) for a, b in itertools.permutations(range(m.n_gpus), 2)
                     if m.has(f"GPU{a}", f"GPU{b}")]
            s, d = pairs[int(rng.integers(len(pairs)))]
            n = int(rng.integers(1, 1024)) << int(rng.choice([10, 20]))
            out.append(Case(f"{name}, GPU{s}->GPU{d}, {n} B", {"M": m, "src": s, "dst": d, "nbytes": n},
                            predicted_order(m, s, d, n)))
    return out
