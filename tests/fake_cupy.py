"""A NumPy stand-in for the parts of CuPy that helpers.models.radar.pipeline.run_pipeline uses.

It lets the pipeline's consumer loop (take, copy, process, retire, release) run on a machine
without a GPU: "device" arrays are host arrays, memcpyAsync is a memmove, events complete
when recorded. It checks the loop's bookkeeping, not any GPU behaviour.
"""

from __future__ import annotations

import ctypes
import types

import numpy as np


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class DevArray(np.ndarray):
    @property
    def data(self):  # cupy's .data is a MemoryPointer with .ptr
        return _Ptr(self.ctypes.data)


class Stream:
    def __init__(self, non_blocking=False):
        self.ptr = id(self)

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None

    def synchronize(self):
        pass

    def record(self, stream=None):
        import time
        self.t = time.perf_counter()

    @property
    def done(self):  # cupy.cuda.Event.done: cudaEventQuery == cudaSuccess
        return self.t is not None


class Pinned:
    def __init__(self, n):
        self.buf = np.empty(n, np.uint8)
        self.ptr = self.buf.ctypes.data

    def __buffer__(self, flags):
        return memoryview(self.buf)


def make():
    registered = {}

    def memcpy(dst, src, n, kind, stream):
        ctypes.memmove(dst, src, n)

    def host_register(ptr, n, flags):
        assert ptr not in registered, "registered twice"
        registered[ptr] = n

    def host_unregister(ptr):
        del registered[ptr]

    runtime = types.SimpleNamespace(memcpyHostToDevice=1, memcpyAsync=memcpy, hostRegister=host_register,
                                    hostUnregister=host_unregister, deviceSynchronize=lambda: None)
    pool = types.SimpleNamespace(free_all_blocks=lambda: None, used_bytes=lambda: 0)
    cuda = types.SimpleNamespace(Stream=Stream, Event=Event, runtime=runtime,
                                 get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3,
                                 alloc_pinned_memory=Pinned)
    cp = types.SimpleNamespace(
        cuda=cuda, fft=np.fft, conj=np.conj, complex64=np.complex64, float32=np.float32,
        empty=lambda shape, dtype: np.empty(shape, dtype).view(DevArray),
        asarray=np.asarray, asnumpy=np.asarray,
        get_default_memory_pool=lambda: pool, get_default_pinned_memory_pool=lambda: pool)
    cp.registered = registered
    return cp
