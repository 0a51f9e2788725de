"""Chapter 2's page: Exercise 2.1 (ns per load behind source question 002's 1.7 s) comes before
the claim box and the table that work it out, so its answer is never printed above it."""

from __future__ import annotations

import json
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "notebooks" / "02_mmio_and_bars.ipynb"


def _sources() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"]]


def test_exercise_2_1_comes_before_its_answer():
    src = _sources()
    exercise = next(i for i, s in enumerate(src) if "exercises.ex_2_1_round_trip(" in s)
    table = next(i for i, s in enumerate(src) if "mmio.seed002_rows(" in s)
    claim = next(i for i, s in enumerate(src) if "16 MiB in 1.7 s is 9.9 MB/s" in s)
    assert exercise < claim < table
    assert "**Exercise 2.1" in src[exercise - 1]  # its question is right above its check
