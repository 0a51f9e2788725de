"""BAR1: the CPU's aperture onto VRAM, translated by the device's own page table.

A real GPU does not expose its memory to the CPU as one flat window. NVIDIA's BAR1 is a
virtual aperture: the driver maps a buffer into it by writing BAR1 page-table entries, and a
VRAM page has a bus address only while it is mapped there (open-gpu-kernel-modules,
src/nvidia/src/kernel/gpu/bus/arch/maxwell/kern_bus_gm107.c: kbusGetBar1VASpace_GM107 returns
BAR1's address space, kbusMapFbAperture_GM107 maps memory into it and
kbusUnmapFbAperture_GM107 takes it out; kern_bus_gh100.c, kbusBar1InstBlkBind_GH100, points
the hardware at BAR1's tables). The toy does the same at small scale:

- BAR1_SIZE bytes of aperture, perhaps fewer than VRAM_SIZE;
- a table of 8-byte entries in VRAM at BAR1_PT_BASE (bit 0 turns translation on), entry i
  mapping aperture page i to the VRAM page in its address bits when PTE_VALID is set;
- a CPU load from an unmapped page returns all ones (what a PCIe read nobody answers gives)
  and a store to one is dropped; either way the device records ERROR_CODE BAR1_FAULT.

`pieces` is that translation, run by whoever performs the access (the driver's bus, a peer
card) on the device's own registers and table: it is the device's logic, not the driver's.
"""

from __future__ import annotations

import numpy as np

from helpers.models.toygpu import regs as R


def table_base(regs: np.ndarray, vram_bytes: int) -> int | None:
    """The VRAM offset of BAR1's page table, or None while translation is off or the base is bad."""
    base = int(regs[R.offset("BAR1_PT_BASE") // 8])
    entries = int(regs[R.offset("BAR1_SIZE") // 8]) // R.PAGE_SIZE
    if not base & R.BAR1_PT_ENABLE:
        return None
    base &= ~R.BAR1_PT_ENABLE
    if base % R.PAGE_SIZE or base + entries * 8 > vram_bytes:
        return None
    return base


def pieces(regs: np.ndarray, vram: np.ndarray, offset: int, nbytes: int) -> list[tuple[int, int, int | None]]:
    """(aperture offset, length, VRAM offset or None when unmapped) runs covering [offset, offset+nbytes).

    Neighbouring pages whose VRAM pages are neighbours too come back as one run."""
    out: list[tuple[int, int, int | None]] = []
    if nbytes <= 0:
        return out
    base = table_base(regs, len(vram))
    first, last = offset // R.PAGE_SIZE, (offset + nbytes - 1) // R.PAGE_SIZE
    if base is None:
        ptes = np.zeros(last + 1 - first, dtype=np.uint64)
    else:
        ptes = vram[base + first * 8:base + (last + 1) * 8].view("<u8")
    pos, end = offset, offset + nbytes
    for i, pte in enumerate(ptes.tolist()):
        take = min(end, (first + i + 1) * R.PAGE_SIZE) - pos
        phys = (pte & R.PTE_ADDR_MASK) + pos % R.PAGE_SIZE if pte & R.PTE_VALID else None
        if phys is not None and phys + take > len(vram):
            phys = None  # an entry pointing past VRAM maps nothing
        prev = out[-1] if out else None
        if prev and ((prev[2] is None and phys is None) or
                     (prev[2] is not None and phys is not None and prev[2] + prev[1] == phys)):
            out[-1] = (prev[0], prev[1] + take, prev[2])
        else:
            out.append((pos, take, phys))
        pos += take
    return out
