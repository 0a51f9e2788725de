"""The provenance of a measurement made now, on this machine's GPU: what the recorder writes into
every recording (and what a page sets beside the reference machine's)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import pwd
import subprocess
import sys

from helpers import __version__
from helpers.core import config, gpu, provenance
from helpers.measure import sysinfo


def git_commit() -> str | None:
    """The checkout's commit ('<sha>-dirty' with uncommitted changes to tracked files), or None
    outside a git checkout: which code made a recording."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(config.REPO_ROOT), *args], capture_output=True, text=True,
                                 timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if not sha or len(sha) != 40:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return sha + ("-dirty" if dirty else "")


def recorder_user() -> str | None:
    """The account that ran the recorder (from the password database, not the environment)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return None


def live_provenance(command_line: list[str] | None = None, recorded_by: str | None = None) -> dict:
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
        "host": {"kernel": platform.release(), "machine": platform.machine(), "cpu": provenance.cpu_model()},
        "packages": provenance.package_versions(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "recorder_version": __version__,
        "command_line": list(command_line if command_line is not None else sys.argv),
        "git_commit": git_commit(),
        "recorded_by": recorded_by or recorder_user(),
    }
