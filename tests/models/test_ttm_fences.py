"""Busy buffers in the TTM model: a submission's fence keeps its BOs busy, eviction waits for it
(or, with no_wait_gpu, refuses to and falls back), and signalling is checked input."""

from __future__ import annotations

import pytest

from helpers.ch06_gem_ttm_dmabuf import ttm_figures
from helpers.core.errors import InputError, InputTypeError
from helpers.models import ttm
from helpers.models.ttm import Domain, MiB

LINK = ttm.LinkModel(latency_s=1e-5, h2d_bytes_per_s=50e9, d2h_bytes_per_s=40e9, source="test")


def two_full(no_wait_gpu: bool = False) -> ttm.TTMModel:
    """8 MiB of VRAM holding a (used by the unfinished job "draw") and b (used later, idle)."""
    m = ttm.TTMModel(8 * MiB, 8 * MiB, link=LINK, no_wait_gpu=no_wait_gpu)
    m.create("a", 4 * MiB)
    m.create("b", 4 * MiB)
    m.create("g", 1 * MiB, placements=(Domain.GTT,))
    m.use(["a", "g"], job="draw")  # a and g now carry draw's fence
    m.use(["b"])  # b is touched last: a is the LRU victim
    return m


def test_a_submission_makes_its_bos_busy_until_the_job_signals():
    m = two_full()
    assert m.busy("a") == ("draw",) and m.busy("g") == ("draw",) and m.busy("b") == ()
    assert sorted(m.signal("draw")) == ["a", "g"]
    assert m.busy("a") == () and m.busy("g") == ()


def test_evicting_a_busy_bo_waits_for_its_fence_which_signals_for_every_bo():
    m = two_full()
    m.create("c", 4 * MiB)  # VRAM is full: LRU picks a, which is busy
    (ev,) = [mv for mv in m.moves if mv.reason == "evict"]
    assert (ev.bo, ev.dst, ev.waited_for) == ("a", Domain.GTT, ("draw",))
    assert m.busy("g") == ()  # the fence signalled once, for every BO that carried it
    assert m.totals()["evictions_that_waited"] == 1
    assert ttm_figures.move_rows(m)[-1][-1] == "draw"


def test_an_idle_victim_is_evicted_without_waiting():
    m = two_full()
    m.signal("draw")
    m.create("c", 4 * MiB)
    (ev,) = [mv for mv in m.moves if mv.reason == "evict"]
    assert ev.bo == "a" and ev.waited_for == ()
    assert m.totals()["evictions_that_waited"] == 0


def test_no_wait_gpu_skips_the_busy_bo_and_evicts_the_next_idle_one():
    m = two_full(no_wait_gpu=True)
    m.create("c", 4 * MiB)
    (ev,) = [mv for mv in m.moves if mv.reason == "evict"]
    assert (ev.bo, ev.dst, ev.waited_for) == ("b", Domain.GTT, ())  # a answered -EBUSY and was skipped
    assert m.bos["a"].domain is Domain.VRAM and m.busy("a") == ("draw",)
    assert m.bos["c"].domain is Domain.VRAM


def test_no_wait_gpu_with_only_busy_bos_takes_the_fallback_placement():
    m = ttm.TTMModel(8 * MiB, 8 * MiB, link=LINK, no_wait_gpu=True)
    m.create("a", 4 * MiB)
    m.create("b", 4 * MiB)
    m.use(["a", "b"], job="draw")
    m.create("c", 4 * MiB)
    assert m.bos["c"].domain is Domain.GTT  # every candidate was busy: VRAM's placement failed
    assert [mv for mv in m.moves if mv.reason == "evict"] == [] and m.busy("b") == ("draw",)


def test_simulate_runs_jobs_and_signals_and_counts_the_waits():
    ops = [("create", "a", 4 * MiB, (Domain.VRAM, Domain.GTT), 0, False),
           ("create", "b", 4 * MiB, (Domain.VRAM, Domain.GTT), 0, False),
           ("use", ["a"], "j1"), ("use", ["b"], "j2"), ("signal", "j2"),
           ("create", "c", 4 * MiB, (Domain.VRAM, Domain.GTT), 0, False),  # evicts a: waits for j1
           ("create", "d", 4 * MiB, (Domain.VRAM, Domain.GTT), 0, False)]  # evicts b: idle
    run = ttm.simulate(ops, 8 * MiB, link=LINK)
    assert run.totals["evictions"] == 2 and run.totals["evictions_that_waited"] == 1
    refused = ttm.simulate(ops, 8 * MiB, link=LINK, no_wait_gpu=True)  # the busy a is skipped: b, then c go
    assert [mv.bo for mv in refused.moves if mv.reason == "evict"] == ["b", "c"]
    assert refused.totals["evictions_that_waited"] == 0 and refused.failures == 0


def test_bad_jobs_and_flags_are_refused():
    m = two_full()
    with pytest.raises(InputError, match="no BO is waiting for job 'nope'"):
        m.signal("nope")
    m.signal("draw")
    with pytest.raises(InputError, match="already signalled"):
        m.signal("draw")
    with pytest.raises(InputError, match="job"):
        m.use(["a"], job="  ")
    with pytest.raises(InputTypeError, match="job"):
        m.use(["a"], job=3)
    with pytest.raises(InputTypeError, match="no_wait_gpu"):
        ttm.TTMModel(8 * MiB, 8 * MiB, no_wait_gpu="yes")
    with pytest.raises(InputError, match="no BO named"):
        m.busy("ghost")


def test_bo_rows_say_where_each_bo_is_what_moved_it_and_what_it_waited_for():
    m = two_full()
    m.create("c", 4 * MiB)
    rows = {r[0]: r for r in ttm_figures.bo_rows(m)}
    assert rows["a"] == ("a", "GTT", "evict VRAM→GTT after waiting for draw", "none")
    assert rows["b"][2:] == ("not moved", "none") and rows["c"][1] == "VRAM"
    skipped = two_full(no_wait_gpu=True)
    skipped.create("c", 4 * MiB)
    rows = {r[0]: r for r in ttm_figures.bo_rows(skipped)}
    assert rows["a"][2:] == ("not moved", "draw") and rows["b"][2] == "evict VRAM→GTT"
