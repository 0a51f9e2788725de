"""Chapter 1's picture: the path of one copy from a CuPy call to DMA on the link, annotated with the
chapter's measurements (the syscall census and the driver maps) when they are given."""

from __future__ import annotations

from helpers.ch01_path_of_a_copy import driver_maps, findings, syscalls
from helpers.core.evidence import Evidence
from helpers.presentation.diagrams import Diagram


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
        init = findings.stage(maps.require(), "initialisation")
        dev_maps = sum(1 for m in driver_maps.nvidia_mappings(init["lines"]) if m.role == "device")
    measured = (f" Measured ({where}): {findings.per_round_words(total)}; {ioctl_start:.0f} ioctl calls at start-up"
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
        d.note(460, 62, findings.per_round_tail(total))
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
