"""The toy GPU's register map (BAR0): the one source of truth for device, driver and docs.

Every register is 64 bits wide and 8-byte aligned. `REGISTERS` below is read by the device
process (which registers exist, which are read-only, their reset values), by the reference
driver (names to offsets) and by `markdown_table()`, which generates the table the chapters
and the book show — so the documentation cannot drift from the device.

Access kinds:
- RO  read-only: the device sets it; a CPU write is refused with ERR_RO_WRITE.
- RW  read-write: the CPU programs it; reads return what was written.
- WO  write-only: a write is a command to the device (doorbell, acknowledge); reads return 0.

Real GPUs document their registers the same way, at much larger scale: NVIDIA's open kernel
modules generate headers from a register database (open-gpu-kernel-modules,
src/common/inc/swref/published/), and amdgpu has one header per IP block
(linux, drivers/gpu/drm/amd/include/asic_reg/).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag

from helpers.core.errors import InputError, InputTypeError

BAR0_SIZE = 4096
REG_BYTES = 8
DEVICE_ID = 0x544F_5947_5055_0001  # 'TOYGPU' then version 1, read from the ID register
PAGE_SIZE = 4096  # the device MMU's page size


class Access(str):
    """One of 'RO', 'RW', 'WO' (a str so the table prints it plainly)."""


RO, RW, WO = Access("RO"), Access("RW"), Access("WO")


@dataclass(frozen=True, kw_only=True)
class Register:
    """A BAR0 register: where it is, who may write it, and what it means."""

    name: str
    offset: int
    access: Access
    doc: str
    reset: int = 0


class Status(IntFlag):
    """Bits of STATUS."""

    READY = 1 << 0     # the device finished bring-up and answers
    BUSY = 1 << 1      # the ring holds commands not yet executed
    ERROR = 1 << 2     # a device error halted the ring; see ERROR_CODE
    RING_ON = 1 << 3   # CONTROL.RING_ENABLE is set and the ring registers were accepted


class Control(IntFlag):
    """Bits of CONTROL."""

    RESET = 1 << 0        # self-clearing: back to power-on state, except BAR1's binding (BAR1_PT_BASE)
    RING_ENABLE = 1 << 1  # start fetching from the ring (RING_BASE/RING_SIZE must be valid)
    CLEAR_ERROR = 1 << 2  # self-clearing: forget the error, resume at the failed command + 1


class Irq(IntFlag):
    """Bits of INT_STATUS, INT_MASK and INT_ACK."""

    FENCE = 1 << 0  # a FENCE command with its INTERRUPT flag completed
    USER = 1 << 1   # an INTERRUPT command executed
    ERROR = 1 << 2  # a device error occurred


class FwCall(IntEnum):
    """Calls to the device's firmware (FW_CALL), for drivers that let the device manage its memory."""

    INIT = 1        # ARG0 ring bus address, ARG1 ring entries, ARG2 write-back address: tables, ring, interrupts
    MAP_VRAM = 2    # ARG0 bytes, ARG1 1 = writable: fresh VRAM pages at a new device virtual address (RESULT)
    UNMAP_VRAM = 3  # ARG0 DVA, ARG1 bytes: take the pages out of the device's page table and free them
    MAP_BAR1 = 4    # ARG0 DVA, ARG1 bytes: give the VRAM behind them bus addresses in BAR1 (RESULT: the offset of DVA)
    UNMAP_BAR1 = 5  # ARG0 aperture offset, ARG1 bytes: take them out of BAR1 again


class FwStatus(IntEnum):
    """Values of FW_STATUS after a call."""

    OK = 0
    NO_FIRMWARE = 1   # this device has none (Lab 1's devices: the driver does all of it)
    NO_MEMORY = 2     # no free VRAM pages, device virtual addresses or aperture pages
    BAD_ARGUMENT = 3  # an argument out of range, or an address nothing maps
    BAD_CALL = 4      # an unknown call, or a call before INIT


class ErrorCode(IntEnum):
    """Values of ERROR_CODE. ERROR_INFO holds the address or offset involved."""

    NONE = 0
    RO_WRITE = 1          # a write to a read-only register (INFO: the offset)
    BAD_REGISTER = 2      # an access outside the register map or misaligned (INFO: the offset)
    RING_CONFIG = 3       # RING_BASE/RING_SIZE/RPTR_ADDR invalid when the ring was enabled (INFO: the value)
    RING_OFF = 4          # a doorbell while the ring is disabled
    EMPTY_DOORBELL = 5    # a doorbell that announces no new command (INFO: the write pointer)
    RING_OVERFLOW = 6     # the write pointer passed the read pointer by more than the ring size
    BAD_DOORBELL = 7      # the write pointer moved backwards
    BAD_OPCODE = 8        # an unknown command opcode (INFO: the opcode)
    MISALIGNED = 9        # an address or length breaks the command's alignment (INFO: the value)
    SYSMEM_RANGE = 10     # a bus address outside system memory (INFO: the address)
    MMU_FAULT = 11        # a device virtual address outside the page table or unmapped (INFO: the DVA)
    MMU_WRITE_FAULT = 12  # a write to a page mapped read-only (INFO: the DVA)
    BAD_DESCRIPTOR = 13   # a zero or oversized length, or too many descriptors (INFO: the value)
    IB_DEPTH = 14         # an indirect buffer nested deeper than the device allows
    PAGE_TABLE = 15       # PT_BASE/PT_ENTRIES or BAR1_PT_BASE outside VRAM, reserved or misaligned (INFO: the value)
    INTERNAL = 16         # a bug in the device model itself (its traceback goes to stderr)
    BAR1_FAULT = 17       # a CPU access to a BAR1 aperture page with no valid entry (INFO: the aperture offset)
    VRAM_WINDOW = 18      # a VRAM_DATA write outside VRAM or into its reserved start (INFO: the VRAM offset)


ERROR_TEXT = {
    ErrorCode.NONE: "no error",
    ErrorCode.RO_WRITE: "write to a read-only register",
    ErrorCode.BAD_REGISTER: "access outside the register map or not 8-byte aligned",
    ErrorCode.RING_CONFIG: "ring base, size or read-pointer address invalid (base 64-byte aligned in system memory, "
                           "size a power of two, RPTR_ADDR 8-byte aligned with 16 bytes in system memory)",
    ErrorCode.RING_OFF: "doorbell rung while the ring is disabled",
    ErrorCode.EMPTY_DOORBELL: "doorbell rung with no new command in the ring",
    ErrorCode.RING_OVERFLOW: "write pointer more than one ring ahead of the read pointer (ring overflow)",
    ErrorCode.BAD_DOORBELL: "write pointer moved backwards",
    ErrorCode.BAD_OPCODE: "unknown command opcode",
    ErrorCode.MISALIGNED: "misaligned address or length",
    ErrorCode.SYSMEM_RANGE: "bus address outside system memory",
    ErrorCode.MMU_FAULT: "device virtual address not mapped (MMU fault)",
    ErrorCode.MMU_WRITE_FAULT: "write to a read-only page (MMU permission fault)",
    ErrorCode.BAD_DESCRIPTOR: "bad descriptor (zero or oversized length, or too many descriptors)",
    ErrorCode.IB_DEPTH: "indirect buffers nested too deeply",
    ErrorCode.PAGE_TABLE: "page table outside VRAM, in its reserved start, or not page-aligned",
    ErrorCode.INTERNAL: "internal error of the device model (a bug: please report it)",
    ErrorCode.BAR1_FAULT: "CPU access to an unmapped BAR1 page (reads return all ones, writes are dropped)",
    ErrorCode.VRAM_WINDOW: "VRAM_DATA write outside VRAM or into the device's reserved VRAM",
}

# Page-table entries: 64 bits each, in VRAM. The device MMU's table sits at PT_BASE (entry i
# maps device virtual page i); BAR1's table sits at BAR1_PT_BASE (entry i maps aperture page i).
PTE_VALID = 1 << 0      # the page is mapped
PTE_WRITABLE = 1 << 1   # the device may write it (else a write is MMU_WRITE_FAULT; BAR1 ignores it)
PTE_ADDR_MASK = ~(PAGE_SIZE - 1) & (1 << 64) - 1  # bits 12-63: VRAM offset of the page
BAR1_PT_ENABLE = 1 << 0  # BAR1_PT_BASE bit 0: translate the aperture through the table (else all unmapped)
BAR1_UNMAPPED_BYTE = 0xFF  # what a CPU load from an unmapped aperture page returns (PCIe: all ones)
WRITE_BACK_BYTES = 16      # the area at RPTR_ADDR: read pointer, then error code (little-endian u64 each)

# Bus messages that are not register writes: the bus tells the device about a CPU access its
# BAR1 translation refused (value: the aperture offset), as a PCIe completer logs an
# Unsupported Request. Far outside BAR0, so no register write can look like one.
BUS_BAR1_FAULT = 0xFFFF_FFFF_FFFF_0001

def _R(name: str, offset: int, access: Access, doc: str, reset: int = 0) -> Register:
    """One row of the register table below, its columns in this order."""
    return Register(name=name, offset=offset, access=access, doc=doc, reset=reset)


REGISTERS: tuple[Register, ...] = (
    _R("ID", 0x000, RO, "constant 0x544F594750550001 ('TOYGPU', version 1): read it first", DEVICE_ID),
    _R("VRAM_SIZE", 0x008, RO, "bytes of device memory (VRAM)"),
    _R("SYSMEM_SIZE", 0x010, RO, "bytes of system memory the device may DMA to and from"),
    _R("STATUS", 0x018, RO, "bits READY, BUSY, ERROR, RING_ON"),
    _R("ERROR_CODE", 0x020, RO, "the first error since the last reset or CLEAR_ERROR (ErrorCode)"),
    _R("ERROR_INFO", 0x028, RO, "address, offset or value involved in that error"),
    _R("CONTROL", 0x030, RW, "bits RESET (self-clearing), RING_ENABLE, CLEAR_ERROR (self-clearing)"),
    _R("INT_STATUS", 0x038, RO, "pending interrupt causes: FENCE, USER, ERROR"),
    _R("INT_MASK", 0x040, RW, "causes that notify the CPU (the 'interrupt line')"),
    _R("INT_ACK", 0x048, WO, "write 1 bits to clear them in INT_STATUS"),
    _R("RING_BASE", 0x050, RW, "bus address of the command ring in system memory (64-byte aligned; latched by RING_ENABLE)"),
    _R("RING_SIZE", 0x058, RW, "ring length in 64-byte entries (a power of two, 2..4096; latched by RING_ENABLE)"),
    _R("RING_HEAD", 0x060, RO, "read pointer: commands the device has consumed (free-running)"),
    _R("RING_TAIL", 0x068, RO, "write pointer the last accepted doorbell announced (free-running)"),
    _R("DOORBELL", 0x070, WO, "write the new write pointer here to announce commands"),
    _R("LAST_FENCE", 0x078, RO, "value of the last FENCE command executed"),
    _R("PT_BASE", 0x080, RW, "VRAM offset of the device page table (4096-byte aligned)"),
    _R("PT_ENTRIES", 0x088, RW, "number of 8-byte page-table entries (device virtual space = entries x 4 KiB)"),
    _R("MODEL_TIME_NS", 0x090, RO, "the device's modelled clock in ns (a model, not a measurement)"),
    _R("CNT_DOORBELLS", 0x098, RO, "doorbell writes received"),
    _R("CNT_COMMANDS", 0x0A0, RO, "commands executed (indirect-buffer contents included)"),
    _R("CNT_BYTES_H2D", 0x0A8, RO, "bytes DMA'd from system memory to VRAM"),
    _R("CNT_BYTES_D2H", 0x0B0, RO, "bytes DMA'd from VRAM to system memory"),
    _R("CNT_DESCRIPTORS", 0x0B8, RO, "DMA descriptors processed"),
    _R("BUS_WRITES_SEEN", 0x0C0, RO, "register writes the device has received (a CPU read waits for this to catch up)"),
    _R("SCRATCH", 0x0C8, RW, "free for the driver: write a value, read it back"),
    _R("BAR1_SIZE", 0x0D0, RO, "bytes of the BAR1 aperture the CPU sees (may be less than VRAM_SIZE)"),
    _R("BAR1_PT_BASE", 0x0D8, RW, "VRAM offset of BAR1's page table (4096-byte aligned; entry i maps aperture page i) "
       "| 1 to turn translation on; while off, every aperture page is unmapped. Kept across CONTROL.RESET"),
    _R("VRAM_WINDOW", 0x0E0, RW, "VRAM offset (8-byte aligned) the next VRAM_DATA write lands at; advances by 8 per write"),
    _R("VRAM_DATA", 0x0E8, WO, "write 8 bytes into VRAM at VRAM_WINDOW: the BAR0 window into device memory "
       "(how a driver writes BAR1's own page table)"),
    _R("RPTR_ADDR", 0x0F0, RW, "bus address (8-byte aligned) of a 16-byte write-back area in system memory: the device "
       "writes its read pointer (RING_HEAD) there after every entry it fetches, and ERROR_CODE at +8 whenever it "
       "changes, so the driver's hot path needs no MMIO reads; 0 = no write-back. Latched by RING_ENABLE"),
    _R("VRAM_RESERVED", 0x0F8, RO, "bytes at the start of VRAM the device keeps for itself: no page table may sit there "
       "and VRAM_DATA may not write there"),
    _R("FW_ARG0", 0x100, RW, "first argument of a firmware call"),
    _R("FW_ARG1", 0x108, RW, "second argument of a firmware call"),
    _R("FW_ARG2", 0x110, RW, "third argument of a firmware call"),
    _R("FW_CALL", 0x118, WO, "write a FwCall number: the device's firmware runs it (none on Lab 1's devices)"),
    _R("FW_RESULT", 0x120, RO, "what the last firmware call returned"),
    _R("FW_STATUS", 0x128, RO, "how the last firmware call ended (FwStatus)"),
)

BY_NAME: dict[str, Register] = {r.name: r for r in REGISTERS}
BY_OFFSET: dict[int, Register] = {r.offset: r for r in REGISTERS}


def register(name: str) -> Register:
    """The register called `name` (case-insensitive); ValueError lists the valid names."""
    if not isinstance(name, str):
        raise InputTypeError(f"register name must be a str, got {type(name).__name__}")
    try:
        return BY_NAME[name.upper()]
    except KeyError:
        raise InputError(f"no register {name!r}; the map has {', '.join(BY_NAME)}") from None


def offset(name: str) -> int:
    """Byte offset of register `name` in BAR0."""
    return register(name).offset


def check_map() -> None:
    """Raise AssertionError if the map is inconsistent (overlap, misalignment, outside BAR0)."""
    seen: dict[int, str] = {}
    for r in REGISTERS:
        assert r.offset % REG_BYTES == 0, f"{r.name} at {r.offset:#x} is not 8-byte aligned"
        assert 0 <= r.offset < BAR0_SIZE, f"{r.name} at {r.offset:#x} is outside BAR0"
        assert r.offset not in seen, f"{r.name} overlaps {seen.get(r.offset)}"
        assert r.access in (RO, RW, WO), f"{r.name} has access {r.access!r}"
        seen[r.offset] = r.name
    assert len(BY_NAME) == len(REGISTERS), "duplicate register names"


def rows() -> list[tuple[str, str, str, str]]:
    """(offset, name, access, meaning) for every register, in address order."""
    return [(f"0x{r.offset:03X}", r.name, str(r.access), r.doc)
            for r in sorted(REGISTERS, key=lambda r: r.offset)]


def markdown_table() -> str:
    """The register map as a Markdown table, generated from REGISTERS."""
    lines = ["| offset | register | access | meaning |", "|---|---|---|---|"]
    lines += [f"| `{o}` | `{n}` | {a} | {d} |" for o, n, a, d in rows()]
    return "\n".join(lines)


check_map()
