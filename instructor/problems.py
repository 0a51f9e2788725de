"""The answers of the per-learner problems (helpers.problems), for `--solve`.

Each solver takes a helpers.problems.Problem and returns printable lines, computed with the
labs' reference implementations (instructor.labs) or, for chapter exercises, the course's own
models.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from helpers.models import copy_cost, ttm
from helpers.models.radar import simulator
from helpers.problems import Problem
from instructor.labs import lab2, lab3, lab4, lab5

MiB = 1 << 20


def _lab2(p: Problem) -> list[str]:
    d = p.data
    t0, bw = lab2.fit_line(d["nbytes"], d["median_s"])
    t = float(lab2.predict_time(d["predict_bytes"], t0, bw))
    s = float(lab2.batch_slowdown(d["count"], d["each"], t0, bw))
    return [f"1. t0 = {t0 * 1e6:.3f} µs, B = {bw / 1e9:.3f} GB/s",
            f"2. one {d['predict_bytes']} B copy: {t * 1e3:.4f} ms",
            f"3. {d['count']} x {d['each']} B: {s:.2f}x one copy of everything"]


def _lab3(p: Problem) -> list[str]:
    d = p.data
    pick = lab3.choose_design(d["frame_bytes"], d["period_s"], d["deadline_s"], d["params"])
    if pick is None:
        return ["no design meets every deadline: the answer is None"]
    r = simulator.simulate(d["params"], pick["design"], d["frame_bytes"], d["period_s"], lab3.FRAMES,
                       buffers=pick["buffers"], slots=pick["slots"], deadline_periods=d["deadline_s"] / d["period_s"])
    s = r["summary"]
    return [f"cheapest design: {pick}",
            f"the model's run of it: p50 {s['p50_ms']:.3f} ms, max {s['max_ms']:.3f} ms, {s['misses']} late, "
            f"{r['dropped']} dropped in {lab3.FRAMES} frames"]


def _lab4(p: Problem) -> list[str]:
    d = p.data
    b = lab4.Buddy(d["total"])
    offsets = []
    for n in d["requests"]:
        try:
            offsets.append(b.alloc(n))
        except MemoryError:
            offsets.append("MemoryError")
    out = [f"1. offsets {offsets}; free lists after: {b.free_lists()}"]
    for kind, steps in (("cyclic", 120), ("hot-cold", 150)):
        lru = ttm.simulate(kind, d["vram"], policy="lru", seed=d["seed"], steps=steps).totals["link_bytes"]
        ref = ttm.simulate(kind, d["vram"], policy=lab4.make_policy(), seed=d["seed"], steps=steps).totals["link_bytes"]
        out.append(f"2. {kind}: LRU {lru / MiB:.0f} MiB, the reference policy {ref / MiB:.0f} MiB over the link")
    return out


def _lab5(p: Problem) -> list[str]:
    best, paths = lab5.optimal(p.data["M"], p.data["transfers"])
    return [f"routes: {paths}", f"smallest makespan: {best * 1e3:.4f} ms"]


def _ch03(p: Problem) -> list[str]:
    f = copy_cost.fit(np.asarray(p.data["nbytes"], dtype=int), np.asarray(p.data["median_s"], dtype=float))
    half = f.t0_s * f.bandwidth_Bps
    bound = "latency-bound" if 64 * 1024 < half else "bandwidth-bound"
    return [f"t0 = {f.t0_s * 1e6:.3f} µs, B = {f.bandwidth_Bps / 1e9:.3f} GB/s",
            f"n½ = t0·B = {half / 1024:.1f} KiB: a 64 KiB copy is {bound}"]


def _ch06(p: Problem) -> list[str]:
    d = p.data
    m = ttm.TTMModel(d["vram_mib"] * MiB, d["gtt_mib"] * MiB)
    for name, size in d["bos"]:
        m.create(name, size * MiB)
    moves = [(mv.bo, mv.dst.name) for mv in m.moves if mv.reason == "evict"]
    return [f"evictions in order: {moves or 'none'}",
            "final placement: " + ", ".join(f"{k}: {b.domain.name}" for k, b in m.bos.items())]


def _ch09(p: Problem) -> list[str]:
    d = p.data
    period = simulator.breaking_rate(d["params"], "registered", d["frame_bytes"])
    if not np.isfinite(period):
        return ["registered cannot keep up at any period up to 1 s"]
    return [f"shortest period {period * 1e3:.3f} ms: {d['frame_bytes'] / period / 1e9:.2f} GB/s"]


SOLVERS: dict[str, Callable[[Problem], list[str]]] = {
    "lab2": _lab2, "lab3": _lab3, "lab4": _lab4, "lab5": _lab5, "ch03": _ch03, "ch06": _ch06, "ch09": _ch09}


def solve(p: Problem) -> list[str]:
    """The answers of problem `p`, one printable line each."""
    return SOLVERS[p.key](p)
