"""Chapter 2's pictures: a GPU's BARs and where each window leads, a posted write against a
non-posted read crossing the link, and (part 2) one access to QEMU's edu device's BAR0 from user
space in the guest (helpers.presentation.diagrams' one visual language)."""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def bars_diagram() -> Diagram:
    """BAR0 (registers), BAR1 (an aperture translated page by page to VRAM), BAR2/3 (the driver's)."""
    d = Diagram(
        "A GPU's BARs and where they lead",
        "The CPU's loads and stores to a BAR's bus addresses cross PCIe to the GPU. BAR0 (16 MiB on the "
        "reference H100) lands on the GPU's registers. BAR1 (128 GiB there) is not a plain window onto "
        "memory: each page of it is translated by BAR1 page tables the driver fills, so a page of VRAM has "
        "a bus address only while the driver has mapped it into BAR1. BAR2/3 is a window the driver keeps "
        "for its own structures.", width=760, height=300)
    d.box("cpu", "CPU: load / store\nto a bus address", "cpu", 10, 120, 150, 60)
    d.box("pcie", "PCIe link", "link", 200, 120, 110, 60)
    d.box("bar0", "BAR0 → registers", "gpu", 350, 20, 170, 50)
    d.box("bar1", "BAR1 aperture", "gpu", 350, 125, 170, 50)
    d.box("bar2", "BAR2/3 → driver's\ninstance memory", "gpu", 350, 220, 170, 56)
    d.box("pt", "BAR1 page tables", "gpu", 560, 125, 150, 50)
    d.box("vram", "VRAM pages\n(mapped ones only)", "vram", 560, 220, 150, 56)
    d.arrow("cpu", "pcie", "MMIO", "data")
    d.arrow("pcie", "bar0", "", "control")
    d.arrow("pcie", "bar1", "", "data")
    d.arrow("pcie", "bar2", "", "control")
    d.arrow("bar1", "pt", "translate", "control")
    d.arrow("pt", "vram", "page", "data")
    d.note(560, 110, "unmapped BAR1 pages lead nowhere")
    return d


def transactions_diagram() -> Diagram:
    """A posted memory write (one packet, no answer) against a non-posted read (request, then a
    completion carrying the data) between a requester and a completer."""
    d = Diagram(
        "Posted write vs non-posted read",
        "A write travels as one packet (MWr) and the writer goes on at once: nothing comes back. A read "
        "sends a request (MRd) and the reader waits until the completer returns the data in a completion "
        "(CplD): a full round trip per read, and a load that depends on the previous one cannot start "
        "before it. The same holds whichever side reads: a CPU reading a BAR, or a GPU thread reading "
        "pinned host memory.", width=760, height=260)
    d.box("req", "requester\n(CPU core, or a GPU thread)", "cpu", 10, 80, 190, 90)
    d.box("link", "PCIe link\n(root complex)", "link", 290, 80, 160, 90)
    d.box("cpl", "completer\n(GPU registers / host RAM)", "device", 540, 80, 200, 90)
    d.via("req", "link", "cpl", "MWr: data, posted", "MWr", "data", bend=-30)
    d.via("req", "link", "cpl", "MRd: request", "MRd", "control")
    d.via("cpl", "link", "req", "CplD: data", "CplD", "completion", bend=30)
    d.note(10, 210, "write: the requester goes on at once.   read: it stalls from MRd until CplD arrives.")
    return d


def edu_bar_diagram() -> Diagram:
    """What one BAR access crosses in the guest: page tables to an uncached MMIO page, QEMU's device model."""
    d = Diagram(
        "A register access to edu's BAR0, from user space in the guest",
        "The probe opens sysfs resource0 and maps it: the kernel's pci_mmap_resource_uc puts BAR0's physical "
        "page into the process's page table, uncached. A store to that page then leaves the CPU as a memory "
        "write to the device (posted: the CPU does not wait for it); a load is a read request that waits for "
        "the device's answer (non-posted). Under QEMU each access exits to the emulator, which calls edu's "
        "edu_mmio_write or edu_mmio_read; the factorial is computed in a thread of the device, so the program "
        "polls the status register until it is done.",
        width=860, height=280)
    d.box("prog", "probe (root)\nstore / load", "cpu", 20, 30, 170)
    d.box("pt", "page table:\nBAR0 page, uncached", "kernel", 240, 30, 170)
    d.box("bar", "BAR0 (1 MiB)\nregisters", "link", 460, 30, 160)
    d.box("dev", "edu device model\n(QEMU)", "device", 670, 30, 170)
    d.box("thr", "edu factorial thread", "device", 670, 170, 170)
    d.box("sysfs", "sysfs resource0\nmmap", "kernel", 240, 170, 170)
    d.arrow("prog", "sysfs", "mmap", "control")
    d.arrow("sysfs", "pt", "map BAR page", "control")
    d.arrow("prog", "pt", "store (posted)", "data")
    d.arrow("pt", "bar", "", "data")
    d.arrow("bar", "dev", "edu_mmio_write", "data")
    d.arrow("dev", "thr", "start", "control")
    d.arrow("dev", "prog", "load answers (non-posted)", "completion", bend=-60)
    return d
