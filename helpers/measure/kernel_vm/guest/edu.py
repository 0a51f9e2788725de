"""Guest-side library of the VFIO part of the kernel lab: QEMU's edu device, from user space.

Runs INSIDE the kernel lab's VM (Debian's Python 3.11, standard library only) as /work/edu.py;
helpers.measure.kernel_vm ships it with every run on the ``edu`` machine. It holds what a
driver writer copies from headers and datasheets, not the driver itself:

* the edu register map (QEMU hw/misc/edu.c: identification 0x00, liveness 0x04, factorial
  0x08, status 0x20, DMA source/destination/count/command 0x80/0x88/0x90/0x98, the device's
  4 KiB DMA buffer seen at device address 0x40000);
* the VFIO ioctl numbers and structure layouts (include/uapi/linux/vfio.h: _IO(';', 100 + n));
* sysfs lookups (which PCI function is edu, its IOMMU group) and the kernel log reader;
* ``safe_dma_args``: QEMU 7.2's edu aborts the whole VM on a transfer outside its buffer
  (or of exactly 4096 bytes), so every course helper that starts a DMA checks its arguments
  first and raises instead.

The chapters' experiments and Lab 6's checks import it; the learner's Lab 6 driver may too.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import struct
import time

EDU_VENDOR, EDU_DEVICE = 0x1234, 0x11E8
# edu's BAR0 registers (hw/misc/edu.c, edu_mmio_read / edu_mmio_write)
REG_ID, REG_LIVENESS, REG_FACTORIAL, REG_STATUS = 0x00, 0x04, 0x08, 0x20
REG_DMA_SRC, REG_DMA_DST, REG_DMA_CNT, REG_DMA_CMD = 0x80, 0x88, 0x90, 0x98
STATUS_COMPUTING = 0x01
DMA_RUN, DMA_TO_RAM, DMA_IRQ = 0x1, 0x2, 0x4  # command bits: run, direction (1: device -> RAM), irq
DMA_BUFFER, DMA_BUFFER_SIZE = 0x40000, 4096  # the device's own buffer, in the device's address space
SAFE_DMA_MAX = DMA_BUFFER_SIZE - 1  # QEMU 7.2's range check rejects a full 4096-byte transfer
DMA_WAIT_S = 5.0  # edu completes a DMA on a 100 ms virtual timer; TCG stretches it

# VFIO (include/uapi/linux/vfio.h): _IO(VFIO_TYPE, VFIO_BASE + n), VFIO_TYPE ';', VFIO_BASE 100
_VFIO = ord(";") << 8
VFIO_GET_API_VERSION = _VFIO | 100
VFIO_CHECK_EXTENSION = _VFIO | 101
VFIO_SET_IOMMU = _VFIO | 102
VFIO_GROUP_GET_STATUS = _VFIO | 103
VFIO_GROUP_SET_CONTAINER = _VFIO | 104
VFIO_GROUP_GET_DEVICE_FD = _VFIO | 106
VFIO_DEVICE_GET_INFO = _VFIO | 107
VFIO_DEVICE_GET_REGION_INFO = _VFIO | 108
VFIO_DEVICE_RESET = _VFIO | 111
VFIO_IOMMU_GET_INFO = _VFIO | 112
VFIO_IOMMU_MAP_DMA = _VFIO | 113
VFIO_IOMMU_UNMAP_DMA = _VFIO | 114
VFIO_API_VERSION = 0
VFIO_TYPE1v2_IOMMU = 3
VFIO_GROUP_FLAGS_VIABLE = 1
VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE = 1, 2
VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX = 0, 7
PCI_COMMAND, PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER = 0x04, 0x2, 0x4

# struct layouts (native little-endian x86-64)
GROUP_STATUS = struct.Struct("=II")  # argsz, flags
REGION_INFO = struct.Struct("=IIIIQQ")  # argsz, flags, index, cap_offset, size, offset
DMA_MAP = struct.Struct("=IIQQQ")  # argsz, flags, vaddr, iova, size
DMA_UNMAP = struct.Struct("=IIQQ")  # argsz, flags, iova, size
DEVICE_INFO = struct.Struct("=IIII")  # argsz, flags, num_regions, num_irqs


class DmaArgsError(ValueError):
    """DMA parameters that would make QEMU 7.2's edu abort the VM (refused before the device sees them)."""


def find_edu() -> str:
    """The PCI address (e.g. '0000:00:03.0') of the edu device, from sysfs."""
    base = "/sys/bus/pci/devices"
    for bdf in sorted(os.listdir(base)):
        if read_hex(f"{base}/{bdf}/vendor") == EDU_VENDOR and read_hex(f"{base}/{bdf}/device") == EDU_DEVICE:
            return bdf
    raise FileNotFoundError("no PCI device 1234:11e8 (QEMU edu) in /sys/bus/pci/devices; start QEMU with -device edu")


def read_hex(path: str) -> int:
    with open(path) as f:
        return int(f.read().strip(), 16)


def iommu_group(bdf: str) -> int:
    """The IOMMU group number of a PCI function (the /dev/vfio/<N> file)."""
    return int(os.path.basename(os.readlink(f"/sys/bus/pci/devices/{bdf}/iommu_group")))


def bind_vfio(bdf: str) -> str:
    """Hand the device to vfio-pci (driver_override, then a re-probe); returns its driver's name."""
    dev = f"/sys/bus/pci/devices/{bdf}"
    if os.path.exists(f"{dev}/driver"):
        if os.path.basename(os.readlink(f"{dev}/driver")) == "vfio-pci":
            return "vfio-pci"
        with open(f"{dev}/driver/unbind", "w") as f:
            f.write(bdf)
    with open(f"{dev}/driver_override", "w") as f:
        f.write("vfio-pci")
    with open("/sys/bus/pci/drivers_probe", "w") as f:
        f.write(bdf)
    return os.path.basename(os.readlink(f"{dev}/driver"))


def safe_dma_args(src: int, dst: int, count: int, to_ram: bool) -> None:
    """Refuse what would abort the VM: the device-side address range must lie inside edu's
    buffer (0x40000 to 0x40fff) and, on QEMU 7.2, end before its last byte (count < 4096)."""
    dev = src if to_ram else dst
    if not 0 < count <= SAFE_DMA_MAX:
        raise DmaArgsError(f"count {count}: edu copies 1 to {SAFE_DMA_MAX} bytes at a time "
                           f"(QEMU 7.2 aborts the VM on a full {DMA_BUFFER_SIZE}-byte transfer)")
    if not (DMA_BUFFER <= dev and dev + count <= DMA_BUFFER + SAFE_DMA_MAX):
        raise DmaArgsError(f"device-side range {dev:#x}..{dev + count - 1:#x} is outside edu's buffer "
                           f"{DMA_BUFFER:#x}..{DMA_BUFFER + SAFE_DMA_MAX - 1:#x} (QEMU 7.2 aborts the VM on it)")


def ioctl_int(fd: int, request: int, arg: int = 0) -> int:
    """An ioctl whose argument is a plain integer; returns its result (OSError on failure)."""
    return fcntl.ioctl(fd, request, arg)


def ioctl_ptr(fd: int, request: int, buf: bytes) -> int:
    """An ioctl whose argument points at `buf` and whose answer is its return value (e.g. a new fd)."""
    return fcntl.ioctl(fd, request, bytearray(buf), True)


def ioctl_buf(fd: int, request: int, buf: bytes) -> bytes:
    """An ioctl on a structure: the kernel reads `buf` and writes its answer back into it."""
    arr = bytearray(buf)
    fcntl.ioctl(fd, request, arr, True)
    return bytes(arr)


class Bar:
    """32- and 64-bit accesses to a mapped BAR (one load or store each, never split by Python)."""

    def __init__(self, mapping: mmap.mmap):
        self.map = mapping
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))

    def read32(self, off: int) -> int:
        return ctypes.c_uint32.from_address(self.base + off).value

    def write32(self, off: int, value: int) -> None:
        ctypes.c_uint32.from_address(self.base + off).value = value & 0xFFFFFFFF

    def read64(self, off: int) -> int:
        return ctypes.c_uint64.from_address(self.base + off).value

    def write64(self, off: int, value: int) -> None:
        ctypes.c_uint64.from_address(self.base + off).value = value & 0xFFFFFFFFFFFFFFFF

    def close(self) -> None:
        self.base = 0
        self.map.close()


def wait_dma_done(bar: Bar, timeout_s: float = DMA_WAIT_S) -> float:
    """Poll edu's DMA command register until its run bit clears; seconds waited (TimeoutError past timeout_s)."""
    t0 = time.monotonic()
    while bar.read64(REG_DMA_CMD) & DMA_RUN:
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"edu's DMA did not complete within {timeout_s} s")
        time.sleep(0.01)
    return time.monotonic() - t0


def start_dma(bar: Bar, src: int, dst: int, count: int, to_ram: bool) -> None:
    """Program one edu DMA (after safe_dma_args) and start it; returns at once."""
    safe_dma_args(src, dst, count, to_ram)
    bar.write64(REG_DMA_SRC, src)
    bar.write64(REG_DMA_DST, dst)
    bar.write64(REG_DMA_CNT, count)
    bar.write64(REG_DMA_CMD, DMA_RUN | (DMA_TO_RAM if to_ram else 0))


class Kmsg:
    """The kernel log from now on (/dev/kmsg, non-blocking): what the kernel reported since."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def new_lines(self, wait_s: float = 0.0, want: str = "") -> list[str]:
        """Messages logged since the last call; waits up to wait_s for one containing `want`."""
        out: list[str] = []
        deadline = time.monotonic() + wait_s
        while True:
            try:
                rec = os.read(self.fd, 8192).decode(errors="replace")
                out.append(rec.split(";", 1)[-1].rstrip("\n"))
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # EPIPE: records were overwritten; keep reading
                if exc.errno != errno.EPIPE:
                    raise
                continue
            if (not want or any(want in line for line in out)) or time.monotonic() >= deadline:
                return out
            time.sleep(0.05)

    def close(self) -> None:
        os.close(self.fd)


def vm_locked_kib() -> int:
    """This process's locked memory (VmLck in /proc/self/status), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1])
    return -1


def anonymous_buffer(size: int) -> tuple[mmap.mmap, int]:
    """Page-aligned anonymous memory and its user virtual address (what MAP_DMA pins)."""
    buf = mmap.mmap(-1, size, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, mmap.PROT_READ | mmap.PROT_WRITE)
    return buf, ctypes.addressof(ctypes.c_char.from_buffer(buf))


class VfioDevice:
    """What a VFIO user-space driver holds for edu (Lab 6 fills it in ``open_device``).

    container, group, device: the three file descriptors (/dev/vfio/vfio, /dev/vfio/<group>,
    the device fd from GROUP_GET_DEVICE_FD); bar: BAR0 mapped through the device fd;
    config_offset: where the PCI configuration space sits in the device fd (region 7);
    mappings: {iova: (user address, size)} of every MAP_DMA this driver made; buffers: the
    mmap objects behind them (kept alive while mapped)."""

    def __init__(self, container: int, group: int, device: int, bar: Bar, *, config_offset: int):
        self.container, self.group, self.device = container, group, device
        self.bar, self.config_offset = bar, config_offset
        self.mappings: dict[int, tuple[int, int]] = {}
        self.buffers: dict[int, mmap.mmap] = {}
