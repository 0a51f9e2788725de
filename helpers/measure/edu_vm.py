"""QEMU's edu device in the kernel lab's VM: run the guest probe (or any guest Python) on it.

The VFIO parts of the course (Chapter 2 part 2, Chapter 4 part 2, Lab 6) all boot the kernel
lab's ``edu`` machine (helpers.measure.kernel_vm.machines: q35, an emulated Intel IOMMU, edu)
and run Python inside it. This module is the one door to that:

* :func:`missing` says what this machine lacks to run them live (QEMU; a QEMU built without
  the edu device or the Intel IOMMU), with how to install it;
* :func:`probe` runs a scenario of ``helpers/measure/kernel_vm/guest/edu_probe.py`` in the guest;
* :func:`run_guest` runs any guest program (Lab 6's checks);
* :func:`guest_source` gives the source of a guest function, so a page shows the very lines
  that ran in the VM.
"""

from __future__ import annotations

import ast
import functools
import subprocess

from helpers.core import config
from helpers.core.errors import SkipExperiment
from helpers.measure import kernel_vm
from helpers.measure.kernel_vm import bundle

MACHINE = "edu"
TIMEOUT_S = 240.0
PROBE_MAIN = b"import sys\nimport edu_probe\nsys.exit(edu_probe.main(['edu_probe']))\n"
NEEDED_DEVICES = {"edu": "QEMU's educational PCI device", "intel-iommu": "the emulated Intel IOMMU"}


@functools.cache
def _device_list(binary: str) -> str:
    r = subprocess.run([binary, "-nodefaults", "-machine", "q35", "-device", "help"], capture_output=True,
                       text=True, timeout=60)
    return r.stdout + r.stderr


def missing() -> str | None:
    """None when the edu machine can boot here, else what is missing and how to install it."""
    hint = config.qemu_missing()
    if hint:
        return hint
    binary = config.qemu_binary()
    listed = _device_list(binary)
    lacking = [f"{name} ({what})" for name, what in NEEDED_DEVICES.items() if f'name "{name}"' not in listed]
    if lacking:
        return (f"{binary} has no {' and no '.join(lacking)}: install a full QEMU build (Debian/Ubuntu: "
                "`sudo apt-get install --no-install-recommends qemu-system-x86`; Fedora: `sudo dnf install "
                "qemu-system-x86-core`; from source: configure with the edu device and the Intel IOMMU enabled)")
    return None


def run_guest(main_py: bytes, params: dict[str, str], *, files: dict[str, bytes] | None = None,
              timeout_s: float = TIMEOUT_S, parse=None) -> dict:
    """Boot the edu machine, run `main_py` (as /work/main.py, beside the course's guest modules and
    `files`) and return kernel_vm.run's {"result", "vm"}. SkipExperiment names what is missing."""
    hint = missing()
    if hint:
        raise SkipExperiment(hint)
    return kernel_vm.run(MACHINE, {"run": "python", **params}, files={**(files or {}), "main.py": main_py},
                         timeout_s=timeout_s, parse=parse)


def probe(scenario: str, **params: str) -> dict:
    """Run edu_probe.py's `scenario` ("bar" or "dma") in the guest: {"result": its JSON, "vm": ...}.
    SkipExperiment when the probe reports an error (the VM ran, the device refused)."""
    run = run_guest(PROBE_MAIN, {"scenario": scenario, **params})
    if "error" in run["result"]:
        raise SkipExperiment(f"the edu probe failed in the VM: {run['result']['error']}")
    return run


def guest_module():
    """The guest library (helpers/measure/kernel_vm/guest/edu.py) imported here, to read: its constants, layouts and
    classes are the ones the VM's code uses (it is standard library only; nothing in it runs a device)."""
    import importlib.util
    import sys

    if "edu" in sys.modules and getattr(sys.modules["edu"], "__file__", "") == str(bundle.SOURCES / "edu.py"):
        return sys.modules["edu"]
    spec = importlib.util.spec_from_file_location("edu", bundle.SOURCES / "edu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def guest_source(*names: str, module: str = "edu_probe.py") -> str:
    """The source of the named functions or classes of a guest module (helpers/measure/kernel_vm/guest/), in order."""
    path = bundle.SOURCES / module
    text = path.read_text()
    tree = ast.parse(text)
    found = {n.name: ast.get_source_segment(text, n) for n in tree.body
             if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    unknown = [n for n in names if n not in found]
    if unknown:
        raise KeyError(f"{module} defines no {unknown}")
    return "\n\n\n".join(found[n] for n in names)
