"""Lab 4 (a buddy allocator and an eviction policy): the reference answers and the hidden cases.

`Buddy` is the allocator the learner writes. `make_policy` is the reference eviction policy:
it predicts when each candidate will be used next from the gaps it has seen between its uses
(a reuse-distance estimate, the practical cousin of Belady's MIN) and evicts the one needed
last. On a cyclic scan that is the most recently used BO (MRU); on a hot/cold workload it is
a cold one, where MRU would evict the hot set. `mru_policy` (moved here from the TTM model)
is the two-line rule that wins only the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from helpers.labs import lab4 as published
from helpers.models import ttm
from instructor.labs.common import Case, draw_seed

PARTS = ("buddy_examples", "cyclic", "hot_cold")


# ----------------------------------------------------------------------------- the answers
class Buddy:
    """A drm_buddy-style allocator over `total` chunks (lowest offset of the smallest order)."""

    def __init__(self, total: int):
        if total <= 0 or total & (total - 1):
            raise ValueError(f"total must be a power of two, got {total}")
        self.total = total
        self.max_order = total.bit_length() - 1
        self.free = {o: set() for o in range(self.max_order + 1)}
        self.free[self.max_order].add(0)
        self.allocated = {}  # offset -> order

    def alloc(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        order = math.ceil(math.log2(n))
        for o in range(order, self.max_order + 1):
            if self.free[o]:
                break
        else:
            raise MemoryError(f"no free block of {n} chunks")
        offset = min(self.free[o])
        self.free[o].remove(offset)
        while o > order:  # split, keep the lower half, free the upper half
            o -= 1
            self.free[o].add(offset + (1 << o))
        self.allocated[offset] = order
        return offset

    def free_block(self, offset: int) -> None:
        if offset not in self.allocated:
            raise ValueError(f"nothing is allocated at {offset}")
        order = self.allocated.pop(offset)
        while order < self.max_order:
            buddy = offset ^ (1 << order)
            if buddy not in self.free[order]:
                break
            self.free[order].remove(buddy)
            offset = min(offset, buddy)
            order += 1
        self.free[order].add(offset)

    def free_lists(self) -> dict:
        return {o: sorted(s) for o, s in self.free.items() if s}


def mru_policy(candidates, needed: int, model) -> object:
    """Within the lowest priority present, the most recently used BO (wins cyclic scans only)."""
    lowest = candidates[0].priority
    return max((c for c in candidates if c.priority == lowest), key=lambda c: c.last_use)


def make_policy() -> Callable:
    """A fresh eviction policy (its own memory of reuse gaps) for one simulated run."""
    seen: dict[str, int] = {}
    gap: dict[str, float] = {}

    def policy(candidates, needed, model):
        for bo in model.bos.values():  # learn the gap between consecutive uses we have observed
            before = seen.get(bo.name)
            if before is not None and bo.last_use > before:
                g = bo.last_use - before
                gap[bo.name] = g if bo.name not in gap else 0.5 * gap[bo.name] + 0.5 * g
            seen[bo.name] = bo.last_use
        lowest = candidates[0].priority
        pool = [c for c in candidates if c.priority == lowest]
        # next use predicted at last_use + gap; a BO never seen reused is predicted far away
        return max(pool, key=lambda c: c.last_use + gap.get(c.name, 10**9))

    return policy


# ----------------------------------------------------------------------------- grading
def earlier(part: str) -> dict:
    """The two parts are independent: nothing of Part 1 is used by Part 2."""
    return {}


def buddy_cases(seed: int | None = None) -> list[tuple]:
    """Hidden allocator cases in the published shape (total, requests, offsets, free lists after)."""
    rng = np.random.default_rng(draw_seed("lab4 buddy_examples", seed))
    out = []
    for _ in range(4):
        total = 1 << int(rng.integers(4, 9))
        b, requests, offsets = Buddy(total), [], []
        for _ in range(int(rng.integers(2, 7))):
            n = int(rng.integers(1, max(2, total // 4)))
            try:
                offsets.append(b.alloc(n))
            except MemoryError:
                break
            requests.append(n)
        out.append((total, tuple(requests), tuple(offsets), b.free_lists()))
    return out


def workloads(kind: str, seed: int | None = None) -> list[Case]:
    """Hidden runs of the `cyclic` or `hot-cold` workload: VRAM size, workload seed, steps;
    for cyclic, the bytes the reference policy moves (the bar is published.CYCLIC_SLACK of it)."""
    if kind not in ("cyclic", "hot-cold"):
        raise ValueError(f"kind must be 'cyclic' or 'hot-cold', got {kind!r}")
    rng = np.random.default_rng(draw_seed(f"lab4 {kind}", seed))
    runs, steps = (3, published.CYCLIC_STEPS) if kind == "cyclic" else (published.HOT_COLD_RUNS, published.HOT_COLD_STEPS)
    out = []
    for _ in range(runs):
        vram = int(rng.integers(40, 129)) * ttm.MiB
        s = int(rng.integers(1, 1 << 30))
        want = None
        if kind == "cyclic":
            want = ttm.simulate("cyclic", vram, policy=make_policy(), seed=s, steps=steps).totals["link_bytes"]
        out.append(Case(f"{kind}, {vram // ttm.MiB} MiB VRAM, seed {s}", {"vram": vram, "seed": s, "steps": steps}, want))
    return out
