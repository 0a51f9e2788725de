"""Routing transfers over a measured topology: the link model of Chapter 8 and Lab 5.

Nodes are "host" and "GPU0".."GPU{n-1}". Every directed link a -> b has a latency (s) and a
bandwidth (bytes/s), taken from a recording: GPU -> GPU links from the peer-access copies,
host links from pinned host<->device copies. A transfer of n bytes crossing one link costs
latency + n / bandwidth (the t0 + n/B model of Chapter 0); a route is a path of links, stored
and forwarded, so its time is the sum over its links.

This module holds the model's data — `LinkMatrix` (a link's cost), the candidate routes
between two GPUs, matrices from a recording or simulated ones — and nothing of Lab 5's
answers: a route's time, a set's makespan and the best routes are what the learner writes
(the instructor's reference is outside the student distribution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helpers.core import validate
from helpers.core.errors import CourseError, InputError
from helpers.models import copy_cost

HOST = "host"


class RoutingError(CourseError):
    """A routing question this matrix cannot answer: a missing link, no route, too many to try."""


class RoutingInputError(InputError):
    """A routing question asked wrongly: too few GPUs, bad link numbers, routes that do not fit."""


@dataclass(frozen=True)
class LinkMatrix:
    """Latency and bandwidth of every directed link between host and GPUs."""

    n_gpus: int
    latency_s: dict[tuple[str, str], float]
    bandwidth_Bps: dict[tuple[str, str], float]
    source: str = "simulated"

    def __post_init__(self):
        if isinstance(self.n_gpus, bool) or not isinstance(self.n_gpus, int) or self.n_gpus < 2:
            raise RoutingInputError(f"routing between GPUs needs at least two GPUs, got n_gpus={self.n_gpus!r}")
        for k, v in list(self.latency_s.items()) + list(self.bandwidth_Bps.items()):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise RoutingInputError(f"link {k[0]}->{k[1]}: latency/bandwidth must be finite numbers >= 0, "
                                        f"got {v!r}")
        for k, v in self.bandwidth_Bps.items():
            if v <= 0:
                raise RoutingInputError(f"link {k[0]}->{k[1]}: bandwidth must be > 0, got {v!r}")

    @property
    def gpus(self) -> list[str]:
        return [f"GPU{i}" for i in range(self.n_gpus)]

    def has(self, a: str, b: str) -> bool:
        return (a, b) in self.bandwidth_Bps

    def cost(self, a: str, b: str, nbytes: int) -> float:
        """Seconds for `nbytes` over the link a -> b alone."""
        if not self.has(a, b):
            raise RoutingError(f"no link {a} -> {b} in this matrix (peer access missing?)")
        return self.latency_s[(a, b)] + nbytes / self.bandwidth_Bps[(a, b)]


def gpu_name(i: int, n_gpus: int) -> str:
    """'GPU{i}' after checking that i is a device index of this matrix."""
    what = f"GPU index (this matrix has GPUs 0..{n_gpus - 1})"
    return f"GPU{validate.whole_number(i, what, 0, n_gpus - 1)}"


def routes(m: LinkMatrix, src: int, dst: int) -> list[tuple[str, ...]]:
    """Every route from GPU src to GPU dst: direct (if linked), via host, via each other GPU."""
    a, b = gpu_name(src, m.n_gpus), gpu_name(dst, m.n_gpus)
    if a == b:
        raise RoutingInputError(f"source and destination are both {a}: nothing to route")
    out = []
    if m.has(a, b):
        out.append((a, b))
    if m.has(a, HOST) and m.has(HOST, b):
        out.append((a, HOST, b))
    for k in m.gpus:
        if k not in (a, b) and m.has(a, k) and m.has(k, b):
            out.append((a, k, b))
    if not out:
        raise RoutingError(f"no route at all from {a} to {b}")
    return out


def from_recording(data: dict, *, peer_method: str = "peer") -> LinkMatrix:
    """A LinkMatrix from a p2p.matrices recording: each link's t0 + n/B is the course's
    copy-cost fit (helpers.models.copy_cost) through its small and large copy, which for two
    sizes is the straight line through both points."""
    try:
        sizes, mats, host = data["sizes"], data["matrices"][peer_method]["one"], data["host"]
        n = len(data["devices"])
    except (KeyError, TypeError) as exc:
        raise RoutingInputError(f"not a p2p.matrices recording (missing {exc})") from None
    lat, bw = {}, {}
    big, small = sizes["large"], sizes["small"]

    def fit(t_small, t_large):
        try:
            f = copy_cost.fit([small, big], [t_small, t_large])
        except copy_cost.ModelInputError as exc:
            raise RoutingError(f"a link's small and large copy do not give a latency and a bandwidth: {exc}") from None
        return f.t0_s, f.bandwidth_Bps

    peer = data.get("peer_access") or [[True] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j and peer[i][j] and mats["large"][i][j] is not None:
                lat[(f"GPU{i}", f"GPU{j}")], bw[(f"GPU{i}", f"GPU{j}")] = fit(mats["small"][i][j], mats["large"][i][j])
        lat[(f"GPU{i}", HOST)], bw[(f"GPU{i}", HOST)] = fit(host["d2h"]["small"][i], host["d2h"]["large"][i])
        lat[(HOST, f"GPU{i}")], bw[(HOST, f"GPU{i}")] = fit(host["h2d"]["small"][i], host["h2d"]["large"][i])
    return LinkMatrix(n, lat, bw, source="recorded")


def synthetic(n_gpus: int, seed: int) -> LinkMatrix:
    """A random but plausible link matrix (simulated): fast or slow GPU links, PCIe host links."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lat, bw = {}, {}
    names = [f"GPU{i}" for i in range(n_gpus)]
    for a in names:
        lat[(a, HOST)], bw[(a, HOST)] = rng.uniform(2e-6, 8e-6), rng.uniform(20e9, 55e9)
        lat[(HOST, a)], bw[(HOST, a)] = rng.uniform(2e-6, 8e-6), rng.uniform(20e9, 55e9)
        for b in names:
            if a != b and rng.random() > 0.15:
                lat[(a, b)] = rng.uniform(1e-6, 20e-6)
                bw[(a, b)] = rng.choice([rng.uniform(5e9, 25e9), rng.uniform(50e9, 400e9)])
    return LinkMatrix(n_gpus, lat, bw, source=f"simulated (seed {seed})")
