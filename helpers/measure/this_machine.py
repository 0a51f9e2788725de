"""This machine's facts, as a recording's provenance holds them: GPU, driver, CUDA, link, host and
package versions, and when.

The recorder writes `live_provenance` into every recording; a page that sets a live figure
beside the reference machine's names this host with `host_summary`. Reading a provenance back
(its board, its label) is helpers.core.provenance.
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
                 "cpu": cpu_model()},
        "packages": package_versions(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "recorder_version": __version__,
        "command_line": list(command_line if command_line is not None else sys.argv),
    }


def host_summary() -> str:
    """'CPU <model>, kernel <release>': this host's facts as a recording's provenance holds them, for a page
    that sets a live figure beside the reference machine's."""
    return f"CPU {cpu_model()}, kernel {platform.release()}"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else what platform knows, else 'unknown')."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
