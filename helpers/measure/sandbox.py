"""Run a crash-prone experiment in a child Python process, with a timeout, and report how it ended.

Some lessons of Chapter 5 are crashes: a host write through a device pointer ends in SIGSEGV,
a GPU kernel that reads an address the GPU cannot translate poisons its CUDA context. Neither
may take the notebook's kernel (or its CUDA context) down with it, and neither may hang it.
`run_python` starts `python -c CODE` in a new session, waits at most `timeout_s`, kills the
whole process group on timeout, and returns an `Outcome`: exit status, the signal that ended
it (number and name), the tail of its output, and any results it printed with `emit()` before
it died.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from helpers.core import validate
from helpers.core.errors import ReferenceDataError
from helpers.core.process_group import kill_group

RESULT_PREFIX = "RESULT:"
MAX_TIMEOUT_S = 600.0
TAIL_CHARS = 2000
STATUSES = ("ok", "error", "signal", "timeout")


def emit(**values) -> None:
    """Called inside a child: print one RESULT line the parent collects, flushed at once
    (so it survives a crash that follows)."""
    print(RESULT_PREFIX + json.dumps(values, default=str), flush=True)


@dataclass(kw_only=True)
class Outcome:
    """How a child process ended, and what it reported before it did."""

    status: str  # ok | error (non-zero exit) | signal | timeout
    returncode: int | None
    signal_number: int | None
    signal_name: str | None
    duration_s: float
    timeout_s: float
    results: dict = field(default_factory=dict)  # merged emit() values, in order
    stdout_tail: str = ""
    stderr_tail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Outcome:
        """Rebuild an Outcome from recorded JSON (replay); rejects unknown statuses."""
        if not isinstance(d, dict) or d.get("status") not in STATUSES:
            raise ReferenceDataError(f"not a recorded sandbox outcome (status must be one of {STATUSES}): {d!r:.200}")
        keys = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in keys})

    def summary(self) -> str:
        """One line: how it ended, in words."""
        if self.status == "signal":
            return f"killed by signal {self.signal_number} ({self.signal_name}) after {self.duration_s:.2f} s"
        if self.status == "timeout":
            return f"still running after {self.timeout_s:g} s: killed by the sandbox"
        if self.status == "error":
            return f"exited with status {self.returncode} after {self.duration_s:.2f} s"
        return f"exited normally after {self.duration_s:.2f} s"


def _check_args(code, timeout_s) -> float:
    """The timeout in seconds, once `code` is a non-empty string and the timeout is bounded."""
    validate.text(code, "sandbox code (a string of Python)")
    return validate.seconds(timeout_s, "timeout_s", hi=MAX_TIMEOUT_S)


def _child_env(extra: dict | None) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # so the child can `import helpers`
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def parse_results(stdout: str) -> dict:
    """Merge every RESULT line a child printed (later keys win); ignore malformed ones."""
    out: dict = {}
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            try:
                value = json.loads(line[len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.update(value)
    return out


def run_python(code: str, timeout_s: float = 60.0, *, env: dict | None = None) -> Outcome:
    """Run `code` in a fresh `python -X faulthandler -c`, at most `timeout_s` seconds.

    The child starts its own session, so a timeout kills it and anything it spawned. Its
    own crash (a signal) is reported, never raised: the crash is the result.
    """
    t = _check_args(code, timeout_s)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=_child_env(env), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=t)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        timed_out = True
    except BaseException:  # KeyboardInterrupt (a kernel interrupt): take the child down too
        kill_group(proc.pid)
        proc.wait()
        raise
    dt = time.monotonic() - t0
    rc = proc.returncode
    signum = -rc if (rc is not None and rc < 0 and not timed_out) else None
    status = "timeout" if timed_out else "signal" if signum else "error" if rc else "ok"
    return Outcome(status=status, returncode=None if timed_out else rc, signal_number=signum,
                   signal_name=signal_name(signum), duration_s=round(dt, 3), timeout_s=t,
                   results=parse_results(out), stdout_tail=out[-TAIL_CHARS:], stderr_tail=err[-TAIL_CHARS:])


def signal_name(signum: int | None) -> str | None:
    """SIGSEGV for 11, and so on; None for None; 'signal N' for numbers Python does not name."""
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
