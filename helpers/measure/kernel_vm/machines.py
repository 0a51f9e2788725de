"""The kernel lab's machines: what one kind of boot puts around Debian's kernel.

Every real-kernel part of the course (DRM in Chapter 6b, fences, VFIO with QEMU's edu device)
boots the same bundle through the same runner; what differs is declared here, once per
machine, and nowhere else:

* the QEMU board (``-machine``), memory and ``-device`` arguments;
* what the kernel command line adds (e.g. ``intel_iommu=on``);
* the kernel modules ``/init`` loads for it (the bundle ships the union of all machines'
  modules and, per machine, their load order with dependencies first);
* the guest programs the bundle compiles from ``helpers/measure/kernel_vm/guest/<name>.c`` (statically,
  one binary per program at ``/<name>`` in the initramfs).

``/init`` (helpers/measure/kernel_vm/guest/init.sh) reads ``kl.machine`` (added by the runner) to load the
machine's modules, and ``kl.run`` to choose what to run. Adding a machine: one entry in
MACHINES, its program (or a mode of an existing one), one ``case`` line in init.sh.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.core.errors import InputError

DRM = ("drm", "drm_kms_helper")


@dataclass(frozen=True, kw_only=True)
class Machine:
    """One kind of kernel-lab VM."""

    name: str
    devices: tuple[str, ...]  # QEMU arguments after the common ones, e.g. ("-device", "edu")
    modules: tuple[str, ...]  # module file stems /init loads (their dependencies are added)
    device_label: str = ""  # the devices in words, for provenance; default: the -device values
    board: str = "pc"  # QEMU -machine
    memory_mb: int = 256
    cmdline: str = ""  # added to the kernel command line
    python: bool = False  # boots with Debian's Python appended (guest_python) and the course's guest code in /work
    # QEMU devices a stock build may lack, {name in `-device help`: what it is}, checked before a boot
    needs_devices: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """'virtio-gpu-pci', 'bochs-display,vgamem=16M', or the explicit device_label."""
        return self.device_label or " ".join(self.devices[1::2]) or "no device"


MACHINES: dict[str, Machine] = {m.name: m for m in (
    Machine(name="gem", devices=("-device", "virtio-gpu-pci"),
            modules=(*DRM, "drm_shmem_helper", "vgem", "virtio_pci", "virtio-gpu")),
    Machine(name="evict", devices=("-device", "bochs-display,vgamem=16M"),
            modules=(*DRM, "ttm", "drm_vram_helper", "bochs")),
    Machine(name="fences", devices=(), modules=(*DRM, "drm_shmem_helper", "vgem"),
            device_label="vgem (no device)"),
    # QEMU's teaching PCI device behind an emulated Intel IOMMU (interrupt remapping needs the split
    # irqchip; caching-mode lets VFIO's mappings reach the emulated IOMMU), for VFIO (Chapters 2b/4b, Lab 6)
    Machine(name="edu", devices=("-device", "intel-iommu,intremap=on,caching-mode=on", "-device", "edu"),
            modules=("vfio_iommu_type1", "vfio-pci"), device_label="edu (1234:11e8) behind intel-iommu",
            board="q35,kernel-irqchip=split", cmdline="intel_iommu=on", python=True,
            needs_devices=(("edu", "QEMU's educational PCI device"), ("intel-iommu", "the emulated Intel IOMMU"))),
)}

# The guest programs compiled into the bundle, from helpers/measure/kernel_vm/guest/<name>.c (plus any .h there).
PROGRAMS = ("probe", "fences")


def get(name: str) -> Machine:
    """The machine called `name`; InputError naming the choices otherwise."""
    try:
        return MACHINES[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown kernel lab machine {name!r}; choose one of {sorted(MACHINES)}") from None


def all_modules() -> tuple[str, ...]:
    """Every module some machine loads, each once, in first-seen order (what the bundle ships)."""
    return tuple(dict.fromkeys(m for machine in MACHINES.values() for m in machine.modules))
