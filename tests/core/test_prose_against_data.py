"""The prose against other data (issue 38, item 3): every chapter's text functions run on every recording
the course has (data/reference/*.json) and on perturbed copies of them (an overlap of 1.5x, a zero-copy
loss, pageable copies much slower, host→device trailing, a registered buffer 11 % slower, an L2 that serves
re-reads or not), as live and as replayed Evidence; each text must agree with the verdict computed from
the same data, and word its values by their mode. Cheap: no notebook is executed, only the functions
that write the page's sentences."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from helpers.ch00_your_machine import first_copy
from helpers.ch02_mmio_and_bars import gpu_reads
from helpers.ch03_dma_and_copy_engines import copy_engines, views
from helpers.ch04_pinned_memory import exercises as ex4
from helpers.ch04_pinned_memory import l2_reread, mapped_kernel, pinning, zero_copy
from helpers.ch05_unified_memory import first_touch
from helpers.ch08_peer_to_peer import views as p2p_view
from helpers.core import evidence, reference
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.models import copy_cost

RECORDINGS = [reference.load(n) for n in reference.list_names()]


def _recorded(eid: str) -> list[tuple[str, dict, reference.Reference]]:
    return [(r.path.stem, r.experiment(eid), r) for r in RECORDINGS if r.has(eid)]


def _evs(eid: str, data: dict, ref: reference.Reference) -> tuple[Evidence, Evidence, Evidence]:
    """(live Evidence of `data`, replayed Evidence of `data`, the recording itself as the reference)."""
    live = Evidence(eid, data, Mode.LIVE, "Test GPU", why="measured now on Test GPU", provenance={})
    rec = ref.recording(eid)
    replay = Evidence(eid, data, Mode.REPLAY, rec.label, why="test", provenance=rec.provenance)
    theirs = Evidence(eid, rec.data, Mode.REPLAY, rec.label, why="test", provenance=rec.provenance)
    return live, replay, theirs


def _worded(text: str, ev: Evidence) -> None:
    """The clause about `ev`'s own values words them by its mode (a beside line's reference clause aside)."""
    for line in text.splitlines():
        own = line.split("; reference (")[0]
        assert evidence.wording_problems(own, ev.mode) == [], line
        if not ev.live:
            assert "measured now" not in own, line


# ---------------------------------------------------------------------------- perturbations

def _bidir(data: dict, *, overlap: float | None = None, h2d: float = 1.0) -> dict:
    d = copy.deepcopy(data)
    d["h2d"]["median_gbps"] *= h2d
    d["h2d"]["aggregate_gbps"] = [x * h2d for x in d["h2d"]["aggregate_gbps"]]
    if overlap is not None:
        one = max(d["h2d"]["median_gbps"], d["d2h"]["median_gbps"])
        d["both"]["median_gbps"] = overlap * one
        d["both"]["aggregate_gbps"] = [overlap * one] * 3
    return d


BIDIR = {"as recorded": {}, "overlap 1.5x": {"overlap": 1.5}, "no overlap": {"overlap": 1.0},
         "overlap 1.95x": {"overlap": 1.95}, "h2d trails": {"h2d": 0.8}}


@pytest.mark.parametrize("case", BIDIR)
@pytest.mark.parametrize("name,data,ref", _recorded("copy_engines.bidirectional"))
def test_ch3b_overlap_key_point_and_directions_follow_the_verdict(name, data, ref, case):
    d = _bidir(data, **BIDIR[case])
    verdict = copy_engines.bidirectional_verdict(d)
    for ev in _evs("copy_engines.bidirectional", d, ref)[:2]:
        key = copy_engines.overlap_key_point(ev)
        assert ("close to 2×" in key) == ("verdict: yes" in verdict), (key, verdict)
        assert ("partly" in key) == ("verdict: partly" in verdict), (key, verdict)
        ratio = d["h2d"]["median_gbps"] / d["d2h"]["median_gbps"]
        lines = copy_engines.direction_lines(ev, _evs("copy_engines.bidirectional", d, ref)[2])
        assert ("trails" in lines[0]) == (ratio < 1 - copy_engines.DIRECTIONS_EQUAL), lines[0]
        for text in [key, *lines, copy_engines.overlap_line(ev, _evs("copy_engines.bidirectional", d, ref)[2])]:
            _worded(text, ev)
    if case == "overlap 1.5x":
        assert "1.50×: partly, not 2×" in copy_engines.overlap_key_point(_evs("copy_engines.bidirectional", d, ref)[0])


def _slower_pageable(data: dict, factor: float, from_bytes: int = 32 << 20) -> dict:
    d = copy.deepcopy(data)
    for s in d["series"]:
        if s["host_kind"] == "pageable":
            for k in ("median_s", "min_s"):
                s[k] = [t * factor if n >= from_bytes else t for n, t in zip(s["nbytes"], s[k], strict=True)]
    return d


PAGEABLE = {"as recorded": 1.0, "pageable 2x slower from 32 MiB": 2.0}


@pytest.mark.parametrize("case", PAGEABLE)
@pytest.mark.parametrize("name,data,ref", _recorded("transfers.pinned_vs_pageable"))
def test_ch0_ch3_pageable_sentences_follow_the_data(name, data, ref, case):
    d = _slower_pageable(data, PAGEABLE[case])
    live, replay, theirs = _evs("transfers.pinned_vs_pageable", d, ref)
    for ev in (live, replay):
        for line in views.pageable_steps(ev):
            s = next(x for x in d["series"] if x["host_kind"] == "pageable" and line.startswith(f"pageable {x['direction']}"))
            n = np.asarray(s["nbytes"], float)
            bw = (n / np.asarray(s["median_s"]))[n >= 1 << 20]
            fell = any(bw[j] < 0.75 * bw[:j].max() for j in range(1, len(bw)))
            assert ("less" in line) == fell, line
            _worded(line, ev)
        claim = first_copy.claim_vs_measurement(ev, 64 << 20)
        bw = first_copy.bandwidths(ev, 64 << 20)[1]
        then = first_copy.SEED_2009["pinned"] / first_copy.SEED_2009["pageable"]
        assert ("still pays" in claim) == (bw[("pinned", "h2d")] / bw[("pageable", "h2d")] > then), claim
        fits = copy_cost.fit_all(d)
        for d_, line in zip(("h2d", "d2h"), views.residual_lines(ev, fits), strict=True):
            closer = fits[("pinned", d_)].max_relative_residual() < fits[("pageable", d_)].max_relative_residual()
            assert ("pinned follows the model more closely" in line) == closer, line
        key = views.n_half_key_point(ev, fits)
        least = min(fits[("pinned", x)].n_half for x in ("h2d", "d2h")) / views.SEED_002_OVERHEAD_BYTES
        if least >= 2:
            assert f"at least {int(least)}x" in key and int(least) <= least, key
        _worded(key, ev)
        for line in views.fits_beside(ev, fits, theirs, copy_cost.fit_all(theirs.data)):
            _worded(line, ev)
    lines = first_copy.beside_lines(live, theirs, 64 << 20)
    for line in lines:
        _worded(line, live)
        if line.startswith("pinned"):
            assert "agrees with the reference" in line, line
        elif PAGEABLE[case] > 1:
            assert "different by more than their spreads" in line and "host CPU" in line, line
    assert all("recorded on" in x for x in first_copy.beside_lines(replay, theirs, 64 << 20))


def _zc(data: dict, stream_factor: float) -> dict:
    d = copy.deepcopy(data)
    for r in d["rows"]:
        if r["pattern"] == "stream":
            r["zero_copy_s"] = r["copy_then_compute_s"] * stream_factor
    return d


ZC = {"as recorded": None, "zero-copy loses read once": 1.5, "zero-copy wins read once": 0.5}


def _l2(factor_small: float, factor_big: float, l2_bytes: int = 50 << 20) -> dict:
    run = lambda n, f: {"nbytes": n, **{f"{w}_{way}_s": t for w in ("zero_copy", "device")  # noqa: E731
                                         for way, t in (("one_kernel_1_pass", 1e-3), ("one_kernel_8_passes", f * 1e-3),
                                                        ("eight_kernels_1_pass", 8e-3))}}
    return {"l2_bytes": l2_bytes, "runs": [run(16 << 20, factor_small), run(256 << 20, factor_big)]}


L2 = {"not recorded": None, "L2 serves re-reads": (1.3, 7.9), "every pass crosses": (7.8, 7.9)}


@pytest.mark.parametrize("l2_case", L2)
@pytest.mark.parametrize("case", ZC)
@pytest.mark.parametrize("name,data,ref", _recorded("zero_copy.vs_copy"))
def test_ch4_zero_copy_key_points_follow_the_verdicts(name, data, ref, case, l2_case, capsys):
    d = data if ZC[case] is None else _zc(data, ZC[case])
    l2_data = None if L2[l2_case] is None else _l2(*L2[l2_case])
    for ev in _evs("zero_copy.vs_copy", d, ref)[:2]:
        l2 = Evidence("zero_copy.l2_reread", l2_data, ev.mode, ev.source, why="test",
                      missing=None if l2_data else "not yet recorded")
        key = zero_copy.key_points(ev, l2)
        verdict = zero_copy.verdict(d)
        for p, s in zero_copy.pattern_summary(d).items():
            said = zero_copy._says(s)
            wins = re.search(r"wins in every case for ([^;.]*)", key).group(1)
            loses = re.search(r"loses in every case for ([^;.]*)", key).group(1)
            assert (p in wins.split(", ")) == said.startswith("zero-copy wins"), (p, key, verdict)
            assert (p in loses.split(", ")) == said.startswith("zero-copy loses"), (p, key, verdict)
        served = l2_reread.served_in_l2(l2_data)
        assert ("has no data here yet" in key) == (served is None)
        if served is not None:
            assert ("were served from the GPU's L2" in key) == served, key
            lines = l2_reread.lines(l2)
            assert any("served on the GPU (its L2)" in x for x in lines) == served
            assert ("crossed the link on every pass" in key) == bool(l2_reread.crossed_above_l2(l2_data))
        _worded(key, ev)
        ex4.zero_copy_why("c", ev, l2)
        feedback = capsys.readouterr().out
        assert ("served on the GPU" in feedback) == bool(served), feedback
        assert ("not yet recorded" in feedback) == (served is None), feedback


@pytest.mark.parametrize("factor", [None, 0.6, 1.0, 1.6])
@pytest.mark.parametrize("name,data,ref", _recorded("zero_copy.numba_mapped"))
def test_ch4_numba_summary_says_what_each_size_shows(name, data, ref, factor):
    d = copy.deepcopy(data)
    if factor:
        for r in d["runs"]:
            r["zero_copy_ms"] = r["copy_then_sum_ms"] / factor
    for ev in _evs("zero_copy.numba_mapped", d, ref)[:2]:
        text = mapped_kernel.summary(ev)
        for r, line in zip(d["runs"], text.splitlines()[1:], strict=True):
            s = r["copy_then_sum_ms"] / r["zero_copy_ms"]
            assert ("faster" in line) == (s > 1 + zero_copy.TIE) and ("slower" in line) == (s < 1 - zero_copy.TIE), line
        _worded(text, ev)


@pytest.mark.parametrize("factor", [1.0, 0.89, 1.04])
@pytest.mark.parametrize("name,data,ref", _recorded("pinning.register_regions"))
def test_ch4_register_verdict_says_as_fast_only_when_it_is(name, data, ref, factor):
    d = copy.deepcopy(data)
    first = next(c for c in d["cases"] if c["outcome"] == "ok")
    first["h2d_s"] /= factor
    last = pinning.register_verdict(d).splitlines()[-1]
    ratios = [d["hostalloc_h2d_s"] / c["h2d_s"] for c in d["cases"] if c["outcome"] == "ok"]
    same = all(abs(r - 1) <= pinning.REGISTERED_SAME for r in ratios)
    assert ("as fast, within" in last) == same and ("not within" in last) == (not same), last


@pytest.mark.parametrize("enqueue", [1.0, 1.9])
@pytest.mark.parametrize("name,data,ref", _recorded("copy_engines.gated_small_copies"))
def test_ch3b_enqueue_beside_names_a_host_difference(name, data, ref, enqueue):
    d = copy.deepcopy(data)
    for r in d["runs"]:
        r["enqueue_median_s"] *= enqueue
        r["enqueue_p90_s"] = r.get("enqueue_p90_s", r["enqueue_median_s"]) * enqueue
    live, replay, theirs = _evs("copy_engines.gated_small_copies", d, ref)
    enq, dev = copy_engines.enqueue_lines(live, theirs)
    assert ("different by more than their spreads" in enq) == (enqueue > 1) and "agrees" in dev
    if enqueue > 1:
        assert "host CPU" in enq
    for line in (enq, dev):
        _worded(line, live)
    assert all("recorded on" in x for x in copy_engines.enqueue_lines(replay, theirs))


@pytest.mark.parametrize("name,data,ref", _recorded("mmio.gpu_read_latency"))
def test_ch2_read_latency_beside(name, data, ref):
    d = copy.deepcopy(data)
    d["host_median_ns"] *= 1.5
    d["host_ns"] = [x * 1.5 for x in d["host_ns"]]
    live, replay, theirs = _evs("mmio.gpu_read_latency", d, ref)
    host, device = gpu_reads.latency_beside(live, theirs)
    assert "different" in host and "agrees" in device
    for text in (host, device, gpu_reads.device_latency_note(d), gpu_reads.read_verdict(d)):
        _worded(text, live)


@pytest.mark.parametrize("name,data,ref", _recorded("copy_engines.cpu_cost"))
def test_ch3c_pageable_cost_beside(name, data, ref):
    live, replay, theirs = _evs("copy_engines.cpu_cost", _halved_pageable_cost(data), ref)
    for line in copy_engines.cpu_cost_beside(live, theirs):
        assert "different" in line and "host CPU" in line
        _worded(line, live)


def _halved_pageable_cost(data: dict) -> dict:
    d = copy.deepcopy(data)
    for k in ("pageable/h2d", "pageable/d2h"):
        d["results"][k]["gbps"] /= 2
    return d


@pytest.mark.parametrize("name,data,ref", _recorded("um.migration"))
def test_ch5_ratio_note_names_its_experiment_and_mode(name, data, ref):
    live, replay, _ = _evs("um.migration", data, ref)
    fvp = Evidence("um.fault_vs_prefetch", None, Mode.REPLAY, "x", why="x", missing="pending")
    for ev in (live, replay):
        note = first_touch.ratio_note(fvp, ev)
        assert f"{first_touch.fault_over_prefetch(data):.2f}x" in note and ev.said in note
        _worded(note, ev)


@pytest.mark.parametrize("name,data,ref", _recorded("p2p.matrices"))
def test_ch8_source_verdict_words_its_mode(name, data, ref):
    for ev in _evs("p2p.matrices", data, ref)[:2]:
        for link in (None, "NV18", "PIX"):
            text = p2p_view.source_verdict(data, link, verb=ev.said)
            assert text.startswith(ev.said[:1].upper() + ev.said[1:] + ":")  # names the machine, not a bare verb
            _worded(text, ev)


def test_every_recording_is_covered():
    """Each recording holds at least one experiment whose prose is tested here (a new recording shows up)."""
    tested = {"copy_engines.bidirectional", "transfers.pinned_vs_pageable", "zero_copy.vs_copy", "p2p.matrices",
              "zero_copy.numba_mapped", "pinning.register_regions", "copy_engines.gated_small_copies",
              "mmio.gpu_read_latency", "copy_engines.cpu_cost", "um.migration"}
    assert RECORDINGS
    for r in RECORDINGS:
        assert tested & set(r.ids()), r.path.name


@pytest.mark.parametrize("slower", [1.0, 1.8])
@pytest.mark.parametrize("name,data,ref", _recorded("pinning.cost_vs_size"))
def test_ch4_pin_cost_beside_names_the_driver(name, data, ref, slower):
    d = copy.deepcopy(data)
    for r in d["rows"]:
        r["register"] *= slower
    live, replay, theirs = _evs("pinning.cost_vs_size", d, ref)
    reg, alloc = pinning.cost_beside(live, theirs)
    assert ("different" in reg) == (slower > 1) and "agrees" in alloc
    if slower > 1:
        assert "kernel-driver work on the host CPU" in reg
    for line in (reg, alloc):
        _worded(line, live)


@pytest.mark.parametrize("name,data,ref", _recorded("um.migration"))
def test_ch5_ratio_beside(name, data, ref):
    live, replay, theirs = _evs("um.migration", data, ref)
    assert "agrees" in first_touch.ratio_beside(live, theirs)
    assert first_touch.ratio_beside(replay, theirs).endswith(f"recorded on {ref.recording('um.migration').label}.")


@pytest.mark.parametrize("name,data,ref", _recorded("zero_copy.numba_mapped"))
def test_ch4_zero_copy_speedup_beside(name, data, ref):
    d = copy.deepcopy(data)
    d["runs"][0]["zero_copy_ms"] *= 2  # the first size's zero-copy twice as slow here
    live, replay, theirs = _evs("zero_copy.numba_mapped", d, ref)
    first, *rest = mapped_kernel.beside_lines(live, theirs)
    assert "different" in first and all("agrees" in x for x in rest)
    for line in (first, *rest):
        _worded(line, live)
    missing = Evidence("zero_copy.numba_mapped", None, Mode.REPLAY, "x", why="x", missing="absent")
    assert mapped_kernel.beside_lines(live, missing) == []
