"""Wording follows the mode (issue 38, item 2): the verbs of the Evidence, the compare line, the
beside sentence, and the output checker tools/checks/wordcheck.py that CI and the GPU run use."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.core import evidence
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.learning import predictions
from helpers.presentation import beside

ROOT = Path(__file__).resolve().parents[2]


def _wordcheck():
    from tools.checks import wordcheck

    return wordcheck


def _ev(mode: Mode, source: str = "GPU X", prov: dict | None = None) -> Evidence:
    return Evidence("demo", {}, mode, source, why="why", provenance=prov or {})


def test_each_mode_has_its_own_verb():
    assert _ev(Mode.LIVE).said == "measured now on GPU X"
    assert _ev(Mode.REPLAY).said == "recorded on GPU X"
    assert evidence.said(Mode.SIMULATED, "toy GPU") == "the model gives (toy GPU)"
    assert _ev(Mode.LIVE).verb == "measured now" and _ev(Mode.REPLAY).verb == "recorded"


@pytest.mark.parametrize("text,mode,bad", [
    ("one-direction bandwidth, recorded on H100", Mode.LIVE, ["recorded"]),
    ("What the reference machine reports", Mode.LIVE, ["reference machine"]),
    ("measured 3 reads", Mode.SIMULATED, ["measured"]),
    ("measured now on H100", Mode.LIVE, []),
    ("recorded on H100", Mode.REPLAY, []),
])
def test_wording_problems(text, mode, bad):
    assert evidence.wording_problems(text, mode) == bad


def test_a_models_value_is_never_measured():
    line = predictions.Comparison(question="q", measured=3.0, unit="reads", source="toy GPU",
                                  mode="simulated", at="t").line
    assert "the model gives 3" in line and "measured" not in line
    assert "recorded 3" in predictions.Comparison(question="q", measured=3.0, unit="reads", source="H100",
                                                  mode="replay", at="t").line
    assert "measured now 3" in predictions.Comparison(question="q", measured=3.0, unit="reads", source="H100",
                                                      mode="live", at="t").line


def test_beside_in_replay_names_the_recording_only():
    ref = _ev(Mode.REPLAY, "ref H100")
    text = beside.sentence("pageable h2d", "GB/s", ref, beside.Value(11.6), ref, beside.Value(11.6), "host")
    assert text == "pageable h2d: 11.6 GB/s, recorded on ref H100."


def test_beside_live_agrees_within_the_spreads_and_names_a_difference_beyond_them():
    here, ref = _ev(Mode.LIVE, "my H100"), _ev(Mode.REPLAY, "ref H100", {"host": {"cpu": "Xeon", "kernel": "6.18"}})
    same = beside.sentence("pinned h2d", "GB/s", here, beside.Value(54.0, 1.0), ref, beside.Value(55.0, 1.0), "link")
    assert "agrees with the reference" in same and "likely cause" not in same
    far = beside.sentence("pageable h2d", "GB/s", here, beside.Value(5.4, 0.2), ref, beside.Value(11.6, 0.3), "host")
    assert "different by more than their spreads" in far and "host CPU" in far and "0.47x" in far
    assert evidence.wording_problems(far.split("; reference (")[0], Mode.LIVE) == []  # the live clause
    # no spread given: 5 % of each value stands in, so 3 % apart is agreement, 20 % is not
    assert "agrees" in beside.sentence("x", "s", here, beside.Value(1.03), ref, beside.Value(1.0), "device")
    assert "different" in beside.sentence("x", "s", here, beside.Value(1.2), ref, beside.Value(1.0), "device")


def test_beside_refuses_bad_input():
    ev = _ev(Mode.LIVE)
    with pytest.raises(InputError, match="kind"):
        beside.sentence("x", "s", ev, beside.Value(1.0), ev, beside.Value(1.0), "clocks")
    with pytest.raises(InputError):
        beside.Value(float("nan"))
    with pytest.raises(InputError):
        beside.Value(1.0, -1.0)


def test_facts_line_names_what_differs_and_admits_what_neither_holds():
    assert "differs: CPU (A here, B in the reference)" in beside.facts_line({"CPU": "A"}, {"CPU": "B"})
    same = beside.facts_line({"CPU": "A", "kernel": "k"}, {"CPU": "A", "kernel": "k", "VM": True})
    assert same.startswith("same CPU, kernel") and "neither report holds" in same


@pytest.mark.parametrize("line,live,bad", [
    ("ch02.x: measured 3 reads (SIMULATED, toy GPU)", False, True),
    ("ch02.x: the model gives 3 reads (SIMULATED, toy GPU)", False, False),
    ("x (LIVE: measured now on H100): recorded one-direction bandwidth", False, True),
    ("pageable: 5 GB/s, measured now on H100; reference (ref): 11 GB/s, 0.46x", True, False),
    ("recorded one-direction bandwidth (NVIDIA H100): h2d 51.4 GB/s", True, True),
    ("recorded one-direction bandwidth (NVIDIA H100): h2d 51.4 GB/s", False, False),
    ("256 MiB regions (REPLAY: recorded on H100)", True, False),
    ("What the reference machine reports:", True, True),
    ("<Diagram: The reference machine (NVIDIA H100 80GB HBM3)>", True, False),  # names the machine it means
    # a figure with a live and a replayed series names both (live on the H100, 2026-11-28)
    ("<Figure: BARs. LIVE · measured now on NVIDIA H100; REPLAY · recorded on NVIDIA H100 (ref)>", True, False),
    ("this machine (LIVE: measured now on H100), beside the reference (REPLAY: recorded on H100)", True, False),
    ("<Figure: LIVE · measured now on NVIDIA H100; the recorded series>", True, True),
    # a real kernel's series beside the model's (Chapter 6b under QEMU in CI, 2026-11-28)
    ("<Figure: VRAM. LIVE · measured now on QEMU bochs; SIMULATED · the course's TTM model>", True, False),
    ("<Figure: VRAM. LIVE · measured now on QEMU bochs; SIMULATED · the model, measured>", True, True),
])
def test_wordcheck_flags_wording_against_the_mode(line, live, bad):
    assert bool(_wordcheck().problems(line, live)) is bad


def test_wordcheck_reads_the_banner_of_an_executed_notebook():
    wc = _wordcheck()
    cell = lambda text: {"cell_type": "code", "outputs": [{"output_type": "stream", "text": text}]}  # noqa: E731
    live = {"cells": [cell("mode      : LIVE: measured now\n"), cell("recorded one-direction bandwidth: 51 GB/s\n")]}
    replay = {"cells": [cell("mode      : REPLAY: recorded\n"), cell("recorded one-direction bandwidth: 51 GB/s\n")]}
    assert wc.check_notebook(live) and not wc.check_notebook(replay)
    assert wc.main([str(ROOT / "notebooks" / "00_your_machine.ipynb")]) == 0  # committed without outputs: nothing to flag
