"""The grader's end of a worker: start it sandboxed, send requests, answer callbacks, on deadlines.

One `Session` is one worker process (helpers.labs.grading.worker) over one scratch folder. Every read
waits at most until a deadline; a worker that misses it, dies, floods its output or breaks
the protocol raises `WorkerGone` with the reason, and is killed with everything it started
(its process group; under bubblewrap its PID namespace goes with it).
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from helpers.core.process_group import kill_group
from helpers.labs.grading import wire
from tools.grader import memcap, sandbox

MAX_MESSAGE = 64 << 20  # bytes in one reply line
OUTPUT = "output.log"   # the learner's stdout and stderr, beside the scratch folder (capped by RLIMIT_FSIZE)


class WorkerGone(Exception):  # noqa: N818 - the event, not an error class hierarchy
    """The worker cannot answer any more: timed out, died, flooded or broke the protocol."""


def _high_fd(fd: int) -> int:
    """A duplicate of `fd` numbered 10 or more (so it cannot clash with 3 and 4 in the child)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Session:
    """A running worker. Use as a context manager; `close()` kills it."""

    def __init__(self, root: Path, scratch: Path, *, sandboxed: bool = True,
                 limits: sandbox.Limits = sandbox.DEFAULT_LIMITS,
                 redacted: list[tuple[Path, str]] | None = None) -> None:
        self.scratch, self.limits = scratch, limits
        sandbox.prepare_scratch(scratch)
        req_r, req_w = (_high_fd(fd) for fd in os.pipe())
        rep_r, rep_w = (_high_fd(fd) for fd in os.pipe())
        out_path = scratch.parent / f"{scratch.name}.{OUTPUT}"  # beside the scratch copy: not in the sandbox
        out = open(out_path, "wb")  # noqa: SIM115 - the child's stdout/stderr
        argv, env = sandbox.worker_command(root, scratch, sandboxed, limits, redacted)
        self.output_path = out_path

        self.cap = memcap.MemoryCap(limits.memory_bytes)  # the whole worker's memory (cgroup v2, else watched)

        def child_setup() -> None:
            os.dup2(req_r, 3, inheritable=True)
            os.dup2(rep_w, 4, inheritable=True)
            self.cap.join()
            sandbox.set_limits(limits)

        try:
            self.proc = subprocess.Popen(argv, env=env, cwd=scratch, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, pass_fds=(3, 4), preexec_fn=child_setup,
                                         start_new_session=True)
        finally:
            out.close()
            os.close(req_r)
            os.close(rep_w)
        self._out, self._in = req_w, rep_r
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._buf = b""
        self._checked = 0.0  # when the memory cap was last read
        self.alive = True

    # -- lifetime -------------------------------------------------------------------------
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Ask the worker to leave, then kill its process group; idempotent."""
        if self.alive:
            try:
                os.write(self._out, wire.dumps({"op": "bye"}))
            except OSError:
                pass
        self.alive = False
        kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        self._out = self._in = -1
        self.cap.close()

    def output(self, limit: int = 2000) -> str:
        """The end of what the learner's code printed."""
        try:
            data = self.output_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def _gone(self, why: str) -> WorkerGone:
        code = self.proc.poll()
        if code is None:
            self.close()
            code = self.proc.returncode
        else:
            self.close()
        if code is not None and code < 0:
            sig = signal.Signals(-code).name
            why = {"SIGXFSZ": "its output (or a file it wrote) exceeded "  # (Python ignores SIGXFSZ: usually EFBIG)
                              f"{self.limits.file_bytes >> 20} MiB",
                   "SIGXCPU": f"it used more than {self.limits.cpu_s} s of CPU time",
                   }.get(sig, f"{why} (killed by {sig})")
        elif code not in (None, 0) and "exit" not in why:
            why = f"{why} (exit status {code})"
        self.alive = False
        return WorkerGone(why)

    # -- messages -------------------------------------------------------------------------
    def send(self, message: dict, deadline: float) -> None:
        data = wire.dumps(message)
        sel = selectors.DefaultSelector()
        sel.register(self._out, selectors.EVENT_WRITE)
        try:
            while data:
                if not sel.select(max(0.0, deadline - time.monotonic())):
                    raise self._gone("it stopped reading requests (timed out)")
                try:
                    data = data[os.write(self._out, data[:1 << 16]):]
                except BrokenPipeError:
                    raise self._gone("the worker exited") from None
        finally:
            sel.close()

    def receive(self, deadline: float) -> dict:
        sel = selectors.DefaultSelector()
        sel.register(self._in, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._gone("it did not answer in time (an endless loop, or too slow)")
                ready = sel.select(min(left, memcap.POLL_S))
                now = time.monotonic()
                if now - self._checked >= memcap.POLL_S:  # at most every POLL_S: a callback-heavy call stays fast
                    self._checked = now
                    if self.cap.over(self.proc.pid):
                        raise self._gone(f"it used more than {self.limits.memory_bytes >> 20} MiB of memory "
                                         "(all its processes together)")
                if not ready:
                    continue
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise self._gone("the worker exited")
                self._buf += chunk
                if len(self._buf) > MAX_MESSAGE:
                    raise self._gone(f"it sent more than {MAX_MESSAGE >> 20} MiB in one answer")
        finally:
            sel.close()
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            raise self._gone("it broke the protocol (not JSON)") from None
        if not isinstance(msg, dict):
            raise self._gone("it broke the protocol (not an object)")
        return msg

    def request(self, message: dict, timeout: float,
                callbacks: dict[str, Callable] | None = None) -> dict:
        """Send `message`, answer the worker's callbacks until its reply; the reply."""
        deadline = time.monotonic() + timeout
        self.send(message, deadline)
        while True:
            reply = self.receive(deadline)
            if reply.get("op") != "callback":
                return reply
            self.send(_answer(reply, callbacks or {}), deadline)


def _answer(msg: dict, callbacks: dict[str, Callable]) -> dict:
    """The grader's answer to a stand-in's callback (never the learner's objects: data only)."""
    fn = callbacks.get(msg.get("name"))
    if fn is None:
        return {"op": "refused", "message": f"no such callback {msg.get('name')!r} in this call"}
    try:
        args = wire.decode(msg.get("args", []))
        kwargs = wire.decode(msg.get("kwargs", {}))
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise wire.WireError("malformed callback")
        return {"op": "answer", "value": wire.encode(fn(*args, **kwargs))}
    except Exception as exc:  # noqa: BLE001 - raised again in the learner's code (same class name)
        return {"op": "refused", "error": type(exc).__name__, "message": str(exc)[:500]}
