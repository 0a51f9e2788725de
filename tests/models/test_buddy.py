"""Property tests of the drm_buddy model (helpers/buddy.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.models.buddy import ALLOCATED, FREE, BuddyAllocator, OutOfSpace

C = 4096  # chunk size used throughout

# An operation: ("alloc", pages, contiguous, topdown) or ("free", index into live allocations)
ops = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.integers(1, 40), st.booleans(), st.booleans()),
    st.tuples(st.just("free"), st.integers(0, 1000)),
), max_size=40)
sizes = st.integers(1, 96).map(lambda n: n * C)  # includes sizes that are not powers of two


def snapshot(a: BuddyAllocator):
    return [(b.offset, b.order, b.state) for b in a.leaves()], a.avail


def run_ops(a: BuddyAllocator, seq):
    live = []
    for op in seq:
        if op[0] == "alloc":
            _, pages, contiguous, topdown = op
            before = snapshot(a)
            try:
                blocks = a.alloc(pages * C, contiguous=contiguous, topdown=topdown)
            except OutOfSpace:
                assert snapshot(a) == before, "a failed allocation changed the allocator"
                continue
            live.append((pages * C, contiguous, blocks))
        elif live:
            _, _, blocks = live.pop(op[1] % len(live))
            a.free(blocks)
        a.check()
    return live


@settings(max_examples=150, deadline=None)
@given(sizes, ops)
def test_invariants_hold_after_every_operation(total, seq):
    a = BuddyAllocator(total, C)
    live = run_ops(a, seq)
    spans = sorted((b.offset, b.end) for _, _, bl in live for b in bl)
    for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False):
        assert e0 <= s1, "two allocated blocks overlap"
    for size, contiguous, blocks in live:
        assert sum(b.size for b in blocks) == size  # exact, also after trimming
        for b in blocks:
            assert b.state == ALLOCATED and b.offset % b.size == 0  # aligned to its own size
        if contiguous:
            bl = sorted(blocks, key=lambda b: b.offset)
            assert all(x.end == y.offset for x, y in zip(bl, bl[1:], strict=False)), "contiguous range has a gap"
    assert a.avail == a.size - sum(s for s, _, _ in live)


@settings(max_examples=150, deadline=None)
@given(sizes, ops)
def test_freeing_everything_coalesces_back_to_the_initial_state(total, seq):
    a = BuddyAllocator(total, C)
    initial = snapshot(a)
    live = run_ops(a, seq)
    for _, _, blocks in reversed(live):
        a.free(blocks)
    assert snapshot(a) == initial
    assert all(b.state == FREE for b in a.roots)
    assert a.fragmentation() == BuddyAllocator(total, C).fragmentation()  # 0 when total is a power of two


@settings(max_examples=100, deadline=None)
@given(sizes, ops, st.integers(1, 96))
def test_non_contiguous_allocation_succeeds_exactly_when_enough_bytes_are_free(total, seq, pages):
    a = BuddyAllocator(total, C)
    run_ops(a, seq)
    want = pages * C
    if want <= a.avail:
        a.alloc(want)
    else:
        with pytest.raises(OutOfSpace):
            a.alloc(want)
    a.check()


@settings(max_examples=50, deadline=None)
@given(sizes, ops)
def test_deterministic(total, seq):
    a, b = BuddyAllocator(total, C), BuddyAllocator(total, C)
    run_ops(a, seq)
    run_ops(b, seq)
    assert snapshot(a) == snapshot(b)


def test_init_splits_a_non_power_of_two_size_into_roots():
    a = BuddyAllocator(12 * C + 100, C)  # rounded down to 12 chunks: roots of 8 and 4
    assert a.size == 12 * C
    assert [(r.offset, r.order) for r in a.roots] == [(0, 3), (8 * C, 2)]


def test_allocation_order_follows_the_kernel():
    # alloc_from_freelist: smallest sufficient order, last (highest-offset) entry, split to the right
    a = BuddyAllocator(16 * C, C)
    (b,) = a.alloc(C)
    assert b.offset == 15 * C and b.order == 0
    (t,) = a.alloc(C, topdown=True)
    assert t.offset == 14 * C
    blocks = a.alloc(3 * C)  # not a power of two: an order-1 block, then an order-0 block
    assert [x.order for x in blocks] == [1, 0]


def test_contiguous_is_trimmed_and_fragmentation_blocks_large_contiguous_requests():
    a = BuddyAllocator(16 * C, C)
    blocks = a.alloc(5 * C, contiguous=True)
    assert sum(b.size for b in blocks) == 5 * C and a.avail == 11 * C
    a.free(blocks)
    # fill with single chunks, free every other one: 8 chunks free, none adjacent
    singles = [a.alloc(C) for _ in range(16)]
    for s in singles[::2]:
        a.free(s)
    assert a.avail == 8 * C and a.largest_free() == C
    assert a.fragmentation() == pytest.approx(1 - 1 / 8)
    with pytest.raises(OutOfSpace):
        a.alloc(2 * C, contiguous=True)
    a.alloc(2 * C)  # scattered blocks are fine


@pytest.mark.parametrize("kwargs, exc", [
    ({"size": 0}, ValueError), ({"size": 3 * C, "chunk_size": 3000}, ValueError),
    ({"size": C - 1}, ValueError), ({"size": 1.5}, TypeError),
    ({"size": True}, TypeError), ({"size": 4 * C, "chunk_size": True}, TypeError),  # a bool is not a count
])
def test_constructor_rejects_bad_input(kwargs, exc):
    with pytest.raises(exc):
        BuddyAllocator(**kwargs)


def test_alloc_and_free_reject_bad_input():
    a = BuddyAllocator(16 * C, C)
    with pytest.raises(ValueError, match="multiple of the chunk"):
        a.alloc(C + 1)
    with pytest.raises(ValueError, match="power of two"):
        a.alloc(C, min_block_size=3 * C)
    with pytest.raises(OutOfSpace):
        a.alloc(32 * C)
    (b,) = a.alloc(C)
    a.free_block(b)
    with pytest.raises(ValueError, match="double free"):
        a.free_block(b)
