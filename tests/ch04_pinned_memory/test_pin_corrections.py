"""Issue 28's corrections to Chapter 4 that code carries: the helper says where it is stricter than the
driver (M9), and Exercise 4.7 (swiotlb: the pinned page is not always the page the device sees, X3)."""

from __future__ import annotations

from pathlib import Path

from conftest import recorded_machine

from helpers.ch04_pinned_memory import exercises, pinning

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = recorded_machine()["experiments"]["pinning.register_regions"]["data"]["driver_answers"]


def test_recorded_unaligned_ok_is_called_stricter_and_explained():
    lines = {line.split(":")[0]: line for line in pinning.helper_vs_driver(ANSWERS)}
    unaligned = next(v for k, v in lines.items() if k.startswith("unaligned"))
    assert ANSWERS["unaligned (malloc'ed NumPy buffer + 8 B)"] == "ok", "the statement below rests on this recording"
    assert "stricter than the driver" in unaligned and "whole pages" in unaligned and "page-aligned" in unaligned
    unmapped = next(v for k, v in lines.items() if k.startswith("unmapped"))
    assert "stricter" not in unmapped and "refuses" in unmapped  # the driver refuses it too
    assert len(lines) == len(ANSWERS)


def test_a_driver_that_refused_unaligned_would_not_make_the_helper_stricter():
    line = pinning.helper_vs_driver({"unaligned (x)": "cudaErrorInvalidValue"})[0]
    assert "stricter" not in line and "refuses" in line
    assert pinning.helper_vs_driver({"something new": "ok"}) == ["something new: driver ok"]


def test_exercise_4_7_swiotlb(capsys):
    assert exercises.device_sees(None) is None
    assert exercises.device_sees("b") is True
    assert "bounce" in capsys.readouterr().out
    for wrong in ("a", "c", "d"):
        assert exercises.device_sees(wrong) is False
    assert exercises.device_sees("e") is False
