"""The toy GPU: a simulated device in its own process, and the reference driver for it.

Modules, one per concept:
- regs      the BAR0 register map (the single source of the docs table) and error codes
- commands  the 64-byte command format, scatter-gather descriptors, encoders
- link      the link model: modelled cost of MMIO reads, posted and write-combined writes, DMA
- bar1      BAR1's translation through the device's own page table
- device    the device process (rings, DMA engine, page tables, fences, interrupts, firmware)
- driver    ToyGPU: the bus and the small driver the chapters use (Lab 1 writes its own:
            helpers.labs.lab1 has its devices and checks)
- bus       what the driver holds of the bus: system-memory buffers, the BAR1 aperture, counters
- errors    the exceptions a device error or the driver raises

The device runs in its own process, reached through helpers.models.device_process (portable
shared memory and pipes).

Everything the toy reports about time is modelled by `link`, never measured.
"""

from helpers.models.toygpu import commands, link, regs
from helpers.models.toygpu.bus import Buffer, Counters
from helpers.models.toygpu.driver import ToyGPU
from helpers.models.toygpu.errors import (
    CommandError,
    DeviceError,
    DeviceLostError,
    MemoryFaultError,
    RegisterError,
    RingError,
    RingFullError,
    ToyGPUError,
)

__all__ = [
    "Buffer", "CommandError", "Counters", "DeviceError", "DeviceLostError", "MemoryFaultError",
    "RegisterError", "RingError", "RingFullError", "ToyGPU", "ToyGPUError", "commands", "link", "regs",
]
