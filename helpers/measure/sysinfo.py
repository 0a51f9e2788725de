"""The learner's machine as the kernel sees it: GPUs on the PCI bus, their links and BARs.

Everything is read from sysfs, /proc and /dev (and from CUDA, when usable), so it works
without a GPU and says what is absent instead of failing. Paths are parameters so tests can
point them at a fake tree.

Kernel sources behind the files read here (linux repository):
- drivers/pci/pci-sysfs.c: `resource` (resource_show), `resourceN_wc`, `current_link_speed`
- include/linux/ioport.h: the IORESOURCE_* flag bits in the third column of `resource`
NVIDIA/open-gpu-kernel-modules: kernel-open/nvidia/nv-procfs.c (nv_procfs_read_gpu_info) writes
/proc/driver/nvidia/gpus/<address>/information, whose `GPU Firmware` line is the GSP firmware's
version, or `N/A` when the driver has none to report.
"""

from __future__ import annotations

import os
import platform
import resource as _rlimit
from dataclasses import asdict, dataclass, field
from pathlib import Path

from helpers.core import gpu
from helpers.core.errors import InputError, SystemInfoError

# include/linux/ioport.h
IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_MEM_64 = 0x00100000
IORESOURCE_SIZEALIGN = 0x00040000

PCI_CLASS_DISPLAY = 0x03  # VGA (0x0300), 3D controller (0x0302), ...
NVIDIA_VENDOR = 0x10DE
PCI_ROM_RESOURCE = 6


@dataclass(frozen=True, kw_only=True)
class Bar:
    """One PCI Base Address Register window, decoded from sysfs `resource`."""

    index: int
    start: int
    end: int
    flags: int
    write_combine_file: bool = False  # a resourceN_wc file exists (mmap it write-combined)

    @property
    def size(self) -> int:
        return self.end - self.start + 1 if self.end >= self.start else 0

    @property
    def is_io(self) -> bool:
        return bool(self.flags & IORESOURCE_IO)

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & IORESOURCE_MEM_64)

    @property
    def prefetchable(self) -> bool:
        return bool(self.flags & IORESOURCE_PREFETCH)

    @property
    def kind(self) -> str:
        if self.index == PCI_ROM_RESOURCE:
            return "expansion ROM"
        return "I/O ports" if self.is_io else "memory"


def parse_resource(text: str) -> list[Bar]:
    """Decode a PCI device's sysfs `resource` file into its non-empty windows.

    Each line is `start end flags` in hex; line N is resource N (0-5 BARs, 6 the ROM).
    Raises InputError (a ValueError) naming the line when the text is not in that format.
    """
    bars: list[Bar] = []
    for i, line in enumerate(text.strip().splitlines()):
        parts = line.split()
        if len(parts) != 3:
            raise InputError(f"resource line {i} has {len(parts)} fields, expected 3: {line!r}")
        try:
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError:
            raise InputError(f"resource line {i} is not three hex numbers: {line!r}") from None
        if i <= PCI_ROM_RESOURCE and end >= start and (flags or end > start):
            bars.append(Bar(index=i, start=start, end=end, flags=flags))
    return bars


@dataclass(kw_only=True)
class PCIDevice:
    """A display-class PCI function (a GPU) and what sysfs says about it."""

    address: str
    vendor: int
    device: int
    pci_class: int
    driver: str | None
    numa_node: int | None
    link_current: str | None
    link_max: str | None
    bars: list[Bar] = field(default_factory=list)
    iommu_group: str | None = None
    gsp_firmware: str | None = None  # the driver's `GPU Firmware` line as printed; None: not reported

    @property
    def pci_id(self) -> str:
        return f"{self.vendor:04x}:{self.device:04x}"

    @property
    def is_nvidia(self) -> bool:
        return self.vendor == NVIDIA_VENDOR


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _link(dev: Path, which: str) -> str | None:
    speed, width = _read(dev / f"{which}_link_speed"), _read(dev / f"{which}_link_width")
    if speed is None and width is None:
        return None
    return f"{speed or '?'} x{width or '?'}"


def read_pci_device(dev: Path) -> PCIDevice:
    """Read one PCI function's identity, link, NUMA node and BARs from its sysfs folder."""
    res = _read(dev / "resource")
    bars = []
    if res:
        try:
            parsed = parse_resource(res)
        except InputError as exc:
            raise SystemInfoError(f"{dev / 'resource'}: {exc}") from None
        for b in parsed:
            wc = (dev / f"resource{b.index}_wc").exists()
            bars.append(Bar(index=b.index, start=b.start, end=b.end, flags=b.flags, write_combine_file=wc))
    numa = _read(dev / "numa_node")
    drv = dev / "driver"
    group = dev / "iommu_group"
    return PCIDevice(
        address=dev.name,
        vendor=int(_read(dev / "vendor") or "0", 16),
        device=int(_read(dev / "device") or "0", 16),
        pci_class=int(_read(dev / "class") or "0", 16),
        driver=os.path.basename(os.readlink(drv)) if drv.is_symlink() else None,
        numa_node=int(numa) if numa not in (None, "") and int(numa) >= 0 else None,
        link_current=_link(dev, "current"),
        link_max=_link(dev, "max"),
        bars=bars,
        iommu_group=os.path.basename(os.readlink(group)) if group.is_symlink() else None,
    )


def gsp_firmware(information: str | None) -> str | None:
    """The value of the `GPU Firmware` line of NVIDIA's /proc/driver/nvidia/gpus/<address>/information
    (the GSP firmware version, or the driver's `N/A`), exactly as the driver printed it; None when
    there is no such file or line. Never guessed from the driver's own version, which can differ."""
    for line in (information or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "GPU Firmware":
            return value.strip() or None
    return None


def gsp_firmware_text(value: str | None) -> str:
    """The system report's wording for a GPU's GSP firmware entry."""
    if value is None:
        return "not reported (no NVIDIA information file, or a report recorded before this row existed)"
    if value == "N/A":
        return "N/A: the driver reports no GSP firmware (the resource manager runs in the kernel module)"
    return value


def display_devices(sysfs: Path | str = "/sys") -> list[PCIDevice]:
    """Every display-class PCI function (GPUs, 3D controllers) found in sysfs."""
    root = Path(sysfs) / "bus" / "pci" / "devices"
    found = []
    if root.is_dir():
        for dev in sorted(root.iterdir()):
            cls = _read(dev / "class")
            if cls and int(cls, 16) >> 16 == PCI_CLASS_DISPLAY:
                found.append(read_pci_device(dev))
    return found


@dataclass(kw_only=True)
class SystemReport:
    """What the course needs to know about the learner's machine, and what is missing."""

    kernel: str
    nvidia_module: str | None
    gpus: list[PCIDevice]
    cuda: dict
    iommu: str
    memlock_soft: int | None  # bytes; None means unlimited
    memlock_hard: int | None
    dev_nvidia: list[str]
    dev_dri: list[str]
    absent: list[str]
    vm: bool | None = None  # a hypervisor's guest (None: not recorded, in reports made before this field)

    def as_dict(self) -> dict:
        d = asdict(self)
        for g, gd in zip(self.gpus, d["gpus"], strict=True):
            gd["pci_id"] = g.pci_id
            for b, bd in zip(g.bars, gd["bars"], strict=True):
                bd.update(size=b.size, is_64bit=b.is_64bit, prefetchable=b.prefetchable, kind=b.kind)
        return d


def _limit(v: int) -> int | None:
    return None if v == _rlimit.RLIM_INFINITY else int(v)


def _nodes(dev: Path, pattern: str) -> list[str]:
    return sorted(str(p) for p in dev.glob(pattern)) if dev.is_dir() else []


def collect(sysfs: Path | str = "/sys", dev: Path | str = "/dev", proc: Path | str = "/proc",
            use_cuda: bool = True) -> SystemReport:
    """Gather the report. Each item that cannot be read is listed in `absent`, not raised."""
    sysfs, dev, proc = Path(sysfs), Path(dev), Path(proc)
    absent = []
    gpus = display_devices(sysfs)
    for g in gpus:
        if g.is_nvidia:
            g.gsp_firmware = gsp_firmware(_read(proc / "driver" / "nvidia" / "gpus" / g.address / "information"))
    if not gpus:
        absent.append("no display-class PCI device in sysfs (no GPU, or a container without /sys)")
    module = _read(sysfs / "module" / "nvidia" / "version")
    if module is None:
        first = _read(proc / "driver" / "nvidia" / "version")
        module = first.splitlines()[0] if first else None
    if module is None:
        absent.append("NVIDIA kernel module not loaded")
    iommu_dir = sysfs / "class" / "iommu"
    units = sorted(p.name for p in iommu_dir.iterdir()) if iommu_dir.is_dir() else []
    grouped = [g.address for g in gpus if g.iommu_group]
    vm = in_vm(proc)
    if units or grouped:
        iommu = f"present ({', '.join(units) or 'GPU in an IOMMU group'})"
    else:
        iommu = iommu_absent_text(vm, gpus)
    soft, hard = _rlimit.getrlimit(_rlimit.RLIMIT_MEMLOCK)
    nvidia_nodes = _nodes(dev, "nvidia*")
    dri_nodes = _nodes(dev / "dri", "*")
    if not nvidia_nodes:
        absent.append("no /dev/nvidia* device nodes")
    if not dri_nodes:
        absent.append("no /dev/dri (no DRM device: the GEM/TTM chapter uses its model)")
    cuda = _cuda_info() if use_cuda else {"usable": False, "reason": "not asked"}
    if not cuda.get("usable"):
        absent.append(f"CUDA not usable: {cuda.get('reason')}")
    return SystemReport(kernel=platform.release(), nvidia_module=module, gpus=gpus, cuda=cuda, iommu=iommu,
                        memlock_soft=_limit(soft), memlock_hard=_limit(hard), dev_nvidia=nvidia_nodes,
                        dev_dri=dri_nodes, absent=absent, vm=vm)


# What an IOMMU row says when this OS sees no IOMMU. The first wording, kept in recordings made
# before it was corrected, read as if a VM's DMA could be untranslated; `iommu_text` rewords it.
OLD_IOMMU_ABSENT = "none found (DMA uses physical addresses, or the VM hides the IOMMU)"


def iommu_absent_text(vm: bool, gpus: list[PCIDevice] | None = None) -> str:
    """The IOMMU row when this OS sees none, saying only what the report shows. In a VM with a
    real (NVIDIA) GPU, the host assigned that device to the guest, and the host's IOMMU, which
    the guest cannot see, translates its DMA (guest-physical to host-physical). A VM without
    one has no GPU DMA to translate, and the guest cannot tell whether the host has an IOMMU.
    On bare metal without an IOMMU (or with it off) a device's DMA uses physical addresses."""
    nvidia = [g for g in gpus or [] if g.is_nvidia]
    if vm and nvidia:
        return ("none visible to this guest (a VM): its NVIDIA GPU is a real device the host assigned to it "
                "(passed through), so the host's IOMMU, which the guest cannot see, translates the GPU's DMA "
                "from guest-physical to host-physical addresses, and every number measured here includes "
                "that translation")
    if vm:
        return ("none visible to this guest (a VM), and no NVIDIA GPU on its PCI bus: no GPU DMA to "
                "translate here; from inside a guest one cannot tell whether the host has an IOMMU")
    if nvidia:
        return "none found: the IOMMU is absent or off, so the GPU's DMA uses physical addresses"
    return ("none found: the IOMMU is absent or off (and no NVIDIA GPU is on the PCI bus, so there is no "
            "GPU DMA to translate)")


#: the first words of every IOMMU row `collect` writes when it finds none (recorded reports keep
#: them; `iommu_text` words them again from the report's facts)
_ABSENT_PREFIXES = ("none found", "none visible to this guest")


def iommu_text(report: SystemReport, vm: bool | None = None) -> str:
    """The report's IOMMU finding, in today's wording: a recorded 'none' is worded again from the
    report's facts (its GPUs, and `vm`, whether its machine was a VM, when known), so a recording
    made with an earlier wording never says more than the report shows."""
    vm = report.vm if vm is None else vm
    if vm is not None and (report.iommu == OLD_IOMMU_ABSENT or report.iommu.startswith(_ABSENT_PREFIXES)):
        return iommu_absent_text(vm, report.gpus)
    return report.iommu


def in_vm(proc: Path | str = "/proc") -> bool:
    """True when the CPU flags in /proc/cpuinfo include `hypervisor` (set by a hypervisor for
    its guests on x86)."""
    text = _read(Path(proc) / "cpuinfo") or ""
    return any(line.startswith("flags") and " hypervisor" in f" {line.split(':', 1)[-1]}"
               for line in text.splitlines())


def _cuda_info() -> dict:
    p = gpu.probe()
    info = {"usable": p.usable, "reason": p.reason, "cupy": p.cupy_version}
    if not p.usable:
        return info
    cp = gpu.cupy()
    props = cp.cuda.runtime.getDeviceProperties(0)
    info.update(
        name=p.name,
        pci_bus_id=p.pci_bus_id,
        device_count=p.device_count,
        runtime=gpu.version_string(p.cuda_runtime),
        driver_cuda=gpu.version_string(p.cuda_driver),
        total_memory=int(props["totalGlobalMem"]),
        async_engines=int(props["asyncEngineCount"]),
        compute_capability=f"{props['major']}.{props['minor']}",
        multiprocessors=int(props["multiProcessorCount"]),
    )
    return info


def fmt_bytes(n: int | None) -> str:
    """Bytes in binary units: 16 MiB, 128 GiB ('unlimited' for None)."""
    if n is None:
        return "unlimited"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def rows(report: SystemReport, vm: bool | None = None) -> list[tuple[str, str, str]]:
    """(item, value, why it matters) rows for a table in Chapter 0 (`vm`: see iommu_text)."""
    out = [("kernel", report.kernel, "the Linux kernel whose drivers move the data")]
    out.append(("NVIDIA module", report.nvidia_module or "absent",
                "the kernel driver (nvidia.ko) that maps BARs and programs DMA"))
    c = report.cuda
    if c.get("usable"):
        out += [("GPU (CUDA)", f"{c['name']} (compute {c['compute_capability']})", "the device CuPy talks to"),
                ("CUDA", f"runtime {c['runtime']}, driver supports {c['driver_cuda']}", "CuPy's runtime vs the driver's API"),
                ("asyncEngineCount", str(c["async_engines"]),
                 "how many copies CUDA can overlap with kernels: a capability count, not the number of "
                 "physical copy engines")]
    else:
        out.append(("CUDA", f"not usable: {c.get('reason')}",
                    "so the course's GPU measurements replay what the reference machines recorded"))
    for g in report.gpus:
        tag = f"{g.address} [{g.pci_id}]"
        out.append((f"PCI {tag}", f"driver {g.driver or 'none'}, NUMA node {g.numa_node if g.numa_node is not None else 'n/a'}",
                    "where the GPU sits on the bus and which CPU socket is closest" if g.is_nvidia else
                    "a display device that is not an NVIDIA GPU (CUDA does not use it)"))
        out.append(("  PCIe link", f"now {g.link_current or 'n/a'}, max {g.link_max or 'n/a'}",
                    "generation (GT/s) and lanes bound every DMA transfer"))
        if g.is_nvidia:
            out.append(("  GSP firmware", gsp_firmware_text(g.gsp_firmware),
                        "on Turing and newer with the open modules most of the driver's resource manager "
                        "runs as this firmware on the GPU (Chapter 1)"))
        for b in g.bars:
            attrs = ", ".join(a for a, on in (("64-bit", b.is_64bit), ("prefetchable", b.prefetchable),
                                              ("has _wc file", b.write_combine_file)) if on)
            out.append((f"  {window_label(g, b)}", f"{fmt_bytes(b.size)} {b.kind}{', ' + attrs if attrs else ''}",
                        "a window of device registers or memory the CPU can map"))
    out.append(("IOMMU", iommu_text(report, vm), "translates device DMA addresses, isolates devices"))
    out.append(("RLIMIT_MEMLOCK", f"soft {fmt_bytes(report.memlock_soft)}, hard {fmt_bytes(report.memlock_hard)}",
                "the most memory a process may lock with mlock(); Chapter 4 tests which ways of pinning "
                "it limits"))
    out.append(("/dev/nvidia*", ", ".join(report.dev_nvidia) or "none", "the driver's device nodes (ioctl, mmap)"))
    out.append(("/dev/dri", ", ".join(report.dev_dri) or "none", "DRM nodes (GEM/TTM drivers)"))
    return out


def from_dict(d: dict) -> SystemReport:
    """Rebuild a SystemReport from its as_dict() form (e.g. a reference file's `system`)."""
    gpus = []
    for g in d.get("gpus", []):
        bars = [Bar(index=b["index"], start=b["start"], end=b["end"], flags=b["flags"],
                    write_combine_file=b.get("write_combine_file", False))
                for b in g.get("bars", [])]
        fields = {k: g.get(k) for k in ("address", "vendor", "device", "pci_class", "driver",
                                        "numa_node", "link_current", "link_max", "iommu_group",
                                        "gsp_firmware")}
        gpus.append(PCIDevice(**fields, bars=bars))
    return SystemReport(kernel=d.get("kernel", "?"), nvidia_module=d.get("nvidia_module"), gpus=gpus,
                        cuda=d.get("cuda", {}), iommu=d.get("iommu", "?"), memlock_soft=d.get("memlock_soft"),
                        memlock_hard=d.get("memlock_hard"), dev_nvidia=d.get("dev_nvidia", []),
                        dev_dri=d.get("dev_dri", []), absent=d.get("absent", []), vm=d.get("vm"))


def link_gbps(link: str | None) -> float | None:
    """Theoretical one-direction PCIe bandwidth in GB/s for a link string like
    '32.0 GT/s PCIe x16': rate x lanes x line-code efficiency / 8 bits.

    Gen1/2 (2.5, 5 GT/s) use 8b/10b coding; Gen3 and later 128b/130b (Gen6's FLIT mode is
    treated the same, a small overestimate). Packet headers are not counted, so real DMA
    tops out lower still.
    """
    if not link:
        return None
    try:
        rate = float(link.split("GT/s")[0].strip())
        lanes = int(link.rsplit("x", 1)[1])
    except (ValueError, IndexError):
        return None
    eff = 8 / 10 if rate <= 5.0 else 128 / 130
    return rate * lanes * eff / 8


NVIDIA_BAR_NAMES = ("BAR0", "BAR1")  # NVIDIA's names of an NVIDIA GPU's first two memory windows


def window_label(gpu: PCIDevice, bar: Bar) -> str:
    """A BAR as sysfs names it, with NVIDIA's name where it differs: 'resource2 (BAR1)'.

    sysfs numbers windows by the register slot they start in (`resourceN`), and a 64-bit BAR
    takes two slots, so an H100's three 64-bit windows are resource0, 2 and 4. NVIDIA numbers
    its windows in order instead: the first memory window is BAR0 (registers), the second BAR1
    (the aperture onto device memory)."""
    if not gpu.is_nvidia:
        return f"resource{bar.index}"
    order = next((i for i, b in enumerate(memory_bars(gpu)) if b.index == bar.index), len(NVIDIA_BAR_NAMES))
    return f"resource{bar.index}" + (f" ({NVIDIA_BAR_NAMES[order]})" if order < len(NVIDIA_BAR_NAMES) else "")


def memory_bars(gpu: PCIDevice) -> list[Bar]:
    """The device's memory windows in slot order (no I/O ports, no expansion ROM)."""
    return [b for b in gpu.bars if not b.is_io and b.index != PCI_ROM_RESOURCE]


def bar_summary(report: SystemReport, memory_bytes: int | None) -> str:
    """One sentence per GPU: its largest BAR against its memory size."""
    lines = []
    for g in report.gpus:
        mem_bars = memory_bars(g)
        if not mem_bars:
            lines.append(f"{g.address}: no memory BARs visible")
            continue
        big = max(mem_bars, key=lambda b: b.size)
        text = f"{g.address}: largest BAR is {window_label(g, big)}, {fmt_bytes(big.size)}"
        if memory_bytes:
            text += (f"; GPU memory {fmt_bytes(memory_bytes)}; the BAR covers "
                     f"{big.size / memory_bytes:.2f}x of it")
        lines.append(text)
    return "\n".join(lines) or "no GPU on the PCI bus"
