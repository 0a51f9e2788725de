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


def vfio_dma_diagram() -> Diagram:
    """A VFIO user-space driver: who maps what, and the IOMMU between the device and RAM."""
    d = Diagram(
        "DMA through the IOMMU: a VFIO driver in user space",
        "The program opens the VFIO container, edu's IOMMU group and the device. VFIO_IOMMU_MAP_DMA hands the "
        "kernel a buffer and an IOVA: vfio_iommu_type1 pins the buffer's pages (charging the process's locked "
        "memory) and writes IOVA-to-physical entries into the IOMMU's page table for that group. The program "
        "then programs edu's DMA registers through BAR0 with the IOVA; edu's DMA engine issues reads and writes "
        "with that address, and the IOMMU translates each one, or refuses it and records a fault that the "
        "kernel's DMAR driver logs.",
        width=900, height=330)
    d.box("prog", "user-space driver\n(Python, uid 0 or 1000)", "cpu", 20, 20, 200)
    d.box("vfio", "vfio / vfio_iommu_type1\npin + map", "kernel", 280, 20, 200)
    d.box("buf", "your buffer\n(pinned pages)", "memory", 20, 240, 200)
    d.box("pt", "IOMMU page table\nIOVA -> physical", "link", 280, 140, 200)
    d.box("iommu", "Intel IOMMU\n(QEMU intel-iommu)", "link", 280, 240, 200)
    d.box("edu", "edu DMA engine\n4 KiB buffer", "device", 560, 240, 180)
    d.box("bar", "edu BAR0\nDMA registers", "device", 560, 20, 180)
    d.box("dmar", "DMAR fault log\n(kernel)", "kernel", 760, 140, 130)
    d.arrow("prog", "vfio", "MAP_DMA (vaddr, IOVA)", "control")
    d.arrow("vfio", "pt", "write entries", "control")
    d.arrow("prog", "bar", "src/dst IOVA, count, run", "control")
    d.arrow("bar", "edu", "start", "control")
    d.arrow("edu", "iommu", "DMA at IOVA", "data")
    d.arrow("iommu", "buf", "translated", "data")
    d.arrow("iommu", "dmar", "fault", "completion")
    return d
