"""Zero-copy: GPU kernels reading mapped (pinned) host memory vs copy-then-compute.

Source question 001 (a forum thread written between 2008 and 2012) hypothesised that letting the GPU read host memory directly ("direct
mapping") beats an explicit DMA copy: no second pass through memory, communication
overlapped with computation for free, and scattered data read in place instead of being
marshalled first. Mapped pinned memory is exactly that: cudaHostAllocMapped (CuPy) or
numba.cuda.mapped_array pages, which a kernel dereferences over PCIe.

The experiment runs the same kernel two ways for each access pattern:

- zero-copy: the kernel reads the mapped host buffer;
- copy-then-compute: cudaMemcpy the whole buffer to device memory, then the kernel reads that.

Patterns: `stream` (sum every element once), `stream_x8` (sum it eight times: data reuse),
`gather_sparse` / `gather_dense` (sum a random 1/1024 or 1/16 of the elements). The data
are float32 with a known pattern, so every result is checked before its time is kept.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from helpers.ch04_pinned_memory.pinning import PinnedAlloc, PinRequestError, device_pointer
from helpers.core import experiments, gpu, validate
from helpers.core.errors import CourseError, DeviceTimeoutError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU
from helpers.core.progress import Progress
from helpers.measure.host_memory import check_nbytes
from helpers.presentation import figures

PATTERNS = ("stream", "stream_x8", "gather_sparse", "gather_dense")
PASSES = {"stream": 1, "stream_x8": 8}
FRACTION = {"gather_sparse": 1 / 1024, "gather_dense": 1 / 16}
METHODS = ("zero_copy", "copy_then_compute")
FRAMEWORKS = ("cupy", "numba")
TILE = 1024  # the data repeat 0, 1, ..., 1023: sums are exact in float64 and easy to predict
TIE = 0.10  # speed-ups within ±10 % of 1 count as a tie
BLOCK = 256  # threads per block of the Numba kernels (a power of two, for the tree reduction)


cuda = None  # numba.cuda, imported on first use (after the course has chosen the simulator or not)


class WrongResultError(CourseError):
    """A kernel returned a different sum from the one the data determine: the time is not kept."""


# ---------------------------------------------------------------------------- data


def fill_pattern(a: np.ndarray) -> None:
    """Fill a float32 array (length a multiple of TILE) with 0..TILE-1 repeated."""
    a.reshape(-1, TILE)[:] = np.arange(TILE, dtype=np.float32)


def indices(n_elems: int, pattern: str, seed: int = 4) -> np.ndarray:
    """The random element indices a gather pattern reads (int64, uniformly over the array)."""
    m = max(1, int(n_elems * FRACTION[pattern]))
    return np.random.default_rng(seed).integers(0, n_elems, m, dtype=np.int64)


def expected(n_elems: int, pattern: str, idx: np.ndarray | None) -> float:
    """The exact result of a pattern on fill_pattern data."""
    if pattern in PASSES:
        return float(PASSES[pattern] * (n_elems // TILE) * (TILE * (TILE - 1) // 2))
    return float((idx % TILE).sum())


def _device_room(nbytes: int) -> None:
    """Refuse (InputError) a buffer that would not fit in the GPU's free memory."""
    check_nbytes(nbytes, "zero-copy device buffer", host=False, device=True)


def _elements(nbytes: int) -> int:
    n = check_nbytes(nbytes, "zero-copy buffer")
    if n % (4 * TILE):
        raise PinRequestError(f"zero-copy buffer: size must be a multiple of {4 * TILE} bytes, got {n}")
    return n // 4


# ---------------------------------------------------------------------------- numba kernels

@functools.lru_cache(maxsize=1)
def numba_kernels():
    """Compile (once) the two Numba kernels; imported lazily so the simulator can be chosen first.

    Both are grid-stride loops that accumulate in float64 per thread, reduce across the block
    in shared memory, and add one value per block into out[0] (one atomic per thread would
    serialise hundreds of thousands of atomics on one address and swamp the measurement).
    The kernels name `cuda` as a module global: Numba's simulator swaps that global for its
    own fake module while a kernel runs.
    """
    global cuda
    import numba.cuda

    cuda = numba.cuda

    f64 = numba.float64

    @cuda.jit(device=True)
    def block_sum_into(acc, out):
        """Tree-reduce each thread's acc across the block in shared memory; one atomic per block."""
        buf = cuda.shared.array(BLOCK, f64)
        t = cuda.threadIdx.x
        buf[t] = acc
        cuda.syncthreads()
        step = cuda.blockDim.x // 2
        while step > 0:
            if t < step:
                buf[t] += buf[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            cuda.atomic.add(out, 0, buf[0])

    @cuda.jit
    def sum_passes(x, passes, out):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        acc = 0.0
        for _ in range(passes):
            i = start
            while i < x.size:
                acc += x[i]
                i += stride
        block_sum_into(acc, out)

    @cuda.jit
    def gather(x, idx, out):
        start, stride = cuda.grid(1), cuda.gridsize(1)
        acc = 0.0
        i = start
        while i < idx.size:
            acc += x[idx[i]]
            i += stride
        block_sum_into(acc, out)

    return sum_passes, gather


def _numba_grid() -> tuple[int, int]:
    from numba import cuda

    dev = cuda.get_current_device()
    sms = getattr(dev, "MULTIPROCESSOR_COUNT", None)
    return (2, 32) if sms is None else (sms * 8, BLOCK)  # the simulator runs threads in Python


def numba_run(x, pattern: str, idx_dev, out, stream=0) -> None:
    """Launch one pattern's Numba kernel on `x` (mapped host or device array) into out[0].

    Asynchronous on `stream`: out is zeroed first on the same stream; read it after a sync.
    """
    sum_passes, gather = numba_kernels()
    blocks, threads = _numba_grid()
    out.copy_to_device(np.zeros(1, dtype=np.float64), stream=stream)
    if pattern in PASSES:
        sum_passes[blocks, threads, stream](x, PASSES[pattern], out)
    else:
        gather[blocks, threads, stream](x, idx_dev, out)


def numba_check(n_elems: int = 4 * TILE, patterns=PATTERNS) -> dict[str, tuple[float, float]]:
    """Both ways on Numba at a small size (works on the CUDA simulator): {pattern: (zero-copy, copied)}.

    The results must equal `expected`; WrongResultError otherwise.
    """
    from numba import cuda

    validate.whole_number(n_elems, "numba_check: n_elems", lo=1)
    if n_elems % TILE:
        raise PinRequestError(f"numba_check: n_elems must be a positive multiple of {TILE}, got {n_elems}")
    mapped = cuda.mapped_array(n_elems, dtype=np.float32)
    fill_pattern(mapped)
    dev = cuda.to_device(np.asarray(mapped))
    out = {}
    try:
        for p in patterns:
            idx = indices(n_elems, p) if p in FRACTION else None
            idx_dev = cuda.to_device(idx) if idx is not None else None
            want = expected(n_elems, p, idx)
            res = cuda.device_array(1, dtype=np.float64)
            got = []
            for x in (mapped, dev):
                numba_run(x, p, idx_dev, res)
                got.append(float(res.copy_to_host()[0]))
            got = tuple(got)
            if got != (want, want):
                raise WrongResultError(f"numba {p}: got {got}, expected {want} both ways")
            out[p] = got
    finally:
        del mapped, dev
        _numba_cleanup()
    return out


def _numba_cleanup() -> None:
    """Free Numba's deferred deallocations now (mapped and pinned host memory included)."""
    from numba import cuda

    if not getattr(cuda, "simulator_enabled", False) and cuda.is_available():
        try:
            cuda.current_context().deallocations.clear()
        except Exception:
            pass


# ---------------------------------------------------------------------------- one size's inputs

@dataclass
class Inputs:
    """One size's inputs, made once and read by both frameworks: the mapped pinned buffer (cudaHostAlloc,
    mapped) filled by fill_pattern, and each gather pattern's indices. Numba used to allocate and fill a
    mapped buffer of its own (cuMemHostAlloc with DEVICEMAP: the same kind of pages) and draw the same
    indices again (the same seed): ~0.9 s at 1 GiB of nothing either framework times."""

    host: PinnedAlloc
    idx: dict[str, np.ndarray]

    @property
    def n_elems(self) -> int:
        return self.host.nbytes // 4


def make_inputs(nbytes: int, patterns=PATTERNS) -> Inputs:
    """Allocate and fill one size's buffer and draw its indices; the caller closes inputs.host."""
    n_el = _elements(nbytes)
    host = PinnedAlloc(nbytes, "mapped", fill=None)
    try:
        fill_pattern(host.array.view(np.float32))
        return Inputs(host, {p: indices(n_el, p) for p in patterns if p in FRACTION})
    except BaseException:
        host.close()
        raise


@contextmanager
def _inputs(nbytes: int, patterns, shared: Inputs | None) -> Iterator[Inputs]:
    """`shared` (the caller's, left open), or fresh inputs freed on leaving."""
    if shared is not None:
        missing = [p for p in patterns if p in FRACTION and p not in shared.idx]
        if shared.host.nbytes != nbytes or shared.host.ptr is None or missing:
            raise PinRequestError(f"zero-copy: the shared inputs (an open buffer: {shared.host.ptr is not None}, "
                                  f"{shared.host.nbytes} bytes, no indices for {missing}) do not fit {nbytes} bytes")
        yield shared
        return
    ins = make_inputs(nbytes, patterns)
    try:
        yield ins
    finally:
        ins.host.close()


class _MappedView:
    """The mapped buffer's device address as a float32 array Numba can launch on (no stream: nothing to wait for)."""

    def __init__(self, dptr: int, n_elems: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n_elems,), "typestr": "<f4", "data": (dptr, False),
                                         "strides": None, "version": 3}


# ---------------------------------------------------------------------------- timing

def _wait(ev, timeout_s: float, what: str) -> None:
    query = getattr(ev, "query", None) or getattr(ev, "done", None)
    if query is None:
        ev.synchronize()
        return
    deadline = time.monotonic() + timeout_s
    while not (query() if callable(query) else ev.done):
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"{what} did not finish within {timeout_s:.0f} s")
        time.sleep(0.0002)


def _time_cupy(cp, stream, fn, reps: int, timeout_s: float = 60.0) -> tuple[list[float], float]:
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times, result = [], None
    for i in range(reps + 1):  # one warm-up (kernel compilation, first-touch of mappings)
        with stream:
            start.record(stream)
            r = fn()
            end.record(stream)
        _wait(end, timeout_s, "a zero-copy measurement")
        if i:
            times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
        result = float(r)
    return times, result


def _time_numba(stream, launch, out, reps: int, timeout_s: float = 60.0) -> tuple[list[float], float]:
    from numba import cuda

    times, result = [], None
    for i in range(reps + 1):  # one warm-up (JIT compilation)
        start, end = cuda.event(), cuda.event()
        start.record(stream)
        launch()
        end.record(stream)
        _wait(end, timeout_s, "a zero-copy measurement")
        if i:
            times.append(start.elapsed_time(end) / 1e3)
        result = float(out.copy_to_host()[0])
    return times, result


def measure_cupy(nbytes: int, patterns=PATTERNS, reps: int = 5, inputs: Inputs | None = None) -> list[dict]:
    """CuPy: every pattern, zero-copy (cudaHostAllocMapped) and copy-then-compute, checked; on `inputs`
    (make_inputs) when given, else on inputs of its own."""
    cp = gpu.cupy()
    _elements(nbytes)
    _device_room(2 * nbytes)  # the device copy, and room for CuPy's temporaries
    with _inputs(nbytes, patterns, inputs) as ins:
        return _cupy_rows(cp, ins, patterns, reps)


def _cupy_rows(cp, ins: Inputs, patterns, reps: int) -> list[dict]:
    nbytes, n_el, host = ins.host.nbytes, ins.n_elems, ins.host
    rows = []
    stream = cp.cuda.Stream(non_blocking=True)
    dev = x_host = None
    try:
        dptr = device_pointer(host.ptr)
        mem = cp.cuda.UnownedMemory(dptr, nbytes, host, cp.cuda.Device().id)
        x_host = cp.ndarray((n_el,), cp.float32, cp.cuda.MemoryPointer(mem, 0))
        dev = cp.empty(n_el, dtype=cp.float32)
        for p in patterns:
            idx = ins.idx.get(p)
            idx_dev = cp.asarray(idx) if idx is not None else None
            want = expected(n_el, p, idx)

            def op(x, p=p, idx_dev=idx_dev):
                if p in PASSES:
                    total = x.sum(dtype=cp.float64)
                    for _ in range(PASSES[p] - 1):
                        total = total + x.sum(dtype=cp.float64)
                    return total
                return x[idx_dev].sum(dtype=cp.float64)

            def copied(p=p, op=op):
                cp.cuda.runtime.memcpyAsync(dev.data.ptr, host.ptr, nbytes, 1, stream.ptr)
                return op(dev)

            row = {"framework": "cupy", "pattern": p, "nbytes": nbytes}
            for method, fn in (("zero_copy", lambda op=op: op(x_host)), ("copy_then_compute", copied)):
                times, got = _time_cupy(cp, stream, fn, reps)
                if got != want:
                    raise WrongResultError(f"cupy {p} {method}: got {got}, expected {want}")
                row[f"{method}_s"] = float(np.median(times))
            rows.append(row)
            del idx_dev
    finally:
        stream.synchronize()
        dev = x_host = None  # drop the device buffer and the view before the host memory is freed
    return rows


def measure_numba(nbytes: int, patterns=PATTERNS, reps: int = 5, inputs: Inputs | None = None) -> list[dict]:
    """Numba: every pattern, zero-copy (the mapped pinned buffer) and copy-then-compute, checked; on
    `inputs` (make_inputs) when given, else on inputs of its own."""
    gpu.cupy()  # a clear NoGPUError here, rather than a Numba one
    _elements(nbytes)
    _device_room(2 * nbytes)
    with _inputs(nbytes, patterns, inputs) as ins:
        return _numba_rows(ins, patterns, reps)


def _numba_rows(ins: Inputs, patterns, reps: int) -> list[dict]:
    from numba import cuda

    nbytes, n_el = ins.host.nbytes, ins.n_elems
    rows = []
    stream = cuda.stream()
    mapped = dev = host = None
    try:
        mapped = cuda.as_cuda_array(_MappedView(device_pointer(ins.host.ptr), n_el))  # the kernel reads the host pages
        # copy-then-compute copies from these same pinned pages (a plain ndarray view, so a host-to-device
        # copy, as measure_cupy and the page's time_mapped_sum do), not from a second pinned buffer: that one
        # cost a cudaHostAlloc + fill per size (~0.7 s + ~0.2 s at 1 GiB, h100-pcie.json's pin costs). The
        # source does not change the copy: in h100-pcie.json (2026-11-25) at 1 GiB, CuPy's copy-then-compute
        # from mapped pages took 19.91 / 19.51 / 20.06 ms (stream / gather_sparse / gather_dense) and
        # Numba's from the separate buffer 19.94 / 19.58 / 20.15 ms (within 0.4%).
        host = ins.host.array.view(np.float32)
        dev = cuda.device_array(n_el, dtype=np.float32)
        out = cuda.device_array(1, dtype=np.float64)
        for p in patterns:
            idx = ins.idx.get(p)
            idx_dev = cuda.to_device(idx) if idx is not None else None
            want = expected(n_el, p, idx)

            def copied(p=p, idx_dev=idx_dev):
                dev.copy_to_device(host, stream=stream)
                numba_run(dev, p, idx_dev, out, stream)

            row = {"framework": "numba", "pattern": p, "nbytes": nbytes}
            for method, fn in (("zero_copy", lambda p=p, idx_dev=idx_dev: numba_run(mapped, p, idx_dev, out, stream)),
                               ("copy_then_compute", copied)):
                times, got = _time_numba(stream, fn, out, reps)
                if got != want:
                    raise WrongResultError(f"numba {p} {method}: got {got}, expected {want}")
                row[f"{method}_s"] = float(np.median(times))
            rows.append(row)
    finally:
        stream.synchronize()
        mapped = host = dev = None
        _numba_cleanup()
    return rows


def zero_copy_sizes(quick: bool) -> list[int]:
    """16 MiB, 256 MiB and 1 GiB (1 and 16 MiB when quick)."""
    return [1 << 20, 16 << 20] if quick else [16 << 20, 256 << 20, 1 << 30]


@experiments.experiment("zero_copy.vs_copy", chapter=4, needs=(GPU,),
                        title="Zero-copy (mapped host memory) vs copy-then-compute, CuPy and Numba, "
                              "streaming and random-gather patterns, 16 MiB..1 GiB",
                        params={"reps": validate.count(1, 50)})
def record_vs_copy(quick: bool, reps: int = 5) -> dict:
    sizes = zero_copy_sizes(quick)
    reps = min(reps, 3) if quick else reps
    bar = Progress(len(sizes) * len(FRAMEWORKS), "zero-copy sizes")
    rows = []
    for n in sizes:
        _device_room(2 * n)
        ins = make_inputs(n)  # one buffer and one set of indices for both frameworks
        try:
            rows += measure_cupy(n, reps=reps, inputs=ins)
            bar.step(f"cupy {n >> 20} MiB")
            rows += measure_numba(n, reps=reps, inputs=ins)
            bar.step(f"numba {n >> 20} MiB")
        finally:
            ins.host.close()
    return {"rows": rows, "patterns": list(PATTERNS), "fractions": FRACTION, "passes": PASSES,
            "tie": TIE}


# ---------------------------------------------------------------------------- verdicts

def speedups(data: dict) -> list[dict]:
    """Each row with speedup = copy-then-compute time / zero-copy time and its one-word verdict."""
    tie = data.get("tie", TIE)
    out = []
    for r in data["rows"]:
        s = r["copy_then_compute_s"] / r["zero_copy_s"]
        word = "wins" if s > 1 + tie else "loses" if s < 1 - tie else "ties"
        out.append(dict(r, speedup=s, verdict=word))
    return out


def pattern_summary(data: dict) -> dict[str, dict]:
    """Per pattern: smallest and largest speed-up, and how many cases zero-copy won/lost/tied."""
    summ: dict[str, dict] = {}
    for r in speedups(data):
        s = summ.setdefault(r["pattern"], {"min": np.inf, "max": 0.0, "wins": 0, "loses": 0, "ties": 0})
        s["min"], s["max"] = min(s["min"], r["speedup"]), max(s["max"], r["speedup"])
        s[r["verdict"]] += 1
    return summ


def _says(s: dict) -> str:
    n = s["wins"] + s["loses"] + s["ties"]
    if s["wins"] == n:
        return "zero-copy wins in every case"
    if s["loses"] == n:
        return "zero-copy loses in every case"
    if s["ties"] == n:
        return "a tie in every case"
    return f"mixed: wins {s['wins']}, loses {s['loses']}, ties {s['ties']} of {n} cases"


def median_speedup(data: dict, pattern: str) -> float | None:
    """Median zero-copy speed-up of one pattern over every framework and size measured."""
    v = [r["speedup"] for r in speedups(data) if r["pattern"] == pattern]
    return float(np.median(v)) if v else None


def _judge(m: float, tie: float, yes: str, no: str) -> str:
    if m > 1 + tie:
        return f"{yes} (median speed-up {m:.2f}x)"
    if m < 1 - tie:
        return f"{no} (median speed-up {m:.2f}x: zero-copy takes {1 / m:.1f}x as long)"
    return f"a draw — zero-copy and copy-then-compute are within ±{tie:.0%} (median speed-up {m:.2f}x)"


def verdict(data: dict) -> str:
    """Source question 001's direct-mapping hypothesis, judged pattern by pattern from the measurements.

    Each claim is decided by the median speed-up over frameworks and sizes: above 1 + tie it
    holds, below 1 - tie it fails, in between it is a draw.
    """
    tie = data.get("tie", TIE)
    summ = pattern_summary(data)
    desc = {"stream": "read once, in order", "stream_x8": "read 8 times (data reuse)",
            "gather_sparse": "random 1/1024 of the elements", "gather_dense": "random 1/16 of the elements"}
    lines = []
    for p in PATTERNS:
        if p in summ:
            s = summ[p]
            lines.append(f"{p:14s} ({desc[p]}): speed-up of zero-copy {s['min']:.2f}x .. {s['max']:.2f}x "
                         f"— {_says(s)}")
    claims = (("stream", "single pass, in order", "supported: zero-copy is faster",
               "refuted: copying first is faster"),
              ("gather_sparse", "sparse scattered access", "supported: reading in place beats copying everything",
               "refuted: copying everything first is faster"),
              ("gather_dense", "dense scattered access", "supported: reading in place still wins",
               "refuted: many small PCIe reads cost more than one bulk copy"),
              ("stream_x8", "data re-read by the kernel", "supported even with reuse",
               "refuted: re-reading favours the copy in GPU memory"))
    parts = [f"{what}: {_judge(median_speedup(data, p), tie, yes, no)}"
             for p, what, yes, no in claims if p in summ]
    return "\n".join(lines + ["verdict on source question 001's direct-mapping hypothesis:"] + [f"  - {x}" for x in parts])


def figure(ev: Evidence) -> figures.CourseFigure:
    """Speed-up of zero-copy over copy-then-compute per pattern, framework and size, log y
    (ev: zero_copy.vs_copy)."""
    rows = speedups(ev.require())
    sizes = sorted({r["nbytes"] for r in rows})
    cats = [f"{p}<br>{f}" for p in PATTERNS for f in FRAMEWORKS]
    fig = go.Figure()
    palette = ("#92c5de", "#4393c3", "#2166ac", "#053061")
    for i, n in enumerate(sizes):
        by = {(r["pattern"], r["framework"]): r["speedup"] for r in rows if r["nbytes"] == n}
        fig.add_bar(name=f"{n / 2**20:g} MiB", x=cats, y=[by.get((p, f)) for p in PATTERNS for f in FRAMEWORKS],
                    marker_color=palette[i % len(palette)])
    fig.add_hline(y=1, line_dash="dash", annotation_text="zero-copy = copy-then-compute")
    fig.update_layout(title="Zero-copy speed-up over copy-then-compute (above 1: zero-copy wins)",
                      barmode="group", yaxis={"type": "log", "title": "copy-then-compute time / zero-copy time"},
                      legend={"orientation": "h", "y": -0.3, "title": "buffer"})
    return figures.CourseFigure(fig, ev.parts)


def table_rows(data: dict) -> list[tuple]:
    """(framework, pattern, size, zero-copy ms, copy-then-compute ms, speed-up, verdict)."""
    return [(r["framework"], r["pattern"], f"{r['nbytes'] / 2**20:g} MiB", f"{r['zero_copy_s'] * 1e3:.3f}",
             f"{r['copy_then_compute_s'] * 1e3:.3f}", f"{r['speedup']:.2f}x", r["verdict"])
            for r in speedups(data)]


def key_points(ev: Evidence, l2: Evidence | None = None) -> str:
    """The chapter's key point on zero-copy, computed from the data shown (this Evidence and, when there
    is one, zero_copy.l2_reread's): which patterns zero-copy won, lost or tied, and what re-reading did."""
    from helpers.ch04_pinned_memory import l2_reread

    summ = pattern_summary(ev.require())
    by = {w: [p for p in PATTERNS if p in summ and _says(summ[p]).startswith(f"zero-copy {w}")]
          for w in ("wins", "loses")}
    mixed = [p for p in PATTERNS if p in summ and p not in by["wins"] + by["loses"]]
    line = (f"Zero-copy against copying first ({ev.said}): wins in every case for "
            f"{', '.join(by['wins']) or 'no pattern'}; loses in every case for {', '.join(by['loses']) or 'no pattern'}"
            + (f"; mixed or tied for {', '.join(mixed)}" if mixed else "") + ".")
    served = l2_reread.served_in_l2(l2.data if l2 is not None else None)
    if served is None:
        return line + (" (Whether re-reads of mapped memory are served from the GPU's L2: the L2 measurement, "
                       "zero_copy.l2_reread, has no data here yet.)")
    crossed = l2_reread.crossed_above_l2(l2.data)
    return line + (" Re-reads within one kernel were served from the GPU's L2 for a working set that fits in it"
                   if served else " Re-reads crossed the link again even for a working set that fits in L2") + (
        "; a working set larger than L2 crossed the link on every pass." if crossed else
        "." if crossed is None else "; above the L2 size, not every pass crossed the link either.")
