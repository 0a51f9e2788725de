"""Stand-ins the lab grader hands to learner code in the worker: they hold no answers.

A graded call may pass a placeholder (`helpers.labs.grading.wire.remote(kind, ...)`) where learner
code expects an object. The worker builds the stand-in here; every question the stand-in
cannot answer by itself goes back to the grader as a callback, so whatever the check knows
(a simulated clock's t0 and bandwidth, how often a timer was called, the reference
implementation of an earlier part) stays in the grader's process.

- `callback`: a function; each call is answered by the grader (a timer, an earlier part).
- `cuda`: the part of `cupy.cuda` Lab 2's `timed_copy` uses (Event, record, synchronize,
  runtime.memcpyAsync, get_elapsed_time); the clock runs in the grader.
- `ns`: a record of attributes (a TTM buffer object's name, size, priority ...); with a `ref`,
  one object per ref within a request.
- `module`: NumPy, as the `xp` argument of Lab 3's `range_doppler`.
- `toygpu`, `labdriver`, `fakebus`: Lab 1's device, which runs in the grader: every register
  access, system-memory load and store and BAR1 access is a question to the grader's device.
"""

from __future__ import annotations

import types
from collections.abc import Callable

from helpers.core.errors import InputError
from helpers.labs.grading.wire import WireError

Callback = Callable[..., object]  # callback(name, *args) -> the grader's answer


def make(spec: dict, callback: Callback, decode: Callable, memo: dict) -> object:
    """The stand-in a placeholder asks for; `memo` makes one object of every `ref` in a request
    (a buffer object listed among the candidates and in the model's table is one object)."""
    kind = spec["__remote__"]
    if kind == "callback":
        return _function(spec["name"], callback)
    if kind == "cuda":
        return RemoteCuda(spec["name"], callback)
    if kind == "cuda_stream":
        return RemoteCuda(spec["name"], callback).stream
    if kind == "ns":
        ref = spec.get("ref")
        if ref is not None and ("ns", ref) in memo:
            return memo[("ns", ref)]
        obj = types.SimpleNamespace(**{k: decode(v) for k, v in spec["fields"].items()})
        if ref is not None:
            memo[("ns", ref)] = obj
        return obj
    if kind == "driver_callback":
        return _driver_function(spec["name"], callback, memo)
    if kind == "toygpu":
        return memo.setdefault(("toygpu", spec["name"]), RemoteToyGPU(spec["name"], callback))
    if kind == "labdriver":
        return lab_driver(spec, callback, decode, memo)
    if kind == "fakebus":
        from helpers.labs.lab1 import FakeBus

        return FakeBus(decode(spec["values"]))
    if kind == "module" and spec.get("name") == "numpy":
        import numpy

        return numpy
    raise WireError(f"unknown stand-in {kind!r}")


def _function(name: str, callback: Callback):
    def stand_in(*args, **kwargs):
        return callback(name, *args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = str(name)
    return stand_in


class RemoteCuda:
    """A SIMULATED `cupy.cuda` subset whose clock lives in the grader (Lab 2)."""

    def __init__(self, name: str, callback: Callback) -> None:
        self._name, self._callback = name, callback
        outer = self

        class Event:
            def __init__(self, *args, **kwargs) -> None:
                self._id = outer._ask("event")

            def record(self, stream=None) -> None:
                outer._ask("record", self._id)

            def synchronize(self) -> None:
                outer._ask("event_sync", self._id)

            @property
            def done(self) -> bool:
                return bool(outer._ask("event_done", self._id))

        class Stream:
            ptr = 0x5EA

            def synchronize(self) -> None:
                outer._ask("stream_sync")

        class Runtime:
            @staticmethod
            def memcpyAsync(dst, src, size, kind, stream) -> None:  # noqa: N802 - CUDA's name
                outer._ask("memcpy", int(size), int(kind), int(stream))

        self.Event, self.Stream, self.runtime, self.stream = Event, Stream, Runtime(), Stream()

    def _ask(self, op: str, *args):
        return self._callback(self._name, op, *args)

    def get_elapsed_time(self, start, end) -> float:
        """Milliseconds between two recorded events, as cupy.cuda.get_elapsed_time."""
        return self._ask("elapsed", getattr(start, "_id", None), getattr(end, "_id", None))


# ----------------------------------------------------------------------- Lab 1: a device in the grader
#: exceptions a stand-in may raise in the learner's code as the grader's device raised them
def course_exceptions() -> dict[str, type]:
    """The course's exception classes a learner's driver may meet or raise (by name)."""
    from helpers.core import errors
    from helpers.models.toygpu import errors as toygpu_errors

    out = {}
    for mod in (errors, toygpu_errors):
        for name, obj in vars(mod).items():
            if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == mod.__name__:
                out[name] = obj
    return out


def rebuild(name: str, message: str) -> Exception:
    """The exception `name` (a course class or a built-in) with `message`, without its constructor."""
    import builtins

    cls = course_exceptions().get(name) or getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return RuntimeError(f"{name}: {message}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    return exc


class RemoteMemory:
    """Device-visible system memory of a Buffer; every load and store goes to the grader's device.

    Indexing reads a copy (`buf.view[0:8]`, `buf.view.copy()`, `np.asarray(buf.view)`);
    assigning to an index or a slice writes through (`buf.view[:] = data`). A NumPy view of a
    copy (`buf.view[0:8].view("<u8")`) is a copy too: write through `buf.view[...] = ...`."""

    def __init__(self, ask, addr: int, nbytes: int) -> None:
        self._ask, self.addr, self.nbytes = ask, int(addr), int(nbytes)
        self.shape, self.size, self.dtype, self.ndim = (self.nbytes,), self.nbytes, "uint8", 1

    def __len__(self) -> int:
        return self.nbytes

    def _range(self, key) -> tuple[int, int, bool]:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.nbytes)
            if step != 1:
                raise InputError("device memory is read and written in contiguous ranges (no step)")
            return start, max(start, stop), False
        i = int(key)
        i = i + self.nbytes if i < 0 else i
        if not 0 <= i < self.nbytes:
            raise IndexError(f"index {key} outside a {self.nbytes}-byte buffer")
        return i, i + 1, True

    def __getitem__(self, key):
        start, stop, scalar = self._range(key)
        data = self._ask("mem_read", self.addr + start, stop - start)
        return int(data[0]) if scalar else data

    def __setitem__(self, key, value) -> None:
        import numpy as np

        start, stop, _ = self._range(key)
        data = np.broadcast_to(np.asarray(value).astype(np.uint8, copy=False).reshape(-1)
                               if np.ndim(value) else np.uint8(value), (stop - start,))
        self._ask("mem_write", self.addr + start, np.ascontiguousarray(data))

    def copy(self):
        return self[:]

    def view(self, dtype):
        return self[:].view(dtype)

    def __array__(self, dtype=None, copy=None):
        a = self[:]
        return a if dtype is None else a.astype(dtype)


def _buffer(ask, addr: int, nbytes: int):
    from helpers.models.toygpu.bus import Buffer

    return Buffer(int(addr), int(nbytes), RemoteMemory(ask, addr, nbytes))


class RemoteToyGPU:
    """The bus of a toy GPU that runs in the grader (Lab 1): MMIO, BAR1, system memory, counters."""

    def __init__(self, name: str, callback: Callback) -> None:
        self._name, self._callback = name, callback

    def _ask(self, op: str, *args):
        return self._callback(self._name, op, *args)

    def read(self, reg) -> int:
        return self._ask("read", reg)

    def write(self, reg, value, *, check: bool = True) -> None:
        self._ask("write", reg, int(value), bool(check))

    def check(self) -> None:
        self._ask("check")

    def alloc_sys(self, nbytes: int, align: int = 64):
        got = self._ask("alloc_sys", int(nbytes), int(align))
        return _buffer(self._ask, got["addr"], got["nbytes"])

    def free_sys(self, buf) -> None:
        self._ask("free_sys", int(buf.addr))

    def bar1_read(self, offset: int, nbytes: int, *, width: int = 8):
        return self._ask("bar1_read", int(offset), int(nbytes), int(width))

    def bar1_write(self, offset: int, data, *, mode: str = "wc", width: int = 8) -> None:
        import numpy as np

        self._ask("bar1_write", int(offset), np.ascontiguousarray(data), str(mode), int(width))

    def device_counters(self) -> dict:
        return self._ask("device_counters")

    @property
    def counters(self):
        return types.SimpleNamespace(**self._ask("counters"))


def lab_driver(spec: dict, callback: Callback, decode: Callable, memo: dict):
    """A LabDriver whose device is the grader's (Lab 1); buffers are RemoteMemory."""
    from helpers.labs.lab1 import LabDriver

    name = spec["name"]
    dev = memo.setdefault(("toygpu", name), RemoteToyGPU(name, callback))
    fields = decode(spec["fields"])
    bufs = {k: _buffer(dev._ask, *fields.pop(k)) for k in ("ring", "fence", "rptr")}
    return LabDriver(dev=dev, **bufs, **fields)


DRIVER_INTS = ("entries", "pt_base", "pages", "bar1_table", "first_dva", "wptr", "next_fence", "doorbells",
               "vram_next")


def export(value):
    """A LabDriver or a stand-in bus as data (buffers as (addr, nbytes), the bus by its name);
    anything else unchanged."""
    from helpers.labs.lab1 import LabDriver

    if type(value) is RemoteToyGPU:
        return {"__toygpu__": value._name}
    if type(value) is LabDriver:
        fields = {k: getattr(value, k) for k in DRIVER_INTS}
        for k in ("ring", "fence", "rptr"):
            b = getattr(value, k)
            fields[k] = (int(getattr(b, "addr", -1)), int(getattr(b, "nbytes", 0)))
        dev = getattr(value, "dev", None)
        fields["dev"] = dev._name if type(dev) is RemoteToyGPU else None
        return {"__labdriver__": fields}
    return value


def _driver_function(name: str, callback: Callback, memo: dict):
    """An earlier part of Lab 1 answered by the grader's reference on the grader's device: the
    driver state it changes (write pointer, fence, doorbells) comes back into the learner's
    LabDriver, and a LabDriver it returns is built on the same stand-in bus."""
    from helpers.labs.lab1 import LabDriver

    def stand_in(*args, **kwargs):
        answer = callback(name, *args, **kwargs)
        if not isinstance(answer, dict):
            return answer
        drv = next((a for a in args if type(a) is LabDriver), None)
        if drv is not None and isinstance(answer.get("driver"), dict):
            for k in DRIVER_INTS:
                setattr(drv, k, int(answer["driver"][k]))
        result = answer.get("result")
        if isinstance(result, dict) and isinstance(result.get("__labdriver__"), dict):
            fields = dict(result["__labdriver__"])
            dev = memo.get(("toygpu", fields.pop("dev", None))) or next(
                (a for a in args if type(a) is RemoteToyGPU), None) or getattr(drv, "dev", None)
            bufs = {k: _buffer(dev._ask, *fields.pop(k)) for k in ("ring", "fence", "rptr")}
            return LabDriver(dev=dev, **bufs, **{k: int(fields[k]) for k in DRIVER_INTS})
        return result

    stand_in.__name__ = stand_in.__qualname__ = str(name)
    return stand_in
