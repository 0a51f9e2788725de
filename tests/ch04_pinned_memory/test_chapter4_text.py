"""Chapter 4's fixed sentences that lean on the reference recording, checked against it: the
pinning rule beside Exercise 4.1, the host-mappings note, and the section 4.2's feedback names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import recorded_machine

from helpers.ch04_pinned_memory import exercises
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "notebooks" / "04_pinned_memory.ipynb"
RECORDED = recorded_machine()["experiments"]


def _text() -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"] if c["cell_type"] == "markdown")


def _data(eid: str) -> dict:
    return RECORDED[eid]["data"]


def test_the_pinning_rule_agrees_with_exercise_4_1s_answer():
    """The page says: a small buffer's pin costs many times a small copy, and leaves the large
    buffer's balance to Exercise 4.1. On the recording a large buffer's pin pays within one copy
    (about 0.59), so the page must not warn that pinning it in a loop costs more than it saves."""
    cost, reg = _data("pinning.cost_vs_size"), _data("pinning.register_regions")
    assert exercises.break_even_copies(cost, reg) < 1
    text = " ".join(_text().split())
    assert "Pinning inside a loop can cost more than the copies it speeds up" not in text
    assert "pinning a small buffer for each copy loses" in text
    small = min(cost["rows"], key=lambda r: r["nbytes"])
    copies = next(s for s in _data("transfers.pinned_vs_pageable")["series"]
                  if s["direction"] == "h2d" and s["host_kind"] == "pageable")
    assert small["register"] + small["unregister"] > 10 * copies["median_s"][0]  # "many times a small copy"
    assert 0.05e-3 < small["register"] + small["unregister"] < 0.2e-3  # "about 0.1 ms"


def test_the_host_mappings_note_does_not_say_pending_once_recorded():
    assert "pinning.host_mappings" in RECORDED
    assert not re.search(r"(?i)until `pinning\.host_mappings` is recorded", _text())
    vm = {b["buffer"]: b for b in _data("pinning.host_mappings")["buffers"]}
    wc = vm["cudaHostAlloc(write_combined)"]  # what the note says the recording shows
    assert wc["path"] == "/dev/nvidiactl" and {"mm", "de", "dd"} <= set(wc["vmflags"])
    assert vm["cudaHostAlloc(default)"]["path"] == "/dev/zero (deleted)"


def test_exercise_4_2s_feedback_names_the_write_combining_section(capsys):
    sections = dict(re.findall(r"^## (\d+)\. (.+)$", _text(), re.M))
    ev = Evidence("pinning.write_combined", _data("pinning.write_combined"), Mode.REPLAY, "test", why="test")
    wrong = next(k for k in exercises.WC_OPTIONS if k != exercises.wc_correct(ev.data))
    for pick in ("b", wrong):
        exercises.wc_reading(pick, ev)
    out = capsys.readouterr().out
    named = set(re.findall(r"Section (\d)", out))
    assert named, out
    assert all("rite-combin" in sections[n] for n in named), (named, sections)
