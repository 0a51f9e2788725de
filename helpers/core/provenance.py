"""Where a number came from: the machine, driver, CUDA and package versions, and when.

The reading side: how a recording's provenance is named on a figure (`label`), the board a PCI id
names, and this host's facts. The recorder collects a live provenance in
helpers.recording.live (it needs the system report, helpers.measure).
"""

from __future__ import annotations

import platform
from importlib import metadata


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages whose behaviour shapes the measurements."""
    out = {"python": platform.python_version()}
    for name in ("numpy", "numba", "numba-cuda", "cupy", "cupy-cuda12x", "cupy-cuda13x", "plotly"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def host_summary() -> str:
    """'CPU <model>, kernel <release>': this host's facts as a recording's provenance holds them, for a page
    that sets a live figure beside the reference machine's."""
    return f"CPU {cpu_model()}, kernel {platform.release()}"


def cpu_model() -> str:
    """This host's CPU model, as /proc/cpuinfo names it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# Boards by PCI vendor:device id, as the PCI ID database (pci.ids) names them. CUDA's name does
# not tell the boards apart ("NVIDIA H100 80GB HBM3" is the SXM5 module), and the link a board
# sits on is not its form factor: the course's reference H100 is an SXM5 module on a PCIe Gen5
# x16 link, passed through to a VM.
BOARDS = {
    "10de:2330": "H100 SXM5 80GB",
    "10de:2331": "H100 PCIe",
    "10de:2335": "H200 SXM 141GB",
}


def board(pci_id: str | None) -> str | None:
    """The board a PCI id names (BOARDS), or None when the course does not know it."""
    return BOARDS.get(str(pci_id or "").lower())


def gpu_label(g: dict) -> str:
    """'NVIDIA H100 80GB HBM3 (H100 SXM5 80GB, 10de:2330)': the GPU's name and, from its PCI id, its board."""
    name = (g or {}).get("name", "?")
    known = board((g or {}).get("pci_id"))
    return f"{name} ({known}, {g['pci_id'].lower()})" if known else name


def label(prov: dict) -> str:
    """A one-line description for figure captions: GPU (and its board, from the PCI id), driver,
    CUDA, link, date."""
    date = str(prov.get("date", ""))[:10]
    return (f"{gpu_label(prov.get('gpu', {}))} · driver {prov.get('driver') or '?'} · "
            f"CUDA {prov.get('cuda_runtime') or '?'} · {prov.get('pcie', {}).get('current') or 'PCIe ?'} · {date}")
