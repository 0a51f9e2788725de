"""Managed (unified) memory: one pointer valid on CPU and GPU, pages that move on demand.

`cudaMallocManaged` returns an address that both processors may dereference. Where its pages
live at any moment is the nvidia-uvm driver's business: a GPU access to a page resident in
host memory raises a *GPU page fault*; the driver (kernel-open/nvidia-uvm/
uvm_gpu_replayable_faults.c) migrates the page and tells the GPU to replay the access. This
module measures that against the two other ways to move managed data:

- explicit prefetch (cudaMemPrefetchAsync / cuMemPrefetchAsync): migrate the range in bulk,
  before the kernel needs it, with the copy engines;
- access advice (cudaMemAdvise / cuMemAdvise): keep the pages where they are and map them
  for the GPU (preferred location CPU + accessed-by GPU), or duplicate them on read
  (read-mostly).

CUDA 13 changed both calls: they now take a location (a cudaMemLocation / CUmemLocation:
device, host, host NUMA node) and a flags word instead of a device ordinal, which CUDA 12
called cudaMemPrefetchAsync_v2 / cudaMemAdvise_v2. `prefetch` and `advise` find out which
form the installed bindings offer and call it the right way.

Oversubscription is explained in the chapter, never executed: `check_managed_nbytes` refuses
a managed allocation larger than a safe share of the GPU's free memory.
"""

from __future__ import annotations

import ctypes
import time
from types import ModuleType

import numpy as np
import plotly.graph_objects as go

from helpers.core import gpu, reference, validate
from helpers.core.errors import CourseError, InputError, ReferenceDataError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.progress import Progress
from helpers.measure import driver_api
from helpers.measure.host_memory import check_nbytes
from helpers.measure.sysinfo import fmt_bytes
from helpers.measure.transfers import wait_event
from helpers.presentation import figures

SAFE_MANAGED_SHARE = 0.5  # of the GPU's free memory
CPU = -1  # cudaCpuDeviceId / CU_DEVICE_CPU: "the host" where a device ordinal is expected
SIZES = (16 << 20, 64 << 20, 256 << 20, 1 << 30, 2 << 30, 4 << 30)
QUICK_SIZES = (16 << 20, 64 << 20)
MODES = ("fault", "prefetch", "remote", "read_mostly")
MODE_TEXT = {
    "fault": "first touch: GPU page faults migrate pages",
    "prefetch": "cudaMemPrefetchAsync to the GPU first",
    "remote": "advice: preferred location CPU + accessed-by GPU (no migration)",
    "read_mostly": "advice: read-mostly (pages duplicated on first read)",
}
TIME_BUDGET_S = 55.0  # the migration experiment stops adding sizes after this long
ADVICE = {
    "read_mostly": "CU_MEM_ADVISE_SET_READ_MOSTLY",
    "unset_read_mostly": "CU_MEM_ADVISE_UNSET_READ_MOSTLY",
    "preferred_location": "CU_MEM_ADVISE_SET_PREFERRED_LOCATION",
    "unset_preferred_location": "CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION",
    "accessed_by": "CU_MEM_ADVISE_SET_ACCESSED_BY",
    "unset_accessed_by": "CU_MEM_ADVISE_UNSET_ACCESSED_BY",
}
_RUNTIME_ADVICE = {"read_mostly": 1, "unset_read_mostly": 2, "preferred_location": 3,
                   "unset_preferred_location": 4, "accessed_by": 5, "unset_accessed_by": 6}


class OversubscriptionError(InputError):
    """A managed allocation larger than the course allows relative to free device memory (bad
    input for this machine: it is refused before anything is allocated)."""


def check_managed_nbytes(nbytes, free_bytes: int | None = None,
                         share: float = SAFE_MANAGED_SHARE) -> int:
    """Validate a managed-allocation size; refuse more than `share` of free device memory.

    Managed memory *can* exceed device memory (the driver evicts pages back to the host), but
    a kernel sweeping an oversubscribed range thrashes: every page faults in, evicts another,
    faults again, and a shared GPU can stall for minutes. The course explains it and never
    runs it. `free_bytes` defaults to what the driver reports now.
    """
    n = validate.byte_size(nbytes, "managed allocation: size")
    share = validate.number(share, "share", 0.0, 1.0)
    if share == 0:
        raise InputError("share must be more than 0, got 0")
    free = gpu.free_device_bytes() if free_bytes is None else validate.whole_number(free_bytes, "free device memory", lo=0)
    if n > share * free:
        raise OversubscriptionError(
            f"managed allocation of {fmt_bytes(n)} refused: it is more than {share:.0%} of the GPU's "
            f"free memory ({fmt_bytes(free)}). Beyond device memory, managed pages are evicted and "
            "faulted back over and over (oversubscription thrashing); the course does not run it. "
            f"Largest allowed now: {fmt_bytes(largest_safe(free, share))}.")
    return n


def largest_safe(free_bytes: int, share: float = SAFE_MANAGED_SHARE) -> int:
    """The largest managed allocation check_managed_nbytes accepts, in bytes."""
    return int(share * int(free_bytes))


# ---- CUDA 12 / 13: which prefetch and advise call, called how ----------------------------

def call_form(fn) -> str:
    """'location' when the call takes a CUmemLocation (CUDA 13 names, 12.x *_v2), else 'ordinal'."""
    return "location" if "location" in driver_api.signature_names(fn) else "ordinal"


def pick(drv: ModuleType, base: str) -> tuple:
    """(function, form): the plain name if it takes a location, else *_v2, else the ordinal form."""
    fn = getattr(drv, base)
    if call_form(fn) == "location":
        return fn, "location"
    v2 = getattr(drv, base + "_v2", None)
    if v2 is not None:
        return v2, "location"
    return fn, "ordinal"


def location(drv: ModuleType, device: int):
    """A CUmemLocation for device ordinal `device`, or the host for CPU (-1)."""
    _check_device(device)
    loc = drv.CUmemLocation()
    if device == CPU:
        loc.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST
        loc.id = 0
    else:
        loc.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        loc.id = device
    return loc


def _check_device(device) -> int:
    return validate.whole_number(device, "device (a GPU ordinal 0, 1, ... or CPU = -1)", lo=CPU)


def _bindings() -> ModuleType | None:
    try:
        return driver_api.driver()
    except CourseError:
        return None


def prefetch(ptr: int, nbytes: int, device: int, stream_ptr: int = 0,
             drv: ModuleType | None = None) -> str:
    """Migrate [ptr, ptr+nbytes) to `device` (or the host, CPU) on a stream; returns the call used."""
    _check_device(device)
    drv = drv or _bindings()
    if drv is None:  # no cuda.bindings: CuPy's runtime wrapper (ordinal form)
        gpu.cupy().cuda.runtime.memPrefetchAsync(ptr, nbytes, device, stream_ptr)
        return "cupy.cuda.runtime.memPrefetchAsync(ordinal)"
    fn, form = pick(drv, "cuMemPrefetchAsync")
    stream = drv.CUstream(stream_ptr)
    if form == "location":
        driver_api.check(fn(ptr, nbytes, location(drv, device), 0, stream), fn.__name__)
    else:
        driver_api.check(fn(ptr, nbytes, drv.CUdevice(device), stream), fn.__name__)
    return f"{fn.__name__}({form})"


def advise(ptr: int, nbytes: int, advice: str, device: int, drv: ModuleType | None = None) -> str:
    """Give the driver `advice` (a key of ADVICE) about [ptr, ptr+nbytes) for `device`."""
    validate.choice(advice, "advice", ADVICE)
    _check_device(device)
    drv = drv or _bindings()
    if drv is None:
        gpu.cupy().cuda.runtime.memAdvise(ptr, nbytes, _RUNTIME_ADVICE[advice], device)
        return "cupy.cuda.runtime.memAdvise(ordinal)"
    fn, form = pick(drv, "cuMemAdvise")
    code = getattr(drv.CUmem_advise, ADVICE[advice])
    where = location(drv, device) if form == "location" else drv.CUdevice(device)
    driver_api.check(fn(ptr, nbytes, code, where), f"{fn.__name__}({advice})")
    return f"{fn.__name__}({form})"


# ---- the measurement ----------------------------------------------------------------------

_READ_KERNEL = r"""
extern "C" __global__ void count_not_one(const unsigned int* p, unsigned long long n,
                                         unsigned long long* bad) {
    unsigned long long local = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        local += (p[i] != 1u);
    if (local) atomicAdd(bad, local);
}
"""


class _Kernel:
    """A grid-stride read of every 32-bit word, counting words that are not 1 (so the read
    cannot be optimised away, and the data is checked)."""

    def __init__(self, cp) -> None:
        self.cp = cp
        self.fn = cp.RawKernel(_READ_KERNEL, "count_not_one")
        sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        self.grid, self.block = (int(sms) * 8,), (256,)
        self.bad = cp.zeros(1, dtype=cp.uint64)

    def launch(self, ptr: int, nwords: int, stream) -> None:
        self.fn(self.grid, self.block, (np.uint64(ptr), np.uint64(nwords), self.bad), stream=stream)


def _timed(cp, stream, work, timeout_s: float = 60.0) -> float:
    """Seconds `work()` took on `stream`, by CUDA events."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(stream)
    work()
    b.record(stream)
    wait_event(b, timeout_s, "managed-memory work")
    return cp.cuda.get_elapsed_time(a, b) / 1e3


def measure_one(nbytes: int, mode: str, kernel: _Kernel | None = None, stream=None) -> dict:
    """One fresh managed allocation of `nbytes`, written by the CPU, then read by the GPU in `mode`.

    Returns seconds for: the CPU's first write (host_fill_s); a prefetch to the GPU
    (prefetch_s, prefetch mode only); the GPU's first and second full read (kernel_first_s,
    kernel_second_s); a prefetch back (back_prefetch_s, prefetch mode); the CPU reading one word
    per 4 KiB page afterwards (host_read_s) — and the number of words the GPU found wrong.
    """
    validate.choice(mode, "mode", MODES)
    n = check_managed_nbytes(nbytes)
    check_nbytes(n, "managed allocation (its pages start in host memory)")
    if n % 4096:
        raise InputError(f"size must be a multiple of 4096 bytes, got {n}")
    cp = gpu.cupy()
    kernel = kernel or _Kernel(cp)
    stream = stream or cp.cuda.Stream(non_blocking=True)
    dev = cp.cuda.Device().id
    mem = cp.cuda.memory.ManagedMemory(n)
    ptr = int(mem.ptr)
    out: dict = {"nbytes": n, "mode": mode}
    try:
        words = np.ctypeslib.as_array((ctypes.c_uint32 * (n // 4)).from_address(ptr))
        if mode == "remote":
            out["advise_call"] = advise(ptr, n, "preferred_location", CPU)
            advise(ptr, n, "accessed_by", dev)
        t0 = time.perf_counter()
        words[:] = 1  # first touch on the CPU: every page is now resident in host memory
        out["host_fill_s"] = time.perf_counter() - t0
        if mode == "read_mostly":  # after the fill: the CPU writes ordinary pages (writing read-mostly
            # ones took 5x as long on the H100, 8 s for 4 GiB), then the GPU's first read duplicates them
            out["advise_call"] = advise(ptr, n, "read_mostly", dev)
        kernel.bad.fill(0)
        if mode == "prefetch":
            calls = []
            out["prefetch_s"] = _timed(cp, stream, lambda: calls.append(prefetch(ptr, n, dev, stream.ptr)))
            out["prefetch_call"] = calls[0]
        out["kernel_first_s"] = _timed(cp, stream, lambda: kernel.launch(ptr, n // 4, stream))
        out["kernel_second_s"] = _timed(cp, stream, lambda: kernel.launch(ptr, n // 4, stream))
        out["bad_words"] = int(kernel.bad.get()[0])
        if mode == "prefetch":
            out["back_prefetch_s"] = _timed(cp, stream, lambda: prefetch(ptr, n, CPU, stream.ptr))
        t0 = time.perf_counter()
        out["host_checksum"] = int(words[::1024].sum(dtype=np.uint64))  # one word per 4 KiB page
        out["host_read_s"] = time.perf_counter() - t0
        del words
    finally:
        stream.synchronize()
        del mem
    return out


@experiment("um.migration", chapter=5, needs=(GPU,),
            title="Managed memory: GPU-fault migration vs prefetch vs access advice, 16 MiB to 4 GiB",
            params={"largest": validate.size(SIZES[0], SIZES[-1])})
def record_migration(quick: bool, largest: int = SIZES[-1]) -> dict:
    cp = gpu.cupy()
    free = gpu.free_device_bytes()
    sizes = [n for n in (QUICK_SIZES if quick else SIZES) if n <= largest]
    kernel, stream = _Kernel(cp), cp.cuda.Stream(non_blocking=True)
    kernel.launch(kernel.bad.data.ptr, 0, stream)  # compile and load before timing anything
    stream.synchronize()
    runs, skipped = [], []
    bar = Progress(len(sizes) * len(MODES), "managed migrations")
    t0 = time.monotonic()
    for n in sizes:
        if n > largest_safe(free):
            skipped.append({"nbytes": n, "why": f"over {SAFE_MANAGED_SHARE:.0%} of free device memory"})
            continue
        if time.monotonic() - t0 > TIME_BUDGET_S:
            skipped.append({"nbytes": n, "why": f"time budget of {TIME_BUDGET_S:g} s spent"})
            continue
        for m in MODES:
            runs.append(measure_one(n, m, kernel, stream))
            bar.step(f"{fmt_bytes(n)} {m}")
    return {"free_device_bytes_at_start": free, "safe_share": SAFE_MANAGED_SHARE,
            "runs": runs, "skipped": skipped, "timer": "cuda-event (GPU work), perf_counter (CPU work)"}


# ---- from recorded (or live) data to rows and figures --------------------------------------

def _gbps(nbytes: int, seconds: float | None) -> float | None:
    return nbytes / seconds / 1e9 if seconds and seconds > 0 else None


def rates(run: dict) -> dict:
    """Derived GB/s of one run (1 GB = 1e9 B).

    - to_gpu: how fast the data reached the GPU. fault mode: nbytes / (first read - second
      read), i.e. the migration time the faults added to the kernel; prefetch mode:
      nbytes / prefetch time; remote: the first read's own rate (data crosses PCIe, no
      migration); read_mostly: as fault mode (pages duplicated, not moved).
    - to_cpu: nbytes / CPU read time (fault-driven return), or / prefetch-back time.
    """
    n = run["nbytes"]
    first, second = run["kernel_first_s"], run["kernel_second_s"]
    if run["mode"] == "prefetch":
        to_gpu = _gbps(n, run["prefetch_s"])
        to_cpu = _gbps(n, run.get("back_prefetch_s"))
    elif run["mode"] == "remote":
        to_gpu, to_cpu = _gbps(n, first), None
    else:
        to_gpu = _gbps(n, first - second)
        to_cpu = _gbps(n, run["host_read_s"]) if run["mode"] == "fault" else None
    return {"to_gpu_gbps": to_gpu, "to_cpu_gbps": to_cpu,
            "fault_overhead_s": (first - second) if run["mode"] in ("fault", "read_mostly") else None}


def check_runs(data: dict) -> list[dict]:
    """The runs of a recorded um.migration, validated (clear error on a malformed recording)."""
    runs = reference.recorded_list(data, "um.migration", "runs", "runs (no 'runs' list)")
    need = {"nbytes", "mode", "kernel_first_s", "kernel_second_s", "host_read_s", "bad_words"}
    for r in runs:
        missing = need - set(r)
        if missing or r["mode"] not in MODES:
            raise ReferenceDataError(f"experiment um.migration: malformed run (missing {sorted(missing)}, mode "
                                     f"{r.get('mode')!r}; modes are {MODES}); re-record it with "
                                     "`python -m helpers.record --only um.migration`")
    return runs


def table_rows(data: dict) -> list[tuple]:
    """(size, mode, prefetch ms, 1st read ms, 2nd read ms, to-GPU GB/s, CPU read-back ms, bad words)."""
    rows = []
    for r in check_runs(data):
        g = rates(r)
        rows.append((fmt_bytes(r["nbytes"]), r["mode"], _ms(r.get("prefetch_s")), _ms(r["kernel_first_s"]),
                     _ms(r["kernel_second_s"]), _num(g["to_gpu_gbps"]), _ms(r.get("back_prefetch_s")),
                     _ms(r["host_read_s"]), r["bad_words"]))
    return rows


TABLE_HEADERS = ("size", "mode", "prefetch ms", "GPU 1st read ms", "GPU 2nd read ms",
                 "to GPU GB/s", "prefetch back ms", "CPU read-back ms", "wrong words")


def _ms(s) -> str:
    return "—" if s is None else f"{s * 1e3:.2f}"


def _num(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def series(data: dict) -> dict[str, tuple[list[int], list[float]]]:
    """{label: (sizes, GB/s)} for the figure: data reaching the GPU per mode, and returning."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for r in check_runs(data):
        g = rates(r)
        for key, label in (("to_gpu_gbps", f"to GPU · {MODE_TEXT[r['mode']]}"),
                           ("to_cpu_gbps", f"to CPU · {'CPU page faults' if r['mode'] == 'fault' else 'prefetch to host'}")):
            if g[key] is not None:
                xs, ys = out.setdefault(label, ([], []))
                xs.append(r["nbytes"])
                ys.append(g[key])
    return out


def figure(ev: Evidence) -> figures.CourseFigure:
    """GB/s vs size for each way of getting managed data to the GPU (and back) (ev: um.migration)."""
    fig = go.Figure()
    for label, (xs, ys) in series(ev.require()).items():
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=label,
                        line={"dash": "dot"} if label.startswith("to CPU") else {})
    figures.log_size_axis(fig, "managed allocation size")
    fig.update_layout(title="Managed memory: how fast data reaches the GPU (and comes back)",
                      yaxis_title="effective rate (GB/s, 1 GB = 1e9 B)",
                      legend={"orientation": "h", "y": -0.3}, height=520)
    return figures.CourseFigure(fig, ev.parts)


def compare(data: dict) -> list[str]:
    """Sentences, decided from the numbers, comparing fault-driven and prefetched migration."""
    runs = check_runs(data)
    by = {(r["nbytes"], r["mode"]): rates(r) for r in runs}
    lines = []
    for n in sorted({r["nbytes"] for r in runs}):
        f, p = by.get((n, "fault")), by.get((n, "prefetch"))
        if not f or not p or not f["to_gpu_gbps"] or not p["to_gpu_gbps"]:
            continue
        ratio = p["to_gpu_gbps"] / f["to_gpu_gbps"]
        verdict = "faster" if ratio > 1 else "slower"
        lines.append(f"{fmt_bytes(n):>9}: prefetch {p['to_gpu_gbps']:6.2f} GB/s, fault-driven "
                     f"{f['to_gpu_gbps']:6.2f} GB/s -> prefetch is {max(ratio, 1 / ratio):.1f}x {verdict}")
    return lines


def advice_lines(data: dict) -> list[str]:
    """What the advice modes cost at the largest size measured, computed from the runs."""
    runs = check_runs(data)
    n = max(r["nbytes"] for r in runs)
    by = {r["mode"]: r for r in runs if r["nbytes"] == n}
    lines = []
    if "remote" in by and "prefetch" in by:
        rem, res = by["remote"]["kernel_second_s"], by["prefetch"]["kernel_second_s"]
        once = by["remote"]["kernel_first_s"] / (by["prefetch"]["prefetch_s"] + by["prefetch"]["kernel_first_s"])
        lines.append(f"{fmt_bytes(n)}, remote (no migration): every pass reads across the link, "
                     f"{rem * 1e3:.2f} ms per pass vs {res * 1e3:.2f} ms once resident ({rem / res:.0f}x); "
                     f"for a single pass it takes {once:.2f}x the time of prefetch + read.")
    if "read_mostly" in by and "fault" in by:
        rm, fa = by["read_mostly"], by["fault"]
        lines.append(f"{fmt_bytes(n)}, read-mostly: first read {rm['kernel_first_s'] * 1e3:.1f} ms vs "
                     f"{fa['kernel_first_s'] * 1e3:.1f} ms for plain faults; the CPU's read-back afterwards "
                     f"{rm['host_read_s'] * 1e3:.1f} ms vs {fa['host_read_s'] * 1e3:.1f} ms (its copy never left).")
    return lines
