"""Chapter 6's real TTM eviction: the recorded kernel trace, the model against it, Lab 4's check."""

from __future__ import annotations

import pytest

from helpers.ch06_gem_ttm_dmabuf import real_ttm
from helpers.core.errors import InputError, InputTypeError
from helpers.models import ttm


@pytest.fixture(scope="module")
def runs():
    return real_ttm.recorded_runs()


def test_the_recording_holds_the_default_sequences_with_evictions(runs):
    assert [r["flips"] for r in runs] == [list(s) for s in real_ttm.DEFAULT_SEQUENCES]
    for r in runs:
        tl = real_ttm.timeline(r)
        assert all(t["setcrtc_rc"] == 0 for t in tl)
        assert sum(len(t["evicted"]) for t in tl) >= 4
        # the trace agrees with the VRAM map: one ttm_mem_evict_first per buffer that left
        assert [t["evict_calls"] for t in tl] == [len(t["evicted"]) for t in tl]
        assert real_ttm.intact(r)


def test_vram_is_16_mib_of_3_mib_buffers_and_fills_at_the_sixth(runs):
    r = runs[0]
    assert real_ttm.vram_bytes(r) == 16 << 20 and real_ttm.buffer_bytes(r) == 1024 * 768 * 4
    tl = real_ttm.timeline(r)
    assert [t["evicted"] for t in tl[:5]] == [[]] * 5 and tl[5]["evicted"] == [0]
    assert len(tl[4]["resident"]) == 5


def test_the_model_picks_the_kernels_victims_on_every_recorded_sequence(runs):
    for r in runs:
        assert real_ttm.compare(r) == []


def test_a_different_policy_is_caught(runs):
    def most_recent(candidates, needed, model):
        return max(candidates, key=lambda b: b.last_use)

    diffs = real_ttm.compare(runs[0], policy=most_recent)
    assert diffs and all(d["kernel"] != d["model"] for d in diffs)


def test_check_policy_accepts_lru_from_the_bo_fields_and_refuses_walk_order_under_shuffle(runs):
    def by_fields(candidates, needed, model):
        return min(candidates, key=lambda b: (b.priority, b.last_use))

    for r in runs:
        for seed in (None, 1, 7):
            assert real_ttm.check_policy(by_fields, run=r, relabel_seed=seed, shuffle_seed=3) == []
    assert real_ttm.check_policy(ttm.lru_policy, run=runs[0], shuffle_seed=None) == []
    assert real_ttm.check_policy(ttm.lru_policy, run=runs[0], shuffle_seed=3) != []


def test_hard_coded_victims_fail_once_relabelled(runs):
    victims = iter(v for t in real_ttm.timeline(runs[0]) for v in t["evicted"])

    def memorised(candidates, needed, model):
        want = f"fb{next(victims)}"
        return next((c for c in candidates if c.name == want), candidates[0])

    assert real_ttm.check_policy(memorised, run=runs[0], relabel_seed=5) != []


def test_check_policy_refuses_a_non_function():
    with pytest.raises(InputTypeError):
        real_ttm.check_policy("lru")


def test_flip_sequences_are_validated():
    assert real_ttm.flip_sequences([[0, 1], (2,)]) == [[0, 1], [2]]
    for bad in ([], [[]], [[16]], [[-1]], [[True]], [[0.5]], [list(range(2)) * 40]):
        with pytest.raises((InputError, InputTypeError)):
            real_ttm.flip_sequences(bad)


def test_figure_and_words_come_from_the_evidence(runs):
    from helpers import course

    ctx = course.start("test", quiet=True)
    ev = ctx.get("real_ttm.eviction", recorded=True)
    fig = real_ttm.figure_timeline(ev)
    assert "REPLAY" in repr(fig) and "under QEMU" in repr(fig) and "SIMULATED" in repr(fig)
    text = real_ttm.describe(ev)
    assert "flip 5" in text and "fb0" in text and "differs from the kernel's: 0" in text
    assert len(real_ttm.comparison_table(ev).rows) == len(runs[0]["flips"])
