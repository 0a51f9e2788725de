"""The path of a copy, from the CuPy call to the DMA on the bus: a diagram annotated with the
chapter's measurements, and source question 000's hypotheses and answer set against those measurements.

Verdicts are computed here from the recorded or live numbers (syscall census, driver maps,
CPU time); nothing below decides a verdict without looking at the data.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, syscalls
from helpers.core.evidence import Evidence
from helpers.presentation.diagrams import Diagram

NEGLIGIBLE_PER_ROUND = 0.05  # syscalls per round trip below this: "no syscall per copy"
SMALL_SYS_SHARE = 0.2  # sys time below this share of CPU time: "the kernel does not move the data"

def path_diagram(census: Evidence | None = None, maps: Evidence | None = None) -> Diagram:
    """The path of one copy: library, driver (ioctl and mmap at set-up only), staging buffer,
    pushbuffer and doorbell, copy engine, link. With the census and maps Evidence, the measured
    numbers go into the description and onto the picture (with their mode and machine)."""
    total = ioctl_start = dev_maps = None
    where = "a schematic"
    if census is not None and census.ok:
        gpu_census = census.require()["gpu"]
        total = syscalls.total_growth(gpu_census)
        ioctl_start = syscalls.growth(gpu_census, "ioctl").baseline
        where = f"{census.mode.value.upper()}, {census.source.split(' (')[0].split(' · ')[0]}"
    if maps is not None and maps.ok:
        init = _stage(maps.require(), "initialisation")
        dev_maps = sum(1 for m in driver_maps.nvidia_mappings(init["lines"]) if m.role == "device")
    measured = (f" Measured ({where}): {per_round_words(total)}; {ioctl_start:.0f} ioctl calls at start-up"
                if total is not None else "")
    measured += (f"; {dev_maps} mappings of /dev/nvidia0 after start-up." if dev_maps is not None else
                 ("." if measured else ""))
    desc = ("A CuPy call enters the CUDA library in user space. At start-up only, the library asks the kernel "
            "driver for objects with ioctl calls on /dev/nvidiactl and maps them with mmap: command memory from "
            "/dev/nvidiactl, the doorbell page from /dev/nvidia0. For each copy from pageable memory the CPU first "
            "copies the data into a pinned staging buffer; the library writes a copy command into a pushbuffer "
            "in shared memory and rings the doorbell with one store, which crosses PCIe as a posted write. The "
            "GPU fetches the command by DMA and its copy engine moves the bytes across the PCIe link between "
            "the staging buffer and device memory. " + PER_COPY_CLAIM.get(total.verdict if total else None, "")
            + measured)
    d = Diagram("The path of one copy, from a CuPy call to DMA on the link", desc, width=780, height=400)
    d.box("app", "your code\ncp.asarray(x), a.get()", "cpu", 20, 15, w=170)
    d.box("lib", "CUDA library\n(libcuda, user space)", "cpu", 20, 110, w=170)
    d.box("drv", "nvidia.ko\n(kernel driver)", "kernel", 270, 15, w=160)
    d.box("host", "your buffer\n(pageable)", "memory", 20, 215, w=170)
    d.box("stage", "pinned staging\nbuffer", "memory", 20, 320, w=170)
    d.box("bell", "doorbell page\n(from /dev/nvidia0)", "gpu", 270, 110, w=170)
    d.box("push", "pushbuffer + GPFIFO\n(from /dev/nvidiactl)", "memory", 270, 215, w=170)
    d.box("link", "PCIe\nlink", "link", 510, 110, w=70, h=264)
    d.box("ce", "copy engine\n(+ host interface)", "gpu", 620, 200, w=150)
    d.box("vram", "device memory", "vram", 620, 320, w=150, h=50)
    d.arrow("app", "lib", "", "control")
    d.arrow("lib", "drv", "start-up only: ioctl, mmap", "control")
    d.arrow("host", "stage", "CPU memcpy", "data")
    d.arrow("lib", "push", "copy command", "control")
    d.arrow("lib", "bell", "one store", "control")
    d.arrow("bell", "link", "posted write", "control")
    d.arrow("push", "link", "fetched by DMA", "control")
    d.arrow("stage", "link", "DMA read", "data")
    d.arrow("link", "ce", "", "data")
    d.arrow("ce", "vram", "", "data")
    if total is not None:
        d.note(460, 30, f"measured ({where}):")
        d.note(460, 46, f"system calls per round trip: {total.slope_text(2)},")
        d.note(460, 62, per_round_tail(total))
        d.note(460, 78, f"{ioctl_start:.0f} ioctl calls, all at start-up" if not syscalls.growth(
            census.require()["gpu"], "ioctl").grows else "ioctl calls grow with N")
    return d


# What the picture may say about system calls per copy, by the verdict of the total's fit
# (None: a schematic without data, which shows the design of the CUDA driver the chapter studies).
PER_COPY_CLAIM = {
    None: "By design no system call is made per copy; the census measures whether that holds.",
    "flat": "No system call is made per copy: the census finds none.",
    "grows": "The census finds system calls that grow with the copies (see its table), so some copies do "
             "enter the kernel.",
    "unclear": "Whether a system call is made per copy cannot be told from the census's runs: start-up "
               "varies too much between them.",
}


def per_round_tail(g: syscalls.Growth) -> str:
    """What the total's fit allows: '0 within the noise', 'they grow with the copies', ..."""
    return {"flat": "0 within the noise" if g.per_round - g.half_width <= 0 else "below one per round trip",
            "grows": "they grow with the copies", "unclear": "too noisy to tell"}[g.verdict]


def per_round_words(g: syscalls.Growth) -> str:
    """'+0.23 ± 0.67 system calls per round trip (95 %), 0 within the noise'."""
    return f"{g.slope_text(2)} system calls per round trip (95 %), {per_round_tail(g)}"


@dataclass(frozen=True)
class Verdict:
    """A claim, what was measured, and the verdict that follows."""

    claim: str
    measured: str
    verdict: str

    def as_row(self) -> tuple[str, str, str]:
        return (self.claim, self.measured, self.verdict)


def _stage(maps: dict, word: str) -> dict:
    for st in maps["stages"]:
        if word in st["stage"]:
            return st
    raise KeyError(f"no maps stage containing {word!r}")


def _hypotheses(g: dict[str, syscalls.Growth], before: list, roles_after: dict) -> list[Verdict]:
    """Hypotheses 1 and 2 of source question 000, judged by the census's fits and the maps."""
    out = []
    rw = (g["read"], g["write"])
    out.append(Verdict(
        "Hypothesis 1: the library calls read(2)/write(2) for every transfer.",
        f"calls per round trip (fit ± 95 %): read {rw[0].slope_text()}, write {rw[1].slope_text()}; "
        "each round trip makes 2 copies and 1 kernel launch",
        "supported: read/write calls grow with the transfers" if any(x.grows for x in rw) else
        "refuted: no read or write per transfer" if all(x.verdict == "flat" for x in rw) else
        "undecided: the runs scatter too much to tell (more repeats needed)"))

    drives = [n for n in ("ioctl", "mmap", "munmap", "poll") if g[n].grows]
    unclear = [n for n in ("ioctl", "mmap", "munmap", "poll") if g[n].verdict == "unclear"]
    dev_maps = roles_after.get("device", {}).get("count", 0)
    out.append(Verdict(
        "Hypothesis 2: the library mmaps device registers once and then drives the GPU from user space.",
        f"{dev_maps} device-node mapping(s) appear at CUDA start-up ({len(before)} before); "
        f"driver syscalls that grow with N: {', '.join(drives) or 'none'}"
        + (f"; too noisy to tell: {', '.join(unclear)}" if unclear else ""),
        ("supported, with a correction: register and doorbell windows are mapped once at start-up and "
         "copies need no syscall, but the library does not program DMA registers itself; it writes "
         "commands to shared memory and rings a doorbell, and the GPU fetches and runs them"
         if dev_maps and not drives and not unclear else
         "not supported by these numbers: " + ("no device-node mapping" if not dev_maps else
                                              f"{', '.join(drives)} grow with the copies")
         if not dev_maps or drives else
         f"undecided: {', '.join(unclear)} scatter too much between runs to tell growth from start-up")))
    return out


def _census_answers(g: dict[str, syscalls.Growth], census: dict, before: list, after: list) -> list[Verdict]:
    """The answer's claims about mmap at start-up and one kernel call per queue start, judged by the census."""
    out = []
    out.append(Verdict(
        "Answer: buffers are mmapped once at start-up, a privileged step.",
        f"/dev/nvidia* mappings: {len(before)} before CUDA, {len(after)} after; "
        f"mmap per round trip {g['mmap'].slope_text()} (fit ± 95 %)",
        "confirmed: the mappings are made at start-up (through the driver's ioctl-validated mmap) "
        "and not per copy" if len(after) > len(before) and g["mmap"].verdict == "flat" else
        "not confirmed by these numbers"))

    out.append(Verdict(
        "Answer: normal operation makes a single kernel call to start the command queue.",
        f"ioctl per round trip: {g['ioctl'].slope_text()}; all syscalls per round trip: "
        f"{syscalls.total_growth(census).slope_text()} (fit ± 95 %)",
        ("does not hold for CUDA on this driver: work is started without any system call, by a "
         "store to the usermode doorbell page" if g["ioctl"].verdict == "flat" else
         "confirmed: ioctl calls grow with the submissions" if g["ioctl"].grows else
         "undecided: ioctl counts scatter too much between runs to tell")))
    return out


def verdicts(census: dict, maps: dict, cpu: dict, dev_dri: list | None = None) -> list[Verdict]:
    """Source question 000's hypotheses, its observations and its answer's claims, judged by the data."""
    g = {n: syscalls.growth(census, n) for n in syscalls.FOCUS}
    before = driver_maps.nvidia_mappings(_stage(maps, "import")["lines"])
    after = driver_maps.nvidia_mappings(_stage(maps, "initialisation")["lines"])
    roles_after = driver_maps.summary(after)
    out: list[Verdict] = []

    out += _hypotheses(g, before, roles_after)

    pg = cpu_time.lookup(cpu, "blocking", "pageable", "h2d")
    pn = cpu_time.lookup(cpu, "blocking", "pinned", "h2d")
    spin = cpu_time.lookup(cpu, "auto", "pinned", "h2d")
    share = pg["sys_s_per_gb"] / max(pg["user_s_per_gb"] + pg["sys_s_per_gb"], 1e-12)
    out.append(Verdict(
        "Observation: copy cost shows up as user time, not system time (source question 000, via time(1)).",
        f"pageable h2d, blocking wait: user {pg['user_s_per_gb'] * 1e3:.0f} ms/GB, sys "
        f"{pg['sys_s_per_gb'] * 1e3:.0f} ms/GB; pinned h2d: user {pn['user_s_per_gb'] * 1e3:.0f} ms/GB "
        f"blocking vs {spin['user_s_per_gb'] * 1e3:.0f} ms/GB spinning",
        ("confirmed, for two reasons: pageable data is copied by the CPU in user space into staging "
         "buffers, and the default wait spins in user space; a pinned copy with a blocking wait costs "
         "little CPU at all" if share < SMALL_SYS_SHARE and pg["user_s_per_gb"] > pn["user_s_per_gb"]
         else "not confirmed here: system time is a large share of the copy's CPU time")))

    out += _census_answers(g, census, before, after)

    dri = "none" if not dev_dri else ", ".join(dev_dri)
    nodes = sorted({m.node for m in after})
    out.append(Verdict(
        "Answer (comment): the call is an ioctl on /dev/dri/card0.",
        f"/dev/dri on the machine: {dri}; nodes the CUDA process maps: {', '.join(nodes) or 'none'}",
        "wrong for NVIDIA compute: the driver's nodes are /dev/nvidiactl, /dev/nvidiaN and "
        "/dev/nvidia-uvm (DRM's card nodes serve display and other vendors' drivers)"
        if nodes and all(n.startswith("/dev/nvidia") for n in nodes) else
        "not decided by these numbers"))

    out.append(Verdict(
        "Answer (comment): the kernel does no per-byte work on the data before the DMA.",
        f"pinned h2d, blocking wait: sys {pn['sys_s_per_gb'] * 1e3:.1f} ms/GB at {pn['gbps']:.1f} GB/s",
        "confirmed: system time per GB is a small fraction of the time the transfer takes"
        if pn["sys_s_per_gb"] * pn["gbps"] < SMALL_SYS_SHARE else
        "not confirmed: the kernel spends much CPU time per GB"))

    out.append(Verdict(
        "Answer: the GPU's own MMU keeps one context from reaching another's memory.",
        "not measured in this chapter",
        "untested here: Chapter 5 (unified memory and the GPU MMU) takes it up"))
    return out
