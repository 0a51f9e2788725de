"""Chapter 3's pictures: a copy's path (pinned vs pageable, through the staging pipeline, the copy
engine and the link), and how PCIe carries a read (requests, completions) and a write."""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def copy_path_diagram() -> Diagram:
    """Pinned: the copy engine reads the buffer itself. Pageable: the CPU first copies each chunk
    into the driver's pinned staging buffer, and the engine reads that."""
    d = Diagram(
        "A host-to-device copy's path: pinned vs pageable",
        "A copy from pinned memory is one DMA: the library writes the copy into the channel, the copy engine "
        "reads the pinned pages across PCIe and writes GPU memory. A copy from pageable memory is a pipeline: "
        "the CUDA library's CPU code copies a chunk into a pinned staging buffer of the driver's, the engine "
        "DMAs that chunk, and the next chunk is staged meanwhile; the CPU is busy for the whole copy.",
        width=760, height=330)
    d.box("app", "your program\n(cudaMemcpyAsync)", "cpu", 10, 20, 170, 54)
    d.box("pageable", "pageable buffer\n(malloc / NumPy)", "memory", 10, 150, 170, 54)
    d.box("staging", "pinned staging\nbuffer (driver's)", "memory", 250, 150, 160, 54)
    d.box("pinned", "pinned buffer\n(cudaHostAlloc)", "memory", 10, 260, 170, 54)
    d.box("link", "PCIe link", "link", 450, 205, 110, 54)
    d.box("ce", "copy engine", "gpu", 600, 150, 140, 54)
    d.box("vram", "GPU memory", "vram", 600, 260, 140, 54)
    d.arrow("app", "ce", "methods + doorbell", "control")
    d.arrow("pageable", "staging", "CPU memcpy, chunk by chunk", "data")
    d.arrow("staging", "link", "", "data")
    d.arrow("pinned", "link", "DMA read (no CPU)", "data")
    d.arrow("link", "ce", "", "data")
    d.arrow("ce", "vram", "write", "data")
    d.arrow("ce", "app", "completion", "completion", bend=20)
    return d


def pcie_reads_writes_diagram() -> Diagram:
    """Device→host: posted writes of up to MPS bytes. Host→device: read requests of up to MRRS bytes,
    answered by completions of up to MPS bytes each."""
    d = Diagram(
        "What crosses the link for each direction of a copy",
        "Device to host, the copy engine writes host memory: a stream of posted memory writes, each carrying up "
        "to Max Payload Size bytes, none answered. Host to device, the engine reads host memory: it sends read "
        "requests of up to Max Read Request Size bytes and waits for completions, each carrying up to Max Payload "
        "Size bytes; it may only have as many requests outstanding as it has tags and completion buffer space, "
        "so reads need the round trip covered by requests in flight.", width=760, height=250)
    d.box("ce", "copy engine\n(GPU)", "gpu", 10, 80, 150, 90)
    d.box("link", "PCIe link", "link", 300, 80, 150, 90)
    d.box("rc", "root complex\n+ host memory", "memory", 590, 80, 160, 90)
    d.via("ce", "link", "rc", "d2h: MWr ≤ MPS, posted", "MWr", "data", bend=-30)
    d.via("ce", "link", "rc", "h2d: MRd ≤ MRRS", "MRd", "control")
    d.via("rc", "link", "ce", "CplD ≤ MPS each", "CplD", "completion", bend=30)
    return d
