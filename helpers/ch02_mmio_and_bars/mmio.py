"""Chapter 2 — MMIO and BARs: the learner's BARs, the card of source question 001, and what CPU
loads and stores through a BAR cost (on the toy GPU's link model).

Real BARs come from sysfs through helpers.measure.sysinfo (live when this machine has a GPU on its
PCI bus, replayed from the reference file's recorded `system` otherwise). Access costs come
from the toy GPU (helpers.models.toygpu): its bytes really move through shared memory, its times
are the link model's — labelled SIMULATED wherever they appear.

Kernel sources behind the chapter (linux repository):
- drivers/pci/pci-sysfs.c: pci_mmap_resource_wc (the mmap of the `resourceN_wc` files, which exist
  for prefetchable BARs)
- drivers/pci/probe.c: pci_read_bases -> __pci_size_stdbars / __pci_size_bars (sizing, with
  decoding off), __pci_read_base (decoding the type bits)
- drivers/pci/rebar.c: pci_rebar_get_possible_sizes, pci_resize_resource (Resizable BAR)
- drivers/pci/pci-sysfs.c: pci_mmap_resource starts with security_locked_down(LOCKDOWN_PCI_ACCESS),
  which refuses every resourceN mmap with EPERM, even root's, while the kernel is locked down
- mm/memory.c: remap_pfn_range (how a driver maps a BAR into a process); since a 2025 mm series
  the memory type is reserved by pfnmap_track / set by pfnmap_setup_cachemode (track_pfn_remap
  before it)
- arch/x86/include/asm/pgtable_types.h and include/linux/pgtable.h: pgprot_noncached,
  pgprot_writecombine
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode
from helpers.measure import sysinfo
from helpers.models.toygpu import ToyGPU
from helpers.models.toygpu.link import LinkParams
from helpers.presentation import figures

# Seed 001 (a 2009 forum thread): "three configured areas, one of them 255MB large", on a
# card "supposed to include 768MB of memory". A BAR is a power of two, so 255 MB is how a
# 256 MiB window was reported (end - start, without the +1, is 255.99 MiB).
SEED001_BAR_BYTES = 256 << 20
SEED001_MEMORY_BYTES = 768 << 20
# Seed 002: memcpy of 16 MB (16*1024*1024 bytes in the posted code) out of an mmapped FPGA BAR
# took 1711 ms into malloc'ed memory and 1701 ms into cudaMallocHost memory.
SEED002_BYTES = 16 * 1024 * 1024
SEED002_SECONDS = (1.711, 1.701)


def _check_report(report) -> None:
    if not isinstance(report, sysinfo.SystemReport):
        raise InputTypeError(f"expected a sysinfo.SystemReport, got {type(report).__name__}")


def bar_role(gpu: sysinfo.PCIDevice, bar: sysinfo.Bar) -> str:
    """What a GPU BAR is for, by the usual NVIDIA layout (a best guess for other vendors).

    Why: sysfs numbers BARs by register slot, and a 64-bit BAR takes two slots, so NVIDIA's
    BAR0/BAR1/BAR2 appear as resource0/2/4.
    """
    if not isinstance(bar, sysinfo.Bar):
        raise InputTypeError(f"expected a sysinfo.Bar, got {type(bar).__name__}")
    if bar.index == sysinfo.PCI_ROM_RESOURCE:
        return "expansion ROM (firmware image)"
    if bar.is_io:
        return "legacy I/O ports"
    mem = [b for b in gpu.bars if not b.is_io and b.index != sysinfo.PCI_ROM_RESOURCE]
    if bar is max(mem, key=lambda b: b.size):
        return "NVIDIA 'BAR1': an aperture whose pages the driver maps onto VRAM pages"
    if bar.index == 0:
        return "registers (NVIDIA 'BAR0'): MMIO control of the GPU"
    return "driver window (NVIDIA 'BAR2/3'): instance memory, page tables"


def bar_rows(report: sysinfo.SystemReport) -> list[tuple[str, ...]]:
    """(GPU, sysfs resource, size, 64-bit, prefetchable, _wc file, role) for every GPU BAR."""
    _check_report(report)
    out = []
    for g in report.gpus:
        for b in g.bars:
            if b.index == sysinfo.PCI_ROM_RESOURCE:
                continue
            out.append((f"{g.address} [{g.pci_id}]", f"resource{b.index}", sysinfo.fmt_bytes(b.size),
                        "yes" if b.is_64bit else "no", "yes" if b.prefetchable else "no",
                        "yes" if b.write_combine_file else "no", bar_role(g, b)))
    return out


def register_bar_notes(report: sysinfo.SystemReport) -> list[str]:
    """One warning per GPU whose register BAR (NVIDIA's BAR0) is flagged prefetchable.

    Why: registers normally sit in a non-prefetchable BAR, because reading a register may change
    the device's state and stores to registers must arrive one by one, in program order. The
    prefetchable bit only makes sysfs offer a `resourceN_wc` file; a register window must still
    never be mapped write-combined (stores could merge or reorder, loads could be speculative).
    """
    _check_report(report)
    notes = []
    for g in report.gpus:
        for b in g.bars:
            if b.index == sysinfo.PCI_ROM_RESOURCE or not bar_role(g, b).startswith("registers"):
                continue
            if b.prefetchable:
                wc = f"so sysfs offers resource{b.index}_wc" if b.write_combine_file else "(no _wc file here)"
                notes.append(f"{g.address}: resource{b.index} holds registers yet is flagged prefetchable, {wc}. "
                             "Registers are normally non-prefetchable; map them uncached only, never "
                             "write-combined.")
    return notes


def largest_bar(report: sysinfo.SystemReport) -> int | None:
    """Bytes of the largest memory BAR of the first GPU in the report (None without one)."""
    _check_report(report)
    for g in report.gpus:
        mem = [b.size for b in g.bars if not b.is_io and b.index != sysinfo.PCI_ROM_RESOURCE]
        if mem:
            return max(mem)
    return None


def aperture_figure(machines: list[tuple[str, int, int, Mode | None, str]]) -> figures.CourseFigure:
    """Bars of aperture size vs memory size (GiB, log axis) for (name, bar, memory, mode, source).

    A machine whose numbers are neither measured nor recorded (seed 001's card, a forum
    report) is passed with mode None: it adds no provenance line, so its name must say where
    the numbers come from.
    """
    if not machines:
        raise InputError("aperture_figure needs at least one machine")
    fig = go.Figure()
    names = [m[0] for m in machines]
    fig.add_bar(name="largest BAR (CPU-visible window)", x=names, y=[m[1] / 2**30 for m in machines],
                marker_color="#b35806")
    fig.add_bar(name="device memory", x=names, y=[m[2] / 2**30 for m in machines], marker_color="#542788")
    fig.update_layout(title="How much of the GPU's memory the CPU can see through a BAR",
                      barmode="group", yaxis={"type": "log", "title": "GiB (log scale)"},
                      legend={"orientation": "h", "y": -0.2})
    parts, seen = [], set()
    for _, _, _, mode, source in machines:
        if mode is not None and (mode, source) not in seen:
            parts.append((mode, source))
            seen.add((mode, source))
    if not parts:
        raise InputError("at least one machine needs a mode (live or replay) for the provenance line")
    return figures.CourseFigure(fig, parts)


# -- the toy GPU: what a CPU access through a BAR costs ----------------------------------------
# "streaming read" names its mechanism: MOVNTDQA from a write-combined mapping, which may fetch a whole
# 64-byte line per round trip; ordinary uncached loads move 8 bytes (16 with an SSE register) at a time.
METHODS = ("uncached read, 4 B", "uncached read, 8 B", "streaming read (MOVNTDQA, WC mapping), 64 B",
           "uncached write, 8 B", "write-combined, 64 B bursts", "device DMA to host")


def access_cost(gpu: ToyGPU, method: str, nbytes: int, offset: int = 0) -> dict:
    """Move `nbytes` between the CPU and the toy's VRAM by `method`; return its modelled cost.

    The data really moves: through BAR1 (a scratch buffer mapped into the aperture for the
    access, as a driver maps a buffer before the CPU may touch it) or by the device's DMA
    engine; the time is the link model's. `offset` is where in the scratch buffer the access
    starts. Returns {'method', 'nbytes', 'transactions', 'model_ns', 'model_gbps'}.
    """
    if not isinstance(gpu, ToyGPU):
        raise InputTypeError(f"expected a ToyGPU, got {type(gpu).__name__}")
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")
    if not _is_int(nbytes) or nbytes < 64 or nbytes % 64:
        raise InputError(f"nbytes must be a positive multiple of 64, got {nbytes!r}")
    dva = gpu.alloc_vram(offset + nbytes)  # a scratch buffer; the CPU methods reach it through BAR1
    try:
        return {"method": method, "nbytes": nbytes, **_move(gpu, method, dva + offset, nbytes)}
    finally:
        gpu.unmap(dva, offset + nbytes)


def _move(gpu: ToyGPU, method: str, dva: int, nbytes: int) -> dict:
    if method == "device DMA to host":
        t0 = gpu.device_counters()["MODEL_TIME_NS"]
        gpu.download(dva, nbytes)
        ns = gpu.device_counters()["MODEL_TIME_NS"] - t0
        return {"transactions": 1, "model_ns": float(ns), "model_gbps": nbytes / ns if ns else float("inf")}
    at = gpu.bar1_map_dva(dva, nbytes)  # a VRAM page has a BAR1 address only while mapped there
    try:
        before = gpu.counters.copy()
        if method.startswith("uncached read"):
            width = int(method.split(",")[1].strip().split()[0])
            gpu.bar1_read(at, nbytes, width=width)
            tx = nbytes // width
        elif method.startswith("streaming read"):
            gpu.bar1_read(at, nbytes, width=64)
            tx = nbytes // 64
        elif method.startswith("uncached write"):
            gpu.bar1_write(at, bytes(nbytes), mode="uc", width=8)
            tx = nbytes // 8
        else:
            gpu.bar1_write(at, bytes(nbytes), mode="wc")
            tx = (gpu.counters - before).wc_bursts
        ns = gpu.last_ns
    finally:
        gpu.bar1_unmap(at - at % 4096, at % 4096 + nbytes)
    return {"transactions": tx, "model_ns": float(ns), "model_gbps": nbytes / ns if ns else float("inf")}


def access_sweep(gpu: ToyGPU, sizes: list[int], methods: tuple[str, ...] = METHODS) -> list[dict]:
    """access_cost for every (method, size): the data behind the chapter's figure."""
    if not sizes:
        raise InputError("access_sweep needs at least one size")
    return [access_cost(gpu, m, n) for m in methods for n in sizes]


def sweep_figure(results: list[dict], seed: int) -> figures.CourseFigure:
    """Modelled bandwidth vs size, one line per access method (SIMULATED)."""
    if not results:
        raise InputError("sweep_figure needs results from access_sweep")
    fig = go.Figure()
    for m in dict.fromkeys(r["method"] for r in results):
        rs = [r for r in results if r["method"] == m]
        fig.add_scatter(x=[r["nbytes"] for r in rs], y=[r["model_gbps"] for r in rs], name=m,
                        mode="lines+markers")
    figures.log_size_axis(fig, "bytes moved")
    fig.update_layout(title="CPU access to a BAR vs device DMA — modelled bandwidth",
                      yaxis={"type": "log", "title": "modelled GB/s (1 GB = 1e9 B, log scale)"},
                      legend={"orientation": "h", "y": -0.3})
    return figures.CourseFigure(fig, [(Mode.SIMULATED, f"toy GPU link model, random seed {seed}")])


def cost_rows(results: list[dict]) -> list[tuple[str, ...]]:
    """(method, bytes, transactions, modelled µs, modelled GB/s) rows for a table."""
    return [(r["method"], f"{r['nbytes']:,}", f"{r['transactions']:,}", f"{r['model_ns'] / 1e3:,.1f}",
             f"{r['model_gbps']:.3f}") for r in results]


def cost_line(r: dict) -> str:
    """One access_cost result as a sentence, with units ('1 transaction', '16,384 transactions')."""
    tx = r["transactions"]
    return (f"{r['method']}: {r['nbytes']:,} B in {tx:,} transaction{'' if tx == 1 else 's'}, "
            f"{r['model_ns'] / 1e3:,.1f} µs modelled -> {r['model_gbps']:.3f} GB/s (SIMULATED)")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_width(width) -> None:
    if not _is_int(width) or width not in (1, 2, 4, 8, 16, 32, 64):
        raise InputError(f"width must be a power of two from 1 to 64 bytes, got {width!r}")


def implied_read_ns(nbytes: int = SEED002_BYTES, seconds: float = SEED002_SECONDS[1],
                    width: int = 8) -> float:
    """ns per load if copying `nbytes` with `width`-byte loads, one after another, took `seconds`."""
    _check_width(width)
    if not (_is_number(nbytes) and _is_number(seconds) and nbytes > 0 and seconds > 0):
        raise InputError(f"nbytes and seconds must be positive, got {nbytes!r}, {seconds!r}")
    return seconds / (nbytes / width) * 1e9


def seed002_rows(params: LinkParams | None = None) -> list[tuple[str, ...]]:
    """Per-load latency that seed 002's 1.7 s for 16 MB implies, for each load width."""
    p = params or LinkParams()
    rows = []
    for w in (1, 4, 8, 16, 64):
        ns = implied_read_ns(width=w)
        verdict = ("shorter than any PCIe round trip: loads cannot have been 1 byte wide" if ns < 250 else
                   "a plausible PCIe round trip per load (a chipset of that era + FPGA endpoint)" if ns < 3000 else
                   "too slow for one round trip per load")
        rows.append((f"{w} B", f"{SEED002_BYTES // w:,}", f"{ns:,.0f}", verdict))
    rows.append(("toy model, 8 B", f"{SEED002_BYTES // 8:,}", f"{p.mmio_read_rtt_ns:,.0f}",
                 "the toy's round trip (SIMULATED parameter, not a measurement)"))
    return rows


def uc_read_ms(nbytes: int, width: int = 8, params: LinkParams | None = None) -> float:
    """Modelled ms to read `nbytes` with uncached loads of `width` bytes (no jitter)."""
    p = params or LinkParams()
    _check_width(width)
    if not _is_int(nbytes) or nbytes <= 0 or nbytes % width:
        raise InputError(f"nbytes must be a positive multiple of width={width}, got {nbytes!r}")
    one = p.mmio_read_rtt_ns + (width + p.tlp_overhead_bytes) / p.link_gbps
    return nbytes // width * one / 1e6


def dma_ms(nbytes: int, params: LinkParams | None = None) -> float:
    """Modelled ms for the toy's DMA engine to move `nbytes` in one descriptor (no jitter)."""
    p = params or LinkParams()
    if not _is_int(nbytes) or nbytes <= 0:
        raise InputError(f"nbytes must be a positive int, got {nbytes!r}")
    return (p.dma_latency_ns + nbytes / p.dma_gbps) / 1e6
