"""No toy-GPU process outlives the Python process that started it, however that one ends."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from toygpu_util import process_gone, shm_exists, start_device

ROOT = str(Path(__file__).resolve().parents[2])
GONE_WITHIN_S = 5.0


def _wait_gone(pid: int, within: float = GONE_WITHIN_S) -> float:
    t = time.monotonic()
    while time.monotonic() - t < within:
        if process_gone(pid):
            return time.monotonic() - t
        time.sleep(0.02)
    raise AssertionError(f"device process {pid} still runs {within} s after its parent ended")


def _parent(body: str) -> subprocess.Popen:
    code = textwrap.dedent("""
        import os, sys, time
        from helpers.models.toygpu import ToyGPU
        g = ToyGPU(vram_bytes=1 << 20, sysmem_bytes=1 << 20)
        assert g.read("ID")
    """) + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


def test_device_dies_when_parent_is_killed():
    p = _parent('print(g.proc.pid, flush=True)\ntime.sleep(60)\n')
    try:
        dev = int(p.stdout.readline())
        assert not process_gone(dev)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        _wait_gone(dev)
    finally:
        p.kill()
        p.wait()


def test_device_dies_even_if_another_process_holds_its_pipe():
    """A forked child inherits the write end, so no EOF comes; the parent-pid check must act."""
    body = """
        holder = os.fork()
        if holder == 0:
            time.sleep(30)
            os._exit(0)
        print(g.proc.pid, holder, flush=True)
        time.sleep(60)
    """
    p = _parent(body)
    holder = None
    try:
        dev, holder = map(int, p.stdout.readline().split())
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        _wait_gone(dev)
    finally:
        p.kill()
        p.wait()
        if holder:
            try:
                os.kill(holder, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_device_stops_at_normal_exit_without_close():
    p = _parent('print(g.proc.pid, flush=True)\n')
    dev = int(p.stdout.readline())
    assert p.wait(timeout=10) == 0
    _wait_gone(dev, 3.0)


def test_close_and_garbage_collection_stop_the_device():
    g = start_device()
    pid, name = g.proc.pid, g._block.name
    assert shm_exists(name)
    g.close()
    assert process_gone(pid)
    assert not shm_exists(name), "closing the device must unlink its shared memory"
    g2 = start_device()
    pid2 = g2.proc.pid
    del g2
    gc.collect()
    _wait_gone(pid2, 3.0)


@pytest.mark.parametrize("sig", [signal.SIGINT])
def test_device_ignores_terminal_interrupts(sig):
    """A Ctrl-C meant for the notebook kernel must not take the device down by surprise."""
    g = start_device()
    try:
        # an ignored signal is discarded when it is sent (never pending), so a reply after the kill
        # proves the device survived it; /proc says it is ignored rather than merely not yet delivered
        status = Path(f"/proc/{g.proc.pid}/status").read_text()
        ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
        assert ignored & (1 << (sig - 1)), f"the device process does not ignore {sig!r}"
        os.kill(g.proc.pid, sig)
        assert g.read("ID")
    finally:
        g.close()


def test_the_aperture_reaches_vram_and_closes_with_the_device():
    """aperture() is BAR1 as an array: stores land in VRAM where BAR1's table maps them."""
    import numpy as np

    from helpers.models.toygpu import DeviceLostError

    gpu = start_device()
    ap = gpu.aperture()
    dva = gpu.alloc_vram(4096)
    at = gpu.bar1_map_dva(dva, 4096)
    ap[at + 8:at + 16] = np.arange(8, dtype=np.uint8)
    assert list(gpu.download(dva, 16)[8:]) == list(range(8))
    assert list(ap[at + 8:at + 12]) == [0, 1, 2, 3]
    gpu.close()
    with pytest.raises(DeviceLostError):
        gpu.aperture()


def test_a_killed_parent_leaves_no_shared_memory():
    """The device unlinks the block on its way out when its parent was SIGKILLed (no atexit ran)."""
    p = _parent('print(g.proc.pid, g._block.name, flush=True)\ntime.sleep(60)\n')
    try:
        dev, name = p.stdout.readline().split()
        assert shm_exists(name)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        _wait_gone(int(dev))
        assert not shm_exists(name)
    finally:
        p.kill()
        p.wait()
