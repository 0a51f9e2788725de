"""Chapter 4's pictures, in the course's one visual language (helpers.presentation.diagrams)."""

from __future__ import annotations

from helpers.presentation.diagrams import Diagram


def pinning_paths_diagram() -> Diagram:
    """The three ways host memory becomes pinned, and the path the GPU's DMA then takes."""
    d = Diagram(
        "Three ways to pinned memory",
        "cudaHostAlloc (default, portable, mapped) and cudaHostRegister take the same path: the CUDA "
        "library has ordinary user memory (for cudaHostAlloc a shared anonymous mapping it made itself), "
        "and an ioctl asks the NVIDIA module to build an OS descriptor for it; the module pins the pages "
        "with the kernel's pin_user_pages and maps them for DMA, through the IOMMU where there is one. "
        "Write-combined cudaHostAlloc is different: the module allocates the pages itself and the library "
        "maps them from /dev/nvidiactl. Either way the GPU's copy engine then reads the pages by DMA.",
        width=900, height=440)
    d.box("app", "your program\ncudaHostAlloc / Register", "cpu", 20, 20, 190)
    d.box("lib", "libcuda\n(the CUDA library)", "cpu", 260, 20, 170)
    d.box("anon", "user memory\n(/dev/zero shared, or yours)", "memory", 20, 140, 190)
    d.box("osdesc", "nvidia module\nOS descriptor", "kernel", 260, 140, 170)
    d.box("gup", "pin_user_pages\n(FOLL_LONGTERM)", "kernel", 480, 140, 170)
    d.box("wc", "nvidia module: own pages\nmmap of /dev/nvidiactl", "kernel", 700, 20, 185)
    d.box("dma", "DMA mapping\n(dma_map_sg)", "kernel", 700, 140, 185)
    d.box("iommu", "IOMMU\n(if present)", "link", 700, 260, 185)
    d.box("ce", "GPU copy engine", "gpu", 480, 370, 170)
    d.box("ram", "host RAM pages", "memory", 20, 260, 190)
    d.arrow("app", "lib", "call", "control")
    d.arrow("lib", "anon", "mmap", "control")
    d.arrow("lib", "osdesc", "ioctl", "control")
    d.arrow("osdesc", "gup", "os_lock_user_pages", "control")
    d.arrow("gup", "dma", "page list", "control")
    d.arrow("lib", "wc", "write-combined: ioctl + mmap", "control")
    d.arrow("wc", "dma", "page list", "control")
    d.arrow("dma", "iommu", "IOVA", "control")
    d.arrow("anon", "ram", "backed by", "control")
    d.arrow("ce", "iommu", "DMA read", "data")
    d.arrow("iommu", "ram", "", "data", bend=0)
    return d


def gdrcopy_diagram() -> Diagram:
    """GDRCopy's path: the CPU loads and stores GPU memory through a write-combined BAR1 mapping."""
    d = Diagram(
        "CPU access to GPU memory through BAR1 (GDRCopy)",
        "GDRCopy's kernel module asks the NVIDIA module for the bus addresses of a GPU buffer "
        "(nvidia_p2p_get_pages, 64 KiB pages, which the NVIDIA module maps into the BAR1 aperture), then "
        "maps those addresses into the process write-combined. CPU stores then travel as posted PCIe "
        "writes straight into GPU memory; CPU loads are uncached, non-posted reads, each waiting for its "
        "completion, which is why reads through the mapping are slow.",
        width=860, height=230)
    d.box("app", "your program\n(gdr_copy_to_mapping)", "cpu", 20, 20, 190)
    d.box("gdrdrv", "gdrdrv module\nmmap (write-combined)", "kernel", 20, 140, 190)
    d.box("nv", "nvidia module\nnvidia_p2p_get_pages", "kernel", 260, 140, 180)
    d.box("bar1", "BAR1 aperture\n(GPU page tables)", "link", 490, 20, 170)
    d.box("vram", "GPU memory", "vram", 700, 20, 140)
    d.arrow("app", "gdrdrv", "pin + mmap", "control")
    d.arrow("gdrdrv", "nv", "get pages", "control")
    d.arrow("nv", "bar1", "map into BAR1", "control")
    d.arrow("app", "bar1", "CPU stores (posted writes)", "data")
    d.arrow("bar1", "vram", "", "data")
    return d
