"""The CUDA driver API from Python, through cuda-python's `cuda.bindings.driver`.

Seed 003's examples are C programs against the driver API (cuInit, cuMemAlloc,
cuMemcpyHtoD, cuMemHostAlloc). This module is their Python counterpart, and it works with
cuda-bindings 12.x and 13.x (installed with numba-cuda). Every call returns a tuple whose
first item is a CUresult; `check` turns a failure into a DriverError naming the call.

The examples use the device's *primary* context (cuDevicePrimaryCtxRetain), the one the
CUDA runtime, CuPy and Numba share, rather than cuCtxCreate as the seed does: a second
context in the same process would have its own GPU address space, and pointers from one
would mean nothing in the other (that is the GPU MMU's per-context isolation at work).
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
from types import ModuleType

from helpers.core.errors import CourseError, InputError, InputTypeError, NoGPUError

SEED_SIZE = 1024  # bytes, as in seed 003's examples
MAX_EXAMPLE_BYTES = 64 << 20
CU_MEMHOSTALLOC_PORTABLE = 0x01
CU_MEMHOSTALLOC_DEVICEMAP = 0x02


class DriverError(CourseError):
    """A CUDA driver API call failed; the message names the call and the CUresult."""


def driver() -> ModuleType:
    """cuda.bindings.driver, or NoGPUError saying how to get it."""
    try:
        from cuda.bindings import driver as drv
    except ImportError as exc:
        raise NoGPUError("the CUDA driver API bindings (cuda-python's cuda.bindings) are not "
                         f"importable here ({exc}); they come with numba-cuda") from None
    try:  # the bindings load libcuda lazily: without a driver the first call raises, not returns
        drv.cuInit(0)
    except Exception as exc:  # noqa: BLE001 - cuda.pathfinder's DynamicLibNotFoundError and kin
        raise NoGPUError(f"the CUDA driver library cannot be loaded here ({type(exc).__name__}: "
                         f"{str(exc)[:160]})") from None
    return drv


def bindings_major(drv: ModuleType | None = None) -> int:
    """12 or 13: which generation of the bindings' signatures is installed (see managed.py)."""
    from cuda import bindings

    return int(str(bindings.__version__).split(".")[0])


def check(result, what: str):
    """Unpack a driver call's (CUresult, values...) tuple; raise DriverError on failure."""
    drv = driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != int(drv.CUresult.CUDA_SUCCESS):
        name = error_name(err)
        raise DriverError(f"{what} failed: {name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def error_name(err) -> str:
    """'CUDA_ERROR_INVALID_VALUE (1)' for a CUresult."""
    try:
        return f"{driver().CUresult(int(err)).name} ({int(err)})"
    except Exception:
        return f"CUresult {int(err)}"


def as_int(value) -> int | None:
    """A driver handle/pointer/enum as a plain int (CUdeviceptr, CUmemorytype, void*)."""
    if value is None:
        return None
    for get in (int, lambda v: int(v.value), lambda v: int(v.getPtr())):
        with contextlib.suppress(Exception):
            return get(value)
    return None


@contextlib.contextmanager
def primary_context(ordinal: int = 0):
    """cuInit, retain device `ordinal`'s primary context and make it current; undo on exit."""
    drv = driver()
    check(drv.cuInit(0), "cuInit")
    dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(drv.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    try:
        yield ctx
    finally:
        drv.cuCtxPopCurrent()
        drv.cuDevicePrimaryCtxRelease(dev)


@contextlib.contextmanager
def _device_memory(drv, n: int):
    """cuMemAlloc(n), freed with cuMemFree on exit."""
    dptr = check(drv.cuMemAlloc(n), "cuMemAlloc")
    try:
        yield dptr
    finally:
        check(drv.cuMemFree(dptr), "cuMemFree")


@contextlib.contextmanager
def _pinned_host_memory(drv, n: int, flags: int, what: str):
    """cuMemHostAlloc(n, flags), freed with cuMemFreeHost on exit."""
    hptr = check(drv.cuMemHostAlloc(n, flags), what)
    try:
        yield hptr
    finally:
        check(drv.cuMemFreeHost(hptr), "cuMemFreeHost")


def _check_size(nbytes) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise InputTypeError(f"size must be a whole number of bytes, got {nbytes!r}")
    if not 0 < nbytes <= MAX_EXAMPLE_BYTES:
        raise InputError(f"size must be between 1 byte and {MAX_EXAMPLE_BYTES >> 20} MiB for these "
                         f"examples, got {nbytes}")
    return nbytes


def seed_pattern(nbytes: int) -> bytes:
    """The seed's data: byte i is i % 256."""
    nbytes = _check_size(nbytes)
    return bytes(i % 256 for i in range(nbytes))


def example1_device_roundtrip(nbytes: int = SEED_SIZE) -> dict:
    """Seed 003 Example 1: cuMemAlloc, cuMemcpyHtoD from pageable memory, cuMemcpyDtoH back."""
    n = _check_size(nbytes)
    drv = driver()
    src = ctypes.create_string_buffer(seed_pattern(n), n)
    back = ctypes.create_string_buffer(n)
    with primary_context(), _device_memory(drv, n) as dptr:
        check(drv.cuMemcpyHtoD(dptr, ctypes.addressof(src), n), "cuMemcpyHtoD")
        check(drv.cuMemcpyDtoH(ctypes.addressof(back), dptr, n), "cuMemcpyDtoH")
    return {"example": 1, "nbytes": n, "device_ptr": as_int(dptr), "first16": list(back.raw[:16]),
            "intact": back.raw == src.raw}


def example3_pinned(nbytes: int = SEED_SIZE) -> dict:
    """Seed 003 Example 3: cuMemHostAlloc(PORTABLE) pinned staging, DMA to the device and back."""
    n = _check_size(nbytes)
    drv = driver()
    pattern = seed_pattern(n)
    back = ctypes.create_string_buffer(n)
    with primary_context(), _pinned_host_memory(drv, n, CU_MEMHOSTALLOC_PORTABLE, "cuMemHostAlloc") as hptr:
        ctypes.memmove(as_int(hptr), pattern, n)  # a host pointer: the CPU may write
        with _device_memory(drv, n) as dptr:
            check(drv.cuMemcpyHtoD(dptr, hptr, n), "cuMemcpyHtoD")
            check(drv.cuMemcpyDtoH(ctypes.addressof(back), dptr, n), "cuMemcpyDtoH")
    return {"example": 3, "nbytes": n, "host_ptr": as_int(hptr), "first16": list(back.raw[:16]),
            "intact": back.raw == pattern}


def example2_done_right(nbytes: int = SEED_SIZE) -> dict:
    """What Example 2 wanted: the CPU writes bytes the GPU then sees, with no copy call.

    cuMemHostAlloc(DEVICEMAP) gives pinned host memory mapped into the GPU's page tables;
    cuMemHostGetDevicePointer gives the address the GPU uses for it (the same number, under
    UVA). The CPU writes through the host pointer, the GPU copies from the device pointer.
    """
    n = _check_size(nbytes)
    drv = driver()
    pattern = seed_pattern(n)
    back = ctypes.create_string_buffer(n)
    with primary_context(), _pinned_host_memory(drv, n, CU_MEMHOSTALLOC_DEVICEMAP,
                                                "cuMemHostAlloc(DEVICEMAP)") as hptr:
        ctypes.memmove(as_int(hptr), pattern, n)
        dview = check(drv.cuMemHostGetDevicePointer(hptr, 0), "cuMemHostGetDevicePointer")
        with _device_memory(drv, n) as dptr:  # a device-to-device copy reads the host page through the GPU's mapping
            check(drv.cuMemcpyDtoD(dptr, dview, n), "cuMemcpyDtoD")
            check(drv.cuMemcpyDtoH(ctypes.addressof(back), dptr, n), "cuMemcpyDtoH")
    return {"example": "2 done right", "nbytes": n, "host_ptr": as_int(hptr),
            "device_view": as_int(dview), "same_address": as_int(hptr) == as_int(dview),
            "first16": list(back.raw[:16]), "intact": back.raw == pattern}


POINTER_ATTRIBUTES = ("MEMORY_TYPE", "IS_MANAGED", "MAPPED", "DEVICE_ORDINAL", "DEVICE_POINTER",
                      "HOST_POINTER", "RANGE_START_ADDR", "RANGE_SIZE")


def pointer_attributes(ptr: int) -> dict:
    """cuPointerGetAttribute for each of POINTER_ATTRIBUTES: {name: int} or {name: 'ERROR_NAME'}.

    Needs a current context (the caller's, e.g. CuPy's primary one). The driver answers
    CUDA_ERROR_INVALID_VALUE for memory it does not know, such as a plain malloc'd buffer.
    """
    drv = driver()
    out: dict = {}
    for name in POINTER_ATTRIBUTES:
        attr = getattr(drv.CUpointer_attribute, f"CU_POINTER_ATTRIBUTE_{name}", None)
        if attr is None:
            continue
        err, *val = drv.cuPointerGetAttribute(attr, ptr)
        ok = int(err) == int(drv.CUresult.CUDA_SUCCESS)
        out[name] = as_int(val[0]) if ok and val else error_name(err).split(" ")[0]
    return out


def signature_names(fn) -> list[str]:
    """Parameter names of a bindings function: from its docstring's first line, else its signature.

    cuda.bindings documents each call as 'name(arg, arg: Type, ...)' on its docstring's first
    line, which is the reliable source for Cython functions; inspect is the fallback.
    """
    first = (getattr(fn, "__doc__", "") or "").strip().splitlines()[:1]
    name = getattr(fn, "__name__", "")
    if first and name and first[0].startswith(name + "(") and ")" in first[0]:
        inner = first[0].split("(", 1)[1].rsplit(")", 1)[0]
        names = [p.split(":")[0].split("=")[0].strip().split(" ")[-1] for p in inner.split(",")]
        return [n for n in names if n]
    with contextlib.suppress(TypeError, ValueError):
        return [p for p in inspect.signature(fn).parameters]
    return []


# -- stream memory operations: the GPU waits on (and writes) a word in pinned host memory ------------
MEMOP_ATTRIBUTES = ("CAN_MAP_HOST_MEMORY", "CAN_USE_STREAM_WAIT_VALUE_NOR", "CAN_USE_64_BIT_STREAM_MEM_OPS",
                    "CAN_FLUSH_REMOTE_WRITES")
MEMOP_CALLS = ("cuStreamWaitValue32", "cuStreamWriteValue32", "cuMemHostGetDevicePointer", "cuStreamQuery")


def memop_support(ordinal: int = 0) -> dict:
    """The device attributes stream memory operations depend on, {name: 0/1, or None if the bindings lack it},
    plus 'calls': which of MEMOP_CALLS the installed bindings have. Needs a driver (NoGPUError otherwise).

    The 32-bit GEQ wait and the 32-bit write this course uses need mapped host memory (CAN_MAP_HOST_MEMORY);
    NOR waits and the 64-bit calls have attributes of their own, and FLUSH needs platform support."""
    drv = driver()
    dev = check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    out: dict = {}
    for name in MEMOP_ATTRIBUTES:
        attr = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}", None)
        err, *val = drv.cuDeviceGetAttribute(attr, dev) if attr is not None else (None,)
        out[name] = int(val[0]) if attr is not None and int(err) == int(drv.CUresult.CUDA_SUCCESS) else None
    out["calls"] = {name: hasattr(drv, name) for name in MEMOP_CALLS}
    return out


def memop_unsupported(support: dict) -> str | None:
    """Why a 32-bit flag wait cannot run with this support (from memop_support), or None if it can."""
    missing = [name for name, ok in support.get("calls", {}).items() if not ok]
    if missing:
        return f"the installed CUDA driver bindings lack {', '.join(missing)}"
    if support.get("CAN_MAP_HOST_MEMORY") != 1:
        return "this GPU cannot map pinned host memory (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is not 1)"
    return None


@contextlib.contextmanager
def mapped_words(count: int):
    """`count` 32-bit words of pinned host memory mapped for the GPU (cuMemHostAlloc DEVICEMAP), zeroed.

    Yields (host view as a NumPy uint32 array, the GPU's address of word 0 from cuMemHostGetDevicePointer);
    cuMemFreeHost on exit, whatever happened. Needs a current context (CuPy's primary one will do)."""
    import numpy as np

    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1024:
        raise InputError(f"mapped words: a count from 1 to 1024, got {count!r}")
    drv = driver()
    with _pinned_host_memory(drv, 4 * count, CU_MEMHOSTALLOC_DEVICEMAP, "cuMemHostAlloc(DEVICEMAP)") as hptr:
        host = np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(as_int(hptr)))
        host[:] = 0
        dptr = check(drv.cuMemHostGetDevicePointer(hptr, 0), "cuMemHostGetDevicePointer")
        try:
            yield host, as_int(dptr)
        finally:
            del host


def wait_value_geq(stream_ptr: int, addr: int, value: int) -> None:
    """Queue on the stream: wait until the 32-bit word at device address `addr` reaches `value`
    (CU_STREAM_WAIT_VALUE_GEQ, a cyclic comparison: (int32)(*addr - value) >= 0)."""
    drv = driver()
    check(drv.cuStreamWaitValue32(stream_ptr, addr, value, drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ),
          "cuStreamWaitValue32(GEQ)")


def write_value(stream_ptr: int, addr: int, value: int) -> None:
    """Queue on the stream: write `value` to the 32-bit word at `addr` once the work before it is done
    (CU_STREAM_WRITE_VALUE_DEFAULT: the write follows a memory barrier, so it is seen after that work's results)."""
    drv = driver()
    check(drv.cuStreamWriteValue32(stream_ptr, addr, value,
                                   drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT),
          "cuStreamWriteValue32")


def stream_idle(stream_ptr: int) -> bool:
    """cuStreamQuery: True when all the stream's work is done, False while some is pending; an error raises."""
    drv = driver()
    err = drv.cuStreamQuery(stream_ptr)[0]
    if int(err) == int(drv.CUresult.CUDA_ERROR_NOT_READY):
        return False
    check((err,), "cuStreamQuery")
    return True
