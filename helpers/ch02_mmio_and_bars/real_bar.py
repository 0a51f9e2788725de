"""Chapter 2, part 2: a real BAR — QEMU's edu device, mapped and used from the guest's user space.

Experiment ``real_bar.edu`` boots the kernel lab's ``edu`` machine (helpers.measure.edu_vm)
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

import random

from helpers.core import checks, transcript, validate
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.measure import edu_vm
from helpers.presentation import figures
from helpers.presentation.diagrams import Diagram

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
    run = edu_vm.probe("bar", factorials=",".join(map(str, factorials)), accesses=str(ACCESSES))
    return {**run["result"], "vm": run["vm"]}


def source_line(ev: Evidence) -> str:
    """Where the data came from: a real kernel under QEMU, and which."""
    return f"this machine — {transcript.label(ev.data['vm'])}" if ev.live else ev.source


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
    return figures.Table(rows, ("", ""), caption=f"{ev.mode.value.upper()} · {source_line(ev)}")


def register_table(ev: Evidence) -> figures.Table:
    """What the registers answered: identification, liveness, factorials."""
    d = ev.require()
    i = d["identify"]
    rows = [("read 0x00 (identification)", f"{i['id']:#010x}: version {i['major']}.{i['minor']}, magic {i['magic']:#x}")]
    for r in d["liveness"]["rows"]:
        rows.append((f"write {r['wrote']:#010x} to 0x04, read 0x04", f"{r['read']:#010x}"))
    for f in d["factorials"]:
        rows.append((f"write {f['n']} to 0x08, poll 0x20, read 0x08", f"{f['result']} ({f['polls']} status polls)"))
    return figures.Table(rows, ("access", "device answered"), caption=f"{ev.mode.value.upper()} · {source_line(ev)}")


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
    return figures.CourseFigure(fig, [(ev.mode, f"{source_line(ev)} — {vm['accel']} emulation: each BAR access "
                                                "is a call into QEMU's device model")])


# --------------------------------------------------------------------------------------------
# The picture and the exercises
# --------------------------------------------------------------------------------------------
def diagram() -> Diagram:
    """What one BAR access crosses in the guest: page tables to an uncached MMIO page, QEMU's device model."""
    d = Diagram(
        "A register access to edu's BAR0, from user space in the guest",
        "The probe opens sysfs resource0 and maps it: the kernel's pci_mmap_resource_uc puts BAR0's physical "
        "page into the process's page table, uncached. A store to that page then leaves the CPU as a memory "
        "write to the device (posted: the CPU does not wait for it); a load is a read request that waits for "
        "the device's answer (non-posted). Under QEMU each access exits to the emulator, which calls edu's "
        "edu_mmio_write or edu_mmio_read; the factorial is computed in a thread of the device, so the program "
        "polls the status register until it is done.",
        width=860, height=280)
    d.box("prog", "probe (root)\nstore / load", "cpu", 20, 30, 170)
    d.box("pt", "page table:\nBAR0 page, uncached", "kernel", 240, 30, 170)
    d.box("bar", "BAR0 (1 MiB)\nregisters", "link", 460, 30, 160)
    d.box("dev", "edu device model\n(QEMU)", "device", 670, 30, 170)
    d.box("thr", "edu factorial thread", "device", 670, 170, 170)
    d.box("sysfs", "sysfs resource0\nmmap", "kernel", 240, 170, 170)
    d.arrow("prog", "sysfs", "mmap", "control")
    d.arrow("sysfs", "pt", "map BAR page", "control")
    d.arrow("prog", "pt", "store (posted)", "data")
    d.arrow("pt", "bar", "", "data")
    d.arrow("bar", "dev", "edu_mmio_write", "data")
    d.arrow("dev", "thr", "start", "control")
    d.arrow("dev", "prog", "load answers (non-posted)", "completion", bend=-60)
    return d


def liveness_answer(answer, ev: Evidence) -> bool | None:
    """Prediction: what reading 0x04 returns after writing 0x12345678."""
    row = next(r for r in ev.require()["liveness"]["rows"] if r["wrote"] == 0x12345678)
    return checks.equal("liveness read-back", answer, row["read"],
                        "edu does not store what you write to 0x04 as it is", why="edu_mmio_write stores ~val in "
                        "addr4: a read-back proves a live device answered, not memory that kept a value")


def factorial13_answer(answer, ev: Evidence) -> bool | None:
    """Derivation: what edu's 32-bit factorial register holds after computing 13!."""
    got = facts(ev)["factorials"].get(13)
    if got is None:
        return checks.verdict("13! in 32 bits", None, "this recording has no n = 13")
    return checks.equal("13! in 32 bits", answer, got, "13! = 6 227 020 800 needs 33 bits; keep what fits",
                        why="the device multiplies in a uint32_t: the result is 13! mod 2^32")


def decode_bar_trial(fn, ev: Evidence) -> list[str]:
    """Run a learner's decode_bar(raw) on the recorded BARs and on drawn ones; the problems found."""
    problems = []
    cases = [b["raw"] for b in ev.require()["config"]["bars"]]
    rng = random.Random(2)
    for _ in range(20):
        base = rng.randrange(0, 1 << 20) << 12
        cases.append(base | rng.choice([0, 8]) | rng.choice([0, 4]))
        cases.append((rng.randrange(0, 1 << 14) << 2) | 1)
    for raw in cases:
        want = _decode(raw)
        got = fn(raw)
        if tuple(got) != want:
            problems.append(f"decode_bar({raw:#010x}) gave {tuple(got)}, expected a different answer")
            break
    return problems


def _decode(raw: int) -> tuple[str, int, bool]:
    if raw & 1:
        return ("io", 32, False)
    return ("memory", 64 if (raw >> 1) & 3 == 2 else 32, bool(raw & 8))


def decode_bar_answer(fn, ev: Evidence) -> bool | None:
    """Coding: decode a BAR register's low bits."""
    return checks.code("decode a BAR register", fn, lambda f: decode_bar_trial(f, ev),
                       why="bit 0 tells I/O from memory; for memory, bits 2-1 give the width (10b: 64-bit) "
                           "and bit 3 prefetchable")
