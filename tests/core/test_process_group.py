"""kill_group: the whole group is killed and none of it still runs when the call returns."""

from __future__ import annotations

import subprocess
import sys
import time

from helpers.core.process_group import group_running, kill_group

# a child that starts a grandchild in its (new) session and prints the grandchild's pid
PARENT = ("import subprocess, sys, time\n"
          "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
          "print(p.pid, flush=True); time.sleep(300)")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_running_group_is_seen_until_it_is_gone():
    p = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert group_running(p.pid)
    finally:
        p.kill()
        p.wait()
    assert not group_running(p.pid)


def test_a_group_whose_child_is_a_zombie_counts_as_gone():
    p = subprocess.Popen(["true"], start_new_session=True)
    deadline = time.monotonic() + 10
    while _state(p.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # `true` exits at once; not reaped yet, so it stays a zombie
    assert _state(p.pid) == "Z"
    assert not group_running(p.pid)
    p.wait()


def test_kill_group_returns_only_when_the_grandchild_has_exited():
    p = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True)
    grandchild = int(p.stdout.readline())
    assert _state(grandchild) not in ("Z", "gone")
    kill_group(p.pid)
    assert _state(grandchild) in ("Z", "gone")  # no waiting here: kill_group has done it
    assert not group_running(p.pid)
    p.wait(timeout=10)
    p.stdout.close()


def test_a_group_that_is_gone_is_left_alone():
    p = subprocess.Popen(["true"], start_new_session=True)
    p.wait()
    kill_group(p.pid)  # no such group any more: no error
    assert not group_running(p.pid)
