"""The path of a copy, from the CuPy call to the DMA on the bus: a diagram annotated with the
chapter's measurements, and source question 000's hypotheses and answer set against those measurements.

Verdicts are computed here from the recorded or live numbers (syscall census, driver maps,
CPU time); nothing below decides a verdict without looking at the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, syscalls
from helpers.core.evidence import Evidence
from helpers.core.figures import CourseFigure
from helpers.core.mode import Mode

NEGLIGIBLE_PER_ROUND = 0.05  # syscalls per round trip below this: "no syscall per copy"
SMALL_SYS_SHARE = 0.2  # sys time below this share of CPU time: "the kernel does not move the data"

_LAYERS = [  # (y, label, detail, side) — side 0: user space, 1: kernel, 2: hardware
    (9, "your code", "cupy: a.get(), cp.asarray(x), kernel(...)", 0),
    (8, "CUDA runtime + driver (libcudart, libcuda)", "checks arguments, picks a copy engine", 0),
    (7, "pageable only: CPU memcpy into pinned staging", "user time, grows with bytes", 0),
    (6, "copy command written into a pushbuffer", "ordinary stores to /dev/nvidiactl-mapped memory", 0),
    (5, "doorbell: one 4-byte store", "to the usermode page mapped from /dev/nvidia0", 0),
    (3.5, "nvidia.ko / nvidia-uvm.ko", "only at set-up: open, ioctl (allocate, map), mmap", 1),
    (2, "PCIe: posted write reaches the GPU", "host interface fetches the pushbuffer by DMA", 2),
    (1, "copy engine DMA", "reads/writes pinned host pages over PCIe, HBM on the GPU", 2),
]


def diagram(census: Evidence | None = None) -> CourseFigure:
    """The stack as boxes, user space above the kernel line; with the syscall census's
    Evidence, its measured counts (and its mode and machine on the figure)."""
    fig = go.Figure()
    colours = {0: "#d9ecd0", 1: "#f6d8c6", 2: "#d4e1f4"}
    for y, label, detail, side in _LAYERS:
        x0, x1 = (0.02, 0.57) if side != 1 else (0.60, 0.98)
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=y - 0.4, y1=y + 0.4, fillcolor=colours[side],
                      line={"color": "#555"})
        fig.add_annotation(x=(x0 + x1) / 2, y=y + 0.12, text=f"<b>{label}</b>", showarrow=False)
        fig.add_annotation(x=(x0 + x1) / 2, y=y - 0.18, text=detail, showarrow=False, font={"size": 10})
    for y0, y1 in ((8.6, 8.4), (7.6, 7.4), (6.6, 6.4), (5.6, 5.4), (4.6, 2.4), (1.6, 1.4)):
        fig.add_annotation(x=0.295, y=y1, ax=0.295, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=2, text="")
    fig.add_annotation(x=0.79, y=3.9, ax=0.57, ay=7.8, xref="x", yref="y", axref="x", ayref="y",
                       showarrow=True, arrowhead=2, arrowcolor="#b35806", text="")
    fig.add_shape(type="line", x0=0, x1=1, y0=4.3, y1=4.3, line={"dash": "dash", "color": "#b35806"})
    fig.add_annotation(x=0.6, y=4.3, yshift=10, xanchor="left",
                       text="user space ↑   kernel ↓ (system calls cross here)",
                       showarrow=False, font={"color": "#b35806"})
    fig.add_annotation(x=0.31, y=3.5, xanchor="left", text="the doorbell store goes straight to the bus:<br>"
                       "an MMIO write, no system call", showarrow=False, font={"size": 10, "color": "#333"})
    fig.add_shape(type="line", x0=0, x1=1, y0=2.75, y1=2.75, line={"dash": "dot", "color": "#2166ac"})
    fig.add_annotation(x=0.6, y=2.75, yshift=10, xanchor="left", text="CPU ↑   bus and GPU ↓", showarrow=False,
                       font={"color": "#2166ac"})
    parts: list[tuple] = [(Mode.SIMULATED, "a schematic of the driver stack (boxes are not measurements)")]
    if census is not None:
        gpu_census = census.require()["gpu"]
        ioctl = syscalls.growth(gpu_census, "ioctl")
        total = syscalls.total_per_round(gpu_census)
        fig.add_annotation(x=0.79, y=6.6, width=230, text=(f"measured: {syscalls.signed(total, 2)} syscalls per round trip<br>"
                                               f"ioctl at start-up: {ioctl.baseline:.0f}, "
                                               f"per round trip: {syscalls.signed(ioctl.per_round, 3)}"),
                           showarrow=False, bordercolor="#1b7837", bgcolor="#eef7ea", font={"size": 11})
        parts += census.parts
    fig.update_xaxes(visible=False, range=[0, 1])
    fig.update_yaxes(visible=False, range=[0.4, 9.6])
    fig.update_layout(title="The path of a copy: from a CuPy call to DMA on the bus", height=620,
                      showlegend=False)
    return CourseFigure(fig, parts)


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


def verdicts(census: dict, maps: dict, cpu: dict, dev_dri: list | None = None) -> list[Verdict]:
    """Source question 000's hypotheses, its observations and its answer's claims, judged by the data."""
    g = {n: syscalls.growth(census, n) for n in syscalls.FOCUS}
    rw = g["read"].per_round + g["write"].per_round
    before = driver_maps.nvidia_mappings(_stage(maps, "import")["lines"])
    after = driver_maps.nvidia_mappings(_stage(maps, "initialisation")["lines"])
    roles_after = driver_maps.summary(after)
    out = []

    out.append(Verdict(
        "Hypothesis 1: the library calls read(2)/write(2) for every transfer.",
        f"read + write per round trip: {syscalls.signed(rw, 3)} (3 transfers per round trip)",
        "refuted: no read or write per transfer" if rw < NEGLIGIBLE_PER_ROUND else
        "supported: read/write calls grow with the transfers"))

    drives = [n for n in ("ioctl", "mmap", "munmap", "poll") if g[n].grows]
    dev_maps = roles_after.get("device", {}).get("count", 0)
    out.append(Verdict(
        "Hypothesis 2: the library mmaps device registers once and then drives the GPU from user space.",
        f"{dev_maps} device-node mapping(s) appear at CUDA start-up ({len(before)} before); "
        f"driver syscalls that grow with N: {', '.join(drives) or 'none'}",
        ("supported, with a correction: register and doorbell windows are mapped once at start-up and "
         "copies need no syscall, but the library does not program DMA registers itself; it writes "
         "commands to shared memory and rings a doorbell, and the GPU fetches and runs them"
         if dev_maps and not drives else
         "not supported by these numbers: " + ("no device-node mapping" if not dev_maps else
                                              f"{', '.join(drives)} grow with the copies"))))

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

    out.append(Verdict(
        "Answer: buffers are mmapped once at start-up, a privileged step.",
        f"/dev/nvidia* mappings: {len(before)} before CUDA, {len(after)} after; "
        f"mmap per round trip {syscalls.signed(g['mmap'].per_round, 3)}",
        "confirmed: the mappings are made at start-up (through the driver's ioctl-validated mmap) "
        "and not per copy" if len(after) > len(before) and not g["mmap"].grows else
        "not confirmed by these numbers"))

    out.append(Verdict(
        "Answer: normal operation makes a single kernel call to start the command queue.",
        f"ioctl per round trip: {syscalls.signed(g['ioctl'].per_round, 3)}; all syscalls per round trip: "
        f"{syscalls.signed(syscalls.total_per_round(census), 3)}",
        ("does not hold for CUDA on this driver: work is started without any system call, by a "
         "store to the usermode doorbell page" if not g["ioctl"].grows else
         "confirmed: ioctl calls grow with the submissions")))

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
