"""Lab 6 (a VFIO user-space driver for QEMU's edu): the reference driver and the hidden inputs.

The reference functions run INSIDE the kernel lab's VM (the course ships their source to
the guest, where ``edu``, ``os``, ``mmap``, ``time`` ... are the guest's modules; on the host
they are never called). ``cases(part, seed)`` draws each part's hidden inputs; the checks
(helpers/measure/kernel_vm/guest/lab6_harness.py) judge what the device and the kernel did with them.
"""

from __future__ import annotations

import inspect
import json
import random
import sys

from helpers.labs import lab6 as published
from instructor.labs.common import draw_seed

edu = os = mmap = time = re = None  # the guest's modules, bound when the functions run in the VM


# ----------------------------------------------------------------------------- the answers
def open_device(bdf):
    container = os.open("/dev/vfio/vfio", os.O_RDWR)
    if edu.ioctl_int(container, edu.VFIO_GET_API_VERSION) != edu.VFIO_API_VERSION:
        raise OSError("unknown VFIO API version")
    if not edu.ioctl_int(container, edu.VFIO_CHECK_EXTENSION, edu.VFIO_TYPE1v2_IOMMU):
        raise OSError("no type1v2 IOMMU")
    group = os.open(f"/dev/vfio/{edu.iommu_group(bdf)}", os.O_RDWR)
    status = edu.ioctl_buf(group, edu.VFIO_GROUP_GET_STATUS, edu.GROUP_STATUS.pack(edu.GROUP_STATUS.size, 0))
    if not edu.GROUP_STATUS.unpack(status)[1] & edu.VFIO_GROUP_FLAGS_VIABLE:
        raise OSError("the IOMMU group is not viable (a device of it is bound to another driver)")
    edu.ioctl_ptr(group, edu.VFIO_GROUP_SET_CONTAINER, container.to_bytes(4, "little"))
    edu.ioctl_int(container, edu.VFIO_SET_IOMMU, edu.VFIO_TYPE1v2_IOMMU)
    device = edu.ioctl_ptr(group, edu.VFIO_GROUP_GET_DEVICE_FD, bdf.encode() + b"\0")

    def region(index):
        info = edu.ioctl_buf(device, edu.VFIO_DEVICE_GET_REGION_INFO,
                             edu.REGION_INFO.pack(edu.REGION_INFO.size, 0, index, 0, 0, 0))
        return edu.REGION_INFO.unpack(info)

    bar0, config = region(edu.VFIO_PCI_BAR0_REGION_INDEX), region(edu.VFIO_PCI_CONFIG_REGION_INDEX)
    bar = edu.Bar(mmap.mmap(device, bar0[4], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=bar0[5]))
    off = config[5] + edu.PCI_COMMAND
    cmd = int.from_bytes(os.pread(device, 2, off), "little")
    os.pwrite(device, (cmd | edu.PCI_COMMAND_MASTER | edu.PCI_COMMAND_MEMORY).to_bytes(2, "little"), off)
    return edu.VfioDevice(container, group, device, bar, config_offset=config[5])


def identify(dev):
    return dev.bar.read32(edu.REG_ID)


def check_alive(dev, value):
    dev.bar.write32(edu.REG_LIVENESS, value)
    return dev.bar.read32(edu.REG_LIVENESS)


def factorial(dev, n):
    dev.bar.write32(edu.REG_FACTORIAL, n)
    deadline = time.monotonic() + 5
    while dev.bar.read32(edu.REG_STATUS) & edu.STATUS_COMPUTING:
        if time.monotonic() > deadline:
            raise TimeoutError("edu's factorial unit stayed busy for 5 s")
    return dev.bar.read32(edu.REG_FACTORIAL)


def map_buffer(dev, iova, size):
    buf = mmap.mmap(-1, size, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, mmap.PROT_READ | mmap.PROT_WRITE)
    vaddr = edu.ctypes.addressof(edu.ctypes.c_char.from_buffer(buf))
    flags = edu.VFIO_DMA_MAP_FLAG_READ | edu.VFIO_DMA_MAP_FLAG_WRITE
    edu.ioctl_buf(dev.container, edu.VFIO_IOMMU_MAP_DMA, edu.DMA_MAP.pack(edu.DMA_MAP.size, flags, vaddr, iova, size))
    dev.mappings[iova] = (vaddr, size)
    dev.buffers[iova] = buf
    return vaddr


def dma_to_device(dev, iova, count):
    for reg, value in ((edu.REG_DMA_SRC, iova), (edu.REG_DMA_DST, edu.DMA_BUFFER), (edu.REG_DMA_CNT, count),
                       (edu.REG_DMA_CMD, edu.DMA_RUN)):
        dev.bar.write64(reg, value)
    deadline = time.monotonic() + 5
    while dev.bar.read64(edu.REG_DMA_CMD) & edu.DMA_RUN:
        if time.monotonic() > deadline:
            raise TimeoutError("edu's DMA did not complete in 5 s")
        time.sleep(0.01)


def dma_from_device(dev, iova, count):
    for reg, value in ((edu.REG_DMA_SRC, edu.DMA_BUFFER), (edu.REG_DMA_DST, iova), (edu.REG_DMA_CNT, count),
                       (edu.REG_DMA_CMD, edu.DMA_RUN | edu.DMA_TO_RAM)):
        dev.bar.write64(reg, value)
    deadline = time.monotonic() + 5
    while dev.bar.read64(edu.REG_DMA_CMD) & edu.DMA_RUN:
        if time.monotonic() > deadline:
            raise TimeoutError("edu's DMA did not complete in 5 s")
        time.sleep(0.01)


def safe_dma(dev, iova, count, to_ram):
    if not 0 < count < edu.DMA_BUFFER_SIZE:
        raise ValueError(f"count {count}: edu copies 1 to {edu.DMA_BUFFER_SIZE - 1} bytes")
    if not any(start <= iova and iova + count <= start + size for start, (_, size) in dev.mappings.items()):
        raise ValueError(f"IOVA range {iova:#x}+{count} is not inside a mapping of this driver")
    if to_ram:
        dma_from_device(dev, iova, count)
    else:
        dma_to_device(dev, iova, count)


def fault_addresses(lines):
    out = []
    for line in lines:
        m = re.search(r"DMAR: \[DMA (?:Read|Write)[^\]]*\] Request device \[[^\]]*\] (?:PASID \S+ )?fault addr "
                      r"(0x)?([0-9a-fA-F]+)", line)
        if m:
            out.append(int(m.group(2), 16))
    return out


# ----------------------------------------------------------------------------- shipping it
def reference_code(exclude: tuple[str, ...] = ()) -> dict:
    """The reference driver as {name: {"source": text}} for the guest (every driver function,
    minus `exclude`; none calls a helper a learner's function of the same name could replace)."""
    mod = sys.modules[__name__]
    return {n: {"source": inspect.getsource(getattr(mod, n))} for n in published.DRIVER_FUNCTIONS if n not in exclude}


# ----------------------------------------------------------------------------- hidden inputs
def cases(part: str, seed: int | None = None) -> dict:
    """The hidden inputs of `part` (one dict), drawn from `seed` (fresh and printed when None)."""
    if part not in published.PARTS:
        raise KeyError(f"Lab 6 has no part {part!r}; parts: {published.PARTS}")
    return published.inputs(part, random.Random(f"lab6:{part}:{draw_seed(f'lab6 {part}', seed)}"))


# ----------------------------------------------------------------------------- grading
def grade(learner: dict, seed: int | None = None, *, timeout_s: float = published.TIMEOUT_S) -> dict:
    """Every part of Lab 6 on `learner` (helpers.labs.lab6.code_of's data) in one boot, each
    part's hidden inputs drawn from `seed`, each part with the reference's functions for the
    other parts (the harness swaps them in). {"parts": {part: {"ok", "feedback", ...}}, "vm", "seed"}."""
    seed = draw_seed("lab6", seed)
    out = published.run({p: cases(p, seed) for p in published.PARTS}, learner, reference_code(), timeout_s=timeout_s)
    return {**out, "seed": seed}


_GRADED: dict[str, dict] = {}


def graded(ns: dict) -> dict:
    """The notebook's hidden checks: every part graded once per version of the learner's code
    (one boot, fresh seed, printed), the parts' results returned to each check cell."""
    code = published.code_of(ns)
    key = json.dumps(code, sort_keys=True)
    if key not in _GRADED:
        _GRADED[key] = grade(code)["parts"]
    return _GRADED[key]
