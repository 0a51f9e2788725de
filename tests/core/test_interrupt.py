"""Interrupting a kernel in the middle of a long experiment leaves nothing behind.

Each test starts a real IPython kernel (jupyter_client), runs a long cell, interrupts it the
way Jupyter's stop button does (SIGINT), then checks from outside, in /proc, that the kernel
has no child process left and no more locked memory than before, and that the next cell
works. The toy-device wait, the sandboxed children and the radar capture card run anywhere;
the transfer sweep and the live radar pipeline need a GPU (marked gpu, run on the GPU
machine) and also check device memory.
"""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

import pytest
from conftest import needs_gpu
from jupyter_client.manager import KernelManager

from tools.matrix import leakprobe

ROOT = Path(__file__).resolve().parents[2]


class Kernel:
    """A started IPython kernel with helpers to run cells, interrupt them and read /proc."""

    def __init__(self, env: dict | None = None):
        kenv = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH")) if x))
        kenv.update(env or {})
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=kenv, cwd=str(ROOT))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.pid = int(self.run("import os; print(os.getpid())").strip())

    def run(self, code: str, timeout: float = 120) -> str:
        """Run a cell to its end; its stdout, or AssertionError with the kernel's traceback.

        Right after an error ipykernel aborts requests already queued (stop_on_error): an
        aborted request is sent again.
        """
        for _ in range(10):
            out = self._run(code, timeout)
            if out is not None:
                return out
            time.sleep(0.5)
        raise AssertionError(f"the kernel kept aborting {code!r}")

    def _run(self, code: str, timeout: float) -> str | None:
        msg_id = self.kc.execute(code)
        started = False
        out, deadline = [], time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            started = started or kind == "execute_input"
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise AssertionError("cell failed: " + "\n".join(content["traceback"])[-3000:])
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out) if started else None

    def interrupt_when(self, code: str, ready, timeout: float = 120, why: str = "the long cell never got going") -> str:
        """Start a cell, wait until ready() is true (polled), interrupt it; return its error name."""
        msg_id = self.kc.execute(code)
        deadline = time.monotonic() + timeout
        while not ready():
            assert time.monotonic() < deadline, why
            time.sleep(0.05)
        time.sleep(0.3)
        self.km.interrupt_kernel()
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                raise AssertionError("the interrupted cell did not stop") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "error":
                return msg["content"]["ename"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "finished"

    def children(self) -> list[dict]:
        return leakprobe.children(self.pid)

    def locked(self) -> int:
        return leakprobe.locked_bytes(self.pid)

    def pinned(self) -> int:
        """Locked bytes plus shared anonymous mappings (where cudaHostAlloc'd memory is)."""
        return leakprobe.locked_bytes(self.pid) + leakprobe.pinned_mapped_bytes(self.pid)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel():
    k = Kernel({"COURSE_MODE": "replay"})
    yield k
    k.close()


def _gone(pids, wait_s: float = 5.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_toy_device_wait_interrupted(kernel, tmp_path):
    kernel.run("from helpers.models.toygpu import ToyGPU")
    locked = kernel.locked()
    waiting = tmp_path / "waiting"
    name = kernel.interrupt_when(
        f"with ToyGPU() as dev:\n    open({str(waiting)!r}, 'w').close()\n"
        "    dev.wait(10**6, timeout=300)  # a fence that never comes",
        lambda: waiting.exists() and len(kernel.children()) == 1)
    assert name == "KeyboardInterrupt"
    assert _gone([c["pid"] for c in kernel.children()]) and kernel.children() == []
    assert kernel.locked() <= locked
    # the next cell works, on a new toy device
    out = kernel.run("with ToyGPU() as dev:\n    print(dev.alive)\nprint(dev.alive)")
    assert out.split() == ["True", "False"]
    assert kernel.children() == []


def test_toy_device_interrupted_while_starting(kernel, tmp_path):
    """An interrupt inside ToyGPU() itself (here: a bring-up made slow on purpose) must not
    strand the device process: the half-made object is kept alive by the traceback IPython
    stores, so only ToyGPU's own clean-up can stop it."""
    marker = tmp_path / "bringing-up"
    kernel.run("import time\nfrom helpers.models.toygpu import ToyGPU, driver\n"
               "def slow_bring_up(self, *args, **kwargs):\n"
               f"    open({str(marker)!r}, 'w').close()\n"
               "    time.sleep(300)\n"
               "driver.ToyGPU.bring_up = slow_bring_up")
    name = kernel.interrupt_when("dev = ToyGPU()", lambda: marker.exists() and len(kernel.children()) == 1)
    assert name == "KeyboardInterrupt"
    assert _gone([c["pid"] for c in kernel.children()]), "the toy device outlived an interrupted ToyGPU()"
    assert kernel.children() == []
    assert kernel.run("print('dev' in dir())").strip() == "False"


def test_sandboxed_child_interrupted(kernel):
    kernel.run("from helpers.measure import sandbox")
    name = kernel.interrupt_when("sandbox.run_python('import time; time.sleep(300)', 400)",
                                 lambda: len(kernel.children()) == 1)
    assert name == "KeyboardInterrupt"
    assert _gone([c["pid"] for c in kernel.children()]) and kernel.children() == []
    out = kernel.run("print(sandbox.run_python('print(6 * 7)', 60).stdout_tail.strip())")
    assert out.strip() == "42"
    assert kernel.children() == []


def test_traced_child_interrupted(kernel, tmp_path):
    """syscalls.run_child starts its command in a new session (strace + tracee): both must go."""
    marker = tmp_path / "started"
    kernel.run("from helpers.ch01_path_of_a_copy import syscalls")
    cmd = ["sh", "-c", f"touch {marker}; sleep 300 & wait"]
    before = {c["pid"] for c in kernel.children()}
    seen: set[int] = set()

    def started() -> bool:
        for c in kernel.children():
            seen.add(c["pid"])
            seen.update(x["pid"] for x in leakprobe.children(c["pid"]))
        return marker.exists() and len(seen) >= 2

    name = kernel.interrupt_when(f"syscalls.run_child({cmd!r}, 400, 'a long child')", started)
    assert name == "KeyboardInterrupt"
    assert _gone(seen - before), "the child or its own child outlived the interrupt"
    assert kernel.run("print(syscalls.run_child(['echo', 'ok'], 30).stdout.strip())").strip() == "ok"


def _rings(pid: int) -> list[str]:
    """The radar capture card's shared-memory rings a process created (helpers.models.radar.ring.CaptureCard)."""
    return sorted(str(x) for x in Path("/dev/shm").glob(f"course-radar-{pid}-*"))


def test_radar_capture_interrupted(kernel):
    """The capture card (a producer process and a /dev/shm ring) stops with the interrupted cell."""
    kernel.run("from helpers.models.radar import pipeline")
    locked = kernel.locked()
    name = kernel.interrupt_when("pipeline.run_cpu_consumer(4 << 20, 8e-3, 1_000_000)",
                                 lambda: len(kernel.children()) == 1 and _rings(kernel.pid))
    assert name == "KeyboardInterrupt"
    assert _gone([c["pid"] for c in kernel.children()]) and kernel.children() == []
    assert _rings(kernel.pid) == [], "the ring outlived the interrupted run"
    assert kernel.locked() <= locked
    out = kernel.run("r = pipeline.run_cpu_consumer(1 << 20, 8e-3, 20)\nprint(len(r.latency_us), r.dropped)")
    assert out.split() == ["20", "0"]
    assert kernel.children() == [] and _rings(kernel.pid) == []


@needs_gpu
@pytest.mark.gpu
def test_transfer_sweep_interrupted_leaves_no_pinned_or_device_memory():
    k = Kernel({"COURSE_MODE": "live"})
    progress = Path(os.environ.get("TMPDIR", "/tmp")) / f"sweep-{os.getpid()}"
    try:
        k.run("from helpers import course\nfrom helpers.measure import transfers\nfrom helpers.core import gpu\nctx = course.start('t', quiet=True)\n"
              "cp = gpu.cupy(); f0, t0 = cp.cuda.runtime.memGetInfo(); print(t0 - f0)")
        k.run("transfers.measure_copy(1 << 20, 'h2d', 'pinned', reps=2)\ncourse.finish(quiet=True)")
        base_dev = int(k.run("f, t = cp.cuda.runtime.memGetInfo(); print(t - f)"))
        base_pinned = k.pinned()
        progress.unlink(missing_ok=True)
        code = ("import pathlib\n"
                f"pathlib.Path({str(progress)!r}).touch()\n"
                "for _ in range(1000):\n"
                "    transfers.sweep([64 << 20, 256 << 20], host_kinds=('pinned', 'registered'), reps=20, "
                "progress=False)\n")
        name = k.interrupt_when(code, lambda: progress.exists() and k.pinned() > base_pinned + (32 << 20),
                                timeout=60, why="64 MiB pinned buffers never showed in VmLck+VmPin or in the "
                                "shared anonymous mappings: the pinned-memory measure does not see cudaHostAlloc here")
        assert name == "KeyboardInterrupt"
        k.run("import gc; gc.collect(); course.finish(quiet=True)")
        assert k.pinned() <= base_pinned + (1 << 20), "pinned memory left behind by the interrupted sweep"
        used = int(k.run("f, t = cp.cuda.runtime.memGetInfo(); print(t - f)"))
        assert used - base_dev <= 64 << 20, f"{(used - base_dev) >> 20} MiB of device memory left behind"
        assert k.children() == []
        assert k.run("print(transfers.measure_copy(1 << 20, 'h2d', 'pinned', reps=2).nbytes)").strip() == str(1 << 20)
    finally:
        progress.unlink(missing_ok=True)
        k.close()


@needs_gpu
@pytest.mark.gpu
def test_radar_pipeline_interrupted_leaves_no_registration_or_device_memory():
    """Interrupting the live pipeline (ring registered with cudaHostRegister, 16 MiB frames)
    leaves no producer, no ring, no pinned or device memory, and the next run works."""
    k = Kernel({"COURSE_MODE": "live"})
    try:
        k.run("from helpers import course\nfrom helpers.models.radar.pipeline import PipelineConfig, run_pipeline\n"
              "from helpers.core import gpu\nctx = course.start('t', quiet=True)\n"
              "cp = gpu.cupy()\nrun_pipeline(PipelineConfig(design='registered', frame_bytes=1 << 20, frames=10))")
        base_dev = int(k.run("f, t = cp.cuda.runtime.memGetInfo(); print(t - f)"))
        base_pinned = k.pinned()
        name = k.interrupt_when("run_pipeline(PipelineConfig(design='pipelined', frame_bytes=16 << 20, frames=1_000_000))",
                                lambda: len(k.children()) == 1 and _rings(k.pid), timeout=90)
        assert name == "KeyboardInterrupt"
        assert _gone([c["pid"] for c in k.children()]) and k.children() == []
        assert _rings(k.pid) == [], "the ring outlived the interrupted pipeline"
        k.run("import gc; gc.collect()")
        assert k.pinned() <= base_pinned + (1 << 20), "pinned memory left behind by the interrupted pipeline"
        used = int(k.run("f, t = cp.cuda.runtime.memGetInfo(); print(t - f)"))
        assert used - base_dev <= 64 << 20, f"{(used - base_dev) >> 20} MiB of device memory left behind"
        out = k.run("r = run_pipeline(PipelineConfig(design='registered', frame_bytes=4 << 20, frames=50))\n"
                    "print(len(r.latency_us), r.checked > 0, r.max_error < 1e-3)")
        assert out.split() == ["50", "True", "True"]
        assert k.children() == [] and _rings(k.pid) == []
    finally:
        k.close()
