"""Lab 4's graded parts, run by the grader (tools/grader) outside the learner's process.

The learner's allocator stays in the worker (`keep=True`) and is driven from here, one call
per operation, so every offset and free list the checks judge is data that crossed the
pipe. The TTM model runs here; the learner's eviction policy is asked for each victim: it
gets the candidates and the model's buffer objects as plain records (name, size, priority,
last_use, pin_count, contiguous, domain, placements) and its choice comes back as an index.
"""

from __future__ import annotations

import math

import hypothesis
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.ch06_gem_ttm_dmabuf import real_ttm
from helpers.labs import lab4
from helpers.labs.grading import CheckFailed, wire
from helpers.models import ttm
from helpers.models.ttm import MiB
from instructor.labs import lab4 as ref
from instructor.labs.common import recorded
from tools.grader.api import Part, StudentRaised

BO_FIELDS = ("name", "size", "priority", "last_use", "pin_count", "contiguous")


def _record(bo) -> wire.Remote:
    fields = {k: getattr(bo, k) for k in BO_FIELDS}
    fields["domain"] = None if bo.domain is None else int(bo.domain)
    fields["placements"] = tuple(int(p) for p in bo.placements)
    return wire.remote("ns", ref=bo.name, fields=fields)


def remote_policy(ask, what: str):
    """A TTM policy (candidates, needed, model) -> victim that asks the learner's `ask` in the worker."""
    def policy(candidates, needed, model):
        table = {bo.name: _record(bo) for bo in model.bos.values()}
        shown = [table.get(c.name) or _record(c) for c in candidates]
        i = ask(shown, needed, wire.remote("ns", fields={"bos": table}), pick=0)
        if i is None:
            raise CheckFailed(f"{what} returned something that is not one of the candidates it was given")
        return candidates[i]

    policy.__name__ = what
    return policy


def _link() -> ttm.LinkModel:
    """Costs of the link from the reference machine's sweep, as the notebook's cells use."""
    sweep = recorded("transfers.pinned_vs_pageable")
    return ttm.LinkModel.from_sweep(sweep.data, sweep.source)


def _policy(student):
    return remote_policy(student.call("make_policy", keep=True), "your policy")


# ------------------------------------------------------------------------ the allocator
def buddy_examples(c, student, seed: int) -> None:
    for total, requests, offsets, free_after in ref.buddy_cases(seed):
        b = student.call("Buddy", total, keep=True)
        got = [b.alloc(n) for n in requests]
        c.require(got == list(offsets),
                  f"Buddy({total}).alloc of {list(requests)} chunks returned offsets {got}, expected {list(offsets)}: "
                  "take the lowest offset of the smallest order that fits, and split keeping the lower half")
        lists = b.free_lists()
        c.require(lists == free_after,
                  f"after those allocations free_lists() is {lists}, expected {free_after}: each split puts "
                  "the upper half on the free list one order down")
        try:
            b.alloc(total)
        except StudentRaised as exc:
            c.require(exc.isa("MemoryError"), f"Buddy({total}).alloc({total}) on a partly used allocator must raise "
                                              f"MemoryError, yours raised {exc.name}")
        else:
            c.require(False, f"Buddy({total}).alloc({total}) on a partly used allocator must raise MemoryError")
        try:
            b.free_block(max(offsets) + 1)
        except StudentRaised as exc:
            c.require(exc.isa("ValueError"), f"free_block({max(offsets) + 1}) (never allocated) must raise "
                                             f"ValueError, yours raised {exc.name}")
        else:
            c.require(False, f"free_block({max(offsets) + 1}) (never allocated) must raise ValueError")
        for off in offsets:
            b.free_block(off)
        lists = b.free_lists()
        top = total.bit_length() - 1
        c.require(lists == {top: [0]}, f"after freeing every block free_lists() is {lists}, expected {{{top}: [0]}}: "
                                       "merge a freed block with its buddy (offset ^ size) while the buddy is free")


def buddy_properties(c, student, seed: int) -> None:
    b = student.call("Buddy", 16, keep=True)  # a quick look first: nonsense fails fast, without shrinking
    off, lists = b.alloc(1), b.free_lists()
    c.require(type(off) is int and isinstance(lists, dict),
              f"Buddy(16).alloc(1) returned {off!r} and free_lists() {lists!r}: an offset and a dict are expected"[:300])

    @settings(max_examples=120, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(hypothesis.HealthCheck))
    @given(st.sampled_from([16, 32, 64]), st.lists(st.tuples(st.booleans(), st.integers(1, 20)), max_size=60))
    def properties(total, seq):
        b = student.call("Buddy", total, keep=True)
        live = {}
        for is_alloc, n in seq:
            if is_alloc:
                try:
                    off = b.alloc(n)
                except StudentRaised as exc:
                    if exc.isa("MemoryError"):
                        continue
                    raise
                size = 1 << math.ceil(math.log2(n))
                assert type(off) is int, f"alloc({n}) returned {off!r}, not an offset"
                assert off % size == 0, f"a block of {size} chunks at offset {off} is not aligned to its size"
                assert 0 <= off and off + size <= total, f"block [{off}, {off + size}) lies outside the {total} chunks"
                for o, s in live.items():
                    assert off + size <= o or o + s <= off, f"new block [{off}, {off + size}) overlaps [{o}, {o + s})"
                live[off] = size
            elif live:
                off = sorted(live)[n % len(live)]
                b.free_block(off)
                del live[off]
            lists = b.free_lists()
            assert isinstance(lists, dict), f"free_lists() returned {lists!r}, not a dict"
            free_chunks = sum(len(v) << o for o, v in lists.items())
            assert free_chunks == total - sum(live.values()), (
                f"{free_chunks} free chunks + {sum(live.values())} allocated != {total}: a split or merge loses "
                "or duplicates blocks")
        for off in list(live):
            b.free_block(off)
        top = total.bit_length() - 1
        assert b.free_lists() == {top: [0]}, (
            f"after freeing everything free_lists() is not {{{top}: [0]}}: "
            "merge with the buddy (offset ^ size) while it is free, order by order")

    try:
        hypothesis.seed(seed)(properties)()
    except AssertionError as exc:  # hypothesis's smallest failing input goes into the feedback
        raise CheckFailed(" ".join([str(exc), *getattr(exc, "__notes__", [])])[:1500]) from None


# ------------------------------------------------------------------------ the policy
def policy_cyclic(c, student, seed: int) -> None:
    link = _link()
    mine_total = ref_total = 0
    for run in ref.workloads("cyclic", seed):
        base = ttm.simulate("cyclic", run.vram, policy="lru", seed=run.seed, steps=run.steps, link=link)
        mine = ttm.simulate("cyclic", run.vram, policy=_policy(student), seed=run.seed, steps=run.steps, link=link)
        c.require(mine.failures == 0,
                  f"{run.name}: {mine.failures} operations could not be placed with your policy (LRU: {base.failures})")
        b, m = base.totals["link_bytes"], mine.totals["link_bytes"]
        c.require(m < b, f"{run.name}: your policy moved {m / MiB:.0f} MiB over the link, LRU {b / MiB:.0f} MiB; "
                         "it must move fewer")
        mine_total, ref_total = mine_total + m, ref_total + run.want
    c.require(mine_total <= lab4.CYCLIC_SLACK * ref_total,
              f"your policy moved {mine_total / MiB:.0f} MiB over these runs, the course's reference policy "
              f"{ref_total / MiB:.0f} MiB: at most {lab4.CYCLIC_SLACK:g}x that is required")


def policy_hot_cold(c, student, seed: int) -> None:
    link = _link()
    lru_total = mine_total = 0
    for run in ref.workloads("hot-cold", seed):
        base = ttm.simulate("hot-cold", run.vram, policy="lru", seed=run.seed, steps=run.steps, link=link)
        mine = ttm.simulate("hot-cold", run.vram, policy=_policy(student), seed=run.seed, steps=run.steps, link=link)
        c.require(mine.failures == 0,
                  f"{run.name}: {mine.failures} operations could not be placed with your policy (LRU: {base.failures})")
        lru_total += base.totals["link_bytes"]
        mine_total += mine.totals["link_bytes"]
    c.require(mine_total <= lab4.HOT_COLD_SLACK * lru_total,
              f"on hot-cold your policy moved {mine_total / MiB:.0f} MiB over the link, {mine_total / lru_total:.2f}x "
              f"LRU's {lru_total / MiB:.0f} MiB; at most {lab4.HOT_COLD_SLACK:g}x is allowed")


def policy_priority(c, student, seed: int) -> None:
    for prio in (1, 2, 3):
        m = ttm.TTMModel(8 * MiB, 16 * MiB, link=_link(), policy=_policy(student))
        m.create("pagetable", 2 * MiB, priority=prio)
        for n in ("a", "b", "c"):
            m.create(n, 2 * MiB)
        m.use(["pagetable"])
        m.create("d", 4 * MiB)
        evicted = [mv.bo for mv in m.moves if mv.reason == "evict"]
        c.require("pagetable" not in evicted,
                  f"a priority-{prio} BO was evicted while priority-0 BOs were candidates (evicted: {evicted}); "
                  "choose among the candidates of the lowest priority only")
        c.require(len(evicted) == 2, f"making room for 4 MiB in a full 8 MiB VRAM of 2 MiB BOs should evict 2 BOs, "
                                     f"your policy led to {len(evicted)}: {evicted}")


def kernel_match(c, student, seed: int) -> None:
    victim = remote_policy(lambda *a, **k: student.call("kernel_victim", *a, **k), "your kernel_victim")
    for k, run in enumerate(real_ttm.recorded_runs()):
        for relabel in (seed % 1000 + 11, seed % 1000 + 23, seed % 1000 + 47):
            diffs = real_ttm.check_policy(victim, run=run, relabel_seed=relabel, shuffle_seed=relabel + k)
            c.require(not diffs, f"recorded run {k}, relabelling {relabel}: {len(diffs)} flips differ from the kernel; "
                                 f"first {diffs[:1]}. TTM evicts the least recently used unpinned buffer of the "
                                 "lowest priority: which field says when a BO was last used?")


GRADED = (
    Part("buddy_examples", 3, ("Buddy",), buddy_examples),
    Part("buddy_properties", 7, ("Buddy",), buddy_properties),
    Part("policy_cyclic", 4, ("make_policy",), policy_cyclic),
    Part("policy_hot_cold", 4, ("make_policy",), policy_hot_cold),
    Part("policy_priority", 2, ("make_policy",), policy_priority),
    Part("kernel_match", 5, ("kernel_victim",), kernel_match),
)
