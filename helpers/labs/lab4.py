"""Lab 4's published examples and the bars its policy checks set.

The allocator examples carry their answers; the cyclic runs carry the bytes the instructor's
reference policy moves on them (computed once, checked by tests/labs against it). Grading uses
hidden cases of the same shape that nobody has seen, so copying these earns nothing.
"""

from __future__ import annotations

from helpers.labs.grading.cases import Case
from helpers.models.ttm import MiB

# (total chunks, requests in chunks, offsets returned, free lists after the requests)
BUDDY_EXAMPLES = (
    (16, (3, 1), (0, 4), {0: [5], 1: [6], 3: [8]}),
    (64, (20, 16, 1), (0, 32, 48), {0: [49], 1: [50], 2: [52], 3: [56]}),
)

CYCLIC_STEPS = 120
CYCLIC_SLACK = 1.2     # a policy may move at most 1.2x the reference policy's bytes on cyclic runs
HOT_COLD_RUNS = 8
HOT_COLD_STEPS = 150
HOT_COLD_SLACK = 1.4   # ... and at most 1.4x LRU's bytes, summed over the hot-cold runs

# (VRAM MiB, workload seed) -> bytes the reference policy moves over the link
_CYCLIC = ((64, 1, 1167523840), (64, 2, 1238695936), (96, 3, 1811415040))


def cyclic_examples() -> list[Case]:
    """Published cyclic runs, each with the reference policy's bytes over the link."""
    return [Case(f"cyclic, {v} MiB VRAM, seed {s}", {"vram": v * MiB, "seed": s, "steps": CYCLIC_STEPS}, want)
            for v, s, want in _CYCLIC]


def hot_cold_examples() -> list[Case]:
    """Published hot-cold runs (the bar is LRU's bytes on the same runs, measured in the check)."""
    return [Case(f"hot-cold, {v} MiB VRAM, seed {s}", {"vram": v * MiB, "seed": s, "steps": HOT_COLD_STEPS})
            for v, s in zip((48, 64, 80, 96, 112, 128, 56, 72), range(1, HOT_COLD_RUNS + 1), strict=True)]
