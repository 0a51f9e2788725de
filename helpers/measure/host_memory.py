"""Host buffers of the three kinds a copy can start from: pageable, pinned and registered.

- pageable: ordinary process memory (a NumPy array). The GPU cannot DMA from it directly,
  because its pages may move or be swapped; the driver copies it through pinned staging
  buffers of its own.
- pinned: allocated by the driver with cudaHostAlloc, page-locked and mapped for the GPU,
  so the copy engine DMAs straight from it.
- registered: memory that already exists (here an anonymous mmap, as in seed 002's
  question) page-locked in place with cudaHostRegister.

Every buffer is a context manager and is freed deterministically by `close()`: pinned
memory is a scarce, locked resource and must never leak from one cell to the next.
"""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np

from helpers.core import gpu, validate
from helpers.core.errors import InputError, SystemInfoError
from helpers.core.resources import Closing
from helpers.measure.sysinfo import fmt_bytes

HOST_KINDS = ("pageable", "pinned", "registered")
SAFE_HOST_SHARE = 0.5  # of MemAvailable: leave the learner's desktop room to breathe
SAFE_DEVICE_SHARE = 0.9  # of free device memory


def available_host_bytes(meminfo: str = "/proc/meminfo") -> int:
    """MemAvailable from /proc/meminfo, in bytes (the kernel's estimate of usable memory)."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError) as exc:
        raise SystemInfoError(f"{meminfo}: cannot read MemAvailable ({type(exc).__name__}: {exc})") from None
    raise SystemInfoError(f"{meminfo} has no MemAvailable line")


def check_nbytes(nbytes, what: str = "buffer", *, host: bool = True, device: bool = False) -> int:
    """Validate a size in bytes and return it as an int, or raise naming what and how much.

    Rejects non-integers and bools (InputTypeError), non-positive sizes, sizes over a safe share of the
    host's available memory, and (with device=True) sizes over the device's free memory.
    """
    n = validate.byte_size(nbytes, f"{what}: size")
    if host:
        avail = available_host_bytes()
        if n > SAFE_HOST_SHARE * avail:
            raise InputError(f"{what}: {fmt_bytes(n)} is more than {SAFE_HOST_SHARE:.0%} of this "
                             f"machine's available memory ({fmt_bytes(avail)}); choose a smaller size")
    if device:
        free = gpu.free_device_bytes()
        if n > SAFE_DEVICE_SHARE * free:
            raise InputError(f"{what}: {fmt_bytes(n)} is more than {SAFE_DEVICE_SHARE:.0%} of the "
                             f"GPU's free memory ({fmt_bytes(free)}); choose a smaller size")
    return n


class HostBuffer(Closing):
    """A host buffer of one kind, viewed as a 1-D uint8 NumPy array in `.array`."""

    def __init__(self, nbytes: int, kind: str = "pinned", *, fill: int = 0xA5) -> None:
        if kind not in HOST_KINDS:
            raise InputError(f"host buffer kind must be one of {HOST_KINDS}, got {kind!r}")
        self.nbytes = check_nbytes(nbytes, f"{kind} host buffer")
        self.kind = kind
        self._pinned = self._mmap = None
        self._registered_ptr = None
        if kind == "pageable":
            self.array = np.empty(self.nbytes, dtype=np.uint8)
        elif kind == "pinned":
            cp = gpu.cupy()
            self._pinned = cp.cuda.pinned_memory.PinnedMemory(self.nbytes)
            self.array = host_array(self._pinned.ptr, self.nbytes)
        else:
            cp = gpu.cupy()
            self._mmap = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self.array = np.frombuffer(self._mmap, dtype=np.uint8)
            ptr = self.array.ctypes.data
            cp.cuda.runtime.hostRegister(ptr, self.nbytes, 0)
            self._registered_ptr = ptr
        self.array.fill(fill)  # touch every page: first-touch faults stay out of timings

    @property
    def ptr(self) -> int:
        """The buffer's virtual address in this process."""
        return int(self.array.ctypes.data)

    def close(self) -> None:
        """Unpin and free now (idempotent)."""
        if self._registered_ptr is not None:
            gpu.cupy().cuda.runtime.hostUnregister(self._registered_ptr)
            self._registered_ptr = None
        self.array = None
        if self._pinned is not None:
            self._pinned = None  # PinnedMemory's destructor calls cudaFreeHost
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                pass  # a caller still holds a view; the mapping goes when that view does
            self._mmap = None

    def __repr__(self) -> str:
        state = "closed" if self.array is None else f"at {self.ptr:#x}"
        return f"HostBuffer({fmt_bytes(self.nbytes)}, {self.kind}, {state})"


def host_array(ptr: int, nbytes: int) -> np.ndarray:
    """The `nbytes` of host memory at `ptr` as a 1-D uint8 NumPy array (no copy; the caller keeps
    the memory alive for as long as the array is used)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))


def pinned_bytes_of_process(pid: int | str = "self") -> int:
    """VmLck + VmPin of a process from /proc (what the kernel counts as locked/pinned).

    Used by tests and notebooks to check that nothing stayed pinned. The NVIDIA driver's
    own pinning does not always appear here, so this is a lower bound.
    """
    total = 0
    with open(os.path.join("/proc", str(pid), "status")) as f:
        for line in f:
            if line.startswith(("VmLck:", "VmPin:")):
                total += int(line.split()[1]) * 1024
    return total
