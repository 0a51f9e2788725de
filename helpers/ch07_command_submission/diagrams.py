"""Chapter 7's pictures: how a driver hands work to a GPU and learns it is done.

Drawn in the course's one visual language (helpers.presentation.diagrams): boxes for places, solid
arrows for bytes, dashed for commands and doorbells, dotted for completions.
"""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def ring_diagram() -> Diagram:
    """The ring, the doorbell, the fence and the read pointer written back to memory."""
    d = Diagram("A command ring with a doorbell, a fence and read-pointer writeback",
                "The driver writes commands into a ring in host memory with ordinary stores (1), then makes one "
                "posted write to the device's doorbell register (2), which wakes the GPU's front end (3). The front "
                "end fetches the new entries from the ring by DMA (4) and, as it consumes them and finishes the work, "
                "writes its read pointer and the fence value back to host memory (5). The driver polls those with "
                "cached loads (6): it learns both that the work is done and how much of the ring is free without "
                "reading a device register.", height=330)
    d.box("drv", "driver\n(user or kernel space)", "cpu", 20, 135, 175, 60)
    d.box("ring", "ring of commands\n(host memory)", "memory", 290, 30, 185, 60)
    d.box("wb", "fence value +\nread-pointer copy\n(host memory)", "memory", 290, 235, 185, 66)
    d.box("fe", "GPU front end", "gpu", 585, 30, 160, 60)
    d.box("bell", "doorbell register\n(MMIO)", "gpu", 585, 240, 160, 60)
    d.arrow("drv", "ring", "1 commands (stores)", "data")
    d.arrow("drv", "bell", "2 doorbell", "control", bend=-8)
    d.arrow("bell", "fe", "3 wake", "control")
    d.arrow("ring", "fe", "4 fetch (DMA)", "data")
    d.arrow("fe", "wb", "5 write back", "completion")
    d.arrow("wb", "drv", "6 poll (cached load)", "completion")
    return d


def gpfifo_diagram() -> Diagram:
    """A CUDA kernel launch on Hopper, as the open kernel modules' headers describe the channel."""
    d = Diagram("A kernel launch on an NVIDIA GPU: pushbuffer, GPFIFO, USERD, doorbell",
                "The CUDA driver in the process writes the launch as methods into a pushbuffer (1), appends a GPFIFO "
                "entry holding the pushbuffer segment's address and length (2), stores the new GPPut in the channel's "
                "USERD page (3) and writes the channel's work-submit token to the doorbell in a mapped usermode page "
                "(4). The GPU's host interface reads GPPut, fetches the GPFIFO entries and the methods (5), advances "
                "GPGet in USERD as it consumes entries (6) and releases a semaphore in memory when the work is done "
                "(7), which the CPU or another queue waits on. None of these steps is a system call.", height=360)
    d.box("cuda", "CUDA driver\n(your process)", "cpu", 20, 150, 165, 60)
    d.box("pb", "pushbuffer\n(methods)", "memory", 270, 20, 160, 54)
    d.box("gp", "GPFIFO ring\n(address, length)", "memory", 270, 110, 160, 54)
    d.box("userd", "USERD\nGPPut / GPGet", "memory", 270, 200, 160, 54)
    d.box("sem", "semaphore\n(a fence in memory)", "memory", 270, 290, 160, 54)
    d.box("bell", "doorbell\n(usermode page)", "gpu", 590, 20, 160, 54)
    d.box("host", "GPU host interface", "gpu", 590, 180, 160, 60)
    d.arrow("cuda", "pb", "1", "data")
    d.arrow("cuda", "gp", "2", "data")
    d.arrow("cuda", "userd", "3 GPPut", "data")
    d.arrow("cuda", "bell", "4 token", "control", bend=-6)
    d.arrow("bell", "host", "wake", "control")
    d.arrow("gp", "host", "5 fetch", "data")
    d.arrow("host", "userd", "6 GPGet", "completion", bend=10)
    d.arrow("host", "sem", "7 release", "completion")
    return d
