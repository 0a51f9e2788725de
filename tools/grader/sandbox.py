"""The sandbox one submission's worker runs in: bubblewrap, a separate uid, resource limits.

What the worker sees (Linux, bubblewrap): the system's /usr (read-only), the Python it runs
on (read-only), the course's `helpers/` and `data/` at /course (read-only: the student
distribution's part of the checkout, never `instructor/`, `labs/` or `tools/`), and its home
/home/learner, a private tmpfs of `scratch_bytes` holding a read-only copy of the submission
(with a private /tmp and /dev/shm of the same size: the only places it may write, all in
memory, all gone when it ends).
No network (every namespace unshared, `--unshare-all`), its own PID namespace (killing the
sandbox kills everything in it), a new session (no terminal to inject into), and, when the
grader is root, the unprivileged uid/gid 65534 (`setpriv` inside the sandbox, every
capability dropped, no_new_privs), so even a path that leaked in
stays someone else's. setrlimit caps CPU seconds, address space, processes and the size of
any file written (the learner's output goes to a capped file); the session adds a wall-clock
deadline per request.

Elsewhere (no bubblewrap: macOS, Windows, a Linux without it) `available()` says why, and the
grader refuses to grade unless told `--no-sandbox`, which runs the worker as a plain child
process with the same limits and the same out-of-process checks, but with the instructor's
files readable and writable by the submission (say so to whoever runs it: labs/README.md).
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
COURSE = "/course"
SCRATCH = "/home/learner"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Per-worker limits (setrlimit, and the session's deadlines)."""

    cpu_s: int = 300               # RLIMIT_CPU: seconds of CPU for the whole worker
    memory_bytes: int = 6 << 30    # RLIMIT_AS
    processes: int = 512           # RLIMIT_NPROC (threads count; per uid)
    file_bytes: int = 16 << 20     # RLIMIT_FSIZE: the largest file it may write, output included
    scratch_bytes: int = 128 << 20  # size of its writable home and of its /tmp (tmpfs, in memory)
    load_s: float = 120.0          # wall clock for the setup and solution cells
    call_s: float = 60.0           # wall clock for one call of a learner function
    part_s: float = 240.0          # wall clock for all the calls of one graded part
    submission_s: float = 600.0    # wall clock for one lab of one student, all parts


def available() -> str | None:
    """None when bubblewrap can sandbox here, else why not."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    return None


def python_paths() -> list[Path]:
    """The interpreter's installation and its virtual environment (bound read-only)."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    return sorted(p for p in paths if not str(p).startswith("/usr"))


def python() -> str:
    """The interpreter the worker runs, by its resolved path (a venv symlink resolved)."""
    return str(Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name)


def _parents(path: Path) -> list[str]:
    """`--dir` for every folder above `path`, world-readable (a bound /root/... stays reachable)."""
    out = []
    for parent in reversed(path.parents[:-1]):
        out += ["--perms", "0755", "--dir", str(parent)]
    return out


def bwrap_argv(root: Path, scratch: Path, limits: Limits | None = None,
               redacted: list[tuple[Path, str]] | None = None) -> list[str]:
    """The bubblewrap command line (up to the program) for a worker over `scratch`: its home is
    a size-limited tmpfs holding the submission (read-only) from `scratch`; `redacted` files
    (tools/grader/ownwork.py: (file, path in the checkout)) replace the course's own, and their
    folder's compiled cache is hidden."""
    size = str((limits or DEFAULT_LIMITS).scratch_bytes)
    root_grader = os.geteuid() == 0
    # as root: no user namespace (the uid change below must be real); otherwise bwrap's own
    argv = ["bwrap", "--die-with-parent", "--new-session"]
    argv += (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
             if root_grader else ["--unshare-all"])
    argv += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
             "--size", size, "--perms", "01777", "--tmpfs", "/dev/shm",
             "--size", size, "--perms", "01777", "--tmpfs", "/tmp"]
    for d in ("bin", "lib", "lib32", "lib64", "sbin"):
        p = Path("/") / d
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group"):
        if Path(f).exists():
            argv += ["--ro-bind", f, f]
    for p in python_paths():
        argv += [*_parents(p), "--ro-bind", str(p), str(p)]
    argv += _parents(Path(COURSE) / "x")
    for d in ("helpers", "data"):
        argv += ["--ro-bind", str(root / d), f"{COURSE}/{d}"]
    for src, rel in redacted or ():
        argv += ["--ro-bind", str(src), f"{COURSE}/{rel}"]
        if (root / rel).parent.joinpath("__pycache__").is_dir():
            argv += ["--tmpfs", f"{COURSE}/{Path(rel).parent}/__pycache__"]
    argv += [*_parents(Path(SCRATCH)), "--size", size, "--perms", "01777", "--tmpfs", SCRATCH]
    for f in sorted(p for p in scratch.iterdir() if p.is_file()):  # the submission, read-only
        argv += ["--ro-bind", str(f), f"{SCRATCH}/{f.name}"]
    argv += ["--chdir", SCRATCH]
    if root_grader:  # drop to uid/gid 65534 inside, with no capabilities left and none to gain
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", "setpriv", f"--reuid={NOBODY}",
                 f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        argv += ["--"]
    return argv


def environment(course_path: str) -> dict[str, str]:
    """The worker's whole environment: nothing of the grader's (no NBGRADER_*, no secrets)."""
    return {"PATH": "/usr/bin:/bin", "HOME": SCRATCH if course_path == COURSE else str(Path.home()),
            "PYTHONPATH": course_path, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "NUMBA_NUM_THREADS": "1", "MPLBACKEND": "Agg", "LANG": "C.UTF-8", "COURSE_MODE": "replay"}


def worker_command(root: Path, scratch: Path, sandboxed: bool, limits: Limits | None = None,
                   redacted: list[tuple[Path, str]] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that start the worker for a submission copied into `scratch` (with `redacted`
    modules in place of the course's: sandboxed only; unsandboxed, the rule is not enforced)."""
    program = [python(), "-s", "-m", "helpers.labs.grading.worker"]
    if sandboxed:
        return bwrap_argv(root, scratch, limits, redacted) + program, environment(COURSE)
    return program, environment(str(root))


def prepare_scratch(scratch: Path) -> None:
    """Make the scratch folder the worker's own (uid 65534 when the grader is root)."""
    scratch.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        for p in (scratch, *scratch.rglob("*")):
            os.chown(p, NOBODY, NOBODY, follow_symlinks=False)


def set_limits(limits: Limits) -> None:
    """setrlimit in the child before it becomes the worker (run from preexec_fn)."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


DEFAULT_LIMITS = Limits()
