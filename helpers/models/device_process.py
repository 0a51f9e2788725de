"""Portable plumbing for the course's simulated devices: shared memory and a device process.

The toy GPU and Chapter 9's capture card each run in a process of their own and share memory
with the notebook, the way a device shares a BAR or a DMA buffer with its driver. This module
is that plumbing, written once, in portable Python (Linux, macOS, Windows/WSL): no /proc, no
/dev/shm paths, no prctl.

- `SharedBlock`: a named block of shared memory (multiprocessing.shared_memory). Python's
  resource tracker is kept out of it: the tracker is a helper process that would outlive every
  notebook that used a device (and before Python 3.13 it also unlinks blocks it merely saw
  attached). Instead the notebook's side unlinks the block when the device is closed, and the
  device process unlinks it on its way out when the notebook's process died first.
- `DeviceProcess` (the notebook's side): starts `python -m <module> ...` with two pipes. The
  device's stdin is its *lifeline* and carries bytes to it (the toy GPU's posted register
  writes); its stdout carries one-byte notifications back (the toy GPU's interrupts), read by
  a thread, so a wait is a timed Event.wait on every platform (select(2) does not take pipes
  on Windows).
- `Lifeline` (the device's side): a thread reads stdin. End of file means the notebook's
  process is gone, however it ended: the operating system closes a dead process's pipes. A
  forked child of the notebook could hold the pipe open, so on POSIX the device also notices
  when its parent process id changes (it was re-parented).

Every wait here has a timeout; stopping a device never waits for longer than its grace period
before killing the process.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import subprocess
import sys
import tempfile
import threading
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the device process imports helpers from it
_TRACK_ARG = sys.version_info >= (3, 13)    # SharedMemory(track=False) exists from Python 3.13
_PATCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _untracked(name: str):
    """Before Python 3.13: keep one block's name away from the resource tracker meanwhile."""
    if _TRACK_ARG or os.name == "nt":
        yield
        return
    with _PATCH_LOCK:
        reg, unreg = resource_tracker.register, resource_tracker.unregister

        def skip(fn):
            return lambda n, rtype: None if n.lstrip("/") == name else fn(n, rtype)

        resource_tracker.register, resource_tracker.unregister = skip(reg), skip(unreg)
        try:
            yield
        finally:
            resource_tracker.register, resource_tracker.unregister = reg, unreg


class _Shm(shared_memory.SharedMemory):
    """SharedMemory whose garbage collection stays quiet while NumPy views still use it.

    (The base class's __del__ lets BufferError escape, which Python prints to stderr; the
    memory itself is unmapped once the last view is gone.)"""

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, BufferError):
            pass


def _shm(name: str, create: bool, size: int = 0) -> shared_memory.SharedMemory:
    kw = {"track": False} if _TRACK_ARG else {}
    with _untracked(name):
        return _Shm(name=name, create=create, size=size, **kw)


class SharedBlock:
    """A named block of shared memory, created by one process and attached by another."""

    def __init__(self, shm: shared_memory.SharedMemory, owner: bool):
        self._shm, self.owner = shm, owner
        self.name = shm.name.lstrip("/")
        self.buf = shm.buf  # a memoryview over the whole block

    @classmethod
    def create(cls, prefix: str, nbytes: int) -> SharedBlock:
        """A new zero-filled block of `nbytes`, named `prefix-<pid>-<random>` (31 characters at most: macOS)."""
        name = f"{prefix}-{os.getpid()}-{secrets.token_hex(4)}"[-30:]
        return cls(_shm(name, True, nbytes), owner=True)

    @classmethod
    def attach(cls, name: str) -> SharedBlock:
        """The block another process created (FileNotFoundError if it is gone)."""
        return cls(_shm(name, False), owner=False)

    @property
    def size(self) -> int:
        return self._shm.size

    def close(self) -> bool:
        """Unmap this process's view; False while a NumPy array or a registration still uses it."""
        self.buf = None
        try:
            self._shm.close()
        except (BufferError, OSError):
            return False
        return True

    def unlink(self) -> None:
        """Remove the name (the memory goes when the last mapping does); harmless if already gone."""
        with _untracked(self.name):
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass


class DeviceProcess:
    """The notebook's side of a device process: start it, send it bytes, count its notifications."""

    def __init__(self, module: str, args: list[str]):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=str(ROOT),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     bufsize=0)
        self.notifications = 0           # one-byte messages the device sent so far
        self.notified = threading.Event()  # set by every notification; the waiter clears it
        self._reader = threading.Thread(target=self._read, name=f"{module} notifications", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            try:
                data = out.read(4096)
            except (OSError, ValueError):
                data = b""
            if not data:
                self.notified.set()  # wake any waiter: it then finds the device gone
                return
            self.notifications += len(data)
            self.notified.set()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, data: bytes) -> None:
        """Write bytes to the device's stdin (BrokenPipeError when the device is gone).

        Callers keep what they have in flight far below a pipe's buffer (4 KiB at least on
        every platform), so this never blocks for long."""
        view = memoryview(data)
        while view:
            n = self.proc.stdin.write(view)
            view = view[n or 0:]

    def stderr_text(self, limit: int = 2000) -> str:
        """The end of what the device wrote to stderr (its tracebacks, if any)."""
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode(errors="replace")[-limit:]
        except (OSError, ValueError):
            return ""

    def stop(self, grace_s: float = 2.0) -> None:
        """Close the lifeline (the device exits on end of file); kill it after `grace_s`."""
        for f in (self.proc.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5.0)
        self._reader.join(timeout=1.0)
        for f in (self.proc.stdout, self._stderr):
            try:
                f.close()
            except OSError:
                pass


class Lifeline:
    """The device's side of its stdin: bytes arrive in `inbox`; `gone()` once the parent is."""

    def __init__(self, parent_pid: int):
        self.parent_pid = parent_pid
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()  # bytes chunks, then None at end of file
        self._eof = threading.Event()
        threading.Thread(target=self._read, name="lifeline", daemon=True).start()

    def _read(self) -> None:
        fd = sys.stdin.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                self._eof.set()
                self.inbox.put(None)
                return
            self.inbox.put(data)

    def gone(self) -> bool:
        """True once stdin reached end of file, or (POSIX) this process was re-parented."""
        if self._eof.is_set():
            return True
        return os.name != "nt" and os.getppid() != self.parent_pid

    def wait_gone(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the parent to let go; `gone()` at the end. Wakes at once on
        end of file, so a device that only idles until it is closed exits without a polling delay."""
        self._eof.wait(timeout)
        return self.gone()

    def get(self, timeout: float) -> bytes | None:
        """The next chunk of bytes within `timeout` s, b'' if none came, None at end of file."""
        try:
            return self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait()
        except queue.Empty:
            return b""


def quiet_interrupts() -> None:
    """Ignore Ctrl-C in a device process: it is meant for the notebook's kernel."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
