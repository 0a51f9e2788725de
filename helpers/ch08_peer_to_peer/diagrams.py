"""Chapter 8's picture: three ways from one GPU's memory to another's (NVLink, PCIe peer-to-peer,
staged through host memory), in the course's one visual language (helpers.presentation.diagrams)."""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def p2p_paths_diagram() -> Diagram:
    """NVLink (through NVSwitch) vs PCIe peer-to-peer vs staging through host memory: how many times
    the bytes cross a link, and where they turn around."""
    d = Diagram("Three ways from GPU 0 to GPU 1",
                "NVLink: GPU 0's copy engine writes through an NVSwitch into GPU 1's memory, no PCIe at all. "
                "PCIe peer-to-peer: the write crosses the link once and turns around in a PCIe switch (or, "
                "if the root complex forwards peer traffic, in the CPU's root complex; ACS redirect forces "
                "that detour). Staged: the bytes go up to host memory and back down, crossing PCIe twice and "
                "DRAM twice.", width=860, height=330)
    d.box("g0", "GPU 0\ncopy engine", "gpu", 20, 130, 130, 54)
    d.box("v0", "GPU 0 memory", "vram", 20, 250, 130, 44)
    d.box("nvs", "NVSwitch\n(NVLink)", "link", 250, 20, 150, 50)
    d.box("sw", "PCIe switch", "link", 250, 130, 150, 54)
    d.box("rc", "CPU root complex\n(IOMMU, ACS)", "link", 240, 250, 170, 54)
    d.box("ram", "pinned host buffer", "memory", 540, 250, 170, 54)
    d.box("g1", "GPU 1 memory", "vram", 560, 130, 140, 54)
    d.arrow("v0", "g0", "read", "data")
    d.arrow("g0", "nvs", "NVLink write", "data")
    d.arrow("nvs", "g1", "", "data")
    d.arrow("g0", "sw", "1 PCIe crossing", "data")
    d.arrow("sw", "g1", "peer write", "data")
    d.arrow("sw", "rc", "2 crossings", "data")
    d.arrow("rc", "ram", "staged: up…", "data", bend=-14)
    d.arrow("ram", "rc", "…and down", "data", bend=14)
    d.note(20, 345, "NVLink: no PCIe · PCIe P2P: one crossing · staged: two crossings and two DRAM passes")
    return d
