"""Where a number came from: the machine, driver, CUDA and package versions, and when.

Recorded into every reference file, and shown on every replayed figure.
"""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from importlib import metadata

from helpers import __version__
from helpers.core import gpu
from helpers.measure import sysinfo


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages whose behaviour shapes the measurements."""
    out = {"python": platform.python_version()}
    for name in ("numpy", "numba", "numba-cuda", "cupy", "cupy-cuda12x", "cupy-cuda13x", "plotly"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def live_provenance(command_line: list[str] | None = None) -> dict:
    """Provenance of a live measurement on this machine's GPU (device 0).

    Raises NoGPUError when there is no usable GPU: live provenance cannot be invented.
    """
    cp = gpu.cupy()
    p = gpu.probe()
    props = cp.cuda.runtime.getDeviceProperties(0)
    report = sysinfo.collect()
    dev = next((g for g in report.gpus if g.address.lower() == (p.pci_bus_id or "").lower()), None)
    return {
        "gpu": {
            "name": p.name,
            "pci_id": dev.pci_id if dev else None,
            "pci_bus_id": p.pci_bus_id,
            "memory_bytes": int(props["totalGlobalMem"]),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "copy_engines": int(props["asyncEngineCount"]),
        },
        "driver": report.nvidia_module,
        "cuda_runtime": gpu.version_string(p.cuda_runtime),
        "cuda_driver_api": gpu.version_string(p.cuda_driver),
        "pcie": {"current": dev.link_current if dev else None, "max": dev.link_max if dev else None},
        "host": {"kernel": platform.release(), "machine": platform.machine(),
                 "cpu": _cpu_model()},
        "packages": package_versions(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "recorder_version": __version__,
        "command_line": list(command_line if command_line is not None else sys.argv),
    }


def host_summary() -> str:
    """'CPU <model>, kernel <release>': this host's facts as a recording's provenance holds them, for a page
    that sets a live figure beside the reference machine's."""
    return f"CPU {_cpu_model()}, kernel {platform.release()}"


def _cpu_model() -> str:
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


def label(prov: dict) -> str:
    """A one-line description for figure captions: GPU (and its board, from the PCI id), driver,
    CUDA, link, date."""
    g = prov.get("gpu", {})
    date = str(prov.get("date", ""))[:10]
    name = g.get("name", "?")
    known = board(g.get("pci_id"))
    if known:
        name += f" ({known}, {g['pci_id'].lower()})"
    return (f"{name} · driver {prov.get('driver') or '?'} · "
            f"CUDA {prov.get('cuda_runtime') or '?'} · {prov.get('pcie', {}).get('current') or 'PCIe ?'} · {date}")
