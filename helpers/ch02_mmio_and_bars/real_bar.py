"""Chapter 2, part 2: a real BAR — QEMU's edu device, mapped and used from the guest's user space.

Experiment ``real_bar.edu`` boots the kernel lab's ``edu`` machine (helpers.measure.kernel_vm)
and runs ``helpers/measure/kernel_vm/guest/edu_probe.py bar`` as root in the guest: edu's configuration
space and BARs from sysfs (as Chapter 2 read the H100's), BAR0 mapped through sysfs
``resource0`` (what the host refused with EPERM), the identification register, the liveness
register (the device stores the bitwise inverse of what is written), the factorial unit
(write n, poll the status register, read n!), and the mean time of one register write, one
register read and one ordinary memory load. Those times are TCG emulation times: every BAR
access is a call into QEMU's device model, so they say how emulation works, never what a PCIe
device costs.

Live where QEMU is installed; elsewhere the transcript the recorder made
(data/kernel_lab/real_bar.edu.json).

Sources (checked): QEMU hw/misc/edu.c (edu_mmio_read, edu_mmio_write, edu_fact_thread,
pci_edu_realize: a 1 MiB BAR0); Linux drivers/pci/pci-sysfs.c (pci_mmap_resource_uc ->
pci_mmap_resource: the mmap of ``resourceN``, a root-only file, refused under kernel lockdown
(security_locked_down(LOCKDOWN_PCI_ACCESS)) and, for a range a driver claimed exclusively,
by iomem_is_exclusive unless the kernel booted with iomem=relaxed, as the lab's does).
"""

from __future__ import annotations

from helpers.core import transcript, validate
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.measure import kernel_vm
from helpers.presentation import figures

EXPERIMENT = "real_bar.edu"
DEFAULT_FACTORIALS = (1, 5, 10, 12, 13)
MAX_FACTORIAL = 20  # from 13! on the result no longer fits edu's 32-bit register (it wraps)
ACCESSES = 2000


def factorial_list(value, what: str = "factorials") -> list[int]:
    """One to eight whole numbers from 0 to 20 (edu's register is 32 bits wide: from 13 on, n! wraps)."""
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= 8:
        raise InputError(f"{what} must be a list of 1 to 8 whole numbers, got {value!r}")
    return [validate.whole_number(v, f"{what}[{i}]", 0, MAX_FACTORIAL) for i, v in enumerate(value)]


@experiment(EXPERIMENT, chapter=2, needs=(QEMU,), reference=KERNEL_LAB_REFERENCE,
            title="A real BAR: QEMU's edu device mapped from user space in a Linux guest (config space, "
                  "registers, factorial, access costs under emulation)",
            params={"factorials": factorial_list})
def edu_bar(quick: bool, factorials=DEFAULT_FACTORIALS) -> dict:
    """Boot the edu machine once and run the probe's `bar` scenario (quick changes nothing)."""
    run = kernel_vm.run("edu", dict(scenario="bar", factorials=",".join(map(str, factorials)),
                                    accesses=str(ACCESSES)))
    return {**run["result"], "vm": run["vm"]}


def config_table(ev: Evidence) -> figures.Table:
    """edu's configuration space as the guest's sysfs showed it, and its BARs."""
    c = ev.require()["config"]
    rows = [("PCI address", c["bdf"]), ("vendor:device", f"{c['vendor']:04x}:{c['device']:04x}"),
            ("revision", f"{c['revision']:#04x}"), ("class", f"{c['class']:06x} (other device)"),
            ("command register", f"{c['command']:#06x} (bit 1: memory decoding on)"),
            ("interrupt pin", "INTA" if c["interrupt_pin"] == 1 else str(c["interrupt_pin"])),
            ("driver bound", c["driver"] or "none"), ("IOMMU group", str(c["iommu_group"]))]
    for b in c["bars"]:
        kind = "64-bit" if (b["raw"] >> 1) & 3 == 2 else "32-bit"
        rows.append((f"BAR{b['bar']}", f"{b['start']:#x}, {b['size'] // 1024} KiB, {kind} memory, "
                                       f"{'prefetchable' if b['raw'] & 8 else 'not prefetchable'}"))
    return figures.Table(rows, ("", ""), caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def register_table(ev: Evidence) -> figures.Table:
    """What the registers answered: identification, liveness, factorials."""
    d = ev.require()
    i = d["identify"]
    rows = [("read 0x00 (identification)", f"{i['id']:#010x}: version {i['major']}.{i['minor']}, magic {i['magic']:#x}")]
    for r in d["liveness"]["rows"]:
        rows.append((f"write {r['wrote']:#010x} to 0x04, read 0x04", f"{r['read']:#010x}"))
    for f in d["factorials"]:
        rows.append((f"write {f['n']} to 0x08, poll 0x20, read 0x08", f"{f['result']} ({f['polls']} status polls)"))
    return figures.Table(rows, ("access", "device answered"),
                         caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def facts(ev: Evidence) -> dict:
    """The page's numbers, as plain values (tests and exercises use them)."""
    d = ev.require()
    return {"id": d["identify"]["id"],
            "inverted": all(r["read"] == (~r["wrote"] & 0xFFFFFFFF) for r in d["liveness"]["rows"]),
            "factorials": {f["n"]: f["result"] for f in d["factorials"]},
            "bar0_bytes": next(b["size"] for b in d["config"]["bars"] if b["bar"] == 0),
            "write_ns": d["costs"]["write_ns"], "read_ns": d["costs"]["read_ns"], "ram_ns": d["costs"]["ram_read_ns"]}


def figure_costs(ev: Evidence) -> figures.CourseFigure:
    """Mean time of one BAR write, one BAR read and one ordinary load from Python, under TCG."""
    import plotly.graph_objects as go

    f = facts(ev)
    names = ["BAR0 write (store)", "BAR0 read (load)", "ordinary memory load"]
    vals = [f["write_ns"], f["read_ns"], f["ram_ns"]]
    fig = go.Figure(go.Bar(x=names, y=vals, text=[f"{v:,.0f} ns" for v in vals], textposition="outside",
                           marker={"color": ["#0072B2", "#D55E00", "#999999"],
                                   "pattern": {"shape": ["/", "x", ""]}}))
    vm = ev.data["vm"]
    fig.update_layout(title=f"One access from Python in the guest, mean of {ev.data['costs']['accesses']} "
                            f"(QEMU {vm['accel']} emulation, not hardware)", height=420, showlegend=False)
    fig.update_yaxes(title="time per access (ns, emulated machine)", rangemode="tozero")
    return figures.CourseFigure(fig, [(ev.mode, f"{transcript.source_line(ev)} — {vm['accel']} emulation: each BAR access "
                                                "is a call into QEMU's device model")])
