"""A map of the machine: CPU, RAM, the root complex and IOMMU, the PCIe link, and the GPU with its
BARs, copy engines and memory, labelled with what a system report recorded.

Everything written on the map comes from the report (and the GPU's memory size from the
recording's provenance); where the report has no value the box says so. The roles of the BARs
are NVIDIA's: the first memory BAR is the register window (BAR0), the second the aperture onto
device memory (BAR1), which the GPU translates through its own BAR1 page tables, so a page of
device memory has a bus address only while the driver has mapped it there.
"""

from __future__ import annotations

from helpers.measure import sysinfo
from helpers.measure.sysinfo import fmt_bytes
from helpers.presentation.diagrams import Diagram


def _bars(g: sysinfo.PCIDevice) -> list[sysinfo.Bar]:
    return sysinfo.memory_bars(g)


def machine_facts(report: sysinfo.SystemReport, memory_bytes: int | None, vm: bool | None = None) -> dict:
    """The facts the map shows, from the report: GPU id, link, the two BARs, memory, IOMMU, engines."""
    g = report.gpus[0] if report.gpus else None
    bars = _bars(g) if g else []
    regs, aperture = (bars + [None, None])[:2]
    return {
        "gpu": report.cuda.get("name") or (g.pci_id if g else "no GPU"),
        "pci": f"{g.address} [{g.pci_id}]" if g else "not on the PCI bus",
        "link": (g.link_current if g else None) or "link unknown",
        "bar0": f"BAR0 (resource{regs.index}): {fmt_bytes(regs.size)}" if regs else "BAR0: not visible",
        "bar1": f"BAR1 (resource{aperture.index}): {fmt_bytes(aperture.size)}" if aperture else "BAR1: not visible",
        "memory": fmt_bytes(memory_bytes) if memory_bytes else "size unknown",
        "engines": report.cuda.get("async_engines"),
        "numa": g.numa_node if g and g.numa_node is not None else "n/a",
        "iommu": sysinfo.iommu_text(report, vm),
    }


def machine_diagram(report: sysinfo.SystemReport, memory_bytes: int | None, vm: bool | None = None,
                    title: str = "The machine, as its system report describes it") -> Diagram:
    """The map of the machine, with the report's facts written on it (see the module docstring)."""
    f = machine_facts(report, memory_bytes, vm)
    engines = f"asyncEngineCount {f['engines']}" if f["engines"] is not None else "asyncEngineCount n/a"
    desc = _description(f, engines, has_gpu=bool(report.gpus))
    d = Diagram(title, desc, width=780, height=345)
    d.box("cpu", "CPU cores\n(your process)", "cpu", 20, 20)
    d.box("ram", "host RAM\npageable + pinned pages", "memory", 20, 220, w=170)
    d.box("rc", "root complex\n+ IOMMU", "link", 210, 115, w=140)
    d.box("pcie", f"PCIe link\n{f['link']}", "link", 385, 115, w=150)
    d.box("bar0", f"{f['bar0']}\nregister window (MMIO)", "gpu", 570, 10, w=200)
    d.box("bar1", f"{f['bar1']}\naperture via page tables", "gpu", 570, 80, w=200)
    d.box("vram", f"device memory (VRAM)\n{f['memory']}", "vram", 570, 195, w=200, h=70)
    d.box("ce", f"copy engines\n({engines})", "gpu", 385, 230, w=150)
    d.arrow("cpu", "rc", "loads/stores", "control")
    d.arrow("rc", "pcie", "", "data")
    d.arrow("pcie", "bar0", "MMIO", "control")
    d.arrow("pcie", "bar1", "", "data")
    d.arrow("bar1", "vram", "mapped pages", "data")
    d.arrow("ce", "vram", "", "data")
    d.arrow("ce", "pcie", "DMA", "data")
    d.arrow("rc", "ram", "DMA to RAM", "data")
    iommu = f"IOMMU: {f['iommu']}"
    cut = iommu.rfind(" ", 0, 115) if len(iommu) > 115 else len(iommu)
    d.note(20, 312, iommu[:cut])
    d.note(20, 328, iommu[cut:].strip())
    d.note(235, 215, f"GPU's NUMA node: {f['numa']}")
    return d


def _description(f: dict, engines: str, has_gpu: bool) -> str:
    """The map's text description, claiming only what the report holds (no GPU: it says so)."""
    rc = ("The CPU and host RAM sit on one side of the root complex, where an IOMMU, when there is one, "
          "translates devices' DMA addresses")
    if not has_gpu:
        return (f"{rc}. This report shows no GPU on the PCI bus, so the GPU's side of the map (BARs, link, "
                f"memory, copy engines) shows where one would sit and what it would report. IOMMU: {f['iommu']}.")
    link = f"running at {f['link']}" if f["link"] != "link unknown" else "(its speed not in the report)"
    memory = f"its {f['memory']} of device memory" if f["memory"] != "size unknown" else \
        "its device memory (size not in the report)"
    return (f"{rc}; the GPU ({f['gpu']}, PCI {f['pci']}) sits behind a PCIe link {link}. The CPU reaches the "
            f"GPU through its BARs: {f['bar0']}, the register window, and {f['bar1']}, an aperture the GPU "
            f"translates through BAR1 page tables into {memory}. The copy engines move data by DMA across the "
            f"link into and out of host RAM ({engines}: a CUDA capability count, not the number of physical "
            f"engines). IOMMU: {f['iommu']}.")
