"""Who may dereference which pointer: source question 003's Example 2, run safely, and the ways that work.

Wrong ways (each in a sandboxed child process, see helpers.measure.sandbox):

- `store_through_device_pointer` (the measuring function the chapter shows, um.wrong_ways'
  `code`): source question 003's Example 2. cuMemAlloc returns a GPU virtual address; in the
  CPU's page tables the driver has at most reserved that range with no access rights (`---p`
  in /proc/self/maps), so a CPU store there is refused (SEGV_ACCERR) and the process gets
  SIGSEGV.
- `gpu_reads_malloc_pointer`: the mirror image. A GPU kernel given a malloc'd address faults
  in the GPU's MMU; without HMM/ATS (device attribute pageableMemoryAccess = 0) nvidia-uvm
  finds no managed range there, cancels the fault, and the context reports
  cudaErrorIllegalAddress. The context is dead; the parent's is not.
- `cpu_write_to_reserved_range`: a CPU-only model of the first, runnable anywhere: a range
  mapped PROT_NONE (what a reserved device range looks like to the CPU) and a store into it.

Right ways (in this process, `correct_ways`): the CPU writes source question 003's bytes and the GPU
reads them with no explicit copy, through mapped pinned memory, managed memory,
cudaHostRegister'ed memory, Numba's managed and mapped arrays, and the driver API.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import textwrap

import numpy as np

from helpers.ch05_unified_memory.uva import maps_entry
from helpers.core import gpu, reference, shown, validate
from helpers.core.errors import InputError, ReferenceDataError
from helpers.core.experiments import GPU, experiment
from helpers.measure import driver_api, sandbox
from helpers.measure.sandbox import emit

NBYTES = 1 << 20
CHILD_TIMEOUT_S = 90.0

def store_through_device_pointer() -> None:
    """Source question 003's Example 2, run only in a child process: cuMemAlloc, then a CPU store
    through the pointer it returned. emit() reports each step to the parent before the next."""
    drv = driver_api.driver()
    with driver_api.primary_context():
        dptr = driver_api.check(drv.cuMemAlloc(1024), "cuMemAlloc")  # a GPU virtual address
        p = driver_api.as_int(dptr)
        emit(device_ptr=p, cpu_mapping=maps_entry(p))  # what the CPU's page tables hold at that address
        emit(step="ctypes.memset(device_ptr, 7, 1024): the CPU stores through a GPU address")
        ctypes.memset(p, 7, 1024)  # the first store decides
        emit(step="the store returned without a fault")
        back = ctypes.create_string_buffer(1024)
        driver_api.check(drv.cuMemcpyDtoH(ctypes.addressof(back), dptr, 1024), "cuMemcpyDtoH")
        emit(gpu_sees=list(back.raw[:16]))


CHILD_PRELUDE = textwrap.dedent("""
    import ctypes
    import numpy as np
    from helpers.course import cp, cupyx, cuda
    from helpers.measure import driver_api
    from helpers.measure.sandbox import emit
    from helpers.ch05_unified_memory.uva import maps_entry
""")


def child_script(fn) -> str:
    """The Python a child process runs for `fn`: the prelude's imports, fn's text, and a call.

    `fn` is the course's function or the learner's changed copy of it; its text must be
    readable (defined in a file or a notebook cell), since the child gets text, not objects."""
    text = shown.source_of(fn)
    if text is None:
        raise InputError(f"{getattr(fn, '__name__', fn)!r}: its source text cannot be read, so it cannot run in "
                         "a child process; define it with def in a cell")
    return f"{CHILD_PRELUDE}\n{text}\n\n{fn.__name__}()\n"


GPU_READ_CHILD = textwrap.dedent("""
    import ctypes
    import numpy as np
    import cupy as cp
    from helpers.measure.sandbox import emit
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    addr = libc.malloc(4096)
    ctypes.memset(addr, 42, 4096)
    emit(host_ptr=addr, pageableMemoryAccess=int(cp.cuda.runtime.deviceGetAttribute(88, 0)),
         pointer_type=int(cp.cuda.runtime.pointerGetAttributes(addr).type))
    k = cp.RawKernel(r'''
    extern "C" __global__ void rd(const unsigned char* p, unsigned int* out) {
        out[0] = p[0] + p[4095];
    }''', "rd")
    out = cp.zeros(1, dtype=cp.uint32)
    k.compile()
    emit(step="launching a kernel that reads the malloc'd address")
    try:
        k((1,), (1,), (np.uint64(addr), out))
        cp.cuda.runtime.deviceSynchronize()
        emit(error=None, value=int(out.get()[0]))
    except Exception as exc:
        emit(error=f"{type(exc).__name__}: {exc}")
    try:
        cp.cuda.runtime.deviceSynchronize()
        cp.arange(4).sum().get()
        emit(context_after="usable")
    except Exception as exc:
        emit(context_after=f"unusable ({type(exc).__name__}: {exc})")
""")

RESERVED_RANGE_CHILD = textwrap.dedent("""
    import ctypes
    from helpers.measure.sandbox import emit
    from helpers.ch05_unified_memory.uva import maps_entry
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, 1 << 20, 0, 0x22, -1, 0)  # PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS
    emit(reserved_ptr=addr, cpu_mapping=maps_entry(addr))
    emit(step="ctypes.memset(reserved_ptr, 7, 1024)")
    ctypes.memset(addr, 7, 1024)
    emit(step="the store returned without a fault")
""")


def host_write_through_device_pointer(timeout_s: float = CHILD_TIMEOUT_S,
                                      code=store_through_device_pointer) -> sandbox.Outcome:
    """Source question 003's Example 2 (`code`) in a child process, at most `timeout_s` seconds."""
    return sandbox.run_python(child_script(code), timeout_s)


def gpu_reads_malloc_pointer(timeout_s: float = CHILD_TIMEOUT_S) -> sandbox.Outcome:
    """A child process whose GPU kernel reads a malloc'd host address."""
    return sandbox.run_python(GPU_READ_CHILD, timeout_s)


def cpu_write_to_reserved_range(timeout_s: float = 30.0) -> sandbox.Outcome:
    """No GPU needed: a CPU store into a PROT_NONE range (how a device range looks to the CPU)."""
    return sandbox.run_python(RESERVED_RANGE_CHILD, timeout_s)


def parent_context_ok() -> bool:
    """After a child's crash: does this process's own CUDA context still compute correctly?"""
    cp = gpu.cupy()
    return int(cp.arange(1000, dtype=cp.int64).sum().get()) == 499500


@experiment("um.wrong_ways", chapter=5, needs=(GPU,),
            title="Sandboxed: host write through a device pointer; GPU read of a malloc'd pointer")
def record_wrong_ways(quick: bool, code=store_through_device_pointer) -> dict:
    ok_before = parent_context_ok()
    host = host_write_through_device_pointer(code=code)
    gpu_read = gpu_reads_malloc_pointer()
    model = cpu_write_to_reserved_range()
    return {"host_write_device_ptr": host.to_dict(), "gpu_read_malloc_ptr": gpu_read.to_dict(),
            "cpu_write_reserved_range": model.to_dict(),
            "parent_context_ok_before": ok_before, "parent_context_ok_after": parent_context_ok()}


def outcome_rows(data: dict) -> list[tuple]:
    """(experiment, how it ended, what it reported) rows from recorded or live outcomes."""
    names = {"host_write_device_ptr": "CPU writes through a cuMemAlloc pointer (source question 003, Example 2)",
             "gpu_read_malloc_ptr": "GPU kernel reads a malloc'd pointer",
             "cpu_write_reserved_range": "CPU writes into a PROT_NONE range (no GPU)"}
    rows = []
    for key, label in names.items():
        if key not in data:
            continue
        o = sandbox.Outcome.from_dict(data[key])
        rows.append((label, o.summary(), _reported(o.results)))
    return rows


def _reported(results: dict) -> str:
    keep = []
    for k in ("cpu_mapping", "pageableMemoryAccess", "pointer_type", "error", "value", "context_after", "step"):
        if k in results:
            v = results[k]
            if k == "cpu_mapping":
                v = f"{v['perms']} {v['path'] or '[anon]'}" if v else "no CPU mapping at all"
            keep.append(f"{k}: {v}")
    return "; ".join(keep)


def claim_vs_measurement(data: dict) -> str:
    """Source question 003 says a host write through a cast device pointer 'is very fast'; the
    verdict follows from how the sandboxed child ended and what the CPU's maps held there."""
    o = sandbox.Outcome.from_dict(data["host_write_device_ptr"])
    claim = ("claim (source question 003): an application would typically write to device memory directly "
             "through a pointer cast, which is very fast.")
    if o.status == "signal":
        m = o.results.get("cpu_mapping")
        if m and "r" not in m["perms"] and "w" not in m["perms"]:
            where = (f"the address lies in a range reserved with no access rights ({m['perms']} in /proc/self/maps), "
                     "so the kernel refused the store (SEGV_ACCERR)")
        elif m:
            where = f"the address lies in a {m['perms']} mapping of {m['path'] or 'anonymous memory'}"
        else:
            where = "the CPU's page tables hold no mapping at that address (SEGV_MAPERR)"
        verdict = (f"measurement: the child was killed by {o.signal_name} (signal {o.signal_number}) at "
                   f"its first store: {where}.\n"
                   "verdict: wrong on this system. Use mapped pinned, managed or registered memory instead.")
    elif o.status == "ok" and "gpu_sees" in o.results:
        verdict = ("measurement: the store succeeded and the GPU saw "
                   f"{o.results['gpu_sees'][:4]}... — this platform maps device memory for the CPU "
                   "(a coherent system such as Grace Hopper).\nverdict: true here, not in general.")
    else:
        verdict = f"measurement: the child {o.summary()}.\nverdict: the cast pointer did not work here."
    return claim + "\n" + verdict


# ---- the right ways ------------------------------------------------------------------------

_SUM_AND_INC = r"""
extern "C" __global__ void sum_and_inc(unsigned char* p, unsigned long long n,
                                       unsigned long long* sum) {
    unsigned long long local = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        local += p[i];
        p[i] = (unsigned char)(p[i] + 1);
    }
    atomicAdd(sum, local);
}
"""


def expected_sum(n: int) -> int:
    """Sum of source question 003's bytes i % 256 for i < n."""
    full, rest = divmod(n, 256)
    return full * (255 * 256 // 2) + rest * (rest - 1) // 2


def _gpu_round(cp, kern, ptr: int, host: np.ndarray) -> dict:
    """CPU writes i % 256 into host (a view of ptr); GPU sums and increments through ptr; CPU checks."""
    n = host.size
    host[:] = np.arange(n, dtype=np.uint64) % 256
    total = cp.zeros(1, dtype=cp.uint64)
    kern((64,), (256,), (np.uint64(ptr), np.uint64(n), total))
    cp.cuda.runtime.deviceSynchronize()
    want_back = ((np.arange(n, dtype=np.uint64) + 1) % 256).astype(np.uint8)
    return {"gpu_sum": int(total.get()[0]), "expected_sum": expected_sum(n),
            "cpu_sees_gpu_writes": bool(np.array_equal(host, want_back))}


def correct_ways(n: int = NBYTES) -> list[dict]:
    """Each host-visible memory kind: the CPU writes, the GPU reads and writes, with no copy call."""
    cp = gpu.cupy()
    rt = cp.cuda.runtime
    kern = cp.RawKernel(_SUM_AND_INC, "sum_and_inc")
    out = []

    def view(ptr):
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(ptr))

    h = rt.hostAlloc(n, rt.hostAllocMapped)
    try:
        out.append({"way": "mapped pinned (cudaHostAlloc, Mapped)", **_gpu_round(cp, kern, h, view(h))})
    finally:
        rt.freeHost(h)
    m = cp.cuda.memory.ManagedMemory(n)
    out.append({"way": "managed (cudaMallocManaged)", **_gpu_round(cp, kern, m.ptr, view(m.ptr))})
    del m
    region = mmap.mmap(-1, n)
    arr = np.frombuffer(region, dtype=np.uint8)
    rt.hostRegister(arr.ctypes.data, n, 2)  # cudaHostRegisterMapped
    try:
        dptr = rt.pointerGetAttributes(arr.ctypes.data).devicePointer
        out.append({"way": "existing mmap + cudaHostRegister(Mapped)", "same_address": dptr == arr.ctypes.data,
                    **_gpu_round(cp, kern, dptr, arr)})
    finally:
        rt.hostUnregister(arr.ctypes.data)
        del arr
        with contextlib.suppress(BufferError):
            region.close()
    out += _numba_ways(n)
    for fn in (driver_api.example1_device_roundtrip, driver_api.example3_pinned,
               driver_api.example2_done_right):
        try:
            r = fn(1024)
            out.append({"way": f"driver API: source question 003 Example {r['example']}", "intact": r["intact"],
                        "first16": r["first16"]})
        except Exception as exc:  # recorded, not hidden
            out.append({"way": f"driver API: {fn.__name__}", "error": f"{type(exc).__name__}: {exc}"})
    return out


def _numba_ways(n: int) -> list[dict]:
    try:
        from numba import cuda as ncuda
    except Exception as exc:
        return [{"way": "numba", "error": f"numba.cuda not importable: {exc}"}]
    out = []

    @ncuda.jit
    def inc(a):
        i = ncuda.grid(1)
        if i < a.size:
            a[i] = a[i] + 1

    for name in ("managed_array", "mapped_array"):
        try:
            a = getattr(ncuda, name)(n, dtype=np.uint8)
            a[:] = np.arange(n, dtype=np.uint64) % 256
            with gpu.deliberate_launch():  # a correctness probe on a few bytes: a small grid on purpose
                inc[(n + 255) // 256, 256](a)
            ncuda.synchronize()
            ok = bool(np.array_equal(np.asarray(a), ((np.arange(n, dtype=np.uint64) + 1) % 256).astype(np.uint8)))
            out.append({"way": f"numba.cuda.{name}", "cpu_sees_gpu_writes": ok})
            del a
        except Exception as exc:
            out.append({"way": f"numba.cuda.{name}", "error": f"{type(exc).__name__}: {exc}"})
    return out


@experiment("um.correct_ways", chapter=5, needs=(GPU,),
            title="Host-visible GPU memory done right: mapped, managed, registered, Numba, driver API")
def record_correct_ways(quick: bool) -> dict:
    return {"nbytes": NBYTES, "ways": correct_ways(NBYTES)}


def driver_example(data: dict, example: int) -> dict:
    """The row of source question 003's Example `example` (1, 2 or 3) done through the driver API, from a
    recorded (or live) um.correct_ways; a run that raised is its row with the error."""
    ways = reference.recorded_list(data, "um.correct_ways", "ways")
    fn = {1: "example1_device_roundtrip", 2: "example2_done_right", 3: "example3_pinned"}[
        validate.whole_number(example, "example", 1, 3)]
    for w in ways:
        if display_way(w["way"]).startswith(f"driver API: source question 003 Example {example}") \
                or w["way"] == f"driver API: {fn}":
            return w
    raise ReferenceDataError(f"experiment um.correct_ways has no driver API row for Example {example}; re-record "
                             "it with `python -m helpers.record --only um.correct_ways`")


def correct_rows(data: dict) -> list[tuple]:
    """(way, GPU read the CPU's bytes, CPU sees the GPU's writes / data intact, note)."""
    ways = reference.recorded_list(data, "um.correct_ways", "ways")
    rows = []
    for w in ways:
        if "error" in w:
            rows.append((display_way(w["way"]), "—", "—", w["error"]))
            continue
        read = "—" if "gpu_sum" not in w else ("yes" if w["gpu_sum"] == w["expected_sum"] else "NO")
        back = w.get("cpu_sees_gpu_writes", w.get("intact"))
        note = f"first bytes {w['first16'][:6]}" if "first16" in w else (
            "GPU address = CPU address" if w.get("same_address") else "")
        rows.append((display_way(w["way"]), read, "yes" if back else "NO", note))
    return rows


def display_way(way: str) -> str:
    """A recorded way's name as the page shows it (older recordings call the source questions seeds)."""
    return way.replace("seed 003", "source question 003")
