"""The simulated devices' plumbing is portable Python: shared memory, a lifeline, no helper daemons.

The toy GPU and the capture card have one transport, helpers.models.device_process, and the
toy-GPU and radar tests all run through it; these tests pin down the plumbing itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from toygpu_util import process_gone, shm_exists

from helpers.models import device_process as dp

ROOT = Path(__file__).resolve().parents[2]
LEARNER_PATH = [ROOT / "helpers" / "models" / "device_process.py",
                *sorted((ROOT / "helpers" / "models" / "toygpu").glob("*.py")),
                ROOT / "helpers" / "models" / "radar" / "card.py"]
LINUX_ONLY = re.compile(r"/proc/|/dev/shm|prctl|PDEATHSIG|select\.select|pass_fds|os\.fork|fcntl")


@pytest.mark.parametrize("path", LEARNER_PATH, ids=lambda p: p.name)
def test_no_linux_only_plumbing_on_the_learners_path(path):
    code = "\n".join(ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#"))
    code = re.sub(r'"""(.|\n)*?"""', "", code)  # docstrings may mention what is avoided
    assert not LINUX_ONLY.findall(code), f"{path.name} uses Linux-only plumbing"


def test_a_block_is_shared_between_processes_and_unlinked():
    block = dp.SharedBlock.create("course-test", 8192)
    try:
        view = np.ndarray((8192,), np.uint8, block.buf)
        view[:4] = [1, 2, 3, 4]
        code = ("import sys; from helpers.models.device_process import SharedBlock\n"
                "b = SharedBlock.attach(sys.argv[1]); print(list(b.buf[:4])); b.buf[4] = 9; b.close()")
        out = subprocess.run([sys.executable, "-c", code, block.name], capture_output=True, text=True,
                             env={"PYTHONPATH": str(ROOT)}, timeout=60)
        assert out.stdout.split("\n")[0] == "[1, 2, 3, 4]", out.stderr
        assert view[4] == 9
        assert shm_exists(block.name)
    finally:
        del view
        block.unlink()
        assert block.close()
    assert not shm_exists(block.name)
    block.unlink()  # twice is harmless


def test_using_the_devices_starts_no_helper_process():
    """Python's resource tracker is a process of its own: the devices must not start it."""
    code = textwrap.dedent("""
        import json, sys
        from multiprocessing import resource_tracker
        from helpers.models.toygpu import ToyGPU
        from helpers.models.radar import ring
        with ToyGPU(vram_bytes=1 << 20, sysmem_bytes=1 << 20) as g:
            g.read("ID")
        with ring.CaptureCard(frame_bytes=1 << 20, period_s=5e-3, frames=2) as c:
            c.wait_frame(10.0)
        print(json.dumps(resource_tracker._resource_tracker._pid))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) is None, "the resource tracker was started"
    assert "leaked" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_lifeline_ends_the_device_and_notifications_arrive(monkeypatch):
    """A device that echoes one notification per byte received, and stops at end of file."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    dev = dp.DeviceProcess("echo_device", [str(os.getpid())])
    try:
        dev.send(b"abc")
        deadline = time.monotonic() + 10
        while dev.notifications < 3 and time.monotonic() < deadline:
            dev.notified.wait(0.1)
        assert dev.notifications == 3, dev.stderr_text()
    finally:
        dev.stop(grace_s=5.0)
    assert process_gone(dev.pid)
    assert dev.proc.returncode == 0, dev.stderr_text()
