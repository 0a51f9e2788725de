"""Every environment variable the course reads, in one place (the README's table lists them).

Reading configuration never changes state: the one switch the course makes on the
environment (Numba's CUDA simulator when there is no GPU) is made by `course.start`, not here.

| variable | meaning | default |
|---|---|---|
| COURSE_MODE | auto, live or replay | auto |
| COURSE_REFERENCE | the reference machine replays use (a folder in data/reference, or a path) | h100-pcie |
| COURSE_P2P_REFERENCE | the two-GPU reference machine Chapter 8 and Lab 5 replay | h200x2-nvlink |
| COURSE_DATA_DIR | the folder of reference machines (tests point it elsewhere) | data/reference |
| COURSE_STRACE | the strace binary Chapter 1 runs | `strace` on PATH |
| BWCHECK | a built bwcheck binary (helpers/measure/bwcheck) for the C cross-check | built with nvcc into build/bwcheck on first use |
| COURSE_STATE_DIR | where the learner's committed predictions are kept | ~/.local/state/cpu-gpu-course |
| COURSE_NVIDIA_SMI | the nvidia-smi that tells whether other processes share the GPU | `nvidia-smi` on PATH |
| NUMBA_ENABLE_CUDASIM | Numba's own switch; 1 runs kernels on its CUDA simulator | set by course.start without a GPU |
| NBGRADER_EXECUTION | nbgrader's own flag; graded checks are quiet under autograde | unset |
| COURSE_QEMU | the QEMU binary the kernel lab boots Linux with | `qemu-system-x86_64` on PATH |
| COURSE_KERNEL_LAB_DIR | where the kernel lab's bundle (kernel + initramfs) is built and kept | build/kernel_lab |
| COURSE_KERNEL_LAB_KERNEL | the Debian kernel package the bundle is made from | what `linux-image-amd64` depends on |
| COURSE_KERNEL_LAB_ACCEL | QEMU accelerator: auto (KVM when /dev/kvm is usable, else TCG), tcg or kvm | auto |

The build and test tools in tools/ (not part of the package a notebook imports; some run
without it) read a few more themselves: TOOL_VARIABLES lists them for the README's table.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers.core.errors import InputError

MODES = ("auto", "live", "replay")
DEFAULT_REFERENCE = "h100-pcie"  # the machine replays use unless COURSE_REFERENCE names another
DEFAULT_P2P_REFERENCE = "h200x2-nvlink"  # Chapter 8's two-GPU recording
REPO_ROOT = Path(__file__).resolve().parents[2]
BWCHECK_BUILT = REPO_ROOT / "build" / "bwcheck" / "bwcheck"  # the C cross-check, as `make bwcheck` builds it

#: every variable the course reads, for the README's table and its test
VARIABLES = ("COURSE_MODE", "COURSE_REFERENCE", "COURSE_P2P_REFERENCE", "COURSE_DATA_DIR", "COURSE_STRACE",
             "BWCHECK", "COURSE_STATE_DIR", "COURSE_NVIDIA_SMI", "NUMBA_ENABLE_CUDASIM", "NBGRADER_EXECUTION",
             "COURSE_QEMU", "COURSE_KERNEL_LAB_DIR", "COURSE_KERNEL_LAB_KERNEL", "COURSE_KERNEL_LAB_ACCEL")

#: variables the scripts in tools/ read (site build, offline installs, browser tests)
TOOL_VARIABLES = ("COURSE_REPO_URL", "COURSE_REPO_BRANCH", "COURSE_REPO_PROVIDER", "COURSE_JUPYTERHUB_URL",
                  "COURSE_BOOK_LABS", "WHEELHOUSE", "CHROMIUM")


def _get(name: str) -> str:
    return os.environ.get(name, "").strip()


def requested_mode() -> str:
    """COURSE_MODE (auto when unset); an unknown value is an InputError naming the choices."""
    value = _get("COURSE_MODE").lower() or "auto"
    if value not in MODES:
        raise InputError(f"COURSE_MODE={value!r} is not one of {', '.join(MODES)}")
    return value


def reference_name() -> str | None:
    """COURSE_REFERENCE, or None to let the reference module choose its default."""
    return _get("COURSE_REFERENCE") or None


def p2p_reference_name() -> str:
    """COURSE_P2P_REFERENCE, or the course's two-GPU recording."""
    return _get("COURSE_P2P_REFERENCE") or DEFAULT_P2P_REFERENCE


def data_dir() -> Path:
    """The folder of reference machines: COURSE_DATA_DIR, else data/reference of this checkout."""
    env = _get("COURSE_DATA_DIR")
    return Path(env) if env else REPO_ROOT / "data" / "reference"


def strace_setting() -> str | None:
    """COURSE_STRACE as given (checked by `strace_binary`), or None."""
    return _get("COURSE_STRACE") or None


STRACE_INSTALL_HINT = ("install it with `sudo apt-get install strace` (Debian, Ubuntu) or "
                       "`sudo dnf install strace` (Fedora, RHEL), or point COURSE_STRACE at an strace "
                       "binary; until then the chapter replays the recorded census")


def strace_binary() -> tuple[str | None, str]:
    """The one lookup of strace: (path, "") when it can run here, else (None, why not).

    $COURSE_STRACE if set (it must be an executable file), else `strace` on PATH. strace traces
    Linux system calls with ptrace, so on another OS there is none to find and the reason says
    so. The evidence contract (an experiment's STRACE need) and Chapter 1 both ask this."""
    import sys

    env = strace_setting()
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return str(p), ""
        return None, (f"COURSE_STRACE={env!r} is not an executable file; fix the path or unset it. "
                      f"To get strace, {STRACE_INSTALL_HINT}")
    if not sys.platform.startswith("linux"):
        return None, (f"strace traces Linux system calls and this is {sys.platform}: the chapter replays "
                      "the census recorded on Linux")
    found = tool_on_path("strace")
    if found:
        return found, ""
    return None, f"strace is not installed here (not on PATH). To run it live, {STRACE_INSTALL_HINT}"


def bwcheck_setting() -> Path | None:
    """BWCHECK: a built cross-check binary to use instead of building one, or None."""
    env = _get("BWCHECK")
    return Path(env) if env else None


def bwcheck_ready() -> bool:
    """Whether the C cross-check can run here without asking: BWCHECK is set, nvcc is on PATH, or
    `make bwcheck` built it (the evidence contract's NVCC need asks this)."""
    return bool(bwcheck_setting() or tool_on_path("nvcc") or BWCHECK_BUILT.exists())


def state_dir() -> Path:
    """Where the course keeps what a learner commits (predictions): COURSE_STATE_DIR, else
    ~/.local/state/cpu-gpu-course."""
    env = _get("COURSE_STATE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "cpu-gpu-course"


def nvidia_smi() -> str | None:
    """COURSE_NVIDIA_SMI: the nvidia-smi to ask who else uses the GPU (tests point it at a stand-in)."""
    return _get("COURSE_NVIDIA_SMI") or None


def numba_simulator_on() -> bool:
    """True when NUMBA_ENABLE_CUDASIM=1 (Numba's kernels run on its CPU simulator)."""
    return _get("NUMBA_ENABLE_CUDASIM") == "1"


def nbgrader_grading() -> bool:
    """True while nbgrader autogrades or validates a notebook."""
    return _get("NBGRADER_EXECUTION") in ("autograde", "validate")


def qemu_setting() -> str | None:
    """COURSE_QEMU as given (checked by `qemu_binary`), or None for qemu-system-x86_64 on PATH."""
    return _get("COURSE_QEMU") or None


QEMU_INSTALL_HINTS = {
    "Debian/Ubuntu": "sudo apt-get install --no-install-recommends qemu-system-x86",
    "Fedora": "sudo dnf install qemu-system-x86-core",
    "macOS": "brew install qemu",
    "Windows": "install QEMU from https://www.qemu.org/download/#windows (or use WSL 2 with the "
               "Debian/Ubuntu line)",
}


def qemu_install_hint() -> str:
    """What to install to run the kernel lab live, per system, in one paragraph."""
    return "QEMU is not installed: " + "; ".join(f"{k}: `{v}`" for k, v in QEMU_INSTALL_HINTS.items())


def qemu_binary() -> str | None:
    """The one lookup of QEMU: COURSE_QEMU (when executable), else qemu-system-x86_64 on PATH, else None."""
    setting = qemu_setting()
    if setting:
        return setting if os.access(setting, os.X_OK) else None
    return tool_on_path("qemu-system-x86_64")


def qemu_missing() -> str | None:
    """None when QEMU is here to boot the kernel lab live, else the install hint (the evidence
    contract's QEMU need asks this)."""
    return None if qemu_binary() else qemu_install_hint()


def kernel_lab_dir() -> Path:
    """The kernel lab's cache folder: COURSE_KERNEL_LAB_DIR, else build/kernel_lab of this checkout."""
    env = _get("COURSE_KERNEL_LAB_DIR")
    return Path(env) if env else REPO_ROOT / "build" / "kernel_lab"


def kernel_lab_kernel_package() -> str | None:
    """COURSE_KERNEL_LAB_KERNEL (a Debian linux-image-*-amd64 package name), or None."""
    return _get("COURSE_KERNEL_LAB_KERNEL") or None


KERNEL_LAB_ACCELS = ("auto", "tcg", "kvm")


def kernel_lab_accel() -> str:
    """COURSE_KERNEL_LAB_ACCEL (auto when unset); an unknown value is an InputError naming the choices."""
    value = _get("COURSE_KERNEL_LAB_ACCEL").lower() or "auto"
    if value not in KERNEL_LAB_ACCELS:
        raise InputError(f"COURSE_KERNEL_LAB_ACCEL={value!r} is not one of {', '.join(KERNEL_LAB_ACCELS)}")
    return value


def tool_on_path(name: str) -> str | None:
    """The path of an executable on PATH, or None."""
    return shutil.which(name)
