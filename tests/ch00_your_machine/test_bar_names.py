"""Chapter 0's tables name a BAR by its sysfs file and, on an NVIDIA GPU, by NVIDIA's name too,
so the table's window and the text's "BAR1" are visibly the same one (sysfs counts register
slots, NVIDIA counts windows; a 64-bit BAR takes two slots)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import H100_RESOURCE, recorded_machine

from helpers.measure import sysinfo

ROOT = Path(__file__).resolve().parents[2]
MEM64 = 0x14220C  # memory, 64-bit, prefetchable (as the H100's resource lines)
MEM32 = 0x40200  # memory, 32-bit, not prefetchable


def gpu(bars, vendor=sysinfo.NVIDIA_VENDOR) -> sysinfo.PCIDevice:
    return sysinfo.PCIDevice(address="0000:01:00.0", vendor=vendor, device=0x2330, pci_class=0x0302,
                             driver="nvidia", numa_node=0, link_current=None, link_max=None, bars=bars)


def test_an_h100s_windows_are_resource_0_2_4_and_nvidias_bar0_bar1():
    g = gpu(sysinfo.parse_resource(H100_RESOURCE))
    assert [sysinfo.window_label(g, b) for b in g.bars] == ["resource0 (BAR0)", "resource2 (BAR1)", "resource4"]


def test_a_32_bit_bar0_puts_bar1_in_resource1():
    g = gpu([sysinfo.Bar(index=0, start=0x1000_0000, end=0x10FF_FFFF, flags=MEM32), sysinfo.Bar(index=1,
                                                                                                start=0x2_0000_0000,
                                                                                                end=0x2_0FFF_FFFF,
                                                                                                flags=MEM64)])
    assert [sysinfo.window_label(g, b) for b in g.bars] == ["resource0 (BAR0)", "resource1 (BAR1)"]


def test_other_vendors_get_only_the_sysfs_name():
    g = gpu(sysinfo.parse_resource(H100_RESOURCE), vendor=0x1002)
    assert [sysinfo.window_label(g, b) for b in g.bars] == ["resource0", "resource2", "resource4"]


def test_the_reference_table_and_chapter_0s_text_name_the_same_window():
    report = sysinfo.from_dict(recorded_machine()["system"])
    rows = {r[0].strip(): r[1] for r in sysinfo.rows(report)}
    assert rows["resource2 (BAR1)"].startswith("128 GiB") and "BAR2" not in " ".join(rows)
    assert "largest BAR is resource2 (BAR1), 128 GiB" in sysinfo.bar_summary(report, None)
    nb = json.loads((ROOT / "notebooks" / "00_your_machine.ipynb").read_text())
    text = " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "**BAR1** is an aperture" in text and "NVIDIA's BAR1, the window the text below is about, is `resource2`" in text
