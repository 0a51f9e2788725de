"""The toy GPU's command format: ring entries, DMA descriptors and their encoders.

A command is one 64-byte ring entry: eight little-endian 64-bit words. Word 0 holds the
opcode (bits 0-7) and flags (bits 8-15); words 1-7 are arguments. The device reads entries
from the command ring (or from an indirect buffer) in system memory, the way a GPU's front
end fetches a ring with DMA. `COMMANDS` is the one description from which both the device's
decoder limits and the documentation table come.

Addresses come in two kinds, as on real GPUs:
- bus addresses: byte offsets into system memory (what a driver gets from dma_map_*);
- device virtual addresses (DVA): translated by the device page table into VRAM offsets.

Real formats are richer but the same in spirit: amdgpu's PM4 packets
(linux, drivers/gpu/drm/amd/amdgpu/soc15d.h, PACKET3_INDIRECT_BUFFER) and NVIDIA's GPFIFO
entries pointing at push buffers (open-gpu-kernel-modules, src/common/sdk/nvidia/inc/class/clc86f.h).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from helpers.core.errors import InputError, InputTypeError

ENTRY_BYTES = 64
ENTRY_WORDS = ENTRY_BYTES // 8
DESC_BYTES = 32
DESC_WORDS = DESC_BYTES // 8

DMA_ALIGN = 8          # DMA addresses and lengths: multiples of 8 bytes
ELEM_ALIGN = 4         # FILL and SAXPY work on 4-byte elements
MAX_DMA_BYTES = 16 << 20   # one descriptor moves at most 16 MiB
MAX_DESCRIPTORS = 256      # per DMA command
MAX_IB_ENTRIES = 256       # per indirect buffer
MAX_IB_DEPTH = 2           # ring -> IB -> IB is allowed, one more level is an error

FLAG_D2H = 1 << 8        # DMA: direction VRAM -> system memory (else system memory -> VRAM)
FLAG_INTERRUPT = 1 << 8  # FENCE: raise the FENCE interrupt after writing the value


class Op(IntEnum):
    """Command opcodes (word 0, bits 0-7)."""

    NOP = 0
    DMA = 1
    FILL = 2
    SAXPY = 3
    FENCE = 4
    INTERRUPT = 5
    INDIRECT = 6


@dataclass(frozen=True)
class CommandSpec:
    """One command's layout, for the documentation table."""

    op: Op
    words: str
    rules: str


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(Op.NOP, "-", "does nothing (padding)"),
    CommandSpec(Op.DMA, "w1 descriptor list bus address, w2 descriptor count; flag D2H",
                f"list 32-byte aligned; 1..{MAX_DESCRIPTORS} descriptors of (bus address, DVA, length); "
                f"addresses and length multiples of {DMA_ALIGN}, length 1..{MAX_DMA_BYTES >> 20} MiB"),
    CommandSpec(Op.FILL, "w1 DVA, w2 length in bytes, w3 32-bit pattern",
                f"DVA and length multiples of {ELEM_ALIGN}"),
    CommandSpec(Op.SAXPY, "w1 DVA of x, w2 DVA of y, w3 n, w4 float32 bits of a",
                "y[i] = a*x[i] + y[i] for n float32 elements, in VRAM; DVAs multiples of 4"),
    CommandSpec(Op.FENCE, "w1 bus address, w2 value; flag INTERRUPT",
                "writes the 64-bit value to system memory (8-byte aligned) and to LAST_FENCE"),
    CommandSpec(Op.INTERRUPT, "-", "sets INT_STATUS.USER"),
    CommandSpec(Op.INDIRECT, "w1 bus address, w2 entry count",
                f"executes 1..{MAX_IB_ENTRIES} 64-byte entries found there (64-byte aligned); "
                f"nesting deeper than {MAX_IB_DEPTH} is an error"),
)


def _entry(op: Op, flags: int = 0, *args: int) -> np.ndarray:
    words = np.zeros(ENTRY_WORDS, dtype=np.uint64)
    words[0] = int(op) | flags
    for i, a in enumerate(args, start=1):
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise InputTypeError(f"{op.name} argument {i} must be an int, got {type(a).__name__}")
        if not 0 <= int(a) < 1 << 64:
            raise InputError(f"{op.name} argument {i} = {a} does not fit in 64 unsigned bits")
        words[i] = int(a)
    return words


def nop() -> np.ndarray:
    """A NOP entry (padding; also a cheap way to count commands)."""
    return _entry(Op.NOP)


def dma(desc_addr: int, count: int, *, to_host: bool = False) -> np.ndarray:
    """A DMA entry walking `count` descriptors at bus address `desc_addr`.

    to_host=False copies system memory -> VRAM (host to device), True copies VRAM -> system
    memory. The device checks alignment and ranges, not this encoder: bad programming must be
    reachable so the chapters can show the device's error.
    """
    return _entry(Op.DMA, FLAG_D2H if to_host else 0, desc_addr, count)


def fill(dva: int, nbytes: int, pattern: int) -> np.ndarray:
    """A FILL entry: write the 32-bit `pattern` over `nbytes` of VRAM at device address `dva`."""
    return _entry(Op.FILL, 0, dva, nbytes, pattern & 0xFFFF_FFFF)


def saxpy(x_dva: int, y_dva: int, n: int, a: float) -> np.ndarray:
    """A SAXPY entry: y = a*x + y on n float32 elements in VRAM (the toy's compute op)."""
    if not isinstance(a, (int, float, np.floating)):
        raise InputTypeError(f"saxpy scale a must be a number, got {type(a).__name__}")
    a_bits = struct.unpack("<I", struct.pack("<f", float(a)))[0]
    return _entry(Op.SAXPY, 0, x_dva, y_dva, n, a_bits)


def fence(addr: int, value: int, *, interrupt: bool = False) -> np.ndarray:
    """A FENCE entry: write `value` at system-memory bus address `addr` when reached."""
    return _entry(Op.FENCE, FLAG_INTERRUPT if interrupt else 0, addr, value)


def interrupt() -> np.ndarray:
    """An INTERRUPT entry: set INT_STATUS.USER and notify the CPU if unmasked."""
    return _entry(Op.INTERRUPT)


def indirect(addr: int, count: int) -> np.ndarray:
    """An INDIRECT entry: execute `count` entries from a buffer at bus address `addr`."""
    return _entry(Op.INDIRECT, 0, addr, count)


def descriptors(triples: list[tuple[int, int, int]]) -> np.ndarray:
    """Scatter-gather descriptors from (bus address, DVA, length) triples, as uint64 words."""
    out = np.zeros((len(triples), DESC_WORDS), dtype=np.uint64)
    for i, t in enumerate(triples):
        if len(t) != 3:
            raise InputError(f"descriptor {i} must be (bus address, DVA, length), got {t!r}")
        for j, v in enumerate(t):
            if not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 1 << 64:
                raise InputError(f"descriptor {i} field {j} = {v!r} is not a 64-bit unsigned int")
            out[i, j] = int(v)
    return out.reshape(-1)


def describe(words) -> str:
    """One line of text for a 64-byte entry, for ring dumps in the chapters."""
    w = [int(x) for x in np.asarray(words, dtype=np.uint64)[:ENTRY_WORDS]]
    code = w[0] & 0xFF
    try:
        op = Op(code)
    except ValueError:
        return f"<bad opcode {code}>"
    if op is Op.DMA:
        d = "VRAM->sys" if w[0] & FLAG_D2H else "sys->VRAM"
        return f"DMA {d}: {w[2]} descriptor(s) at bus {w[1]:#x}"
    if op is Op.FILL:
        return f"FILL {w[2]} B at DVA {w[1]:#x} with {w[3]:#010x}"
    if op is Op.SAXPY:
        a = struct.unpack("<f", struct.pack("<I", w[4] & 0xFFFF_FFFF))[0]
        return f"SAXPY n={w[3]} a={a:g} x@{w[1]:#x} y@{w[2]:#x}"
    if op is Op.FENCE:
        return f"FENCE value {w[2]} -> bus {w[1]:#x}{' + interrupt' if w[0] & FLAG_INTERRUPT else ''}"
    if op is Op.INDIRECT:
        return f"INDIRECT {w[2]} entries at bus {w[1]:#x}"
    return op.name


def rows() -> list[tuple[str, str, str, str]]:
    """(opcode, name, words, rules) for every command, for a table."""
    return [(str(int(c.op)), c.op.name, c.words, c.rules) for c in COMMANDS]


def markdown_table() -> str:
    """The command set as a Markdown table, generated from COMMANDS."""
    lines = ["| opcode | command | arguments | rules |", "|---|---|---|---|"]
    lines += [f"| {o} | `{n}` | {w} | {r} |" for o, n, w, r in rows()]
    return "\n".join(lines)
