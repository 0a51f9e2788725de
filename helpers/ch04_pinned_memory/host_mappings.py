"""Where pinned memory lives in the process: the mapping behind each kind of pinned buffer.

For cudaHostAlloc with each flag (default, portable, mapped, write-combined) and for a
cudaHostRegister'ed anonymous mmap, the experiment records the line of /proc/self/maps that
holds the buffer and that mapping's VmFlags from /proc/self/smaps. The two answers the chapter
teaches from it:

- default, portable and mapped pinned memory is a shared anonymous mapping the CUDA library
  made itself (`/dev/zero (deleted)`, flags `sh`), which the NVIDIA module then pins through its
  OS-descriptor path, the same path cudaHostRegister takes (escape.c, RmCreateOsDescriptor ->
  os-mlock.c, os_lock_user_pages -> pin_user_pages); pinning does not change the mapping's flags.
- write-combined memory is allocated by the module and mapped from /dev/nvidiactl by
  nvidia_mmap_helper (kernel-open/nvidia/nv-mmap.c): vm_insert_page makes it a mixed map
  (`mm`), and the module adds VM_DONTEXPAND | VM_DONTDUMP (`de dd`).

The same experiment reads the machine facts Section 6 of the chapter needs: NUMA nodes, the
GPU's NUMA node and local CPUs, and whether an IOMMU is present (sysfs), and, where readable,
the guest kernel's PAT memory-type list.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
from pathlib import Path

import numpy as np

from helpers.ch04_pinned_memory.pinning import ALLOC_FLAGS
from helpers.core import experiments, gpu
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU

NBYTES = 2 << 20
_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$")
FLAG_TEXT = {"sh": "shared", "de": "VM_DONTEXPAND", "dd": "VM_DONTDUMP", "mm": "mixed map (VM_MIXEDMAP)",
             "pf": "pure PFN map (VM_PFNMAP)", "io": "I/O memory (VM_IO)", "lo": "locked (mlock)"}


def mapping_of(ptr: int, smaps_text: str) -> dict | None:
    """The mapping holding address `ptr` in an smaps text: start, end, perms, path and VmFlags."""
    if not isinstance(ptr, int) or isinstance(ptr, bool) or ptr <= 0:
        raise InputError(f"mapping_of needs a positive address, got {ptr!r}")
    found = None
    for line in smaps_text.splitlines():
        m = _HEADER.match(line)
        if m:
            if found is not None:  # the mapping had no VmFlags line (a kernel before 3.8)
                return found
            lo, hi = int(m.group(1), 16), int(m.group(2), 16)
            found = {"start": lo, "end": hi, "perms": m.group(3), "path": m.group(4).strip(), "vmflags": []} \
                if lo <= ptr < hi else None
        elif found is not None and line.startswith("VmFlags:"):
            found["vmflags"] = line.split(":", 1)[1].split()
            return found
    return found


def _smaps() -> str:
    return Path("/proc/self/smaps").read_text()


def buffer_mappings(nbytes: int = NBYTES) -> list[dict]:
    """The mapping of a cudaHostAlloc buffer with each flag and of a registered mmap (freed after)."""
    rt = gpu.cupy().cuda.runtime
    out = []
    for name, flag in ALLOC_FLAGS.items():
        ptr = rt.hostAlloc(nbytes, flag)
        try:
            out.append({"buffer": f"cudaHostAlloc({name})", "flags": flag, **(mapping_of(int(ptr), _smaps()) or {})})
        finally:
            rt.freeHost(ptr)
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    pages = np.frombuffer(region, dtype=np.uint8)
    pages[::4096] = 1
    ptr = int(pages.ctypes.data)
    try:
        out.append({"buffer": "anonymous mmap, before cudaHostRegister", **(mapping_of(ptr, _smaps()) or {})})
        rt.hostRegister(ptr, nbytes, 0)
        try:
            out.append({"buffer": "cudaHostRegister(anonymous mmap)", **(mapping_of(ptr, _smaps()) or {})})
        finally:
            rt.hostUnregister(ptr)
    finally:
        del pages
        region.close()
    return out


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def machine_facts(bus_id: str | None) -> dict:
    """NUMA and IOMMU facts from sysfs (None where a file is absent or unreadable)."""
    dev = f"/sys/bus/pci/devices/{bus_id}" if bus_id else None
    groups = Path("/sys/kernel/iommu_groups")
    facts = {"numa_nodes_online": _read("/sys/devices/system/node/online"),
             "gpu_numa_node": _read(f"{dev}/numa_node") if dev else None,
             "gpu_local_cpulist": _read(f"{dev}/local_cpulist") if dev else None,
             "gpu_iommu_group": os.path.basename(os.readlink(f"{dev}/iommu_group"))
             if dev and os.path.islink(f"{dev}/iommu_group") else None,
             "iommu_groups": len(list(groups.iterdir())) if groups.is_dir() else 0,
             "iommu_units": sorted(p.name for p in Path("/sys/class/iommu").iterdir())
             if Path("/sys/class/iommu").is_dir() else [],
             "cpus_allowed": len(os.sched_getaffinity(0)),
             "pat_memtypes": None}
    pat = _read("/sys/kernel/debug/x86/pat_memtype_list")
    if pat:
        counts: dict[str, int] = {}
        for line in pat.splitlines()[1:]:
            kind = line.rsplit("]", 1)[-1].strip()
            if kind:
                counts[kind] = counts.get(kind, 0) + 1
        facts["pat_memtypes"] = counts
    return facts


@experiments.experiment("pinning.host_mappings", chapter=4, needs=(GPU,),
                        title="The mapping (/proc/self/maps, smaps VmFlags) behind default, portable, mapped, "
                              "write-combined cudaHostAlloc and cudaHostRegister buffers; NUMA and IOMMU facts")
def record_host_mappings(quick: bool) -> dict:
    with contextlib.suppress(Exception):
        gpu.release_pools()
    return {"nbytes": NBYTES, "buffers": buffer_mappings(NBYTES), "machine": machine_facts(gpu.probe().pci_bus_id)}


def rows(data: dict) -> list[tuple]:
    """(buffer, perms, what it maps, VmFlags of note) per recorded buffer."""
    out = []
    for b in data["buffers"]:
        flags = b.get("vmflags", [])
        noted = ", ".join(f"{f} ({FLAG_TEXT[f]})" for f in flags if f in FLAG_TEXT) or "—"
        out.append((b["buffer"], b.get("perms", "?"), b.get("path") or "[anonymous, private]", noted))
    return out


HEADERS = ("buffer", "perms", "mapping (/proc/self/maps)", "VmFlags of note (smaps)")


def verdict(ev: Evidence) -> str:
    """Which buffers are libcuda's shared anonymous mappings and which the module's /dev/nvidiactl
    mixed maps, from the recording; or that the recording is pending."""
    if ev.data is None:
        return ("pinning.host_mappings: recording pending — this experiment is newer than the reference "
                "recording. Until it is recorded, Chapter 5's recorded pointer table (um.pointer_attributes) "
                "already shows default and mapped cudaHostAlloc memory as rw-s '/dev/zero (deleted)'.")
    lines = []
    for b in ev.data["buffers"]:
        path, flags = b.get("path", ""), set(b.get("vmflags", []))
        if "/dev/nvidiactl" in path:
            what = "mapped from /dev/nvidiactl by the NVIDIA module" + (
                " as a mixed map (mm) it may not grow or be dumped (de dd)" if {"mm", "de", "dd"} <= flags else "")
        elif "/dev/zero" in path:
            what = "a shared anonymous mapping the CUDA library made (/dev/zero (deleted)), pinned by the module"
        elif not path:
            what = "ordinary anonymous memory" + (", flags unchanged by the pin" if "lo" not in flags else "")
        else:
            what = f"a mapping of {path}"
        lines.append(f"{b['buffer']}: {what}")
    return "\n".join(lines)


def numa_lines(ev: Evidence) -> list[str]:
    """What the data (live, or the recording) say about NUMA and the IOMMU of the machine that produced them."""
    if ev.data is None:
        return ["NUMA and IOMMU facts: recording pending (pinning.host_mappings)."]
    m = ev.data["machine"]
    head = f"NUMA and IOMMU, {ev.said}:"
    nodes = m.get("numa_nodes_online")
    one = nodes in ("0", None)
    return [head, f"NUMA nodes online: {nodes or 'unknown'}" + (" — one node: every pinned buffer is local, nothing to "
                                                          "measure here" if one else ""),
            f"GPU's NUMA node (sysfs numa_node): {m.get('gpu_numa_node')} (-1 means the firmware gave none); "
            f"its local CPUs: {m.get('gpu_local_cpulist') or 'unknown'}",
            f"IOMMU: {len(m.get('iommu_units') or [])} unit(s), {m.get('iommu_groups')} group(s); the GPU's group: "
            f"{m.get('gpu_iommu_group') or 'none (no IOMMU visible inside this machine)'}"]
