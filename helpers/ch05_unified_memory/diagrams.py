"""Chapter 5's picture, in the course's one visual language (helpers.presentation.diagrams)."""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def fault_migration_diagram() -> Diagram:
    """A unified-memory GPU page fault: from the missing page to the replayed access."""
    d = Diagram(
        "A GPU page fault on managed memory, and the migration that resolves it",
        "A warp reads a managed address whose page is not in the GPU's page tables. The GPU's MMU writes a "
        "fault entry to a fault buffer and interrupts the CPU; the accesses wait. The UVM driver reads a batch "
        "of faults, unmaps the pages on the CPU side, has a copy engine move them (within their 2 MiB block, "
        "often more than the one page that faulted) from host RAM to GPU memory, writes the new GPU page-table "
        "entries, and tells the GPU to replay the waiting accesses, which now succeed.",
        width=880, height=320)
    d.box("sm", "warp on an SM\nreads address A", "gpu", 20, 20, 170)
    d.box("mmu", "GPU MMU\n(no entry for A)", "gpu", 240, 20, 170)
    d.box("fb", "fault buffer\n(in GPU memory)", "vram", 460, 110, 170)
    d.box("uvm", "nvidia-uvm driver\nservice a fault batch", "kernel", 680, 20, 180)
    d.box("ram", "host RAM\n(page of A, 2 MiB block)", "memory", 680, 200, 180)
    d.box("ce", "copy engine", "gpu", 460, 200, 170)
    d.box("vram", "GPU memory\n(new home of A)", "vram", 240, 200, 170)
    d.arrow("sm", "mmu", "translate A", "control")
    d.arrow("mmu", "fb", "fault entry", "control")
    d.arrow("fb", "uvm", "interrupt", "completion")
    d.arrow("uvm", "ram", "unmap on CPU", "control")
    d.arrow("uvm", "ce", "migrate", "control")
    d.arrow("ram", "ce", "DMA read", "data")
    d.arrow("ce", "vram", "DMA write", "data")
    d.arrow("uvm", "mmu", "map A + replay", "completion")
    d.note(20, 300, "1 miss  2 fault entry  3 interrupt  4 migrate  5 map  6 replay")
    return d
