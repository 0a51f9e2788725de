"""Stand-ins for Lab 1's driver parts, so that each visible check gives feedback on its own part
while the learner's other parts are unfinished (course design, "Labs": the other parts may use a
reference). A learner stuck on Part 3's bring_up still sees Parts 4-8 checked.

What they may show, and why it gives nothing away: the student distribution must not hold a
part's solution, so these are not the instructor's reference (instructor/labs/lab1_driver.py,
never shipped). They do the parts' *work* through the simulator's back doors and the chapters'
own driver, never the way the lab asks for:

- page tables are written straight into the simulated VRAM (`dev.vram_view`), not through the
  VRAM window the lab teaches; the entry format and the layout are public already (the firmware
  in helpers/models/toygpu/device.py, `lab1.layout`, the checks' messages);
- `submit` and `wait_fence` hand the LabDriver's ring to the chapters' toy driver
  (`ToyGPU.submit` / `ToyGPU.wait`, shipped for Chapters 2 and 7) for one call.

None of them works in grading: the grader runs the learner's functions against a remote bus
(helpers.labs.grading.remote.RemoteToyGPU) that has neither `vram_view` nor the chapters' driver, so a
submission that calls or copies a stand-in fails there, and the grade never uses them (the
grader's other parts are the instructor's reference, in the grader's own process).
"""

from __future__ import annotations

import numpy as np

from helpers.core.errors import InputTypeError
from helpers.labs import lab1
from helpers.models.toygpu import commands as cmd
from helpers.models.toygpu import regs
from helpers.models.toygpu.bus import Buffer
from helpers.models.toygpu.driver import ToyGPU

PAGE = regs.PAGE_SIZE


def _backdoor(dev) -> ToyGPU:
    if not isinstance(dev, ToyGPU):
        raise InputTypeError("the course's stand-in parts run only on a local simulated device (the visible checks), "
                        "never in grading")
    return dev


def identify(dev) -> dict:
    """Part 1's result, read through the simulator's debug look (no bus time, no ID check)."""
    d = _backdoor(dev)
    return {"id": d._peek("ID"), "vram_bytes": d._peek("VRAM_SIZE"), "sysmem_bytes": d._peek("SYSMEM_SIZE"),
            "bar1_bytes": d._peek("BAR1_SIZE"), "reserved_bytes": d._peek("VRAM_RESERVED")}


def _write_table(dev: ToyGPU, base: int, entries: np.ndarray) -> None:
    """A page table written straight into simulated VRAM: the back door, not the VRAM window."""
    dev.vram_view[base:base + entries.nbytes] = entries.astype("<u8").view(np.uint8)


def map_bar1(dev, table: int, pages: list) -> None:
    """Part 2's result: BAR1's table (every entry) at `table`, then translation on."""
    d = _backdoor(dev)
    entries = np.zeros(d._peek("BAR1_SIZE") // PAGE, dtype=np.uint64)
    entries[:len(pages)] = np.asarray(pages, dtype=np.uint64) | np.uint64(regs.PTE_VALID | regs.PTE_WRITABLE)
    _write_table(d, table, entries)
    d.write("BAR1_PT_BASE", table | regs.BAR1_PT_ENABLE)


def bring_up(dev, ring_entries: int = 16) -> lab1.LabDriver:
    """Part 3's result on a Lab 1 device: lab1.layout's tables, the ring, the write-back area."""
    d = _backdoor(dev)
    info = identify(d)
    d.write("CONTROL", regs.Control.RESET)
    lay = lab1.layout(info["vram_bytes"], info["bar1_bytes"], info["reserved_bytes"])
    first = lay["first_dva"] // PAGE
    mmu = np.zeros(lay["pages"], dtype=np.uint64)
    mmu[first:] = np.arange(first, lay["pages"], dtype=np.uint64) * np.uint64(PAGE) \
        | np.uint64(regs.PTE_VALID | regs.PTE_WRITABLE)
    _write_table(d, lay["pt_base"], mmu)
    map_bar1(d, lay["bar1_table"], [(first + k) * PAGE
                                    for k in range(min(info["bar1_bytes"] // PAGE, lay["pages"] - first))])
    ring = d.alloc_sys(ring_entries * cmd.ENTRY_BYTES, align=cmd.ENTRY_BYTES)
    wb = d.alloc_sys(64, align=64)
    fence = Buffer(wb.addr, 8, wb.view[:8])
    rptr = Buffer(wb.addr + 8, regs.WRITE_BACK_BYTES, wb.view[8:8 + regs.WRITE_BACK_BYTES])
    wb.view[:] = 0
    for name, value in (("PT_BASE", lay["pt_base"]), ("PT_ENTRIES", lay["pages"]), ("RING_BASE", ring.addr),
                        ("RING_SIZE", ring_entries), ("RPTR_ADDR", rptr.addr),
                        ("CONTROL", regs.Control.RING_ENABLE)):
        d.write(name, value)
    return lab1.LabDriver(dev=d, ring=ring, fence=fence, rptr=rptr, entries=ring_entries,
                          pt_base=lay["pt_base"], pages=lay["pages"], bar1_table=lay["bar1_table"],
                          first_dva=lay["first_dva"])


def _lend_ring(drv: lab1.LabDriver) -> ToyGPU:
    """The chapters' toy driver, pointed at this LabDriver's ring and write-back area."""
    d = _backdoor(drv.dev)
    d.ring, d.fence_slot, d.rptr_slot = drv.ring, drv.fence, drv.rptr
    d.ring_entries, d.wptr, d._next_fence = drv.entries, drv.wptr, drv.next_fence
    return d


def submit(drv: lab1.LabDriver, commands) -> int:
    """Part 4's submit: the chapters' ToyGPU.submit on the LabDriver's ring (one doorbell)."""
    d = _lend_ring(drv)
    value = d.submit(list(commands), interrupt=False)
    drv.wptr, drv.next_fence, drv.doorbells = d.wptr, value, drv.doorbells + 1
    return value


def wait_fence(drv: lab1.LabDriver, value: int, timeout: float = 2.0) -> None:
    """Part 4's wait: the chapters' ToyGPU.wait, polling the fence and the written-back error code."""
    _lend_ring(drv).wait(value, timeout=timeout, how="poll")


#: the parts other checks may stand in for (the rest are never called by another part's check)
FUNCTIONS = ("identify", "map_bar1", "bring_up", "submit", "wait_fence")
