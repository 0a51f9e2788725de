"""Tests of the TTM model (helpers/ttm.py): placement, eviction order, pinning, costs, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.ch06_gem_ttm_dmabuf import ttm_figures
from helpers.core import reference
from helpers.models import ttm
from helpers.models.buddy import OutOfSpace
from helpers.models.ttm import Domain, MiB
from instructor.labs import lab4

LINK = ttm.LinkModel(latency_s=1e-5, h2d_bytes_per_s=50e9, d2h_bytes_per_s=40e9, source="test")


def model(vram=16 * MiB, gtt=16 * MiB, policy="lru"):
    return ttm.TTMModel(vram, gtt, chunk_size=64 * 1024, link=LINK, policy=policy)


def test_lru_evicts_least_recently_used_first():
    m = model()
    for n in "abcd":
        m.create(n, 4 * MiB)
    m.use(["a"])  # b is now the least recently used
    m.create("e", 4 * MiB)
    assert m.bos["b"].domain is Domain.GTT
    assert [mv.bo for mv in m.moves if mv.reason == "evict"] == ["b"]
    assert all(m.bos[n].domain is Domain.VRAM for n in "acde")


def test_lower_priority_is_evicted_before_older_higher_priority():
    m = model()
    m.create("pt", 4 * MiB, priority=2)  # oldest, but priority 2
    for n in "abc":
        m.create(n, 4 * MiB)
    m.create("e", 8 * MiB)
    ev = [mv.bo for mv in m.moves if mv.reason == "evict"]
    assert ev == ["a", "b"] and m.bos["pt"].domain is Domain.VRAM


def test_pinned_bos_are_never_evicted_and_cannot_be_destroyed_pinned():
    m = model()
    m.create("fb", 8 * MiB, placements=(Domain.VRAM,), contiguous=True)
    m.pin("fb")
    m.create("a", 8 * MiB)
    m.create("b", 8 * MiB)  # must evict a, not the older fb
    assert m.bos["fb"].domain is Domain.VRAM and m.bos["a"].domain is Domain.GTT
    with pytest.raises(ValueError, match="pinned"):
        m.destroy("fb")
    m.unpin("fb")
    m.destroy("fb")
    assert m.used(Domain.VRAM) == 8 * MiB


def test_pin_fails_cleanly_when_the_desired_domain_is_full_of_pinned_bos():
    m = model(vram=8 * MiB)
    m.create("fb0", 8 * MiB)
    m.pin("fb0")
    m.create("x", 4 * MiB)  # lands in GTT (fallback)
    assert m.bos["x"].domain is Domain.GTT
    with pytest.raises(OutOfSpace, match="cannot pin"):
        m.pin("x")
    assert not m.bos["x"].pinned


def test_bos_of_the_same_submission_do_not_evict_each_other():
    m = model(vram=8 * MiB)
    m.create("a", 4 * MiB)
    m.create("b", 4 * MiB)
    m.create("c", 4 * MiB)  # evicts a
    m.use(["a", "b", "c"])  # a needs VRAM; b and c are reserved, so a falls back to GTT
    assert m.bos["a"].domain is Domain.GTT
    assert {m.bos["b"].domain, m.bos["c"].domain} == {Domain.VRAM}


def test_gtt_overflow_goes_to_system_without_link_traffic():
    m = model(vram=8 * MiB, gtt=4 * MiB)
    for n in "abc":
        m.create(n, 4 * MiB)  # c evicts a to GTT
    m.create("d", 4 * MiB)  # evicts b; GTT is full, so a goes GTT -> SYSTEM first
    assert m.bos["a"].domain is Domain.SYSTEM and m.bos["b"].domain is Domain.GTT
    gtt_to_sys = [mv for mv in m.moves if mv.src is Domain.GTT and mv.dst is Domain.SYSTEM]
    assert gtt_to_sys and all(mv.link_bytes == 0 and mv.seconds == 0 for mv in gtt_to_sys)


def test_move_costs_come_from_the_link_model():
    m = model(vram=8 * MiB)
    for n in "abc":
        m.create(n, 4 * MiB)
    (ev,) = [mv for mv in m.moves if mv.reason == "evict"]
    assert ev.link_bytes == 4 * MiB and ev.seconds == pytest.approx(1e-5 + 4 * MiB / 40e9)
    m.use(["a"])  # back into VRAM: h2d
    back = m.moves[-1]
    assert back.dst is Domain.VRAM and back.seconds == pytest.approx(1e-5 + 4 * MiB / 50e9)


def test_link_model_from_the_real_reference_recording():
    sweep = reference.load().experiment("transfers.pinned_vs_pageable")
    link = ttm.LinkModel.from_sweep(sweep, reference.load().recording("transfers.pinned_vs_pageable").label)
    assert 1e9 < link.h2d_bytes_per_s < 200e9 and 1e9 < link.d2h_bytes_per_s < 200e9
    assert 1e-7 < link.latency_s < 1e-3
    assert link.source.startswith("pinned-copy fit of")


def test_simulate_is_deterministic_under_a_seed():
    a = ttm.simulate("hot-cold", 64 * MiB, seed=3, steps=60, link=LINK)
    b = ttm.simulate("hot-cold", 64 * MiB, seed=3, steps=60, link=LINK)
    c = ttm.simulate("hot-cold", 64 * MiB, seed=4, steps=60, link=LINK)
    assert a.timeline == b.timeline and a.moves == b.moves
    assert ttm.workload("hot-cold", 64 * MiB, seed=3) != ttm.workload("hot-cold", 64 * MiB, seed=4)
    assert a.timeline != c.timeline


def test_workloads_behave_as_documented():
    fits = ttm.simulate("fits", 64 * MiB, steps=80, link=LINK)
    assert fits.totals["evictions"] == 0 and fits.failures == 0
    lru = ttm.simulate("cyclic", 64 * MiB, steps=80, link=LINK, policy="lru")
    mru = ttm.simulate("cyclic", 64 * MiB, steps=80, link=LINK, policy=lab4.mru_policy)  # instructor-only
    assert mru.totals["link_bytes"] < lru.totals["link_bytes"]  # a round-robin scan defeats LRU


def test_policy_must_return_a_candidate():
    def bad(cands, needed, m):
        return m.bos["fb"]

    m = model(vram=8 * MiB, policy=bad)
    m.create("fb", 4 * MiB)
    m.pin("fb")
    m.create("a", 4 * MiB)
    with pytest.raises(ValueError, match="not one of the eviction candidates"):
        m.create("b", 4 * MiB)


@pytest.mark.parametrize("kwargs, exc", [
    ({"size": 0}, ValueError), ({"priority": 4}, ValueError), ({"placements": ()}, ValueError),
    ({"placements": (Domain.GTT,), "contiguous": True}, ValueError), ({"name": ""}, ValueError),
])
def test_create_rejects_bad_input(kwargs, exc):
    args = {"name": "x", "size": MiB} | kwargs
    with pytest.raises(exc):
        model().create(**args)


def test_bad_names_and_policies():
    with pytest.raises(ValueError, match="unknown policy"):
        model(policy="nope")
    with pytest.raises(ValueError, match="unknown workload"):
        ttm.workload("nope", 64 * MiB)
    with pytest.raises(ValueError, match="no BO named"):
        model().use(["ghost"])


def test_no_room_anywhere_is_reported_and_changes_nothing():
    m = model(vram=4 * MiB, gtt=4 * MiB)
    m.create("fb", 4 * MiB, placements=(Domain.VRAM,))
    m.pin("fb")
    with pytest.raises(OutOfSpace):
        m.create("big", 8 * MiB, placements=(Domain.VRAM, Domain.GTT))
    assert "big" not in m.bos and m.used(Domain.GTT) == 0


op = st.one_of(
    st.tuples(st.just("create"), st.integers(1, 12), st.sampled_from([(Domain.VRAM, Domain.GTT), (Domain.VRAM,),
                                                                       (Domain.GTT,), (Domain.VRAM, Domain.GTT, Domain.SYSTEM)]),
              st.integers(0, 3), st.booleans()),
    st.tuples(st.just("use"), st.lists(st.integers(0, 50), min_size=1, max_size=3)),
    st.tuples(st.just("pin"), st.integers(0, 50)),
    st.tuples(st.just("unpin"), st.integers(0, 50)),
    st.tuples(st.just("destroy"), st.integers(0, 50)),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(op, max_size=40), st.sampled_from(sorted(ttm.POLICIES)))
def test_invariants_under_random_operations(seq, policy):
    m = ttm.TTMModel(16 * MiB, 8 * MiB, chunk_size=64 * 1024, link=LINK, policy=policy, seed=1)
    made = 0
    for o in seq:
        names = sorted(m.bos)
        pinned_before = {n: m.bos[n].domain for n in names if m.bos[n].pinned}
        try:
            if o[0] == "create":
                contiguous = o[4] and Domain.VRAM in o[2]
                m.create(f"b{made}", o[1] * 1024 * 1024, o[2], o[3], contiguous)
                made += 1
            elif names and o[0] == "use":
                m.use(sorted({names[i % len(names)] for i in o[1]}))
            elif names and o[0] == "pin":
                m.pin(names[o[1] % len(names)])
            elif names and o[0] == "unpin" and m.bos[names[o[1] % len(names)]].pinned:
                m.unpin(names[o[1] % len(names)])
            elif names and o[0] == "destroy" and not m.bos[names[o[1] % len(names)]].pinned:
                m.destroy(names[o[1] % len(names)])
        except OutOfSpace:
            pass
        m.vram.check()
        assert m.used(Domain.VRAM) <= 16 * MiB and 0 <= m.gtt_used <= 8 * MiB
        assert m.gtt_used == sum(b.size for b in m.bos.values() if b.domain is Domain.GTT)
        assert m.used(Domain.VRAM) == sum(blk.size for b in m.bos.values() for blk in b.blocks)
        for b in m.bos.values():
            assert b.domain in b.placements or b.domain is Domain.SYSTEM  # evicted BOs may land in SYSTEM
            assert (b.domain is Domain.VRAM) == bool(b.blocks)
        for n, dom in pinned_before.items():
            assert m.bos[n].domain is dom, "a pinned BO moved"


def test_panel_renders_into_widget_state_and_redraws():
    """The panel's figures live in the Output widget's state (no frontend needed, so a
    headless executor never has to mimic output capture; see ttm_figures.panel), and a control
    change replaces them with the new run's numbers."""
    pytest.importorskip("ipywidgets")
    box = ttm_figures.panel(None)
    (vram, wl), (pol, seed) = (h.children for h in box.children[:2])
    out = box.children[2]
    kinds = [o["output_type"] for o in out.outputs]
    assert kinds == ["stream", "display_data", "display_data"]
    assert all("application/vnd.plotly.v1+json" in o["data"] for o in out.outputs[1:])
    expected = ttm.simulate("hot-cold", 256 * MiB, policy="lru", seed=1)
    assert out.outputs[0]["text"].startswith(f"{expected.totals['evictions']} evictions")
    wl.value, vram.value = "cyclic", 64 * MiB
    changed = ttm.simulate("cyclic", 64 * MiB, policy="lru", seed=1)
    assert out.outputs[0]["text"].startswith(f"{changed.totals['evictions']} evictions")
    assert len(out.outputs) == 3
