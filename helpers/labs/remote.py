"""Stand-ins the lab grader hands to learner code in the worker: they hold no answers.

A graded call may pass a placeholder (`helpers.labs.wire.remote(kind, ...)`) where learner
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
"""

from __future__ import annotations

import types
from collections.abc import Callable

from helpers.labs.wire import WireError

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
