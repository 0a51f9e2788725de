"""Kill a child's whole process group and wait until none of it still runs.

The course starts crash-prone or slow children (a sandboxed experiment, strace and its tracee,
QEMU, a grader's worker) in a session of their own, so a timeout can take down everything they
started. `os.killpg(..., SIGKILL)` only *delivers* the signal: on a busy machine a grandchild can
still be running its exit (state R) after the call returns and after the child itself is reaped.
`kill_group` waits, bounded, until every member has exited, so a caller that reports "killed"
tells the truth.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

EXIT_WAIT_S = 5.0
_PROC = Path("/proc")


def kill_group(pgid: int, wait_s: float = EXIT_WAIT_S) -> None:
    """SIGKILL process group `pgid`, then wait at most `wait_s` until none of it runs.

    A group that is already gone, or that this process may not signal, is left alone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + wait_s
    while group_running(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def group_running(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs. Zombies count as gone (they run nothing and
    wait only to be reaped). Reads /proc where there is one; elsewhere asks the kernel with signal 0."""
    if not (_PROC / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists; it is only not ours to signal
        return True
    for stat in _PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
