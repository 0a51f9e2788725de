"""The kernel lab's runner and bundle builder without QEMU: cpio, .deb, module order, the
kernel command line, the result parser, transcripts, timeouts (a fake QEMU that hangs)."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from helpers.core import config, experiments, transcript
from helpers.core.errors import DeviceTimeoutError, InputError, ReferenceDataError, SkipExperiment
from helpers.measure.kernel_vm import bundle, machines, qemu


def test_cpio_newc_entries_are_aligned_and_end_with_the_trailer():
    data = bundle.cpio_newc([("bin", None, 0o755), ("init", b"#!/bin/sh\n", 0o755)])
    assert data.startswith(b"070701")
    assert len(data) % 4 == 0
    assert b"init\0" in data and b"dev/console\0" in data and data.rstrip(b"\0").endswith(b"TRAILER!!!")
    # /init: a regular file, 0755, its size in the header; /dev/console: char device 5:1
    hdr = data[data.index(b"070701", data.index(b"bin\0")):][:110]
    assert int(hdr[14:22], 16) == 0o100755 and int(hdr[54:62], 16) == len(b"#!/bin/sh\n")
    con = data[data.rindex(b"070701", 0, data.index(b"dev/console")):][:110]
    assert int(con[14:22], 16) & 0o170000 == 0o020000
    assert (int(con[78:86], 16), int(con[86:94], 16)) == (5, 1)


def _deb(tmp_path: Path, files: dict[str, bytes]) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    members = [("debian-binary", b"2.0\n"), ("data.tar.gz", raw.getvalue())]
    out = b"!<arch>\n"
    for name, body in members:
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(body):<10}`\n".encode() + body
        out += b"\n" if len(body) % 2 else b""
    p = tmp_path / "x.deb"
    p.write_bytes(out)
    return p


def test_extract_deb_takes_only_the_named_paths(tmp_path):
    deb = _deb(tmp_path, {"./boot/vmlinuz-6.1.0-1-amd64": b"K" * 11, "./usr/share/doc/x": b"doc"})
    files = bundle.extract_deb(deb, ("./boot/vmlinuz-",), tmp_path / "out")
    assert [f.name for f in files] == ["vmlinuz-6.1.0-1-amd64"]
    assert files[0].read_bytes() == b"K" * 11


def test_not_a_deb_is_refused(tmp_path):
    p = tmp_path / "bad.deb"
    p.write_bytes(b"hello")
    with pytest.raises(SkipExperiment, match="not a .deb"):
        bundle.extract_deb(p, ("./",), tmp_path)


def _ko(tmp_path: Path, name: str, depends: str) -> Path:
    p = tmp_path / f"{name}.ko"
    p.write_bytes(b"\x7fELF...\0license=GPL\0depends=" + depends.encode() + b"\0vermagic=6.1\0")
    return p


def test_module_order_puts_dependencies_first_and_matches_dash_and_underscore(tmp_path):
    mods = {n: _ko(tmp_path, n, d) for n, d in
            {"drm": "", "ttm": "drm", "drm_kms_helper": "drm", "bochs": "drm_kms_helper,ttm,drm",
             "virtio-gpu": "drm,virtio_ring", "virtio_ring": ""}.items()}
    order = [p.stem for p in bundle.module_order(mods, ("bochs", "virtio_gpu"))]
    assert order.index("drm") < order.index("ttm") < order.index("bochs")
    assert order.index("drm_kms_helper") < order.index("bochs")
    assert order.index("virtio_ring") < order.index("virtio-gpu")
    assert len(order) == len(set(order)) == 6


def test_module_order_names_a_missing_module_and_a_cycle(tmp_path):
    with pytest.raises(SkipExperiment, match="nouveau"):
        bundle.module_order({"drm": _ko(tmp_path, "drm", "")}, ("nouveau",))
    cyc = {"a": _ko(tmp_path, "a", "b"), "b": _ko(tmp_path, "b", "a")}
    with pytest.raises(SkipExperiment, match="cycle"):
        bundle.module_order(cyc, ("a",))


def test_kernel_cmdline_passes_parameters_and_refuses_what_would_break_it():
    line = qemu.kernel_cmdline({"run": "evict", "flips": "0,1,2/3,4"})
    assert line.endswith(" kl.run=evict kl.flips=0,1,2/3,4") and "console=ttyS0" in line
    for bad in ({"run": "gem; reboot"}, {"Run": "gem"}, {"x": "a b"}):
        with pytest.raises(InputError):
            qemu.kernel_cmdline(bad)


def test_command_uses_nodefaults_the_device_and_two_serial_ports(tmp_path):
    cmd = qemu.command("qemu", tmp_path / "k", tmp_path / "i", "evict", {"run": "evict"}, "tcg",
                       tmp_path / "c", tmp_path / "r")
    assert "-nodefaults" in cmd and "-no-reboot" in cmd and cmd[cmd.index("-accel") + 1] == "tcg"
    assert cmd.count("-serial") == 2 and cmd[-1].startswith("bochs-display")
    assert cmd[cmd.index("-machine") + 1] == "pc" and cmd[cmd.index("-m") + 1] == "256"
    assert " kl.machine=evict kl.run=evict" in cmd[cmd.index("-append") + 1]
    with pytest.raises(InputError, match="amdgpu"):
        qemu.command("qemu", tmp_path, tmp_path, "amdgpu", {}, "tcg", tmp_path, tmp_path)


def test_a_machine_brings_its_board_memory_devices_and_command_line(monkeypatch, tmp_path):
    m = machines.Machine(name="iommu", devices=("-device", "intel-iommu,intremap=on", "-device", "edu"),
                         modules=("vfio",), board="q35,kernel-irqchip=split", memory_mb=512,
                         cmdline="intel_iommu=on")
    monkeypatch.setitem(machines.MACHINES, "iommu", m)
    cmd = qemu.command("qemu", tmp_path / "k", tmp_path / "i", "iommu", {"run": "x"}, "tcg", tmp_path / "c",
                       tmp_path / "r")
    assert cmd[cmd.index("-machine") + 1] == "q35,kernel-irqchip=split" and cmd[cmd.index("-m") + 1] == "512"
    assert cmd[-4:] == ["-device", "intel-iommu,intremap=on", "-device", "edu"]
    assert cmd[cmd.index("-append") + 1].endswith(" intel_iommu=on kl.machine=iommu kl.run=x")
    assert m.label == "intel-iommu,intremap=on edu"
    assert "vfio" in machines.all_modules()


def test_each_machine_gets_its_own_module_load_order(tmp_path):
    mods = {n: _ko(tmp_path, n, d) for n, d in
            {"drm": "", "ttm": "drm", "drm_kms_helper": "drm", "bochs": "drm_kms_helper,ttm,drm",
             "vgem": "drm"}.items()}
    text = bundle.load_order(bundle.module_order(mods, ("drm", "drm_kms_helper", "vgem")))
    assert text == "drm\ndrm_kms_helper fbdev_emulation=0\nvgem\n"
    assert len(machines.all_modules()) == len(set(machines.all_modules()))
    for m in machines.MACHINES.values():
        assert set(m.modules) <= set(machines.all_modules())


def test_parse_result_between_markers_and_the_ways_it_fails():
    assert qemu.parse_result("noise\r\nKERNEL-LAB-BEGIN\r\n{\"a\": 1}\r\nKERNEL-LAB-END\r\n") == {"a": 1}
    with pytest.raises(SkipExperiment, match="before the probe"):
        qemu.parse_result("")
    with pytest.raises(SkipExperiment, match="while the probe ran"):
        qemu.parse_result("KERNEL-LAB-BEGIN\n{\"a\"")
    with pytest.raises(SkipExperiment, match="not JSON"):
        qemu.parse_result("KERNEL-LAB-BEGIN\n{oops\nKERNEL-LAB-END\n")


def test_missing_qemu_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_QEMU", str(tmp_path / "no-such-qemu"))
    hint = config.qemu_missing()
    for system in ("Debian/Ubuntu", "Fedora", "macOS", "Windows"):
        assert system in hint
    with pytest.raises(SkipExperiment, match="apt-get install --no-install-recommends qemu-system-x86"):
        qemu.boot(tmp_path / "k", tmp_path / "i", "gem", {"run": "gem"}, timeout_s=5)


def test_accel_setting_is_checked(monkeypatch):
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "hvf")
    with pytest.raises(InputError, match="COURSE_KERNEL_LAB_ACCEL"):
        qemu.accelerators()
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "tcg")
    assert qemu.accelerators() == ["tcg"]


def _fake_qemu(tmp_path: Path, body: str) -> Path:
    """A stand-in for qemu-system-x86_64: answers --version, otherwise runs `body` (sh)."""
    p = tmp_path / "fake-qemu"
    p.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'QEMU emulator version 0.0.1'; exit 0; fi\n"
                 + body + "\n")
    p.chmod(0o755)
    return p


def test_a_hung_vm_is_killed_at_the_timeout_with_nothing_left(monkeypatch, tmp_path):
    pidfile = tmp_path / "pid"
    monkeypatch.setenv("COURSE_QEMU", str(_fake_qemu(tmp_path, f"echo $$ > {pidfile}; sleep 300 & wait")))
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "tcg")
    # the stand-in would run 300 s and then exit by itself, without this error
    with pytest.raises(DeviceTimeoutError, match="did not power off within 2 s"):
        qemu.boot(tmp_path / "k", tmp_path / "i", "gem", {"run": "gem"}, timeout_s=2)
    pid = int(pidfile.read_text())
    # the fake QEMU and its child (same process group) are gone (or zombies, dead and awaiting reaping
    # by init, which may take a moment)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True).stdout.splitlines()
        left = [st for pg, st in (r.split() for r in rows) if int(pg) == pid]
        if all(s.startswith("Z") for s in left):
            break
        time.sleep(0.2)
    assert all(s.startswith("Z") for s in left), f"processes of the killed VM still run: {left}"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_vm_that_writes_its_result_is_read_back(monkeypatch, tmp_path):
    # the fake writes the marker lines to the second -serial file:PATH argument
    body = ('for a in "$@"; do case "$a" in file:*) last="${a#file:}";; esac; done\n'
            'printf "KERNEL-LAB-BEGIN\\n{\\"kernel_release\\": \\"x\\"}\\nKERNEL-LAB-END\\n" > "$last"')
    monkeypatch.setenv("COURSE_QEMU", str(_fake_qemu(tmp_path, body)))
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "tcg")
    b = qemu.boot(tmp_path / "k", tmp_path / "i", "gem", {"run": "gem"}, timeout_s=30)
    assert b.result == {"kernel_release": "x"} and b.accel == "tcg" and b.qemu_version == "0.0.1"


def test_transcripts_round_trip_and_refuse_edits(monkeypatch, tmp_path):
    monkeypatch.setattr(transcript, "folder", lambda: tmp_path)
    vm = {"kernel_release": "6.1.0-1-amd64", "qemu": "7.2.22 (Debian)", "accel": "TCG", "device": "bochs-display",
          "date": "2026-11-23T18:00:00+00:00"}
    p = transcript.write("real_x.y", "t", {"n": 1}, vm, ["cmd"])
    t = transcript.load("real_x.y")
    assert t.data == {"n": 1} and t.label == "Linux 6.1.0-1-amd64 under QEMU 7.2.22 (TCG), bochs-display · 2026-11-23"
    doc = json.loads(p.read_text())
    doc["data"]["n"] = 2
    p.write_text(json.dumps(doc))
    with pytest.raises(ReferenceDataError, match="checksum mismatch"):
        transcript.load("real_x.y")
    with pytest.raises(ReferenceDataError, match="kernel_vm record --only real_x.z"):
        transcript.load("real_x.z")


def test_the_gpu_recorder_leaves_kernel_lab_experiments_to_the_vm_recorder():
    reg = experiments.discover()
    lab = [e for e in reg.values() if e.reference == experiments.KERNEL_LAB_REFERENCE]
    assert {e.id for e in lab} == {"real_drm.gem_prime", "real_ttm.eviction", "real_fences.implicit_sync",
                                   "real_bar.edu", "vfio_dma.edu"}
    assert all(experiments.QEMU in e.needs for e in lab)
    for e in lab:  # their transcripts are committed and valid
        assert transcript.load(e.id).provenance["accel"] in ("TCG", "KVM")


def test_cache_dir_follows_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_KERNEL_LAB_DIR", str(tmp_path))
    assert bundle.cache_dir() == tmp_path == config.kernel_lab_dir()
    assert bundle.existing() is None  # empty folder: no bundle


def test_initramfs_gzip_is_reproducible():
    entries = [("init", b"x", 0o755)]
    assert gzip.compress(bundle.cpio_newc(entries), mtime=0) == gzip.compress(bundle.cpio_newc(entries), mtime=0)


def test_source_line_names_the_vm_live_and_the_transcript_in_replay():
    from types import SimpleNamespace

    vm = {"kernel_release": "6.1.0-9-amd64", "qemu": "7.2.22 (Debian)", "accel": "TCG", "device": "edu",
          "date": "2026-11-28T01:02:03+00:00"}
    live = SimpleNamespace(live=True, data={"vm": vm}, source="ignored when live")
    assert transcript.source_line(live) == "this machine — Linux 6.1.0-9-amd64 under QEMU 7.2.22 (TCG), edu · 2026-11-28"
    replay = SimpleNamespace(live=False, data={"vm": vm}, source="data/kernel_lab/real_bar.edu.json · QEMU")
    assert transcript.source_line(replay) == "data/kernel_lab/real_bar.edu.json · QEMU"
