"""Chapter 2's helpers (helpers.ch02_mmio_and_bars.mmio): BAR roles, seed arithmetic, modelled access costs."""

from __future__ import annotations

import dataclasses

import pytest
from toygpu_util import start_device

from helpers.ch02_mmio_and_bars import mmio
from helpers.core import reference
from helpers.core.mode import Mode
from helpers.measure import sysinfo


@pytest.fixture(scope="module")
def ref_report():
    return sysinfo.from_dict(reference.load("h100-pcie").experiment("system.report"))


def test_reference_bars_and_roles(ref_report):
    rows = mmio.bar_rows(ref_report)
    assert [r[1:3] for r in rows] == [("resource0", "16 MiB"), ("resource2", "128 GiB"), ("resource4", "32 MiB")]
    assert "aperture whose pages the driver maps" in rows[1][6] and "registers" in rows[0][6]
    assert mmio.largest_bar(ref_report) == 128 << 30
    with pytest.raises(TypeError):
        mmio.bar_rows({"gpus": []})


def test_streaming_read_names_its_mechanism():
    """Issue 28 M8: "64-byte streaming loads" must say how: MOVNTDQA from a write-combined mapping."""
    streaming = [m for m in mmio.METHODS if m.startswith("streaming read")]
    assert len(streaming) == 1 and "MOVNTDQA" in streaming[0] and "WC" in streaming[0]


def test_register_bar_flagged_prefetchable_gets_a_warning(ref_report):
    """Issue 28 M7: the reference VM reports BAR0 (registers) prefetchable with a _wc file; the page must
    say registers are normally non-prefetchable and never mapped write-combined."""
    notes = mmio.register_bar_notes(ref_report)
    assert len(notes) == 1 and "resource0" in notes[0] and "resource0_wc" in notes[0]
    assert "never" in notes[0] and "write-combined" in notes[0] and "non-prefetchable" in notes[0]
    g = ref_report.gpus[0]
    plain = dataclasses.replace(g.bars[0], flags=g.bars[0].flags & ~sysinfo.IORESOURCE_PREFETCH, write_combine_file=False)
    fixed = dataclasses.replace(ref_report, gpus=[dataclasses.replace(g, bars=[plain, *g.bars[1:]])])
    assert mmio.register_bar_notes(fixed) == []  # a non-prefetchable register BAR needs no warning


def test_seed_arithmetic():
    assert mmio.implied_read_ns(width=8) == pytest.approx(1.701 / (16 * 2**20 / 8) * 1e9)
    assert 800 < mmio.implied_read_ns(width=8) < 820
    with pytest.raises(ValueError, match="width"):
        mmio.implied_read_ns(width=3)
    assert mmio.uc_read_ms(4 << 20, 8) > 8 > mmio.dma_ms(4 << 20), "the chapter's point must hold"


def test_aperture_figure_labels_modes():
    fig = mmio.aperture_figure([("ref", 1 << 30, 2 << 30, Mode.REPLAY, "somewhere"),
                                ("2009", 256 << 20, 768 << 20, None, "")])
    assert fig.modes == [Mode.REPLAY]
    with pytest.raises(ValueError, match="mode"):
        mmio.aperture_figure([("2009", 1, 2, None, "")])


def test_access_costs_order_as_the_chapter_says():
    with start_device(vram_bytes=2 << 20) as gpu:
        r = {x["method"]: x["model_gbps"] for x in mmio.access_sweep(gpu, [64 << 10])}
        fig = mmio.sweep_figure(mmio.access_sweep(gpu, [4096]), gpu.seed)
    assert r["uncached read, 4 B"] < r["uncached read, 8 B"] < r["streaming read (MOVNTDQA, WC mapping), 64 B"]
    assert r["uncached read, 8 B"] < r["uncached write, 8 B"] < r["write-combined, 64 B bursts"]
    assert r["device DMA to host"] > r["write-combined, 64 B bursts"]
    assert fig.modes == [Mode.SIMULATED]
    with pytest.raises(ValueError, match="method"):
        mmio.access_cost(gpu, "telepathy", 64)
