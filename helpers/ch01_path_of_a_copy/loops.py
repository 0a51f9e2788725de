"""The measuring code Chapter 1 shows on its page, and how it reaches the traced child process.

`copy_loop` is the program whose system calls the census counts (path.syscall_census and
path.ioctl_trace); `cpu_seconds` is what the CPU-time experiment runs for each kind of copy
(path.cpu_time). Both run in a fresh child process (helpers/ch01_path_of_a_copy/_copy_workload.py),
so that strace and getrusage see a small CUDA program and not the course's own package: the
parent writes the function's text to a file (`code_file`) and the child defines it from there,
with `np`, `cp`, `resource` and `time` in scope. The recorder passes the course's functions;
a learner's changed one travels the same way.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from helpers.core import shown
from helpers.core.errors import InputError, InputTypeError
from helpers.core.gpu import cp


def copy_loop(rounds: int, nbytes: int) -> bool:
    """`rounds` round trips: copy `nbytes` to the GPU, add 1 to each byte there, copy them back."""
    host = np.full(nbytes, 7, dtype=np.uint8)  # pageable memory, as in source question 000
    back = np.empty_like(host)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    rt = cp.cuda.runtime
    for _ in range(rounds):
        rt.memcpy(dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice)  # cudaMemcpy
        dev += 1  # a kernel launch
        rt.memcpy(back.ctypes.data, dev.data.ptr, nbytes, rt.memcpyDeviceToHost)
    return rounds == 0 or bool((back == 8).all())  # the kernel ran on the bytes that came back


def cpu_seconds(host, dev, direction: str, repeats: int) -> dict:
    """CPU time (user, system) and wall time this process spends on `repeats` synchronous copies."""
    rt = cp.cuda.runtime
    dst, src, kind = ((dev.data.ptr, host.ctypes.data, rt.memcpyHostToDevice) if direction == "h2d"
                      else (host.ctypes.data, dev.data.ptr, rt.memcpyDeviceToHost))
    rt.memcpy(dst, src, host.nbytes, kind)  # warm-up
    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(repeats):
        rt.memcpy(dst, src, host.nbytes, kind)  # cudaMemcpy: returns when the copy is done
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    return {"wall": wall, "user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime}


def code_file(fn: Callable, folder: Path | str) -> tuple[Path, str]:
    """Write `fn`'s text to a file in `folder` for the child process; returns (path, name).

    A function whose text Python cannot find (a lambda typed at a prompt, a builtin) cannot
    travel to the child: InputError says to define it with `def` in a cell."""
    if not callable(fn):
        raise InputTypeError(f"expected a function like copy_loop, got {type(fn).__name__}")
    text = shown.source_of(fn)
    name = getattr(fn, "__name__", "")
    if text is None or not name.isidentifier() or f"def {name}(" not in text:
        raise InputError(f"the text of {name or fn!r} cannot be found, so it cannot run in the traced child "
                         "process; define it with `def` in a notebook cell")
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("@")]  # no decorators in the child
    path = Path(folder) / f"{name}.py"
    path.write_text("\n".join(lines) + "\n")
    return path, name
