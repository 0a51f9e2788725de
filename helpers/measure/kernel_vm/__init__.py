"""The kernel lab: boot Debian's stock Linux under QEMU and run real kernel calls in it.

No machine the course supports has a DRM device to show GEM, PRIME, dma-buf and TTM on (CI,
laptops without a GPU, the NVIDIA machines: CUDA creates no /dev/dri node). A virtual machine
does: QEMU emulates display devices whose drivers ship in every distribution kernel
(vgem needs no device at all, virtio-gpu, bochs with 16 MiB of VRAM managed by TTM).

    from helpers.measure import kernel_vm
    run = kernel_vm.run("evict", {"buffers": "8", "flips": "0,1,2,3,4,5"})
    run["result"], run["vm"]          # the probe's JSON, and how the VM ran (kernel, QEMU, accel)

* machines.py what each kind of boot adds (QEMU board and devices, modules, guest programs)
* bundle.py   builds the kernel + initramfs from Debian's packages into build/kernel_lab/
* qemu.py     boots it (TCG, or KVM when usable), always to the end, and reads the JSON back
* transcript  recordings of runs in data/kernel_lab/, for replay where QEMU is absent
* ``python -m helpers.measure.kernel_vm build|run|record`` (see __main__.py)
"""

from __future__ import annotations

import datetime as _dt
import gzip
import platform

from helpers.core import config
from helpers.measure.kernel_vm import bundle, guest_python, machines, qemu

__all__ = ["run", "bundle", "machines", "qemu", "guest_python", "guest_files"]


def guest_files(files: dict[str, bytes] | None = None) -> bytes:
    """The run's /work folder as a gzipped cpio: the course's guest modules (helpers/measure/kernel_vm/guest/*.py)
    and `files` ({name: bytes}, e.g. main.py, the program /init runs), for machines with Python."""
    entries = [("work", None, 0o755)]
    entries += [(f"work/{p.name}", p.read_bytes(), 0o644) for p in sorted(bundle.SOURCES.glob("*.py"))]
    entries += [(f"work/{name}", data, 0o644) for name, data in (files or {}).items()]
    return gzip.compress(bundle.cpio_newc(entries, chardevs=()), compresslevel=1, mtime=0)


def run(machine: str, params: dict[str, str], *, timeout_s: float = qemu.DEFAULT_TIMEOUT_S, log=print,
        files: dict[str, bytes] | None = None, parse=None) -> dict:
    """Build the bundle if needed, boot `machine` (a name in machines.MACHINES) with `params`,
    return {"result": the probe's JSON, "vm": how it ran}. SkipExperiment when this machine cannot.

    On a machine with Python (machines.Machine.python) Debian's Python 3.11 is appended to the
    initramfs, `files` go to /work beside the course's guest modules, and kl.run=python runs
    /work/main.py; `parse` reads the result port (qemu.boot)."""
    m = machines.get(machine)
    hint = config.qemu_missing()
    if hint:
        from helpers.core.errors import SkipExperiment

        raise SkipExperiment(hint)
    b = bundle.ensure(log)
    extra = guest_python.ensure(log).read_bytes() + guest_files(files) if m.python else b""
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
    return {"result": boot.result, "vm": vm}
