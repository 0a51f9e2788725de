"""Lab 1's answer: a driver for the toy GPU, written against the bare device (no firmware).

Instructor-only: the student distribution does not contain instructor/. The source notebook's
solution cells call these functions, and autograding uses them for every part other than the
one being graded (helpers.labs.lab1.Parts), with the SEEDS below, which students never see.
"""

from __future__ import annotations

import math
import time

import numpy as np

from helpers.core.errors import DeviceTimeoutError
from helpers.labs.lab1 import PAGE, LabDriver
from helpers.models.toygpu import commands as cmd
from helpers.models.toygpu import regs
from helpers.models.toygpu.errors import RingFullError, ToyGPUError

#: device seeds of the hidden tests, per graded check
SEEDS = {
    "identify_device": (9173, 40411), "map_bar1": (5521, 70877), "bring_up": (3307, 81233),
    "submit_and_wait": (6047, 23909), "dma_copies": (1289, 55547), "compute": (7717, 31019),
    "batching": (4463, 92821), "recovery": (2131, 66359),
}


# Part 1
def identify(dev) -> dict:
    dev_id = dev.read("ID")
    if dev_id != regs.DEVICE_ID:
        raise ToyGPUError(f"ID register reads {dev_id:#x}, expected {regs.DEVICE_ID:#x}: not a toy GPU")
    return {"id": dev_id, "vram_bytes": dev.read("VRAM_SIZE"), "sysmem_bytes": dev.read("SYSMEM_SIZE"),
            "bar1_bytes": dev.read("BAR1_SIZE"), "reserved_bytes": dev.read("VRAM_RESERVED")}


# Part 2
def map_bar1(dev, table: int, pages: list[int]) -> None:
    entries = dev.read("BAR1_SIZE") // PAGE
    dev.write("VRAM_WINDOW", table, check=False)
    for i in range(entries):
        pte = pages[i] | regs.PTE_VALID | regs.PTE_WRITABLE if i < len(pages) else 0
        dev.write("VRAM_DATA", pte, check=False)
    dev.write("BAR1_PT_BASE", table | regs.BAR1_PT_ENABLE, check=False)
    dev.check()


# Part 3
def bring_up(dev, ring_entries: int = 16) -> LabDriver:
    info = identify(dev)
    dev.write("CONTROL", regs.Control.RESET, check=False)
    pages = info["vram_bytes"] // PAGE
    table = math.ceil(info["reserved_bytes"] / PAGE) * PAGE
    pt_base = table + math.ceil(info["bar1_bytes"] // PAGE * 8 / PAGE) * PAGE
    first_dva = pt_base + math.ceil(pages * 8 / PAGE) * PAGE
    first = first_dva // PAGE
    map_bar1(dev, table, [(first + k) * PAGE for k in range(min(info["bar1_bytes"] // PAGE, pages - first))])
    dev.write("VRAM_WINDOW", pt_base, check=False)
    for i in range(pages):
        dev.write("VRAM_DATA", i * PAGE | regs.PTE_VALID | regs.PTE_WRITABLE if i >= first else 0, check=False)
    dev.write("PT_BASE", pt_base, check=False)
    dev.write("PT_ENTRIES", pages, check=False)
    ring = dev.alloc_sys(ring_entries * cmd.ENTRY_BYTES, align=cmd.ENTRY_BYTES)
    fence, rptr = dev.alloc_sys(8, align=8), dev.alloc_sys(16, align=8)
    fence.view[:] = 0
    rptr.view[:] = 0
    drv = LabDriver(dev=dev, ring=ring, fence=fence, rptr=rptr, entries=ring_entries, pt_base=pt_base,
                    pages=pages, bar1_table=table, first_dva=first_dva)
    _program_ring(drv)
    return drv


def _program_ring(drv: LabDriver) -> None:
    dev = drv.dev
    dev.write("RING_BASE", drv.ring.addr, check=False)
    dev.write("RING_SIZE", drv.entries, check=False)
    dev.write("RPTR_ADDR", drv.rptr.addr, check=False)
    dev.write("CONTROL", regs.Control.RING_ENABLE, check=False)
    dev.check()


# Part 4
def _u64(buf, word: int = 0) -> int:
    return int(buf.view[8 * word:8 * word + 8].view("<u8")[0])


def submit(drv: LabDriver, commands) -> int:
    entries = [np.asarray(c, dtype=np.uint64) for c in commands]
    value = drv.next_fence + 1
    entries.append(cmd.fence(drv.fence.addr, value))
    free = drv.entries - (drv.wptr - _u64(drv.rptr))
    if len(entries) > free:
        raise RingFullError(f"{len(entries)} entries do not fit: {free} free")
    for words in entries:
        slot = drv.wptr % drv.entries
        drv.ring.view[slot * cmd.ENTRY_BYTES:(slot + 1) * cmd.ENTRY_BYTES] = words.astype("<u8").view(np.uint8)
        drv.wptr += 1
    drv.next_fence = value
    drv.dev.write("DOORBELL", drv.wptr, check=False)
    drv.doorbells += 1
    return value


def wait_fence(drv: LabDriver, value: int, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if _u64(drv.fence) >= value:
            return
        if _u64(drv.rptr, 1):
            drv.dev.check()
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"fence {value} not reached within {timeout} s")
        time.sleep(0.0002)


# Part 5
def _check_length(nbytes) -> None:
    if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0 or nbytes % cmd.DMA_ALIGN:
        raise ValueError(f"DMA lengths must be positive multiples of {cmd.DMA_ALIGN} bytes, got {nbytes!r}")
    if -(-nbytes // PAGE) > cmd.MAX_DESCRIPTORS:
        raise ValueError(f"{nbytes} bytes need more than {cmd.MAX_DESCRIPTORS} descriptors")


def _dma(drv: LabDriver, stage, dva: int, nbytes: int, to_host: bool) -> None:
    triples = [(stage.addr + o, dva + o, min(PAGE, nbytes - o)) for o in range(0, nbytes, PAGE)]
    words = cmd.descriptors(triples)
    table = drv.dev.alloc_sys(words.size * 8, align=cmd.DESC_BYTES)
    try:
        table.view[:] = words.astype("<u8").view(np.uint8)
        wait_fence(drv, submit(drv, [cmd.dma(table.addr, len(triples), to_host=to_host)]))
    finally:
        drv.dev.free_sys(table)


def copy_to_vram(drv: LabDriver, data, dva: int) -> None:
    src = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    _check_length(src.size)
    stage = drv.dev.alloc_sys(src.size, align=cmd.DMA_ALIGN)
    try:
        stage.view[:] = src
        _dma(drv, stage, dva, src.size, to_host=False)
    finally:
        drv.dev.free_sys(stage)


def copy_from_vram(drv: LabDriver, dva: int, nbytes: int) -> np.ndarray:
    _check_length(nbytes)
    stage = drv.dev.alloc_sys(nbytes, align=cmd.DMA_ALIGN)
    try:
        _dma(drv, stage, dva, nbytes, to_host=True)
        return stage.view.copy()
    finally:
        drv.dev.free_sys(stage)


# Part 6
def saxpy(drv: LabDriver, x_dva: int, y_dva: int, n: int, a: float) -> None:
    wait_fence(drv, submit(drv, [cmd.saxpy(x_dva, y_dva, n, a)]))


# Part 7
def run_batched(drv: LabDriver, commands, batch: int) -> int:
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= drv.entries - 1:
        raise ValueError(f"batch must be from 1 to {drv.entries - 1}, got {batch!r}")
    commands = list(commands)
    rung = 0
    for start in range(0, len(commands), batch):
        wait_fence(drv, submit(drv, commands[start:start + batch]))
        rung += 1
    return rung


# Part 8
def recover(drv: LabDriver) -> tuple[regs.ErrorCode, int]:
    dev = drv.dev
    code, info = regs.ErrorCode(dev.read("ERROR_CODE")), dev.read("ERROR_INFO")
    dev.write("CONTROL", regs.Control.RESET, check=False)  # BAR1's binding survives a reset; the rest does not
    dev.write("PT_BASE", drv.pt_base, check=False)
    dev.write("PT_ENTRIES", drv.pages, check=False)
    drv.wptr = 0  # the device's read pointer starts again at 0
    _program_ring(drv)
    return code, info
