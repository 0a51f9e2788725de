"""The kernel lab: boot Debian's stock Linux under QEMU and run real kernel calls in it.

No machine the course supports has a DRM device to show GEM, PRIME, dma-buf and TTM on (CI,
laptops without a GPU, the NVIDIA machines: CUDA creates no /dev/dri node). A virtual machine
does: QEMU emulates display devices whose drivers ship in every distribution kernel
(vgem needs no device at all, virtio-gpu, bochs with 16 MiB of VRAM managed by TTM).

    from helpers.measure import kernel_vm
    kernel_vm.missing("edu")          # None, or what this machine lacks to boot it (and how to install it)
    run = kernel_vm.run("evict", {"run": "evict", "buffers": "8", "flips": "0,1,2,3,4,5"})
    run["result"], run["vm"]          # the probe's JSON, and how the VM ran (kernel, QEMU, accel)
    kernel_vm.run("edu", {"scenario": "dma"})      # a machine with Python: the edu probe, in the guest
    kernel_vm.run("edu", {}, main=b"...", files={...})  # ... or any guest program (Lab 6's checks)
    kernel_vm.guest_source("identify")  # a guest function's source, so a page shows the lines that ran

This package is the one way into the VM: every real-kernel part (Chapters 2b, 4b and 6b, Lab 6)
calls :func:`run`.

* machines.py what each kind of boot adds (QEMU board and devices, modules, guest programs)
* bundle.py   builds the kernel + initramfs from Debian's packages into build/kernel_lab/
* qemu.py     boots it (TCG, or KVM when usable), always to the end, and reads the JSON back
* transcript  recordings of runs in data/kernel_lab/, for replay where QEMU is absent
* ``python -m helpers.measure.kernel_vm build|run|record`` (see __main__.py)
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import gzip
import importlib.util
import platform
import subprocess
import sys
import types

from helpers.core import config
from helpers.core.errors import SkipExperiment
from helpers.measure.kernel_vm import bundle, guest_python, machines, qemu

__all__ = ["run", "missing", "guest_source", "guest_module", "bundle", "machines", "qemu", "guest_python",
           "guest_files"]

# What a machine with Python runs when the caller gives no program: the edu probe's scenario
# (kl.scenario=bar|dma on the kernel command line), helpers/measure/kernel_vm/guest/edu_probe.py.
PROBE_MAIN = b"import sys\nimport edu_probe\nsys.exit(edu_probe.main(['edu_probe']))\n"


@functools.cache
def _device_list(binary: str) -> str:
    r = subprocess.run([binary, "-nodefaults", "-machine", "q35", "-device", "help"], capture_output=True,
                       text=True, timeout=60)
    return r.stdout + r.stderr


def missing(machine: str) -> str | None:
    """None when `machine` can boot here, else what is missing (QEMU; a QEMU built without one of the
    machine's devices, e.g. edu or the Intel IOMMU) and how to install it."""
    m = machines.get(machine)
    hint = config.qemu_missing()
    if hint or not m.needs_devices:
        return hint
    binary = config.qemu_binary()
    listed = _device_list(binary)
    lacking = [f"{name} ({what})" for name, what in m.needs_devices if f'name "{name}"' not in listed]
    if lacking:
        return (f"{binary} has no {' and no '.join(lacking)}: install a full QEMU build (Debian/Ubuntu: "
                "`sudo apt-get install --no-install-recommends qemu-system-x86`; Fedora: `sudo dnf install "
                "qemu-system-x86-core`; from source: configure with the edu device and the Intel IOMMU enabled)")
    return None


def guest_files(files: dict[str, bytes] | None = None) -> bytes:
    """The run's /work folder as a gzipped cpio: the course's guest modules (helpers/measure/kernel_vm/guest/*.py)
    and `files` ({name: bytes}, e.g. main.py, the program /init runs), for machines with Python."""
    entries = [("work", None, 0o755)]
    entries += [(f"work/{p.name}", p.read_bytes(), 0o644) for p in sorted(bundle.SOURCES.glob("*.py"))]
    entries += [(f"work/{name}", data, 0o644) for name, data in (files or {}).items()]
    return gzip.compress(bundle.cpio_newc(entries, chardevs=()), compresslevel=1, mtime=0)


def run(machine: str, params: dict[str, str], *, main: bytes | None = None, files: dict[str, bytes] | None = None,
        timeout_s: float | None = None, log=print, parse=None) -> dict:
    """Build the bundle if needed, boot `machine` (a name in machines.MACHINES) with `params`,
    return {"result": the probe's JSON, "vm": how it ran}. SkipExperiment when this machine cannot
    (missing() says why), or when the probe reports an error (the VM ran, the guest refused).

    On a machine with Python (machines.Machine.python) Debian's Python 3.11 is appended to the
    initramfs, `files` go to /work beside the course's guest modules, and kl.run=python runs
    /work/main.py: `main`, by default the edu probe (PROBE_MAIN, its scenario in `params`);
    `parse` reads the result port (qemu.boot)."""
    m = machines.get(machine)
    hint = missing(machine)
    if hint:
        raise SkipExperiment(hint)
    if m.python:
        params = {"run": "python", **params}
        files = {**(files or {}), "main.py": PROBE_MAIN if main is None else main}
    b = bundle.ensure(log)
    extra = guest_python.ensure(log).read_bytes() + guest_files(files) if m.python else b""
    timeout_s = timeout_s or (qemu.PYTHON_TIMEOUT_S if m.python else qemu.DEFAULT_TIMEOUT_S)
    boot = qemu.boot(b.kernel, b.initrd, machine, params, timeout_s=timeout_s, extra_initrd=extra, parse=parse)
    vm = {"kernel_release": boot.result.get("kernel_release") or b.kernel_release,
          "kernel_package": b.manifest["kernel_deb"], "qemu": boot.qemu_version, "accel": boot.accel.upper(),
          "device": m.label, "machine": machine, "params": params,
          "boot_seconds": round(boot.seconds, 2), "bundle_bytes": bundle.bundle_bytes(b),
          "vmlinuz_bytes": b.manifest["vmlinuz_bytes"], "initrd_bytes": b.manifest["initrd_bytes"],
          "host": f"{platform.system()} {platform.release()} {platform.machine()}",
          "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "notes": boot.notes}
    abort = qemu.device_abort(boot.stderr_tail)
    if abort:  # a streamed result (parse) survived QEMU stopping the VM: say why it stopped
        vm["device_abort"] = abort.lstrip(" —")
    if isinstance(boot.result, dict) and "error" in boot.result:
        raise SkipExperiment(f"the probe failed in the VM ({machine}): {boot.result['error']}")
    return {"result": boot.result, "vm": vm}


def guest_module() -> types.ModuleType:
    """The guest library (helpers/measure/kernel_vm/guest/edu.py) imported here, to read: its constants, layouts and
    classes are the ones the VM's code uses (it is standard library only; nothing in it runs a device)."""
    path = bundle.SOURCES / "edu.py"
    if not path.is_file():  # a copy without the guest sources (the grader's sandbox): nothing to read
        return types.ModuleType("edu", "the guest library (edu.py) is not in this copy of the course")
    if "edu" in sys.modules and getattr(sys.modules["edu"], "__file__", "") == str(path):
        return sys.modules["edu"]
    spec = importlib.util.spec_from_file_location("edu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def guest_source(*names: str, module: str = "edu_probe.py") -> str:
    """The source of the named functions or classes of a guest module (bundle.SOURCES), in order."""
    text = (bundle.SOURCES / module).read_text()
    tree = ast.parse(text)
    found = {n.name: ast.get_source_segment(text, n) for n in tree.body
             if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    unknown = [n for n in names if n not in found]
    if unknown:
        raise KeyError(f"{module} defines no {unknown}")
    return "\n\n\n".join(found[n] for n in names)
