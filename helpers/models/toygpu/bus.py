"""What the toy GPU's driver holds of the bus: device-visible system-memory buffers and their
allocator (dma_alloc_coherent's part), the CPU's view of BAR1 as a byte array, DMA descriptors
for a copy, and the counters of what the driver did on the bus (modelled CPU time included).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from helpers.core.errors import InputError
from helpers.models.toygpu import commands as C

if TYPE_CHECKING:
    from helpers.models.toygpu.driver import ToyGPU


@dataclass(kw_only=True)
class Counters:
    """What the driver did on the bus, and the CPU time the link model charges for it."""

    mmio_reads: int = 0          # uncached loads (BAR0 registers and BAR1 reads)
    mmio_writes: int = 0         # posted uncached stores (BAR0 registers and UC BAR1 writes)
    wc_bursts: int = 0           # write-combined bursts to BAR1
    bar_bytes_read: int = 0
    bar_bytes_written: int = 0
    doorbells: int = 0
    cpu_model_ns: float = 0.0    # modelled, never measured

    def copy(self) -> Counters:
        """A snapshot, to subtract later."""
        return Counters(**asdict(self))

    def __sub__(self, other: Counters) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True)
class Buffer:
    """A block of the device-visible system memory: its bus address and a CPU view of it."""

    addr: int
    nbytes: int
    view: np.ndarray  # uint8, shares memory with the device


class Aperture:
    """The CPU's view of BAR1 as a byte array: slicing reads and stores go through the device's
    BAR1 translation (ToyGPU.bar1_read / bar1_write), so unmapped pages read as all ones."""

    def __init__(self, gpu: ToyGPU):
        self._gpu = gpu
        self.size = gpu.bar1_size

    def _range(self, key) -> tuple[int, int]:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise InputError("index BAR1 with a slice such as ap[4096:8192]")
        start, stop, _ = key.indices(self.size)
        return start, max(stop - start, 0)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key) -> np.ndarray:
        start, n = self._range(key)
        return self._gpu.bar1_read(start, n, width=1)

    def __setitem__(self, key, data) -> None:
        start, n = self._range(key)
        buf = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if buf.size != n:
            raise InputError(f"{buf.size} bytes do not fit a {n}-byte slice of BAR1")
        self._gpu.bar1_write(start, buf, width=1)


class Arena:
    """First-fit allocator over [0, size) in `align`-byte units, for system memory."""

    def __init__(self, size: int):
        self.size, self.used = size, {}  # addr -> nbytes

    def alloc(self, nbytes: int, align: int) -> int:
        pos = 0
        for a in sorted(self.used):
            pos = -(-pos // align) * align
            if pos + nbytes <= a:
                break
            pos = a + self.used[a]
        pos = -(-pos // align) * align
        if pos + nbytes > self.size:
            raise MemoryError(f"toy system memory exhausted: {nbytes} bytes requested, "
                              f"{self.size - sum(self.used.values())} free of {self.size}")
        self.used[pos] = nbytes
        return pos

    def free(self, addr: int) -> None:
        if addr not in self.used:
            raise InputError(f"bus address {addr:#x} is not an allocated system-memory block")
        del self.used[addr]


def dma_chunks(addr: int, dva: int, n: int) -> list[tuple[int, int, int]]:
    """(bus address, device address, bytes) descriptors for one copy of n bytes, each at most
    commands.MAX_DMA_BYTES (what one DMA descriptor may carry)."""
    step = C.MAX_DMA_BYTES
    return [(addr + o, dva + o, min(step, n - o)) for o in range(0, n, step)]
