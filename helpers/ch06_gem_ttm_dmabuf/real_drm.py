"""Chapter 6, part 2: the DRM walkthrough in a real Linux kernel booted under QEMU.

Experiment ``real_drm.gem_prime`` boots Debian's stock kernel in the kernel lab's VM
(helpers.measure.kernel_vm) with two DRM drivers: ``vgem`` (no hardware at all, GEM on shmem
pages) and ``virtio_gpu`` (QEMU's ``-device virtio-gpu-pci``). The probe
(helpers/measure/kernel_vm/guest/probe.c) makes the calls of Chapter 6's walkthrough on each and reports
what the kernel answered: dumb-buffer handles, pitch and size, the fake mmap offset of
MAP_DUMB, a write and read-back through that mapping, PRIME export (the dma-buf's inode; a
second export of the same object gives the same dma-buf), the dma-buf's fdinfo, SET_NAME as
seen in /proc/self/maps, DMA_BUF_IOCTL_SYNC, debugfs bufinfo, PRIME import (the same handle
back), flink + GEM_OPEN from a second open file, and GEM_CLOSE (a second close is EINVAL while
the dma-buf mapping stays readable).

Live where QEMU is installed; elsewhere a transcript the recorder made in the same VM
(data/kernel_lab/real_drm.gem_prime.json). Where the learner's own machine has /dev/dri,
:func:`on_this_machine` runs the same probe there.

Kernel sources of each step (checked against torvalds/linux): drm_mode_create_dumb_ioctl and
drm_mode_mmap_dumb_ioctl (drivers/gpu/drm/drm_dumb_buffers.c), drm_gem_handle_create_tail
(idr_alloc from 1 in file_priv->object_idr) and drm_gem_close_ioctl / drm_gem_flink_ioctl /
drm_gem_open_ioctl (drivers/gpu/drm/drm_gem.c), drm_prime_handle_to_fd_ioctl and
drm_prime_fd_to_handle_ioctl (drivers/gpu/drm/drm_prime.c), dma_buf_show_fdinfo,
dma_buf_set_name and dma_buf_ioctl (drivers/dma-buf/dma-buf.c).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.core import transcript
from helpers.core.errors import SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.measure import kernel_vm
from helpers.presentation import figures

DRIVERS = ("vgem", "virtio_gpu")
HOST_PROBE_TIMEOUT_S = 60


@experiment("real_drm.gem_prime", chapter=6, needs=(QEMU,), reference=KERNEL_LAB_REFERENCE,
            title="GEM, dumb buffers, PRIME and dma-buf in a real Linux kernel (vgem, virtio-gpu under QEMU)")
def gem_prime(quick: bool) -> dict:
    """Boot the VM once and run the walkthrough on vgem and virtio_gpu (quick changes nothing)."""
    run = kernel_vm.run("gem", {"run": "gem", "drivers": ",".join(DRIVERS)})
    res = run["result"]
    problems = [f"{d.get('driver')}: {d['error']}" for d in res.get("devices", []) if "error" in d]
    if "error" in res or problems or len(res.get("devices", [])) != len(DRIVERS):
        raise SkipExperiment(f"the probe did not complete in the VM: {res.get('error') or problems}")
    return {"devices": res["devices"], "kernel_version": res.get("kernel_version"), "vm": run["vm"]}


def fdinfo(device: dict) -> dict[str, str]:
    """The dma-buf's /proc/self/fdinfo lines as {field: value}."""
    out = {}
    for line in device["dma_buf"]["fdinfo"]:
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def facts(device: dict) -> dict:
    """What the walkthrough showed on one driver, as plain values (tests and the page use them)."""
    dumb = device["dumb"]
    info = fdinfo(device)
    return {
        "driver": device["driver"],
        "handles": [d["handle"] for d in dumb],
        "pitch": dumb[0]["pitch"], "size": dumb[0]["size"],
        "fake_offset": device["map_dumb"]["offset"],
        "second_offset": device["map_dumb"]["offset_second_buffer"],
        "readback_ok": device["map_dumb"]["readback_mismatches"] == 0,
        "dma_buf_link": device["prime_export"]["fd_link"],
        "same_dma_buf": device["prime_export"].get("same_dma_buf"),
        "exp_name": info.get("exp_name"), "name": info.get("name"),
        "maps_shows_name": "dmabuf:course-buf" in device["dma_buf"].get("maps", ""),
        "sync_ok": device["dma_buf"].get("sync_start_rc") == 0 and device["dma_buf"].get("sync_end_rc") == 0,
        "import_same_handle": device["prime_import"]["same_handle"],
        "flink_name": device["flink"]["name"], "gem_open_handle": device["flink"]["second_file_handle"],
        "gem_open_size": device["flink"]["second_file_size"],
        "second_close": device["gem_close"]["second_error"],
        "mapping_after_close_ok": device["gem_close"].get("dma_buf_mapping_mismatches_after_close") == 0,
    }


def table(ev: Evidence) -> figures.Table:
    """One row per step of the walkthrough, one column per driver: what the kernel answered."""
    devs = ev.require()["devices"]
    fs = [facts(d) for d in devs]
    rows = [
        ("CREATE_DUMB: handles of two buffers", *[", ".join(map(str, f["handles"])) for f in fs]),
        ("CREATE_DUMB 256x256x32: pitch, size (bytes)", *[f"{f['pitch']}, {f['size']}" for f in fs]),
        ("MAP_DUMB: fake mmap offset", *[f"{f['fake_offset']:#x}" for f in fs]),
        ("MAP_DUMB: offset of the second buffer", *[f"{f['second_offset']:#x}" for f in fs]),
        ("mmap, write, unmap, map again, read back", *["identical" if f["readback_ok"] else "DIFFERENT" for f in fs]),
        ("PRIME_HANDLE_TO_FD: the fd is", *[f["dma_buf_link"] for f in fs]),
        ("a second export: the same dma-buf (inode)", *[str(f["same_dma_buf"]) for f in fs]),
        ("fdinfo exp_name (the exporter)", *[str(f["exp_name"]) for f in fs]),
        ("DMA_BUF_SET_NAME, then /proc/self/maps shows", *["/dmabuf:course-buf" if f["maps_shows_name"] else "no name"
                                                          for f in fs]),
        ("DMA_BUF_IOCTL_SYNC start/end", *["0, 0" if f["sync_ok"] else "failed" for f in fs]),
        ("PRIME_FD_TO_HANDLE: the same handle back", *[str(f["import_same_handle"]) for f in fs]),
        ("GEM_FLINK name; GEM_OPEN in a second file: handle, size",
         *[f"{f['flink_name']}; {f['gem_open_handle']}, {f['gem_open_size']}" for f in fs]),
        ("GEM_CLOSE twice: the second", *[f["second_close"] for f in fs]),
        ("dma-buf mapping after GEM_CLOSE", *["still reads the data" if f["mapping_after_close_ok"] else "CHANGED"
                                              for f in fs]),
    ]
    return figures.Table(rows, ("step", *[f["driver"] for f in fs]),
                         caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def bufinfo(ev: Evidence, driver: str = "vgem") -> str:
    """debugfs /sys/kernel/debug/dma_buf/bufinfo as the kernel printed it during the walkthrough."""
    dev = next((d for d in ev.require()["devices"] if d["driver"] == driver), None)
    if dev is None:
        raise SkipExperiment(f"no walkthrough of {driver!r} in this evidence")
    return "\n".join(dev["dma_buf"]["bufinfo"])


def provenance_table(ev: Evidence) -> figures.Table:
    """Kernel, QEMU, accelerator, device, boot time and bundle size of the run shown."""
    vm = ev.require()["vm"]
    rows = [("kernel", vm["kernel_release"]), ("kernel package", vm["kernel_package"]), ("QEMU", vm["qemu"]),
            ("accelerator", vm["accel"]), ("devices", f"vgem (no device) and {vm['device']}"),
            ("QEMU start to power-off", f"{vm['boot_seconds']:.1f} s"),
            ("bundle (vmlinuz + initramfs)", f"{vm['vmlinuz_bytes'] / 2**20:.1f} MiB + {vm['initrd_bytes'] / 2**20:.1f} MiB"),
            ("host", vm["host"]), ("date", vm["date"])]
    return figures.Table(rows, ("", ""), caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def on_this_machine() -> dict | str:
    """The same probe on this machine's own /dev/dri/card* (every card), or why it cannot run.

    Needs a DRM device, permission to open it (the `video` or `render` group) and the probe
    built by the kernel lab (`python -m helpers.measure.kernel_vm build`).
    """
    cards = sorted(Path("/dev/dri").glob("card*")) if Path("/dev/dri").is_dir() else []
    if not cards:
        return "this machine has no /dev/dri/card* (no DRM driver): the VM above is where the calls run"
    b = kernel_vm.bundle.existing()
    if b is None or not b.probe.is_file():
        return ("this machine has " + ", ".join(map(str, cards)) + "; build the probe with "
                "`python -m helpers.measure.kernel_vm build` to run it here")
    try:
        r = subprocess.run([str(b.probe), "gem"], capture_output=True, text=True, timeout=HOST_PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"the probe did not finish within {HOST_PROBE_TIMEOUT_S} s on this machine"
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return f"the probe failed here (exit {r.returncode}): {r.stderr.strip()[-300:]}"
