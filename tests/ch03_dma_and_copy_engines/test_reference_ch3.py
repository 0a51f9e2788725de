"""Chapter 3's fidelity bars on recorded data: the small-copy device-side times the course
reports agree with helpers/measure/bwcheck --small from the same run, within 25%."""

from pathlib import Path

import pytest

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import reference

DATA = Path(__file__).resolve().parents[2] / "data" / "reference"
FILES = sorted(p.parent for p in DATA.glob("*/manifest.json"))
CH3 = ("copy_engines.gated_small_copies", "copy_engines.bidirectional", "copy_engines.cpu_cost")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_small_copy_device_time_agrees_with_c(path):
    ref = reference.load(path)
    if not ref.has("crosscheck.small_copy"):
        # a file recorded before Chapter 3 existed has none of its experiments; one that has
        # any of them must have the cross-check from the same run too
        assert not any(ref.has(e) for e in CH3), f"{path.name} records Chapter 3 but not crosscheck.small_copy"
        return
    data = ref.experiment("crosscheck.small_copy")
    assert not ref.recording("crosscheck.small_copy").doc["quick"], "record the cross-check at full size"
    cmp = crosscheck.small_copy_comparison(data["course"], data["c"])
    assert set(data["course"]["h2d"]) == {"4", "64", "1024", "4096"}
    assert cmp["ok"], f"worst device-side difference {cmp['worst']:.1%} > {cmp['tolerance']:.0%}: {cmp['relative_difference']}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_gated_measurements_really_held(path):
    ref = reference.load(path)
    if not ref.has("copy_engines.gated_small_copies"):
        return
    runs = ref.experiment("copy_engines.gated_small_copies")["runs"]
    assert runs and all(r["gate_held"] for r in runs), "a gated measurement ran before its release"
