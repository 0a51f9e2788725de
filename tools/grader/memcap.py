"""One memory cap for a whole worker (every process it starts together), not per process.

- **cgroup v2** where the grader may make one: a child cgroup of the grader's own with
  `memory.max` (and `memory.swap.max` 0); the worker joins it before it execs, so the kernel
  holds all its processes to the cap together (the OOM killer acts inside it only).
  Needs a unified hierarchy (/sys/fs/cgroup/cgroup.controllers) whose memory controller is
  delegated to the grader's cgroup (`systemd-run --scope -p Delegate=yes ...`, or a container
  given its own cgroup namespace).
- **elsewhere** (cgroup v1, no delegation, macOS): a watchdog in the grader reads the resident
  memory of every process of the worker (/proc) at each poll (`POLL_S`) and kills the worker
  when their sum passes the cap. Each process stays capped by RLIMIT_AS as well, so between
  two polls the worker can hold at most `processes` x `memory_bytes` (sandbox.Limits); where
  /proc is missing too, RLIMIT_AS per process is all there is.
`describe()` says which one this machine has (the grader prints it before a class).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
POLL_S = 0.25
_COUNTER = itertools.count()


def _own_cgroup() -> Path | None:
    if not (CGROUP / "cgroup.controllers").is_file():
        return None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return CGROUP / line[3:].lstrip("/")
    except OSError:
        return None
    return None


def _make_cgroup(limit: int) -> tuple[Path | None, str]:
    """A fresh cgroup v2 capped at `limit` bytes, or (None, why not)."""
    own = _own_cgroup()
    if own is None:
        return None, "no cgroup v2 here (unified hierarchy not mounted)"
    try:
        if "memory" not in (own / "cgroup.subtree_control").read_text().split():
            (own / "cgroup.subtree_control").write_text("+memory")
        cg = own / f"course-grader-{os.getpid()}-{next(_COUNTER)}"
        cg.mkdir()
        (cg / "memory.max").write_text(str(limit))
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
        return cg, f"cgroup v2 memory.max ({cg})"
    except OSError as exc:
        return None, f"the grader's cgroup does not delegate the memory controller ({exc.strerror})"


def describe(limit: int) -> str:
    """How a worker's memory is capped on this machine, in a sentence."""
    cg, why = _make_cgroup(limit)
    if cg is not None:
        _remove(cg)
        return f"each worker's memory together is capped at {limit >> 20} MiB by a cgroup v2 (memory.max)"
    how = ("a watchdog sums the resident memory of the worker's processes every "
           f"{POLL_S} s and stops the worker above {limit >> 20} MiB") if Path("/proc/self/statm").exists() else \
        "only each process's address space is capped (RLIMIT_AS): no /proc to watch the whole worker"
    return f"{why}: {how}; each process is also held to RLIMIT_AS"


def _remove(cg: Path) -> None:
    try:
        cg.rmdir()
    except OSError:
        pass


class MemoryCap:
    """The cap of one worker: `join()` in the child before exec, `over(pid)` at each poll, `close()`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.cgroup, self.why = _make_cgroup(limit)
        self._procs = str(self.cgroup / "cgroup.procs") if self.cgroup is not None else None

    def join(self) -> None:
        """In the child (preexec_fn): move this process into the worker's cgroup."""
        if self._procs is not None:
            fd = os.open(self._procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def over(self, pid: int) -> bool:
        """True when the worker started as `pid` went over the cap (the cgroup's OOM killer acted,
        or, watched, its processes' resident memory together is above it)."""
        if self.cgroup is not None:
            try:
                events = (self.cgroup / "memory.events").read_text().split()
                return int(events[events.index("oom_kill") + 1]) > 0
            except (OSError, ValueError, IndexError):
                return False
        return resident_bytes(pid) > self.limit

    def close(self) -> None:
        if self.cgroup is not None:
            _remove(self.cgroup)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(d))
    return tree


def resident_bytes(pid: int) -> int:
    """The resident memory of `pid` and every process below it (0 where /proc is missing)."""
    if not Path("/proc/self/statm").exists():
        return 0
    tree, total, todo, page = _children(), 0, [pid], os.sysconf("SC_PAGE_SIZE")
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
        except (OSError, ValueError, IndexError):
            pass
        todo += tree.get(p, [])
    return total
