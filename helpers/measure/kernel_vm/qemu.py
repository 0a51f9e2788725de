"""Boot the kernel lab's bundle under QEMU, pass parameters in, get the probe's JSON back.

One boot is one ``qemu-system-x86_64`` process in its own session: the kernel's console goes to
a log file (the first serial port), the probe's JSON to a second file (the second serial
port, between two marker lines). The boot always ends: the guest powers itself off after the
probe, ``-no-reboot`` turns a kernel panic into an exit, and past ``timeout_s`` the whole
process group is killed. Nothing is left running, also when the caller is interrupted.

TCG (QEMU's own CPU emulation) works everywhere; KVM is used when ``/dev/kvm`` can be opened
(COURSE_KERNEL_LAB_ACCEL=auto) and a guest actually runs on it: in nested VMs /dev/kvm may
open while no guest instruction ever executes (seen on the course's CI machines), so a KVM boot
whose kernel prints nothing within FIRST_OUTPUT_S is killed and the boot retried under TCG,
and the result says so. That verdict is kept for the rest of the process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.core import config
from helpers.core.errors import DeviceTimeoutError, InputError, SkipExperiment
from helpers.core.process_group import kill_group
from helpers.measure.kernel_vm import machines

BEGIN, END = "KERNEL-LAB-BEGIN", "KERNEL-LAB-END"
DEFAULT_TIMEOUT_S = 180.0
PYTHON_TIMEOUT_S = 240.0  # a machine with Python (edu): Debian's interpreter unpacks and starts first
FIRST_OUTPUT_S = 8.0  # a kernel booting on KVM prints on the console well within a second
_KVM_FAILED: list[str] = []  # why KVM was abandoned in this process (then TCG only)
# The machines (board, memory, devices, modules) are in machines.py; -nodefaults keeps QEMU's
# own VGA card (which bochs would take) out.
# iomem=relaxed: the probe reads bochs's VRAM through BAR0 (sysfs resource0) while the driver owns it
CMDLINE = "console=ttyS0 panic=-1 loglevel=4 iomem=relaxed"


def qemu_version(binary: str) -> str:
    """'QEMU emulator version 7.2.22 (Debian ...)' -> '7.2.22 (Debian ...)'."""
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    first = (r.stdout.splitlines() or ["?"])[0]
    return first.removeprefix("QEMU emulator version ").strip()


def kvm_usable() -> bool:
    """True when /dev/kvm exists and this user can open it read-write."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def accelerators() -> list[str]:
    """The accelerators to try, in order, from COURSE_KERNEL_LAB_ACCEL and /dev/kvm."""
    want = config.kernel_lab_accel()
    if want == "auto":
        return ["kvm", "tcg"] if kvm_usable() and not _KVM_FAILED else ["tcg"]
    return [want]


@dataclass(kw_only=True)
class Boot:
    """One finished boot: the probe's JSON, how long it took, and how it was run."""

    result: dict
    accel: str
    qemu_version: str
    seconds: float  # QEMU start to exit
    command: list[str]
    console_tail: str
    notes: list[str] = field(default_factory=list)
    stderr_tail: str = ""  # QEMU's own complaints (an emulated device that stopped the VM says why here)


def kernel_cmdline(params: dict[str, str], extra: str = "") -> str:
    """The kernel command line: the lab's fixed part, the machine's `extra`, one kl.NAME=VALUE
    per parameter."""
    for k, v in params.items():
        if not re.fullmatch(r"[a-z_]+", k) or not re.fullmatch(r"[A-Za-z0-9_,./-]+", str(v)):
            raise InputError(f"kernel lab parameter {k}={v!r}: names are lower-case words, values letters, "
                             "digits and , . / _ - (they travel on the kernel command line)")
    return CMDLINE + (f" {extra}" if extra else "") + "".join(f" kl.{k}={v}" for k, v in params.items())


def command(binary: str, kernel: Path, initrd: Path, machine: str, params: dict[str, str], accel: str,
            console: Path, result: Path) -> list[str]:
    """The qemu-system-x86_64 command line of one boot of `machine` (machines.MACHINES); the
    kernel command line names the machine (kl.machine, whose modules /init loads)."""
    m = machines.get(machine)
    return [binary, "-nodefaults", "-no-user-config", "-machine", m.board, "-accel", accel,
            "-m", str(m.memory_mb), "-smp", "1", "-display", "none", "-no-reboot",
            "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", kernel_cmdline({"machine": m.name, **params}, m.cmdline),
            "-serial", f"file:{console}", "-serial", f"file:{result}", *m.devices]


def parse_result(text: str) -> dict:
    """The JSON object between the marker lines of the result port (SkipExperiment if absent)."""
    text = text.replace("\r", "")
    if BEGIN not in text:
        raise SkipExperiment("the VM ended before the probe started (no begin marker on the result port)")
    body = text.split(BEGIN, 1)[1]
    if END not in body:
        raise SkipExperiment("the VM ended while the probe ran (no end marker on the result port)")
    body = body.split(END, 1)[0].strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise SkipExperiment(f"the probe's output is not JSON ({exc.msg} at char {exc.pos}): {body[:200]!r}") from None
    if not isinstance(data, dict):
        raise SkipExperiment(f"the probe's output is not a JSON object: {body[:200]!r}")
    return data


def boot(kernel: Path, initrd: Path, machine: str, params: dict[str, str], *,
         timeout_s: float = DEFAULT_TIMEOUT_S, extra_initrd: bytes = b"", parse=None) -> Boot:
    """Boot once (KVM first where usable, then TCG) and return the probe's JSON.

    extra_initrd: more (gzipped cpio) archives the kernel unpacks over the bundle's initramfs
    (the guest's Python, the run's own files). parse: reads the result port's text (default
    parse_result; a caller that streams results may accept a run cut short).
    SkipExperiment when QEMU is missing or the guest produced no result; DeviceTimeoutError
    when it ran past timeout_s (the QEMU process group is killed first).
    """
    parse = parse or parse_result
    binary = config.qemu_binary()
    if binary is None:
        raise SkipExperiment(config.qemu_install_hint())
    version = qemu_version(binary)
    notes: list[str] = []
    accels = accelerators()
    if _KVM_FAILED and config.kernel_lab_accel() == "auto":
        notes.append(f"KVM not tried: earlier in this process, {_KVM_FAILED[0]}")
    for k, accel in enumerate(accels):
        with tempfile.TemporaryDirectory(prefix="kernel-lab-boot-") as tmp:
            console, result = Path(tmp) / "console.log", Path(tmp) / "result.txt"
            boot_initrd = initrd
            if extra_initrd:  # the kernel unpacks concatenated archives in order, later ones over earlier
                boot_initrd = Path(tmp) / "initrd.img"
                boot_initrd.write_bytes(initrd.read_bytes() + extra_initrd)
            cmd = command(binary, kernel, boot_initrd, machine, params, accel, console, result)
            t0 = time.monotonic()
            watch = console if k + 1 < len(accels) else None  # a silent KVM boot falls back to TCG
            rc, stderr = _run_to_end(cmd, timeout_s, watch)
            seconds = time.monotonic() - t0
            log = console.read_text(errors="replace") if console.exists() else ""
            out = result.read_text(errors="replace") if result.exists() else ""
        if rc is None and watch is not None and not log:
            why = f"{accel.upper()}: the kernel printed nothing in {FIRST_OUTPUT_S:.0f} s (killed)"
            _KVM_FAILED.append(why)
            notes.append(f"{why}; used {accels[k + 1].upper()}")
            continue
        if rc is None:
            raise DeviceTimeoutError(f"the kernel lab's VM did not power off within {timeout_s:.0f} s; QEMU was "
                                     f"killed (raise timeout_s on a slow machine). Last console lines:\n{log[-1500:]}")
        if rc != 0 and not out and k + 1 < len(accels):
            notes.append(f"{accel} did not start (QEMU exit {rc}: {stderr.strip()[-200:]}); used {accels[k + 1]}")
            continue
        try:
            data = parse(out)
        except SkipExperiment as exc:
            tail = (log[-1500:] + "\n" + stderr[-500:]).strip()
            raise SkipExperiment(f"{exc}; QEMU exit {rc}{device_abort(stderr)}; last console lines:\n{tail}") from None
        return Boot(result=data, accel=accel, qemu_version=version, seconds=seconds, command=cmd,
                    console_tail=log[-3000:], notes=notes, stderr_tail=stderr[-2000:])
    raise SkipExperiment("no accelerator could start QEMU: " + "; ".join(notes))


def device_abort(stderr: str) -> str:
    """Why QEMU itself stopped, when an emulated device aborted it (else ""): QEMU 7.2's edu
    ends the whole VM with a "hardware error" on a DMA outside its 4 KiB buffer."""
    if "hardware error" not in stderr and "EDU" not in stderr:
        return ""
    first = next((x for x in stderr.splitlines() if "EDU" in x or "hardware error" in x), "").strip()
    return (f" — QEMU's emulated device stopped the VM ({first[:200]}): edu's DMA engine only copies inside "
            "its own 4 KiB buffer (device addresses 0x40000 to 0x40ffe on QEMU 7.2, fewer than 4096 bytes); "
            "check the source, destination and count you programmed")


def _run_to_end(cmd: list[str], timeout_s: float, watch: Path | None = None) -> tuple[int | None, str]:
    """Run QEMU in its own session: (exit status, stderr), or (None, "") when it ran past
    timeout_s, or when `watch` (the console file) was still empty after FIRST_OUTPUT_S, and its
    process group was killed. Interrupted, it is killed too."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        if watch is not None:
            deadline = time.monotonic() + min(FIRST_OUTPUT_S, timeout_s)
            while proc.poll() is None and time.monotonic() < deadline:
                if watch.exists() and watch.stat().st_size > 0:
                    break
                time.sleep(0.2)
            if proc.poll() is None and not (watch.exists() and watch.stat().st_size > 0):
                _kill(proc)
                return None, ""
        _, stderr = proc.communicate(timeout=timeout_s)
        return proc.returncode, stderr
    except subprocess.TimeoutExpired:
        _kill(proc)
        return None, ""
    finally:
        if proc.poll() is None:  # interrupted (KeyboardInterrupt) or an error above
            _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    kill_group(proc.pid)
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        print("kernel lab: QEMU did not exit after SIGKILL", file=sys.stderr)
