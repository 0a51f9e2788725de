"""Chapter 6's pictures: sharing a buffer through dma-buf, and where TTM keeps buffer objects.

Drawn in the course's one visual language (helpers.presentation.diagrams): boxes for places, solid
arrows for bytes, dashed for requests (ioctls, handing over an fd), dotted for completions.
"""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def sharing_diagram() -> Diagram:
    """GEM handle → dma-buf fd → importer, and where CUDA enters the same picture."""
    d = Diagram("From a GEM handle to a dma-buf to an importer",
                "A process asks the GPU driver for a buffer and gets a GEM handle, a small number valid only in "
                "its own open file of the device (1). PRIME turns the handle into a dma-buf, a real file descriptor "
                "(2); CUDA makes the same kind of descriptor from device memory with cuMemGetHandleForAddressRange. "
                "The descriptor can be passed to another process or driver (3). The importer attaches to the "
                "dma-buf and asks the exporter for the buffer's DMA addresses (4), then reads or writes the memory "
                "directly by DMA, with no copy through the CPU (5).", height=330)
    d.box("proc", "process\nhandle = 1", "cpu", 20, 40, 160, 58)
    d.box("drv", "GPU driver (exporter)\nGEM object", "kernel", 290, 40, 190, 58)
    d.box("mem", "the buffer\n(VRAM or system pages)", "vram", 580, 40, 165, 58)
    d.box("fd", "dma-buf\n(a file: fd = 7)", "kernel", 290, 200, 190, 58)
    d.box("imp", "importer: NIC,\ndisplay, other GPU", "device", 580, 200, 165, 58)
    d.arrow("proc", "drv", "1 create → handle", "control")
    d.arrow("drv", "mem", "owns", "control")
    d.arrow("proc", "fd", "2 handle → fd", "control")
    d.arrow("fd", "imp", "3 fd handed over", "control")
    d.arrow("imp", "drv", "4 attach, map", "control", bend=-10)
    d.arrow("imp", "mem", "5 DMA", "data")
    d.note(20, 300, "CUDA: cuMemGetHandleForAddressRange(DMA_BUF_FD) makes the fd directly from device memory")
    return d


def ttm_diagram() -> Diagram:
    """TTM's placements and the moves between them when VRAM is full."""
    d = Diagram("TTM placements and eviction",
                "A command submission needs a buffer object in an acceptable placement, and TTM validates it (1). "
                "If VRAM is full, TTM walks its least-recently-used lists, lowest priority number first, and picks "
                "a victim (2). The victim is copied from VRAM to GTT, system pages the GPU reaches through its page "
                "tables, by the GPU's copy engine where the driver has one and by the CPU otherwise (3). "
                "Under more pressure, a GTT buffer is unbound and left in "
                "plain SYSTEM pages, which copies nothing (4). A buffer used again is copied back into VRAM (5). "
                "Pinned buffers are kept off the LRU lists, on the device's unevictable list, and never move.", height=330)
    d.box("cs", "command submission\nneeds buffer X", "cpu", 20, 40, 170, 58)
    d.box("ttm", "TTM: LRU lists\nper priority", "kernel", 290, 40, 180, 58)
    d.box("vram", "VRAM placement", "vram", 580, 40, 160, 58)
    d.box("gtt", "GTT placement\n(GPU-reachable pages)", "memory", 580, 210, 160, 58)
    d.box("sys", "SYSTEM placement\n(not GPU-reachable)", "memory", 290, 210, 180, 58)
    d.arrow("cs", "ttm", "1 validate", "control")
    d.arrow("ttm", "vram", "2 pick LRU victim", "control")
    d.arrow("vram", "gtt", "3 evict: copy", "data", bend=-14)
    d.arrow("gtt", "vram", "5 move back in", "data", bend=14)
    d.arrow("gtt", "sys", "4 unbind, no copy", "control")
    return d


def fences_diagram() -> Diagram:
    """A buffer's reservation object: who adds fences, who waits for which, who signals."""
    d = Diagram("A buffer's reservation object: who adds fences, who waits for them",
                "A job that will write the buffer adds its fence to the buffer's reservation object (dma_resv) as a "
                "writer's fence, a job that will only read adds a reader's fence (1); in the lab, vgem's "
                "FENCE_ATTACH ioctl stands in for the GPU driver. A reader, such as poll for POLLIN on the dma-buf, "
                "EXPORT_SYNC_FILE for reading or the start of CPU access for reading, waits for the unsignalled "
                "writers' fences only (2). A writer, such as poll for POLLOUT, waits for every unsignalled fence (3). "
                "Before TTM moves or frees the buffer, ttm_bo_wait_ctx waits for all of its fences, the kernel's "
                "own included (4). When the job ends, its fence is signalled, here by FENCE_SIGNAL or vgem's 10 "
                "second timer, and every waiter wakes (5).", height=360)
    d.box("job", "job (GPU driver;\nhere vgem FENCE_ATTACH)", "gpu", 20, 40, 190, 58)
    d.box("resv", "dma_resv of the buffer\nwriters' | readers' fences", "kernel", 290, 40, 200, 58)
    d.box("reader", "a reader: POLLIN,\nsync_file, CPU read", "cpu", 575, 20, 175, 58)
    d.box("writer", "a writer: POLLOUT,\nsync_file for writing", "cpu", 575, 130, 175, 58)
    d.box("ttm", "TTM: evict or free\n(ttm_bo_wait_ctx)", "kernel", 290, 230, 200, 58)
    d.box("buf", "the buffer's memory", "memory", 20, 230, 190, 58)
    d.arrow("job", "resv", "1 add fence", "control")
    d.arrow("reader", "resv", "2 waits: writers", "control")
    d.arrow("writer", "resv", "3 waits: all", "control")
    d.arrow("ttm", "resv", "4 waits: all", "control")
    d.arrow("job", "buf", "reads / writes", "data")
    d.arrow("job", "resv", "5 signal", "completion", bend=30)
    return d
