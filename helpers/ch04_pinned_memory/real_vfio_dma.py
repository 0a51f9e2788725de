"""Chapter 4, part 2: DMA through an IOMMU — QEMU's edu device driven from user space with VFIO.

Experiment ``vfio_dma.edu`` boots the kernel lab's ``edu`` machine (q35 with an emulated Intel
IOMMU, helpers.measure.kernel_vm) and runs ``helpers/measure/kernel_vm/guest/edu_probe.py dma`` in the guest:

1. edu is handed to ``vfio-pci`` (driver_override); the probe opens the VFIO container, the
   device's IOMMU group and the device, maps BAR0 through the device fd and turns bus
   mastering on through the config region;
2. ``VFIO_IOMMU_MAP_DMA`` pins a buffer of the process and maps it at IOVA 0x100000 in the
   group's IOMMU domain; edu's DMA engine copies a random payload RAM -> device -> RAM and the
   bytes are compared;
3. a DMA to IOVA 0x900000, never mapped: the IOMMU refuses it and the guest kernel logs the
   fault (DMAR);
4. an IOVA above edu's 28-bit DMA mask: the device drops the high bits, so the data lands in
   whatever is mapped at the truncated IOVA;
5. an unmap while a DMA is pending: VFIO allows it, the device's write then faults;
6. the locked-memory charge of MAP_DMA (VmLck) and, as an unprivileged user with
   RLIMIT_MEMLOCK 64 KiB, a 1 MiB MAP_DMA refused with ENOMEM and the kernel's own line.

Live where QEMU is installed; elsewhere the recorded transcript
(data/kernel_lab/vfio_dma.edu.json).

Sources (checked against torvalds/linux master and qemu/qemu master): drivers/vfio/vfio_iommu_type1.c
(vfio_dma_do_map, vfio_pin_map_dma, vfio_pin_pages_remote with its "RLIMIT_MEMLOCK (%ld)
exceeded" message, vfio_lock_acct charging mm->locked_vm, vfio_dma_do_unmap);
drivers/iommu/intel/dmar.c (dmar_fault, dmar_fault_do_one: the "[DMA Write NO_PASID] Request
device ... fault addr ... [fault reason ...]" line); drivers/vfio/pci/vfio_pci_core.c
(vfio_pci_core_mmap of BAR regions); include/uapi/linux/vfio.h (the ioctls and structures);
QEMU hw/misc/edu.c (edu_dma_timer, dma_rw: a DMA completes on a 100 ms virtual timer;
edu_clamp_addr: addresses are ANDed with dma_mask, 28 bits by default).
"""

from __future__ import annotations

from helpers.core import transcript, validate
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.measure import kernel_vm
from helpers.presentation import figures

EXPERIMENT = "vfio_dma.edu"
DEFAULT_PAYLOAD = 2048
MAX_PAYLOAD = 4095  # QEMU 7.2's edu aborts the VM on a full 4096-byte transfer


@experiment(EXPERIMENT, chapter=4, needs=(QEMU,), reference=KERNEL_LAB_REFERENCE,
            title="DMA through an IOMMU: edu driven from user space with VFIO (MAP_DMA, a checked round trip, "
                  "an IOMMU fault, the DMA mask, unmap while pending, RLIMIT_MEMLOCK)",
            params={"payload": validate.count(1, MAX_PAYLOAD), "seed": validate.count(0, 2**31 - 1)})
def edu_dma(quick: bool, payload: int = DEFAULT_PAYLOAD, seed: int = 1) -> dict:
    """Boot the edu machine once and run the probe's `dma` scenario (quick changes nothing)."""
    run = kernel_vm.run("edu", dict(scenario="dma", payload=str(payload), seed=str(seed)))
    return {**run["result"], "vm": run["vm"]}


def _log(lines: list[str], want: str = "fault addr") -> str:
    return next((x for x in lines if want in x), "(no line)")


def facts(ev: Evidence) -> dict:
    """What the run showed, as plain values (tests, exercises and the page use them)."""
    d = ev.require()
    m = d["memlock"]
    return {"driver": d["driver"], "group": d["iommu_group"], "group_devices": d["group_devices"],
            "bytes": d["round_trip"]["bytes"], "equal": d["round_trip"]["equal"],
            "dma_wait_s": d["round_trip"]["wait_out_s"],
            "fault_line": _log(d["unmapped"]["kernel_log"]), "fault_iova": d["unmapped"]["iova"],
            "mask_iova": d["above_mask"]["iova"], "mask_landed_low": d["above_mask"]["landed_at_low_iova"],
            "mask_landed_high": d["above_mask"]["landed_in_high_buffer"],
            "unmap_still_running": d["unmap_pending"]["dma_still_running_after_unmap"],
            "unmap_fault_line": _log(d["unmap_pending"]["kernel_log"]),
            "unmap_buffer_untouched": d["unmap_pending"]["buffer_untouched"],
            "vmlck_map_kib": d["map"]["vmlck_kib_after_map"] - d["vfio"]["vmlck_kib_before_map"],
            "root_vmlck": d["root_vmlck"], "memlock_limit": m.get("limit"),
            "small_ok": m.get("map_16384", {}).get("ok"), "big_errno": m.get("map_1048576", {}).get("errno"),
            "big_error": m.get("map_1048576", {}).get("error"), "memlock_line": _log(m.get("kernel_log", []),
                                                                                  "RLIMIT_MEMLOCK"),
            "guard": d["guard"]}


def steps_table(ev: Evidence) -> figures.Table:
    """One row per step: what the program did, and what the kernel or the device answered."""
    d, f = ev.require(), facts(ev)
    v = d["vfio"]
    rk = f["root_vmlck"]
    rows = [
        ("driver_override + drivers_probe", f"edu ({d['bdf']}) bound to {f['driver']}; IOMMU group {f['group']} "
                                           f"holds {', '.join(f['group_devices'])}"),
        ("open /dev/vfio/vfio; GET_API_VERSION; CHECK_EXTENSION(TYPE1v2)", f"API {v['api']}, type1v2 {v['type1v2']}"),
        (f"open /dev/vfio/{f['group']}; GROUP_GET_STATUS", "viable" if v["viable"] else "NOT viable"),
        ("GROUP_SET_CONTAINER; SET_IOMMU(TYPE1v2); GROUP_GET_DEVICE_FD", "device fd"),
        ("DEVICE_GET_REGION_INFO(BAR0); mmap; read 0x00", f"{v['bar0']['size'] // 1024} KiB BAR; id {v['id']:#010x}"),
        ("config region: PCI_COMMAND |= bus master", f"command = {v['command']:#06x}"),
        (f"IOMMU_MAP_DMA 12 KiB at IOVA {d['map']['iova']:#x}", f"VmLck +{f['vmlck_map_kib']} KiB (pages pinned)"),
        (f"edu DMA {f['bytes']} B: RAM -> device -> RAM", "bytes equal" if f["equal"] else "BYTES DIFFER"),
        (f"edu DMA to IOVA {f['fault_iova']:#x} (never mapped)", f["fault_line"]),
        (f"edu DMA to IOVA {f['mask_iova']:#x} (above the 28-bit mask)",
         "landed at IOVA 0x100000 (bit 28 dropped)" if f["mask_landed_low"] else
         ("landed where mapped" if f["mask_landed_high"] else "landed nowhere visible")),
        ("start DMA, then IOMMU_UNMAP_DMA at once",
         f"unmap allowed (DMA still running: {f['unmap_still_running']}); then: {f['unmap_fault_line']}"),
        ("root: MAP_DMA 1 MiB, UNMAP", f"VmLck {rk['vmlck_before_kib']} -> {rk['vmlck_mapped_kib']} -> "
                                       f"{rk['vmlck_after_unmap_kib']} KiB"),
        (f"uid 1000, RLIMIT_MEMLOCK {f['memlock_limit']} B: MAP_DMA 16 KiB, then 1 MiB",
         f"16 KiB {'ok' if f['small_ok'] else 'refused'}; 1 MiB: {f['big_error']} — {f['memlock_line']}"),
        ("course helper: a 4096-byte edu DMA", "refused before the device saw it" if f["guard"]["refused"]
         else "NOT refused"),
    ]
    return figures.Table(rows, ("step", "answer"),
                         caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def provenance_table(ev: Evidence) -> figures.Table:
    """Kernel, QEMU, accelerator, device, boot time and the guest's Python."""
    d = ev.require()
    vm = d["vm"]
    rows = [("kernel", vm["kernel_release"]), ("kernel package", vm["kernel_package"]), ("QEMU", vm["qemu"]),
            ("accelerator", vm["accel"]), ("devices", vm["device"]), ("guest Python", d.get("python", "?")),
            ("QEMU start to power-off", f"{vm['boot_seconds']:.1f} s"), ("host", vm["host"]), ("date", vm["date"])]
    return figures.Table(rows, ("", ""), caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")
