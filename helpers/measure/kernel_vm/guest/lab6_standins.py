"""Stand-ins for Lab 6's parts in the notebook's checks, so that each check gives feedback on its
own part while the learner's other parts are unfinished (course design, "Labs"): a learner stuck
on Part 1's open_device still sees Parts 2-6 checked on the device.

Runs INSIDE the kernel lab's VM, in the unprivileged child (uid 1000) of lab6_harness.py, and
only for the notebook's checks. They do not do the parts' work the way the lab asks; they
use what the root harness opened *for* them and handed over as file descriptors (``lend``):

- the VFIO container, group and device were opened by the root harness with the chapters' own
  probe (edu_probe.Vfio, the code Chapter 4b already shows), not by this process;
- BAR0 is mapped from the sysfs file ``resource0``, opened by root (mode 0600: uid 1000 cannot
  open it), not from the VFIO device fd the lab teaches;
- a buffer "mapped" here is a memfd the root harness mapped for the device from its own
  process (MAP_DMA at the check's IOVA, before this process started); this process only maps
  the same pages;
- a DMA is started through that resource0 mapping with the guest library's edu.start_dma.

None of them works in grading: there the harness hands over nothing (the child of a graded
part holds only its two pipes), the learner's uid cannot open ``resource0``, and the other
parts are the instructor's reference, never these (lab6_harness.child_functions). A submission
that calls or copies a stand-in fails there.
"""

from __future__ import annotations

import mmap

import edu

#: what the root harness lent this process: {"resource0": fd, "container", "group", "device": fds,
#: "config_offset": int, "buffers": [[iova, size, memfd], ...]}; empty when graded
HANDLES: dict = {}
_BAR: list = []  # this process's mapping of resource0, made once
#: the functions that stand in for each part (identify, check_alive, factorial, safe_dma and
#: fault_addresses are never called by another part's check, so they have none)
FUNCTIONS = {"open": ("open_device",), "map": ("map_buffer",), "dma": ("dma_to_device", "dma_from_device")}
#: the parts each part's check builds on (lab6_harness's checks call these parts' functions)
BUILDS_ON = {"open": (), "identify": ("open",), "factorial": ("open",), "map": ("open",), "dma": ("open", "map"),
             "refuse": ("open", "map", "dma"), "faults": ()}


class NotLent(RuntimeError):
    """A stand-in called where the harness lent it nothing (in grading, or by hand)."""


class StandInRefused(RuntimeError):
    """A stand-in DMA asked for what edu must never see (deliberately not a ValueError)."""


def lend(handles: dict) -> None:
    """Keep what the root harness handed over (called by the child before any learner code)."""
    HANDLES.clear()
    HANDLES.update(handles)


def _lent(what: str):
    if what not in HANDLES:
        raise NotLent(f"the course's stand-in has no {what}: stand-ins work only in the notebook's checks, "
                      "where the root harness lends them a device it opened; graded, only your code runs")
    return HANDLES[what]


def _bar() -> edu.Bar:
    """BAR0 through sysfs resource0 (the root-opened fd): the back door, not the VFIO device fd."""
    if not _BAR:
        _BAR.append(edu.Bar(mmap.mmap(_lent("resource0"), 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)))
    return _BAR[0]


def open_device(bdf):
    """Part 1's result: the VfioDevice of the triple the root harness opened, BAR0 via resource0."""
    return edu.VfioDevice(_lent("container"), _lent("group"), _lent("device"), _bar(),
                          config_offset=_lent("config_offset"))


def map_buffer(dev, iova, size):
    """Part 4's result for the check's own (iova, size): the root harness's memfd, already mapped
    for the device at iova, mapped here too and recorded in dev.mappings / dev.buffers."""
    for b_iova, b_size, fd in _lent("buffers"):
        if (b_iova, b_size) == (iova, size):
            buf = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            vaddr = edu.ctypes.addressof(edu.ctypes.c_char.from_buffer(buf))
            dev.mappings[iova] = (vaddr, size)
            dev.buffers[iova] = buf
            return vaddr
    raise NotLent(f"the course's stand-in map_buffer serves only the check's own buffer, not {iova:#x}+{size}")


def _dma(src: int, dst: int, count: int, to_ram: bool) -> None:
    """One DMA through the resource0 mapping. Arguments edu must never see are refused with an
    error that is NOT a ValueError, so a safe_dma that let them through is not taken to refuse."""
    try:
        edu.start_dma(_bar(), src, dst, count, to_ram)
    except edu.DmaArgsError as exc:
        raise StandInRefused(f"the course's stand-in DMA was handed what would stop the VM ({exc}): "
                             "your code called it instead of refusing") from None
    edu.wait_dma_done(_bar())


def dma_to_device(dev, iova, count):
    """Part 5's result: count bytes from iova into edu's buffer (edu.start_dma via resource0), then wait."""
    _dma(iova, edu.DMA_BUFFER, count, to_ram=False)


def dma_from_device(dev, iova, count):
    """Part 5's result, device to memory."""
    _dma(edu.DMA_BUFFER, iova, count, to_ram=True)


def for_part(part: str) -> dict:
    """{function name: stand-in} for the parts `part`'s check builds on."""
    return {name: globals()[name] for p in BUILDS_ON[part] for name in FUNCTIONS[p]}
