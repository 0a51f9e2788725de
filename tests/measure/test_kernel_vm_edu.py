"""The edu machine's additions to the kernel lab, without QEMU: the guest's Python archive
(which package files go where), the run's /work archive, the concatenated initramfs QEMU gets,
and the explanation when QEMU's edu device aborts the VM."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from test_kernel_vm import _fake_qemu  # the same stand-in for QEMU

from helpers.core.errors import SkipExperiment
from helpers.measure import edu_vm, kernel_vm
from helpers.measure.kernel_vm import guest_python, machines, qemu

edu = edu_vm.guest_module()  # the guest library; standard library only, importable on the host too


def test_the_edu_machine_has_an_iommu_split_irqchip_and_python():
    m = machines.get("edu")
    cmd = qemu.command("qemu", Path("k"), Path("i"), "edu", {"run": "python"}, "tcg", Path("c"), Path("r"))
    assert cmd[cmd.index("-machine") + 1] == "q35,kernel-irqchip=split"
    devices = cmd[cmd.index("-serial", cmd.index("-serial") + 1) + 2:]
    assert devices == ["-device", "intel-iommu,intremap=on,caching-mode=on", "-device", "edu"]  # IOMMU first
    assert "intel_iommu=on" in cmd[cmd.index("-append") + 1] and "kl.machine=edu" in cmd[cmd.index("-append") + 1]
    assert m.python and "vfio-pci" in m.modules and "vfio_iommu_type1" in m.modules
    assert not machines.get("gem").python


@pytest.mark.parametrize(("path", "where"), [
    ("./usr/bin/python3.11", "/usr/bin/python3.11"),
    ("./usr/lib/python3.11/ctypes/__init__.py", "/usr/lib/python3.11/ctypes/__init__.py"),
    ("./usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
     "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so"),
    ("./lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("./usr/lib/x86_64-linux-gnu/libffi.so.8", "/lib/x86_64-linux-gnu/libffi.so.8"),
    ("./usr/lib/python3.11/test/test_os.py", None),
    ("./usr/lib/python3.11/tkinter/__init__.py", None),
    ("./usr/lib/python3.11/lib-dynload/_sqlite3.cpython-311-x86_64-linux-gnu.so", None),
    ("./usr/share/doc/python3.11/copyright", None),
    ("./lib/x86_64-linux-gnu/libnss_files.so.2", None),
])
def test_the_python_archive_takes_the_interpreter_stdlib_and_libraries_only(path, where):
    assert guest_python.wanted(path) == where


def test_guest_files_hold_the_course_modules_and_the_runs_own():
    data = gzip.decompress(kernel_vm.guest_files({"main.py": b"print(1)\n"}))
    for name in (b"work\0", b"work/edu.py\0", b"work/edu_probe.py\0", b"work/main.py\0"):
        assert name in data
    assert b"print(1)\n" in data and b"dev/console\0" not in data  # the bundle's archive already has it


def test_qemu_gets_the_bundle_initramfs_with_the_extra_archives_after_it(monkeypatch, tmp_path):
    # the fake copies the -initrd it was given next to the test and writes a result
    body = ('prev=""; for a in "$@"; do [ "$prev" = -initrd ] && cp "$a" ' + str(tmp_path / "seen") + '; prev="$a"; '
            'case "$a" in file:*) last="${a#file:}";; esac; done\n'
            'printf "KERNEL-LAB-BEGIN\\n{}\\nKERNEL-LAB-END\\n" > "$last"')
    monkeypatch.setenv("COURSE_QEMU", str(_fake_qemu(tmp_path, body)))
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "tcg")
    (tmp_path / "initrd").write_bytes(b"BASE")
    qemu.boot(tmp_path / "k", tmp_path / "initrd", "edu", {"run": "python"}, timeout_s=30, extra_initrd=b"EXTRA")
    assert (tmp_path / "seen").read_bytes() == b"BASEEXTRA"
    assert (tmp_path / "initrd").read_bytes() == b"BASE"  # the bundle itself is never changed


def test_an_edu_abort_is_explained(monkeypatch, tmp_path):
    body = 'echo "qemu: hardware error: EDU: DMA range 0x40000-0x41000 out of bounds (0x40000-0x40fff)!" >&2; exit 1'
    monkeypatch.setenv("COURSE_QEMU", str(_fake_qemu(tmp_path, body)))
    monkeypatch.setenv("COURSE_KERNEL_LAB_ACCEL", "tcg")
    with pytest.raises(SkipExperiment, match="edu's DMA engine only copies inside its own 4 KiB buffer"):
        qemu.boot(tmp_path / "k", tmp_path / "i", "edu", {"run": "python"}, timeout_s=30)
    assert qemu.device_abort("some other failure") == ""


@pytest.mark.parametrize(("src", "dst", "count", "to_ram", "ok"), [
    (0x100000, 0x40000, 2048, False, True),
    (0x40000, 0x100000, 4095, True, True),
    (0x40000, 0x100000, 4096, True, False),  # QEMU 7.2's off-by-one: a full buffer aborts the VM
    (0x100000, 0x40800, 2048, False, False),  # runs past the buffer's end
    (0x100000, 0x3F000, 16, False, False),  # below the buffer
    (0x40000, 0x100000, 0, True, False),
])
def test_the_guest_library_refuses_dma_that_would_abort_the_vm(src, dst, count, to_ram, ok):
    if ok:
        edu.safe_dma_args(src, dst, count, to_ram)
    else:
        with pytest.raises(edu.DmaArgsError):
            edu.safe_dma_args(src, dst, count, to_ram)


def test_vfio_ioctl_numbers_follow_the_uapi_header():
    # _IO(';', 100 + n): type 0x3b in bits 8-15, no size or direction bits
    assert edu.VFIO_GET_API_VERSION == 0x3B64 and edu.VFIO_IOMMU_MAP_DMA == 0x3B71
    assert edu.DMA_MAP.size == 32 and edu.REGION_INFO.size == 32 and edu.DMA_UNMAP.size == 24


def test_the_guest_modules_use_only_the_archives_standard_library():
    # what the guest's Python lacks (SKIP_DIRS) must not be imported by the course's guest code
    code = ("import sys\n"
            f"sys.path.insert(0, {str(Path(edu.__file__).parent)!r})\n"
            "import edu, edu_probe\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in " + repr(guest_python.SKIP_DIRS) + "]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
