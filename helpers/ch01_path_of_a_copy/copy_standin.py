"""A stand-in for the few CuPy calls a Chapter 1 copy loop makes, which runs without a GPU and
records what the loop did (SIMULATED: no bytes cross a bus).

Exercise 1.5 asks for `copy_loop` with pinned host buffers. Its check must judge what the
learner's function *does*, never what its text says (a comment that mentions empty_pinned
pins nothing). So the check runs the function with `cp` and `cupyx` replaced by this module's
stand-ins: device arrays are host memory the stand-in owns, `runtime.memcpy` really moves the
bytes (so a loop that forgets a copy gets the wrong bytes back), `dev += 1` really adds one
(a "kernel launch"), and every copy records whether its host side lies in memory allocated
pinned (`cupyx.empty_pinned` and friends) or registered (`runtime.hostRegister`).
"""

from __future__ import annotations

import ctypes
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from helpers.core.errors import InputError

H2D, D2H = 1, 2


@dataclass
class Copy:
    """One runtime.memcpy the loop made."""

    kind: int            # H2D or D2H
    nbytes: int
    host_pinned: bool    # the host side lies inside pinned (or registered) memory


@dataclass(kw_only=True)
class Log:
    """What the learner's loop did with the stand-in."""

    copies: list[Copy] = field(default_factory=list)
    launches: int = 0
    pinned: list[tuple[int, int]] = field(default_factory=list)  # (address, bytes) of pinned host memory
    device: list[tuple[int, int]] = field(default_factory=list)  # (address, bytes) of stand-in device memory
    keep: list = field(default_factory=list)                      # the arrays behind those ranges

    def inside(self, ranges: list[tuple[int, int]], ptr: int, n: int) -> bool:
        return any(a <= ptr and ptr + n <= a + size for a, size in ranges)


class DeviceArray:
    """A stand-in cupy.ndarray: host memory owned by the stand-in, `.data.ptr`, and `+= k`."""

    def __init__(self, log: Log, shape, dtype):
        self._log = log
        self._a = np.zeros(shape, dtype=dtype)
        self.data = SimpleNamespace(ptr=self._a.ctypes.data)
        log.device.append((self._a.ctypes.data, self._a.nbytes))
        log.keep.append(self._a)

    def __iadd__(self, k):
        self._log.launches += 1  # an elementwise kernel on the GPU
        with np.errstate(over="ignore"):
            self._a += np.asarray(k).astype(self._a.dtype)
        return self

    def get(self):
        return self._a.copy()

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    @property
    def size(self) -> int:
        return self._a.size


def _runtime(log: Log) -> SimpleNamespace:
    def memcpy(dst: int, src: int, nbytes: int, kind: int) -> None:
        if kind not in (H2D, D2H):
            raise InputError(f"the stand-in copies host->device ({H2D}) or device->host ({D2H}), got kind {kind}")
        host, dev = (src, dst) if kind == H2D else (dst, src)
        if not log.inside(log.device, dev, nbytes):
            raise InputError(f"a {'host->device' if kind == H2D else 'device->host'} copy whose device side is "
                             "not a device array's .data.ptr range")
        log.copies.append(Copy(kind, int(nbytes), log.inside(log.pinned, host, nbytes)))
        ctypes.memmove(dst, src, nbytes)

    def host_register(ptr: int, nbytes: int, flags: int = 0) -> None:
        log.pinned.append((int(ptr), int(nbytes)))

    return SimpleNamespace(memcpy=memcpy, memcpyHostToDevice=H2D, memcpyDeviceToHost=D2H,
                           hostRegister=host_register, hostUnregister=lambda ptr: None,
                           deviceSynchronize=lambda: None)


def _pinned_allocators(log: Log) -> SimpleNamespace:
    def pinned(make):
        def alloc(*args, **kwargs):
            a = make(*args, **kwargs)
            log.pinned.append((a.ctypes.data, a.nbytes))
            log.keep.append(a)
            return a
        return alloc

    return SimpleNamespace(empty_pinned=pinned(np.empty), zeros_pinned=pinned(np.zeros),
                           empty_like_pinned=pinned(np.empty_like), zeros_like_pinned=pinned(np.zeros_like))


def modules(log: Log) -> tuple[SimpleNamespace, SimpleNamespace]:
    """(cp, cupyx) stand-ins that record into `log`."""
    rt = _runtime(log)
    cp = SimpleNamespace(
        empty=lambda shape, dtype=np.float64: DeviceArray(log, shape, dtype),
        zeros=lambda shape, dtype=np.float64: DeviceArray(log, shape, dtype),
        uint8=np.uint8, float32=np.float32, int32=np.int32,
        cuda=SimpleNamespace(runtime=rt, Device=lambda *a: SimpleNamespace(synchronize=lambda: None),
                             alloc_pinned_memory=None),
    )
    return cp, _pinned_allocators(log)


@contextmanager
def standing_in(log: Log):
    """While active, `import cupy` / `import cupyx` inside the learner's function give the stand-ins."""
    cp, cupyx = modules(log)
    saved = {k: sys.modules.get(k) for k in ("cupy", "cupyx")}
    sys.modules["cupy"], sys.modules["cupyx"] = cp, cupyx
    try:
        yield cp, cupyx
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def run(fn, *args) -> tuple[object, Log]:
    """Call the learner's `fn(*args)` with `cp` and `cupyx` in its globals replaced by the
    stand-ins (the notebook's own names are not touched); (its result, what it did)."""
    import types

    log = Log()
    with standing_in(log) as (cp, cupyx):
        g = dict(fn.__globals__, cp=cp, cupyx=cupyx)
        twin = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__kwdefaults__ = fn.__kwdefaults__
        return twin(*args), log
