"""The toy GPU itself: a device model that runs in its own process.

The driver (helpers.models.toygpu.driver) starts it with `python -m helpers.models.toygpu ...` and
from then on reaches it the way a driver reaches hardware (the plumbing is
helpers.models.device_process, portable Python on Linux, macOS and Windows):

- One block of shared memory holds BAR0, VRAM and the device-visible system memory, mapped in
  both processes. The device is the only writer of BAR0's bytes; a CPU load from it is a
  register read.
- A CPU store to a register is a *posted write*: it travels to the device, which decides
  what it means (a doorbell, a reset, an error for a read-only register). In the model the
  write travels as a 16-byte (offset, value) message through the device process's stdin,
  which is also what wakes the device up: it sleeps on its inbox instead of spinning on a core.
- The CPU reaches VRAM through BAR1; the device reaches system memory only by DMA, following
  bus addresses in its commands and descriptors.
- Interrupts travel back as one byte on the device process's stdout, when INT_MASK lets them.

Robustness rules this module keeps:
- bad programming never raises out of the device loop: it becomes ERROR_CODE/ERROR_INFO,
  halts the ring and raises the ERROR interrupt; every command is bounded in work, so the
  device always returns to reading its register writes;
- it never outlives the process that started it: it exits when its stdin reaches end of file
  (the parent's end closes when the parent dies, however it dies) or, on POSIX, when its
  parent process id changes, checked at least every 50 ms; on its way out it unlinks the
  shared memory, so a killed notebook leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import traceback

import numpy as np

from helpers.models.device_process import Lifeline, SharedBlock, quiet_interrupts
from helpers.models.toygpu import commands as C
from helpers.models.toygpu import regs as R
from helpers.models.toygpu.link import LinkModel, LinkParams

MSG = struct.Struct("<QQ")  # one posted register write: (offset, value)
POLL_S = 0.05               # longest sleep between parent-liveness checks


class Fault(Exception):
    """Raised inside the device model for bad programming; becomes ERROR_CODE, never escapes."""

    def __init__(self, code: R.ErrorCode, info: int = 0):
        super().__init__(code.name)
        self.code, self.info = code, int(info) & (1 << 64) - 1


class Device:
    """The device state machine: registers, ring, MMU, DMA engine, interrupts."""

    def __init__(self, bar0, vram, sysmem, *, notify, link: LinkModel, bar1_bytes: int | None = None,
                 reserved_bytes: int = 0, firmware: bool = True, seed: int = 1):
        self.regs = np.ndarray((R.BAR0_SIZE // 8,), dtype="<u8", buffer=bar0)
        self.vram = np.ndarray((len(vram),), dtype=np.uint8, buffer=vram)
        self.sys = np.ndarray((len(sysmem),), dtype=np.uint8, buffer=sysmem)
        self.notify = notify  # callable sending one interrupt notification, or None
        self.link = link
        self.ring_base = self.ring_size = self.rptr_addr = 0
        self.regs[:] = 0
        self._set("ID", R.DEVICE_ID)
        self._set("VRAM_SIZE", len(vram))
        self._set("SYSMEM_SIZE", len(sysmem))
        self._set("BAR1_SIZE", len(vram) if bar1_bytes is None else bar1_bytes)
        self._set("VRAM_RESERVED", reserved_bytes)
        self.firmware = Firmware(self, seed) if firmware else None
        self.reset()

    # -- registers -------------------------------------------------------------------------
    def _get(self, name: str) -> int:
        return int(self.regs[R.BY_NAME[name].offset // 8])

    def _set(self, name: str, value: int) -> None:
        self.regs[R.BY_NAME[name].offset // 8] = int(value) & (1 << 64) - 1

    def _add(self, name: str, n: int) -> None:
        self._set(name, self._get(name) + int(n))

    def reset(self) -> None:
        """Power-on state: keep identity, BAR1's binding and BUS_WRITES_SEEN, zero everything else.

        BAR1 is the bus's view of the device: an engine reset must not pull VRAM out from
        under a CPU mapping (its page table lives in VRAM, which a reset leaves alone)."""
        keep = {n: self._get(n) for n in ("ID", "VRAM_SIZE", "SYSMEM_SIZE", "BAR1_SIZE", "BAR1_PT_BASE",
                                          "VRAM_RESERVED", "BUS_WRITES_SEEN")}
        self.regs[:] = 0
        for r in R.REGISTERS:
            self._set(r.name, r.reset)
        for n, v in keep.items():
            self._set(n, v)
        self.ring_base = self.ring_size = self.rptr_addr = 0
        self._set("STATUS", R.Status.READY)

    def error(self, code: R.ErrorCode, info: int = 0) -> None:
        """Record the first error, halt the ring and raise the ERROR interrupt."""
        if not self._get("STATUS") & R.Status.ERROR:
            self._set("ERROR_CODE", int(code))
            self._set("ERROR_INFO", info)
            self._set("STATUS", self._get("STATUS") | R.Status.ERROR)
            self._write_back()
        self.interrupt(R.Irq.ERROR)

    def interrupt(self, cause: R.Irq) -> None:
        """Set an INT_STATUS bit and, if INT_MASK allows it, notify the CPU."""
        self._set("INT_STATUS", self._get("INT_STATUS") | int(cause))
        if self._get("INT_MASK") & int(cause) and self.notify is not None:
            self.notify()

    def on_write(self, offset: int, value: int) -> None:
        """A posted register write arrived: apply its meaning."""
        try:
            self._on_write(offset, value)
        finally:
            self._add("BUS_WRITES_SEEN", 1)

    def _on_write(self, offset: int, value: int) -> None:
        if offset == R.BUS_BAR1_FAULT:
            return self.error(R.ErrorCode.BAR1_FAULT, value)
        reg = R.BY_OFFSET.get(offset) if offset % R.REG_BYTES == 0 else None
        if reg is None:
            return self.error(R.ErrorCode.BAD_REGISTER, offset)
        if reg.access == R.RO:
            return self.error(R.ErrorCode.RO_WRITE, offset)
        name = reg.name
        if name == "CONTROL":
            return self._control(value)
        if name == "INT_ACK":
            self._set("INT_STATUS", self._get("INT_STATUS") & ~value)
            return None
        if name == "DOORBELL":
            return self._doorbell(value)
        if name == "VRAM_DATA":
            return self._vram_data(value)
        if name == "FW_CALL":
            return self._firmware_call(value)
        if name == "BAR1_PT_BASE" and value & R.BAR1_PT_ENABLE:
            base, entries = value & ~R.BAR1_PT_ENABLE, self._get("BAR1_SIZE") // R.PAGE_SIZE
            if not self._table_fits(base, entries):
                self._set(name, 0)  # translation stays off: every aperture page reads as unmapped
                return self.error(R.ErrorCode.PAGE_TABLE, value)
        self._set(name, value)
        if name == "INT_MASK" and self._get("INT_STATUS") & value:
            self.interrupt(R.Irq(self._get("INT_STATUS") & value & 0x7))
        return None

    def _table_fits(self, base: int, entries: int) -> bool:
        """A page table may start on a page boundary past the reserved VRAM and must end inside VRAM."""
        return base % R.PAGE_SIZE == 0 and base >= self._get("VRAM_RESERVED") and base + entries * 8 <= len(self.vram)

    def _firmware_call(self, call: int) -> None:
        result, status = 0, R.FwStatus.NO_FIRMWARE
        if self.firmware is not None:
            args = [self._get(f"FW_ARG{i}") for i in range(3)]
            result, status = self.firmware.call(call, *args)
        self._set("FW_RESULT", result)
        self._set("FW_STATUS", int(status))

    def _vram_data(self, value: int) -> None:
        """The BAR0 window: store 8 bytes at VRAM_WINDOW and advance it."""
        at = self._get("VRAM_WINDOW")
        if at % 8 or at + 8 > len(self.vram) or at < self._get("VRAM_RESERVED"):
            return self.error(R.ErrorCode.VRAM_WINDOW, at)
        self.vram[at:at + 8].view("<u8")[0] = value
        self._set("VRAM_WINDOW", at + 8)
        return None

    def _control(self, value: int) -> None:
        if value & R.Control.RESET:
            self.reset()
            return
        status = self._get("STATUS")
        if value & R.Control.CLEAR_ERROR:
            status &= ~R.Status.ERROR
            self._set("ERROR_CODE", 0)
            self._set("ERROR_INFO", 0)
            self._set("INT_STATUS", self._get("INT_STATUS") & ~R.Irq.ERROR)
            self._write_back()
        self._set("STATUS", status)
        on = bool(value & R.Control.RING_ENABLE)
        self._set("CONTROL", value & R.Control.RING_ENABLE)
        if on and not status & R.Status.RING_ON:
            base, size = self._get("RING_BASE"), self._get("RING_SIZE")
            if size < 2 or size > 4096 or size & (size - 1):
                self._set("CONTROL", 0)
                return self.error(R.ErrorCode.RING_CONFIG, size)
            if base % C.ENTRY_BYTES or base + size * C.ENTRY_BYTES > len(self.sys):
                self._set("CONTROL", 0)
                return self.error(R.ErrorCode.RING_CONFIG, base)
            rptr = self._get("RPTR_ADDR")
            if rptr and (rptr % 8 or rptr + R.WRITE_BACK_BYTES > len(self.sys)):
                self._set("CONTROL", 0)
                return self.error(R.ErrorCode.RING_CONFIG, rptr)
            self.ring_base, self.ring_size, self.rptr_addr = base, size, rptr
            self._write_back()
            self._set("STATUS", self._get("STATUS") | R.Status.RING_ON)
        elif not on:
            self._set("STATUS", self._get("STATUS") & ~R.Status.RING_ON)
        self._update_busy()
        return None

    def _doorbell(self, wptr: int) -> None:
        self._add("CNT_DOORBELLS", 1)
        if not self._get("STATUS") & R.Status.RING_ON:
            return self.error(R.ErrorCode.RING_OFF, wptr)
        head, tail = self._get("RING_HEAD"), self._get("RING_TAIL")
        if wptr < tail:
            return self.error(R.ErrorCode.BAD_DOORBELL, wptr)
        if wptr == tail:
            return self.error(R.ErrorCode.EMPTY_DOORBELL, wptr)
        if wptr - head > self.ring_size:
            return self.error(R.ErrorCode.RING_OVERFLOW, wptr)
        self._set("RING_TAIL", wptr)
        self._update_busy()
        return None

    def _update_busy(self) -> None:
        st = self._get("STATUS")
        busy = self._get("RING_HEAD") < self._get("RING_TAIL")
        self._set("STATUS", (st | R.Status.BUSY) if busy else (st & ~R.Status.BUSY))

    # -- command execution ----------------------------------------------------------------
    def can_step(self) -> bool:
        """True when the ring holds a command and nothing halts it."""
        st = self._get("STATUS")
        return bool(st & R.Status.RING_ON) and not st & R.Status.ERROR and \
            self._get("RING_HEAD") < self._get("RING_TAIL")

    def step(self) -> None:
        """Fetch and execute one ring entry; a fault becomes a device error."""
        head = self._get("RING_HEAD")
        addr = self.ring_base + (head % self.ring_size) * C.ENTRY_BYTES
        words = self.sys[addr:addr + C.ENTRY_BYTES].view("<u8").copy()
        self._set("RING_HEAD", head + 1)  # consumed, even if it fails: CLEAR_ERROR resumes after it
        self._write_back()
        try:
            self.execute(words, depth=0)
        except Fault as f:
            self.error(f.code, f.info)
        except Exception:  # a bug in this model: report it as a device error, never hang
            traceback.print_exc(file=sys.stderr)
            self.error(R.ErrorCode.INTERNAL, 0)
        self._update_busy()

    def _write_back(self) -> None:
        """Publish the read pointer and the error code in system memory (USERD's GPGet, amdgpu's
        rptr write-back), so the driver's hot path needs no MMIO reads."""
        if self.rptr_addr:
            area = self.sys[self.rptr_addr:self.rptr_addr + R.WRITE_BACK_BYTES].view("<u8")
            area[1] = self._get("ERROR_CODE")  # an error notifier: the driver sees it without MMIO
            area[0] = self._get("RING_HEAD")

    def execute(self, w: np.ndarray, depth: int) -> None:
        """Execute one 64-byte entry (raises Fault on bad programming)."""
        self._add("CNT_COMMANDS", 1)
        self._add("MODEL_TIME_NS", self.link.command_fetch())
        code, flags = int(w[0]) & 0xFF, int(w[0]) & 0xFF00
        try:
            op = C.Op(code)
        except ValueError:
            raise Fault(R.ErrorCode.BAD_OPCODE, code) from None
        a = [int(x) for x in w]
        if op is C.Op.NOP:
            return
        if op is C.Op.DMA:
            self._dma(a[1], a[2], to_host=bool(flags & C.FLAG_D2H))
        elif op is C.Op.FILL:
            self._fill(a[1], a[2], a[3] & 0xFFFF_FFFF)
        elif op is C.Op.SAXPY:
            self._saxpy(a[1], a[2], a[3], a[4])
        elif op is C.Op.FENCE:
            self._sys_check(a[1], 8, 8)
            self.sys[a[1]:a[1] + 8].view("<u8")[0] = a[2]
            self._set("LAST_FENCE", a[2])
            if flags & C.FLAG_INTERRUPT:
                self.interrupt(R.Irq.FENCE)
        elif op is C.Op.INTERRUPT:
            self.interrupt(R.Irq.USER)
        elif op is C.Op.INDIRECT:
            self._indirect(a[1], a[2], depth)

    def _sys_check(self, addr: int, n: int, align: int) -> None:
        if addr % align:
            raise Fault(R.ErrorCode.MISALIGNED, addr)
        if addr + n > len(self.sys):
            raise Fault(R.ErrorCode.SYSMEM_RANGE, addr)

    def _segments(self, dva: int, n: int, write: bool) -> list[tuple[int, int]]:
        """Translate [dva, dva+n) through the page table into (VRAM offset, length) runs."""
        pt_base, pt_n = self._get("PT_BASE"), self._get("PT_ENTRIES")
        if pt_n > len(self.vram) // 8 or not self._table_fits(pt_base, pt_n):
            raise Fault(R.ErrorCode.PAGE_TABLE, pt_base)
        if dva + n > pt_n * R.PAGE_SIZE:
            first_bad = max(dva, pt_n * R.PAGE_SIZE)
            raise Fault(R.ErrorCode.MMU_FAULT, first_bad)
        first, last = dva // R.PAGE_SIZE, (dva + n - 1) // R.PAGE_SIZE
        ptes = self.vram[pt_base:pt_base + pt_n * 8].view("<u8")[first:last + 1]
        bad = np.flatnonzero((ptes & R.PTE_VALID) == 0)
        if bad.size:
            raise Fault(R.ErrorCode.MMU_FAULT, max(dva, (first + int(bad[0])) * R.PAGE_SIZE))
        phys = ptes & np.uint64(R.PTE_ADDR_MASK)
        bad = np.flatnonzero(phys > len(self.vram) - R.PAGE_SIZE)
        if bad.size:
            raise Fault(R.ErrorCode.MMU_FAULT, max(dva, (first + int(bad[0])) * R.PAGE_SIZE))
        if write:
            bad = np.flatnonzero((ptes & R.PTE_WRITABLE) == 0)
            if bad.size:
                raise Fault(R.ErrorCode.MMU_WRITE_FAULT, max(dva, (first + int(bad[0])) * R.PAGE_SIZE))
        runs: list[tuple[int, int]] = []
        pos, end = dva, dva + n
        for i, p in enumerate(phys.tolist()):
            page_end = (first + i + 1) * R.PAGE_SIZE
            take = min(end, page_end) - pos
            start = p + pos % R.PAGE_SIZE
            if runs and runs[-1][0] + runs[-1][1] == start:
                runs[-1] = (runs[-1][0], runs[-1][1] + take)
            else:
                runs.append((start, take))
            pos += take
        return runs

    def _gather(self, runs) -> np.ndarray:
        return np.concatenate([self.vram[s:s + n] for s, n in runs]) if runs else np.zeros(0, np.uint8)

    def _scatter(self, runs, data: np.ndarray) -> None:
        pos = 0
        for s, n in runs:
            self.vram[s:s + n] = data[pos:pos + n]
            pos += n

    def _dma(self, desc_addr: int, count: int, to_host: bool) -> None:
        if count < 1 or count > C.MAX_DESCRIPTORS:
            raise Fault(R.ErrorCode.BAD_DESCRIPTOR, count)
        self._sys_check(desc_addr, count * C.DESC_BYTES, C.DESC_BYTES)
        table = self.sys[desc_addr:desc_addr + count * C.DESC_BYTES].view("<u8").reshape(count, C.DESC_WORDS).copy()
        for sys_addr, dva, length, _ in table.tolist():
            if length < 1 or length > C.MAX_DMA_BYTES:
                raise Fault(R.ErrorCode.BAD_DESCRIPTOR, length)
            for v in (sys_addr, dva, length):
                if v % C.DMA_ALIGN:
                    raise Fault(R.ErrorCode.MISALIGNED, v)
            self._sys_check(sys_addr, length, C.DMA_ALIGN)
            runs = self._segments(dva, length, write=not to_host)
            if to_host:
                self.sys[sys_addr:sys_addr + length] = self._gather(runs)
                self._add("CNT_BYTES_D2H", length)
            else:
                self._scatter(runs, self.sys[sys_addr:sys_addr + length])
                self._add("CNT_BYTES_H2D", length)
            self._add("CNT_DESCRIPTORS", 1)
            self._add("MODEL_TIME_NS", self.link.dma(length))

    def _fill(self, dva: int, n: int, pattern: int) -> None:
        for v in (dva, n):
            if v % C.ELEM_ALIGN:
                raise Fault(R.ErrorCode.MISALIGNED, v)
        if n < 1 or n > C.MAX_DMA_BYTES:
            raise Fault(R.ErrorCode.BAD_DESCRIPTOR, n)
        runs = self._segments(dva, n, write=True)
        data = np.full(n // 4, pattern, dtype="<u4").view(np.uint8)
        self._scatter(runs, data)
        self._add("MODEL_TIME_NS", self.link.vram_op(n))

    def _saxpy(self, x: int, y: int, n: int, a_bits: int) -> None:
        for v in (x, y):
            if v % C.ELEM_ALIGN:
                raise Fault(R.ErrorCode.MISALIGNED, v)
        if n < 1 or n * 4 > C.MAX_DMA_BYTES:
            raise Fault(R.ErrorCode.BAD_DESCRIPTOR, n)
        a = np.frombuffer(struct.pack("<I", a_bits & 0xFFFF_FFFF), dtype="<f4")[0]
        xr = self._segments(x, n * 4, write=False)
        yr = self._segments(y, n * 4, write=True)
        xv = self._gather(xr).view("<f4")
        yv = self._gather(yr).view("<f4")
        with np.errstate(all="ignore"):  # inf/nan are data, not device errors
            out = (a * xv + yv).astype("<f4")
        self._scatter(yr, out.view(np.uint8))
        self._add("MODEL_TIME_NS", self.link.vram_op(3 * n * 4))

    def _indirect(self, addr: int, count: int, depth: int) -> None:
        if depth + 1 > C.MAX_IB_DEPTH:
            raise Fault(R.ErrorCode.IB_DEPTH, depth + 1)
        if count < 1 or count > C.MAX_IB_ENTRIES:
            raise Fault(R.ErrorCode.BAD_DESCRIPTOR, count)
        self._sys_check(addr, count * C.ENTRY_BYTES, C.ENTRY_BYTES)
        entries = self.sys[addr:addr + count * C.ENTRY_BYTES].view("<u8").reshape(count, C.ENTRY_WORDS).copy()
        for w in entries:
            self.execute(w, depth + 1)


class Firmware:
    """The device's own firmware: manages VRAM and the ring for a driver that asks (FW_CALL).

    Chapters 2 and 7 use a driver that leaves page tables to the device, the way recent NVIDIA
    GPUs run much of their resource manager on a processor of their own (the GSP) and the
    kernel driver asks it by remote procedure call (open-gpu-kernel-modules,
    src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c, kgspInitRm_IMPL boots it;
    src/nvidia/src/kernel/vgpu/rpc.c, rpcRmApiControl_GSP sends it a call). Lab 1's devices have no firmware: there the
    driver builds every table itself. The firmware keeps its tables at the end of VRAM (BAR1's
    last, the device MMU's below it) and hands out the rest, shuffled by the device's seed."""

    def __init__(self, dev: Device, seed: int):
        self.dev, self.seed = dev, seed
        self.ready = False

    def _build(self) -> None:
        d, vram = self.dev, len(self.dev.vram)
        pages, ap_pages = vram // R.PAGE_SIZE, d._get("BAR1_SIZE") // R.PAGE_SIZE
        self.bar1_table = vram - -(-ap_pages * 8 // R.PAGE_SIZE) * R.PAGE_SIZE
        self.pt_base = self.bar1_table - -(-pages * 8 // R.PAGE_SIZE) * R.PAGE_SIZE
        self.pt_entries = pages
        d.vram[self.pt_base:vram] = 0
        first = -(-d._get("VRAM_RESERVED") // R.PAGE_SIZE)
        rng = np.random.default_rng(self.seed)
        self.free_pages = [int(p) for p in rng.permutation(np.arange(first, self.pt_base // R.PAGE_SIZE))]
        self.dva_free = [False] + [True] * (pages - 1)  # DVA 0 stays unmapped: a null device pointer faults
        self.bar1_free = [True] * ap_pages
        self.ready = True

    def _table(self, base: int, n: int) -> np.ndarray:
        return self.dev.vram[base:base + n * 8].view("<u8")

    def call(self, call: int, a0: int, a1: int, a2: int) -> tuple[int, R.FwStatus]:
        """Run one call; (result, status). Never raises: bad arguments are a status."""
        if call == R.FwCall.INIT:
            return self._init(a0, a1, a2)
        if not self.ready or call not in tuple(R.FwCall):
            return 0, R.FwStatus.BAD_CALL
        return {R.FwCall.MAP_VRAM: self._map_vram, R.FwCall.UNMAP_VRAM: self._unmap_vram,
                R.FwCall.MAP_BAR1: self._map_bar1, R.FwCall.UNMAP_BAR1: self._unmap_bar1}[call](a0, a1)

    def _init(self, ring: int, entries: int, write_back: int) -> tuple[int, R.FwStatus]:
        if not self.ready:
            self._build()
        d = self.dev
        for name, value in (("PT_BASE", self.pt_base), ("PT_ENTRIES", self.pt_entries),
                            ("BAR1_PT_BASE", self.bar1_table | R.BAR1_PT_ENABLE), ("RING_BASE", ring),
                            ("RING_SIZE", entries), ("RPTR_ADDR", write_back),
                            ("INT_MASK", R.Irq.FENCE | R.Irq.USER | R.Irq.ERROR)):
            d._set(name, value)
        d._control(R.Control.RING_ENABLE)
        return 0, (R.FwStatus.BAD_ARGUMENT if d._get("STATUS") & R.Status.ERROR else R.FwStatus.OK)

    def _map_vram(self, nbytes: int, writable: int) -> tuple[int, R.FwStatus]:
        n = -(-nbytes // R.PAGE_SIZE)
        if n < 1 or n > self.pt_entries:
            return 0, R.FwStatus.BAD_ARGUMENT
        first = _first_fit(self.dva_free, n) if n <= len(self.free_pages) else None
        if first is None:
            return 0, R.FwStatus.NO_MEMORY
        flags = R.PTE_VALID | (R.PTE_WRITABLE if writable else 0)
        self._table(self.pt_base, self.pt_entries)[first:first + n] = \
            [self.free_pages.pop() * R.PAGE_SIZE | flags for _ in range(n)]
        return first * R.PAGE_SIZE, R.FwStatus.OK

    def _pages(self, start: int, nbytes: int, limit: int) -> range | None:
        first, last = start // R.PAGE_SIZE, (start + max(nbytes, 1) - 1) // R.PAGE_SIZE
        return range(first, last + 1) if last < limit else None

    def _unmap_vram(self, dva: int, nbytes: int) -> tuple[int, R.FwStatus]:
        pages = self._pages(dva, nbytes, self.pt_entries)
        if pages is None:
            return 0, R.FwStatus.BAD_ARGUMENT
        table = self._table(self.pt_base, self.pt_entries)
        for p in pages:
            pte = int(table[p])
            if pte & R.PTE_VALID:
                self.free_pages.append((pte & R.PTE_ADDR_MASK) // R.PAGE_SIZE)
            table[p] = 0
            self.dva_free[p] = p > 0
        return 0, R.FwStatus.OK

    def _map_bar1(self, dva: int, nbytes: int) -> tuple[int, R.FwStatus]:
        pages = self._pages(dva, nbytes, self.pt_entries)
        table = self._table(self.pt_base, self.pt_entries)
        if pages is None or any(not int(table[p]) & R.PTE_VALID for p in pages):
            return 0, R.FwStatus.BAD_ARGUMENT
        first = _first_fit(self.bar1_free, len(pages))
        if first is None:
            return 0, R.FwStatus.NO_MEMORY
        bar1 = self._table(self.bar1_table, len(self.bar1_free))
        for k, p in enumerate(pages):
            bar1[first + k] = int(table[p]) & R.PTE_ADDR_MASK | R.PTE_VALID | R.PTE_WRITABLE
        return first * R.PAGE_SIZE + dva % R.PAGE_SIZE, R.FwStatus.OK

    def _unmap_bar1(self, offset: int, nbytes: int) -> tuple[int, R.FwStatus]:
        pages = self._pages(offset, nbytes, len(self.bar1_free))
        if pages is None:
            return 0, R.FwStatus.BAD_ARGUMENT
        bar1 = self._table(self.bar1_table, len(self.bar1_free))
        for p in pages:
            bar1[p] = 0
            self.bar1_free[p] = True
        return 0, R.FwStatus.OK


def _first_fit(free: list[bool], n: int) -> int | None:
    """The first run of `n` free pages in `free` (taken: marked used), or None."""
    run = 0
    for i, ok in enumerate(free):
        run = run + 1 if ok else 0
        if run == n:
            free[i + 1 - n:i + 1] = [False] * n
            return i + 1 - n
    return None


def layout(vram_bytes: int, sysmem_bytes: int) -> dict[str, tuple[int, int]]:
    """Where BAR0, VRAM and system memory sit in the device's one shared block: name -> (offset, size)."""
    return {"bar0": (0, R.BAR0_SIZE), "vram": (R.BAR0_SIZE, vram_bytes),
            "sysmem": (R.BAR0_SIZE + vram_bytes, sysmem_bytes)}


def serve(dev: Device, line: Lifeline) -> None:
    """The device's main loop: take register writes, execute commands, watch the parent."""
    pending = b""
    while not line.gone():
        data = line.get(0 if dev.can_step() else POLL_S)
        if data is None:
            return  # end of file: the driver closed its end, or its process died
        if data:
            pending += data
            whole = len(pending) - len(pending) % MSG.size
            for off, val in MSG.iter_unpack(pending[:whole]):
                dev.on_write(off, val)
            pending = pending[whole:]
        if dev.can_step():
            dev.step()


def _notifier():
    """Send one byte on stdout per interrupt; exit quietly once nobody listens."""
    fd = sys.stdout.fileno()

    def notify() -> None:
        try:
            os.write(fd, b"\x01")
        except OSError:
            raise SystemExit(0) from None

    return notify


def main(argv: list[str] | None = None) -> int:
    """Entry point of the device process (started by the driver, not by hand)."""
    quiet_interrupts()
    p = argparse.ArgumentParser(description="toy GPU device process")
    p.add_argument("--shm", required=True)
    p.add_argument("--vram", type=int, required=True)
    p.add_argument("--sysmem", type=int, required=True)
    p.add_argument("--bar1", type=int, default=None)
    p.add_argument("--reserved", type=int, default=0)
    p.add_argument("--no-firmware", action="store_true")
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--link", default="{}")
    a = p.parse_args(argv)
    line = Lifeline(a.parent)
    if line.gone():
        return 0
    block = SharedBlock.attach(a.shm)
    try:
        parts = [block.buf[o:o + n] for o, n in layout(a.vram, a.sysmem).values()]
        link = LinkModel(LinkParams(**json.loads(a.link)), seed=a.seed)
        dev = Device(*parts, notify=_notifier(), link=link, bar1_bytes=a.bar1, reserved_bytes=a.reserved,
                     firmware=not a.no_firmware, seed=a.seed)
        serve(dev, line)
    except KeyboardInterrupt:
        pass
    finally:
        block.unlink()  # the driver unlinks it too; whoever is last, nothing is left behind
    return 0
