"""The toy GPU as the chapters use it: its bus (MMIO, BAR1, system memory) and a small driver.

    from helpers.models.toygpu import ToyGPU, commands as cmd
    with ToyGPU(seed=1) as gpu:
        print(hex(gpu.read("ID")))
        x = gpu.alloc_vram(4096)
        gpu.upload(np.arange(1024, dtype=np.float32), x)
        gpu.run([cmd.saxpy(x, x, 1024, 2.0)])          # submit, ring the doorbell, wait
        y = gpu.download(x, 4096).view(np.float32)

Two layers, both open to read:

- the bus and the services a kernel gives a driver: `read`/`write` are MMIO on BAR0 (each
  costs modelled bus time and is counted in `counters`); `bar1_read`/`bar1_write`/`aperture`
  are CPU loads and stores through BAR1, translated by the device's own BAR1 page table;
  `alloc_sys` is device-visible system memory (dma_alloc_coherent); a device error becomes
  an exception named after it, with the device's ERROR_INFO in its message.
- a small driver on top: the device's firmware builds the page tables and programs the ring
  when asked (`bring_up`, `alloc_vram`, `bar1_map_dva`: FW_CALL, see device.Firmware), and the
  driver fills the ring in system memory, rings the doorbell and waits on fences
  (`emit`/`kick`/`submit`/`wait`), learning the device's progress from the read pointer and
  error code the device writes back to memory, not from MMIO reads.

Lab 1's devices have no firmware: the learner writes what the firmware does here (BAR1's and
the MMU's page tables, bring-up), a stricter ring discipline (refuse rather than wait, one DMA
descriptor per page) and recovery. That answer lives in instructor/labs/lab1_driver.py, which
the student distribution does not contain.

Compare the real thing: the Linux amdgpu ring code (drivers/gpu/drm/amd/amdgpu/amdgpu_ring.c,
amdgpu_ring_commit writes the write pointer, the doorbell) and fence code (amdgpu_fence.c,
amdgpu_fence_emit / amdgpu_fence_process), or NVIDIA's open kernel modules, where user space
rings the doorbell itself with a work-submit token the kernel hands out
(open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/fifo/arch/ampere/kernel_fifo_ga100.c,
kfifoGenerateWorkSubmitTokenHal_GA100, which packs NV_CTRL_VF_DOORBELL_RUNLIST_ID and _VECTOR
from src/common/inc/swref/published/ampere/ga100/dev_ctrl.h; the doorbell is
NVC361_NOTIFY_CHANNEL_PENDING in src/common/sdk/nvidia/inc/class/clc361.h).
"""

from __future__ import annotations

import json
import os
import time
import weakref
from dataclasses import asdict

import numpy as np

from helpers.core import validate
from helpers.core.errors import DeviceTimeoutError, InputError, InputTypeError
from helpers.models.device_process import DeviceProcess, SharedBlock
from helpers.models.toygpu import bar1 as B1
from helpers.models.toygpu import commands as C
from helpers.models.toygpu import regs as R
from helpers.models.toygpu.bus import Aperture, Arena, Buffer, Counters, dma_chunks
from helpers.models.toygpu.device import MSG, layout
from helpers.models.toygpu.errors import (
    ERROR_CLASS,
    DeviceError,
    DeviceLostError,
    RingFullError,
    ToyGPUError,
)
from helpers.models.toygpu.link import LinkModel, LinkParams

DEFAULT_TIMEOUT_S = 5.0
POSTED_CREDITS = 256  # posted writes in flight at most (PCIe's flow-control credits; 4 KiB of messages)


def _int(name: str, v, lo: int = 0, hi: int = 1 << 64) -> int:
    """A whole number in [lo, hi): InputTypeError for anything else, InputError out of range."""
    return validate.whole_number(v, name, lo, hi - 1)


def _check_timeout(name: str, t) -> float:
    """A finite, positive number of seconds: every wait on the toy GPU ends."""
    return validate.seconds(t, name)


def _check_ring_entries(ring_entries) -> int:
    """A ring of 2..4096 entries, a power of two (the device wraps its head with a mask)."""
    n = _int("ring_entries", ring_entries, 2, 4097)
    if n & (n - 1):
        raise InputError(f"ring_entries must be a power of two, got {ring_entries}")
    return n


def _shutdown(device: DeviceProcess, block: SharedBlock) -> None:
    """Stop the device (it exits when its lifeline closes), then free the shared memory."""
    device.stop()
    block.unlink()
    block.close()


def _check_config(vram_bytes, sysmem_bytes, bar1_bytes, reserved_bytes, seed, link, timeout, start_timeout,
                  ring_entries, bring_up) -> int:
    """ToyGPU's arguments checked before any process starts (InputError / InputTypeError naming the
    bad one); returns the BAR1 size (VRAM's when None). `ring_entries` is checked only for a bring-up."""
    for name, v in (("vram_bytes", vram_bytes), ("sysmem_bytes", sysmem_bytes)):
        _int(name, v, R.PAGE_SIZE * 8, (1 << 30) + 1)
        if v % R.PAGE_SIZE:
            raise InputError(f"{name} must be a multiple of {R.PAGE_SIZE}, got {v}")
    bar1_bytes = vram_bytes if bar1_bytes is None else _int("bar1_bytes", bar1_bytes, R.PAGE_SIZE * 16,
                                                             vram_bytes + 1)
    if bar1_bytes % R.PAGE_SIZE:
        raise InputError(f"bar1_bytes must be a multiple of {R.PAGE_SIZE}, got {bar1_bytes}")
    _int("reserved_bytes", reserved_bytes, 0, vram_bytes // 2 + 1)
    if reserved_bytes % R.PAGE_SIZE:
        raise InputError(f"reserved_bytes must be a multiple of {R.PAGE_SIZE}, got {reserved_bytes}")
    _int("seed", seed, 0, 1 << 63)
    if link is not None and not isinstance(link, LinkParams):
        raise InputTypeError(f"link must be LinkParams, got {type(link).__name__}")
    for name, t in (("timeout", timeout), ("start_timeout", start_timeout)):
        _check_timeout(name, t)
    if bring_up:
        _check_ring_entries(ring_entries)  # before the device process starts, not after
    return bar1_bytes


# -- the driver -------------------------------------------------------------------------------
class ToyGPU:
    """A started toy GPU: its bus, and the chapters' driver for it (see the module docstring)."""

    def __init__(self, *, vram_bytes: int = 4 << 20, sysmem_bytes: int = 4 << 20, seed: int = 1,
                 link: LinkParams | None = None, ring_entries: int = 64,
                 timeout: float = DEFAULT_TIMEOUT_S, start_timeout: float = 30.0,
                 bring_up: bool = True, bar1_bytes: int | None = None, reserved_bytes: int = 0,
                 firmware: bool = True):
        bar1_bytes = _check_config(vram_bytes, sysmem_bytes, bar1_bytes, reserved_bytes, seed, link,
                                   timeout, start_timeout, ring_entries, bring_up)
        self.seed, self.timeout, self.ring_entries = int(seed), float(timeout), ring_entries
        self.link = LinkModel(link, seed=seed)
        self.counters = Counters()
        self.last_ns = 0.0
        self._writes_sent = 0

        self._block = SharedBlock.create("course-toygpu", R.BAR0_SIZE + vram_bytes + sysmem_bytes)
        try:
            self._device = DeviceProcess("helpers.models.toygpu", [
                "--shm", self._block.name, "--vram", str(vram_bytes), "--sysmem", str(sysmem_bytes),
                "--bar1", str(bar1_bytes), "--reserved", str(reserved_bytes), *([] if firmware else ["--no-firmware"]),
                "--parent", str(os.getpid()), "--seed", str(seed), "--link", _json(link or LinkParams())])
        except BaseException:
            self._block.unlink()
            raise
        self.proc = self._device.proc
        self._finalizer = weakref.finalize(self, _shutdown, self._device, self._block)
        views = {name: self._block.buf[o:o + n] for name, (o, n) in layout(vram_bytes, sysmem_bytes).items()}
        self._regs = np.ndarray((R.BAR0_SIZE // 8,), dtype="<u8", buffer=views["bar0"])
        self.vram_view = np.ndarray((vram_bytes,), dtype=np.uint8, buffer=views["vram"])
        self.sys_view = np.ndarray((sysmem_bytes,), dtype=np.uint8, buffer=views["sysmem"])
        self.bar1_size = bar1_bytes
        self._irqs_seen = 0
        self._sys = Arena(sysmem_bytes)
        self.ring: Buffer | None = None
        self.fence_slot: Buffer | None = None
        self.rptr_slot: Buffer | None = None
        self.read_pointer = "memory"  # where the hot path learns the device's progress: "memory" or "mmio"
        self.wptr = 0
        self._head = 0
        self._next_fence = 0
        try:
            self._wait_ready(start_timeout)
            if bring_up:
                self.bring_up(ring_entries)
        except BaseException:  # a failure or a kernel interrupt half-way: no device process outlives it
            self.close()
            raise

    def _wait_ready(self, start_timeout: float) -> None:
        """Wait for STATUS.READY: the device process mapped the memory and answers."""
        deadline = time.monotonic() + start_timeout
        while not self._peek("STATUS") & R.Status.READY:
            if not self._device.alive():
                raise DeviceLostError(f"the toy GPU process exited during start-up:\n{self._stderr_text()}")
            if time.monotonic() > deadline:
                raise DeviceTimeoutError(f"the toy GPU did not become READY within {start_timeout} s")
            time.sleep(0.005)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the device process and release its memory (also runs at exit)."""
        self._finalizer()

    def __enter__(self) -> ToyGPU:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def aperture(self) -> Aperture:
        """BAR1 as a byte array the CPU indexes: `ap[a:b]` loads, `ap[a:b] = data` stores (translated)."""
        self._ensure_alive()
        return Aperture(self)

    @property
    def alive(self) -> bool:
        """True while the device process runs."""
        return self._finalizer.alive and self._device.alive()

    def _stderr_text(self) -> str:
        return self._device.stderr_text()

    def _ensure_alive(self) -> None:
        if not self._finalizer.alive:
            raise DeviceLostError("this toy GPU was closed; start a new one with ToyGPU()")
        if not self._device.alive():
            raise DeviceLostError(f"the toy GPU process exited (status {self.proc.returncode}). "
                                  f"{self._stderr_text()}".strip())

    # -- MMIO on BAR0 -----------------------------------------------------------------------
    def _offset(self, reg: str | int) -> int:
        if isinstance(reg, str):
            return R.offset(reg)
        off = _int("register offset", reg, 0, R.BAR0_SIZE)
        return off

    def _peek(self, name: str) -> int:
        """Read a register without a bus transaction (debug backdoor; no modelled cost)."""
        return int(self._regs[R.offset(name) // 8])

    def _flush(self, timeout: float | None = None, in_flight: int = 0) -> None:
        """Wait until at most `in_flight` posted writes are still on their way to the device.

        0 (a read never passes earlier writes) or fewer than POSTED_CREDITS (room to post one more)."""
        deadline = None
        while self._writes_sent - self._peek("BUS_WRITES_SEEN") > in_flight:
            self._ensure_alive()
            now = time.monotonic()
            deadline = deadline or now + (timeout or self.timeout)
            if now > deadline:
                raise DeviceTimeoutError(
                    f"the toy GPU took more than {timeout or self.timeout} s to accept register writes "
                    f"({self._peek('BUS_WRITES_SEEN')} of {self._writes_sent} seen)")
            time.sleep(0.0001)

    def read(self, reg: str | int) -> int:
        """MMIO-read a BAR0 register (by name or 8-byte-aligned offset): one uncached round trip.

        Like a PCIe read, it waits for earlier posted writes to arrive first, so a read after
        writes sees their effect.
        """
        off = self._offset(reg)
        if off % R.REG_BYTES:
            raise InputError(f"register offset {off:#x} is not 8-byte aligned")
        self._ensure_alive()
        self._flush()
        self.last_ns = self.link.uc_reads(1, 8)
        self.counters.mmio_reads += 1
        self.counters.cpu_model_ns += self.last_ns
        return int(self._regs[off // 8])

    def write(self, reg: str | int, value: int, *, check: bool = True) -> None:
        """MMIO-write a BAR0 register: a posted write, on its way when this returns.

        With check=True (the default) the driver then reads STATUS (one round trip), so a
        write the device refused raises its DeviceError here. check=False is the raw posted
        write, as fast as the bus allows: its error shows up at the next check().
        """
        off = self._offset(reg)
        value = _int("register value", value)
        self._ensure_alive()
        self._post(off, value)
        self.last_ns = self.link.uc_writes(1, 8)
        self.counters.mmio_writes += 1
        self.counters.cpu_model_ns += self.last_ns
        if check:
            self.check()

    def _post(self, offset: int, value: int) -> None:
        """Put one message on the bus to the device (a posted write, or a bus error report)."""
        self._flush(in_flight=POSTED_CREDITS - 1)  # out of credits: wait for the device to take some
        try:
            self._device.send(MSG.pack(offset, value))
        except (BrokenPipeError, OSError, ValueError):
            raise DeviceLostError(f"the toy GPU process is gone. {self._stderr_text()}".strip()) from None
        self._writes_sent += 1

    def check(self) -> None:
        """Read STATUS; if the device is in error, read the code and raise its DeviceError."""
        if self.read("STATUS") & R.Status.ERROR:
            code = R.ErrorCode(self.read("ERROR_CODE"))
            info = self.read("ERROR_INFO")
            raise ERROR_CLASS.get(code, DeviceError)(code, info)

    # -- CPU access to VRAM through BAR1 -------------------------------------------------
    def _bar1_range(self, offset: int, nbytes: int, width: int) -> None:
        _int("BAR1 offset", offset, 0, self.bar1_size)
        _int("byte count", nbytes, 0, self.bar1_size + 1)
        if width not in (1, 2, 4, 8, 16, 32, 64):
            raise InputError(f"access width must be 1, 2, 4, 8, 16, 32 or 64 bytes, got {width!r}")
        if offset % width or nbytes % width:
            raise InputError(f"offset {offset} and length {nbytes} must be multiples of the width {width}")
        if offset + nbytes > self.bar1_size:
            raise InputError(f"BAR1 access [{offset}, {offset + nbytes}) runs past the aperture "
                             f"({self.bar1_size} bytes)")

    def _aperture(self, offset: int, nbytes: int) -> list[tuple[int, int, int | None]]:
        """The device's BAR1 translation of an access; a refused one is reported to the device."""
        self._flush()  # posted writes (page-table updates among them) arrive before this access
        runs = B1.pieces(self._regs, self.vram_view, offset, nbytes)
        bad = next((a for a, _, v in runs if v is None), None)
        if bad is not None:
            self._post(R.BUS_BAR1_FAULT, bad)
        return runs

    def bar1_read(self, offset: int, nbytes: int, *, width: int = 8) -> np.ndarray:
        """Copy `nbytes` out through BAR1, from aperture `offset`, with uncached loads of `width` bytes.

        The bytes really come out of VRAM, wherever BAR1's page table maps each aperture page
        (unmapped pages read as all ones, and the device records BAR1_FAULT); the time is the
        link model's: one round trip per load, which is why CPU reads from a BAR are slow.
        Widths above 8 model vector loads (16/32 B) and streaming loads from a write-combined
        mapping (MOVNTDQA, which may fetch a whole 64-byte line per round trip; on an uncached
        mapping it behaves like an ordinary 16-byte load).
        """
        self._bar1_range(offset, nbytes, width)
        out = np.full(nbytes, R.BAR1_UNMAPPED_BYTE, dtype=np.uint8)
        for a, n, v in self._aperture(offset, nbytes):
            if v is not None:
                out[a - offset:a - offset + n] = self.vram_view[v:v + n]
        n = nbytes // width
        self.last_ns = self.link.uc_reads(n, width)
        self.counters.mmio_reads += n
        self.counters.bar_bytes_read += nbytes
        self.counters.cpu_model_ns += self.last_ns
        return out

    def bar1_write(self, offset: int, data, *, mode: str = "wc", width: int = 8) -> None:
        """Store `data` through BAR1 at aperture `offset`, write-combined ('wc') or uncached ('uc').

        Stores to unmapped aperture pages are dropped (the device records BAR1_FAULT)."""
        buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if mode not in ("wc", "uc"):
            raise InputError(f"mode must be 'wc' (write-combined) or 'uc' (uncached), got {mode!r}")
        self._bar1_range(offset, buf.size, width)
        self._store(offset, buf)
        if mode == "wc":
            self.last_ns = self.link.wc_writes(buf.size)
            self.counters.wc_bursts += self.link.wc_bursts(buf.size)
        else:
            n = buf.size // width
            self.last_ns = self.link.uc_writes(n, width)
            self.counters.mmio_writes += n
        self.counters.bar_bytes_written += buf.size
        self.counters.cpu_model_ns += self.last_ns

    def _store(self, offset: int, buf: np.ndarray) -> None:
        for a, n, v in self._aperture(offset, buf.size):
            if v is not None:
                self.vram_view[v:v + n] = buf[a - offset:a - offset + n]

    def peer_write(self, offset: int, data) -> None:
        """Another PCIe device writes `data` into BAR1 at aperture `offset` (a peer-to-peer write).

        Translated like the CPU's stores; no CPU time or CPU bus counters (the card pays)."""
        buf = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._bar1_range(offset, buf.size, 1)
        self._store(offset, buf)

    # -- bring-up, with the device's firmware ----------------------------------------------
    def _fw(self, call: R.FwCall, *args: int) -> int:
        """Ask the device's firmware (FW_ARGn, FW_CALL, then FW_STATUS/FW_RESULT); its result."""
        for k, a in enumerate(args):
            self.write(f"FW_ARG{k}", a, check=False)
        self.write("FW_CALL", int(call), check=False)
        status = R.FwStatus(self.read("FW_STATUS"))
        if status is R.FwStatus.OK:
            return self.read("FW_RESULT")
        what = call.name.lower().replace("_", " ")
        if status is R.FwStatus.NO_FIRMWARE:
            raise ToyGPUError("this toy GPU has no firmware to ask (Lab 1's devices): the driver must build "
                              "its page tables and program the ring itself")
        if status is R.FwStatus.NO_MEMORY:
            where = "BAR1 aperture" if call in (R.FwCall.MAP_BAR1,) else "toy VRAM"
            raise MemoryError(f"{where} exhausted: firmware call {what} {args} found no room")
        self.check()  # a refused INIT left a device error: raise it
        raise InputError(f"the firmware refused {what} {args}: {status.name}")

    def bring_up(self, ring_entries: int = 64) -> None:
        """Identify, reset, and have the firmware set up page tables, BAR1 and the ring.

        The driver owns system memory (the ring, the fence and the write-back area); the
        device's firmware owns VRAM's layout (see device.Firmware). Lab 1's devices have no
        firmware: there you write this part."""
        dev_id = self.read("ID")
        if dev_id != R.DEVICE_ID:
            raise ToyGPUError(f"ID register reads {dev_id:#x}, expected {R.DEVICE_ID:#x}: not a toy GPU")
        self.vram_size, self.sysmem_size = self.read("VRAM_SIZE"), self.read("SYSMEM_SIZE")
        self.bar1_size = self.read("BAR1_SIZE")
        self.write("CONTROL", R.Control.RESET)
        self._program_device(ring_entries)

    def _program_device(self, ring_entries: int) -> None:
        _check_ring_entries(ring_entries)
        if self.ring is None or self.ring.nbytes != ring_entries * C.ENTRY_BYTES:
            if self.ring is not None:
                self.free_sys(self.ring)
            self.ring = self.alloc_sys(ring_entries * C.ENTRY_BYTES, align=C.ENTRY_BYTES)
        if self.fence_slot is None:  # one write-back page: the fence at 0, then read pointer and error code
            self.fence_slot = self.alloc_sys(64, align=64)
            self.rptr_slot = Buffer(self.fence_slot.addr + 8, R.WRITE_BACK_BYTES,
                                    self.fence_slot.view[8:8 + R.WRITE_BACK_BYTES])
        self.rptr_slot.view[:] = 0
        self.ring_entries, self.wptr, self._head = ring_entries, 0, 0
        self._fw(R.FwCall.INIT, self.ring.addr, ring_entries, self.rptr_slot.addr)
        self.pt_base, self.pt_entries = self._peek("PT_BASE"), self._peek("PT_ENTRIES")
        self._drain_irq()

    def recover(self) -> None:
        """After a device error: reset and program the device again, keeping memory and mappings."""
        self.write("CONTROL", R.Control.RESET)
        self._program_device(self.ring_entries)

    def clear_error(self) -> None:
        """Forget the device error and let the ring continue after the failed command."""
        self.write("CONTROL", R.Control.CLEAR_ERROR | R.Control.RING_ENABLE)

    # -- memory -----------------------------------------------------------------------------
    def alloc_sys(self, nbytes: int, align: int = 64) -> Buffer:
        """Reserve device-visible system memory (like dma_alloc_coherent); returns a Buffer."""
        _int("nbytes", nbytes, 1, len(self.sys_view) + 1)
        _int("align", align, 1, R.PAGE_SIZE + 1)
        addr = self._sys.alloc(nbytes, align)
        return Buffer(addr, nbytes, self.sys_view[addr:addr + nbytes])

    def free_sys(self, buf: Buffer) -> None:
        """Give a system-memory Buffer back."""
        if not isinstance(buf, Buffer):
            raise InputTypeError(f"expected a Buffer, got {type(buf).__name__}")
        self._sys.free(buf.addr)

    def alloc_vram(self, nbytes: int, *, writable: bool = True) -> int:
        """Fresh VRAM pages at a new device virtual address (returned), from the firmware.

        Virtual pages are contiguous; the physical pages behind them are scattered, so the
        device's page table does real work."""
        _int("nbytes", nbytes, 1, len(self.vram_view) + 1)
        return self._fw(R.FwCall.MAP_VRAM, nbytes, int(bool(writable)))

    def unmap(self, dva: int, nbytes: int) -> None:
        """Take the pages covering [dva, dva+nbytes) out of the page table and free them; later use faults."""
        _int("dva", dva, 0, self.pt_entries * R.PAGE_SIZE)
        _int("nbytes", nbytes, 0, len(self.vram_view) + 1)
        self._fw(R.FwCall.UNMAP_VRAM, dva, nbytes)

    def translate(self, dva: int) -> int | None:
        """The VRAM offset behind a DVA, read from the device's page table (a debug look, no bus time)."""
        _int("dva", dva, 0, 1 << 64)
        page = dva // R.PAGE_SIZE
        if page >= self.pt_entries:
            return None
        at = self.pt_base + page * 8
        pte = int(self.vram_view[at:at + 8].view("<u8")[0])
        return (pte & R.PTE_ADDR_MASK) + dva % R.PAGE_SIZE if pte & R.PTE_VALID else None

    def bar1_map_dva(self, dva: int, nbytes: int) -> int:
        """Give the VRAM behind [dva, dva+nbytes) bus addresses in BAR1; returns the aperture offset of
        `dva` (what kbusMapFbAperture_GM107 does for a buffer on NVIDIA's GPUs)."""
        _int("dva", dva, 0, 1 << 64)
        _int("nbytes", nbytes, 1, len(self.vram_view) + 1)
        return self._fw(R.FwCall.MAP_BAR1, dva, nbytes)

    def bar1_unmap(self, offset: int, nbytes: int) -> None:
        """Take [offset, offset+nbytes) of the aperture out of BAR1; later CPU accesses fault."""
        _int("BAR1 offset", offset, 0, self.bar1_size)
        _int("nbytes", nbytes, 1, self.bar1_size + 1)
        self._fw(R.FwCall.UNMAP_BAR1, offset, nbytes)

    # -- the ring ---------------------------------------------------------------------------
    def head(self) -> int:
        """The device's read pointer: a load from the write-back slot in system memory (no bus
        transaction), or with read_pointer='mmio' an uncached read of RING_HEAD (a round trip:
        the way not to do it, kept so Chapter 7 can count the difference)."""
        if self.read_pointer == "mmio":
            self._head = self.read("RING_HEAD")
        else:
            self._head = int(self.rptr_slot.view.view("<u8")[0])
        return self._head

    def error_code(self) -> int:
        """The device's error code as it wrote it back to memory (0: none): no bus transaction."""
        return int(self.rptr_slot.view.view("<u8")[1])

    def space(self) -> int:
        """Free ring entries, from the read pointer last seen (refresh it with head())."""
        return self.ring_entries - (self.wptr - self._head)

    def emit(self, command) -> None:
        """Write one entry into the ring (system memory); the device sees it after kick()."""
        words = np.asarray(command, dtype=np.uint64)
        if words.shape != (C.ENTRY_WORDS,):
            raise InputError(f"a command is {C.ENTRY_WORDS} uint64 words, got shape {words.shape}")
        if self.ring is None:
            raise ToyGPUError("the ring is not set up: call bring_up() first")
        if self.space() <= 0:
            self.head()
        if self.space() <= 0:
            raise RingFullError(f"the ring's {self.ring_entries} entries are all waiting for the device; "
                                "kick() and wait, or use a bigger ring or an indirect buffer")
        slot = (self.wptr % self.ring_entries) * C.ENTRY_BYTES
        self.ring.view[slot:slot + C.ENTRY_BYTES] = words.astype("<u8").view(np.uint8)
        self.wptr += 1

    def kick(self) -> None:
        """Ring the doorbell: one posted write of the new write pointer."""
        self.write("DOORBELL", self.wptr, check=False)
        self.counters.doorbells += 1

    def _make_room(self, n: int, timeout: float) -> None:
        """Wait (with a timeout) until `n` entries are free; looks at the read pointer once if
        there is room, and keeps looking while there is not."""
        if n > self.ring_entries:
            raise RingFullError(f"{n} entries can never fit a ring of {self.ring_entries}; "
                                "put the commands in an indirect buffer")
        deadline = time.monotonic() + timeout
        self.head()
        while self.space() < n:
            self._ensure_alive()
            if time.monotonic() > deadline:
                self.check()
                raise DeviceTimeoutError(f"no room for {n} entries in the ring within {timeout} s")
            time.sleep(0.0002)
            self.head()

    def submit(self, cmds, *, fence: bool = True, interrupt: bool = True,
               timeout: float | None = None) -> int | None:
        """Put commands (plus a fence) in the ring and ring the doorbell once.

        Returns the fence value to wait() for, or None with fence=False. Waits (with a
        timeout) for ring space rather than overwrite commands the device has not read.
        """
        cmds = [np.asarray(c, dtype=np.uint64) for c in cmds]
        value = None
        if fence:
            self._next_fence += 1
            value = self._next_fence
            cmds.append(C.fence(self.fence_slot.addr, value, interrupt=interrupt))
        if not cmds:
            raise InputError("submit() needs at least one command (or fence=True)")
        self._make_room(len(cmds), self.timeout if timeout is None else timeout)
        for c in cmds:
            self.emit(c)
        self.kick()
        return value

    def fence_value(self) -> int:
        """The last fence value the device wrote to system memory (a cheap CPU load)."""
        return int(self.fence_slot.view[:8].view("<u8")[0])

    def _drain_irq(self) -> bool:
        """True when interrupt notifications arrived since the last look."""
        n = self._device.notifications
        got, self._irqs_seen = n != self._irqs_seen, n
        return got

    def _service_interrupt(self) -> None:
        status = self.read("INT_STATUS")
        if status & R.Irq.FENCE:  # USER interrupts stay pending for whoever asked for them
            self.write("INT_ACK", R.Irq.FENCE, check=False)
        if status & R.Irq.ERROR:
            self.check()

    def wait(self, value: int, *, timeout: float | None = None, how: str = "irq") -> None:
        """Wait until the fence reaches `value`; raise the device's error, or time out.

        how='irq' sleeps on the interrupt notification; 'poll' spins on the fence in system
        memory (cheap loads), and on the error code the device writes back beside its read
        pointer; 'register' polls LAST_FENCE over MMIO (a round trip each).
        """
        _int("fence value", value, 0)
        if how not in ("irq", "poll", "register"):
            raise InputError(f"how must be 'irq', 'poll' or 'register', got {how!r}")
        timeout = self.timeout if timeout is None else _check_timeout("timeout", timeout)
        deadline = time.monotonic() + timeout
        while True:
            self._device.notified.clear()  # before looking: a notification after the look ends the sleep
            done = (self.read("LAST_FENCE") if how == "register" else self.fence_value()) >= value
            if done:
                return
            if how == "irq" and self._drain_irq():
                self._service_interrupt()
            elif how != "irq" and self.error_code():
                self.check()  # the written-back error code says the ring halted: read why
            self._ensure_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.check()
                raise DeviceTimeoutError(
                    f"fence {value} not reached within {timeout} s (last fence {self.fence_value()}, "
                    f"STATUS {self.read('STATUS'):#x}, head {self.read('RING_HEAD')}, write pointer {self.wptr})")
            if how == "irq":
                self._device.notified.wait(min(remaining, 0.05))
            else:
                time.sleep(min(remaining, 0.0002))

    def run(self, cmds, *, timeout: float | None = None, how: str = "irq") -> int:
        """submit() then wait(): execute commands and return once they are done."""
        value = self.submit(cmds, timeout=timeout)
        self.wait(value, timeout=timeout, how=how)
        return value

    # -- conveniences used by the chapters --------------------------------------------------
    def write_commands(self, buf: Buffer, cmds) -> int:
        """Write commands into a system-memory Buffer (an indirect buffer); returns the count."""
        words = np.concatenate([np.asarray(c, dtype=np.uint64).reshape(-1) for c in cmds])
        if words.size % C.ENTRY_WORDS or words.size * 8 > buf.nbytes:
            raise InputError(f"{words.size * 8} bytes of commands do not fit the {buf.nbytes}-byte buffer")
        buf.view[:words.size * 8] = words.astype("<u8").view(np.uint8)
        return words.size // C.ENTRY_WORDS

    def dma(self, triples: list[tuple[int, int, int]], *, to_host: bool = False,
            timeout: float | None = None) -> None:
        """One scatter-gather DMA from (bus address, DVA, length) descriptors; waits for it."""
        if not triples:
            raise InputError("dma() needs at least one (bus address, DVA, length) descriptor")
        desc = C.descriptors(triples)
        table = self.alloc_sys(desc.size * 8, align=C.DESC_BYTES)
        try:
            table.view[:] = desc.astype("<u8").view(np.uint8)
            self.run([C.dma(table.addr, len(triples), to_host=to_host)], timeout=timeout)
        finally:
            self.free_sys(table)

    def upload(self, data, dva: int, *, timeout: float | None = None) -> None:
        """Copy host data to VRAM at `dva`: CPU copy into a staging buffer, then DMA."""
        src = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if src.size == 0 or src.size % C.DMA_ALIGN:
            raise InputError(f"DMA moves multiples of {C.DMA_ALIGN} bytes; got {src.size} bytes")
        stage = self.alloc_sys(src.size, align=C.DMA_ALIGN)
        try:
            stage.view[:] = src
            self.dma(dma_chunks(stage.addr, dva, src.size), timeout=timeout)
        finally:
            self.free_sys(stage)

    def download(self, dva: int, nbytes: int, *, timeout: float | None = None) -> np.ndarray:
        """Copy `nbytes` of VRAM at `dva` to a new host array (uint8): DMA, then CPU copy."""
        _int("nbytes", nbytes, 1, len(self.vram_view) + 1)
        if nbytes % C.DMA_ALIGN:
            raise InputError(f"DMA moves multiples of {C.DMA_ALIGN} bytes; got {nbytes}")
        stage = self.alloc_sys(nbytes, align=C.DMA_ALIGN)
        try:
            self.dma(dma_chunks(stage.addr, dva, nbytes), to_host=True, timeout=timeout)
            return stage.view.copy()
        finally:
            self.free_sys(stage)

    def device_counters(self) -> dict[str, int]:
        """The device's counter registers, read through a debug backdoor (no bus time)."""
        self._flush()
        names = ("MODEL_TIME_NS", "CNT_DOORBELLS", "CNT_COMMANDS", "CNT_BYTES_H2D",
                 "CNT_BYTES_D2H", "CNT_DESCRIPTORS")
        return {n: self._peek(n) for n in names}


def _json(p: LinkParams) -> str:
    return json.dumps(asdict(p))
