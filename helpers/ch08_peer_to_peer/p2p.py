"""Peer-to-peer copies between GPUs: the peer-access matrix and P2P bandwidth/latency matrices.

For every ordered pair of GPUs (i, j) one copy of n bytes from GPU i to GPU j is timed three
ways, each warmed up and repeated, median reported:

- `peer`: peer access enabled (cudaDeviceEnablePeerAccess), cudaMemcpyPeerAsync: the copy
  engines move the bytes straight over NVLink or PCIe, never through system memory;
- `staged`: the bytes bounce through a pinned host buffer, GPU i -> host, then host ->
  GPU j, the path every copy takes without P2P (the two legs timed with CUDA events on
  each GPU's own clock and added);
- `driver`: cudaMemcpyPeerAsync before peer access is enabled, to see what the driver does
  on its own.

Each at a large size (bandwidth) and a tiny one (latency), one direction alone and both
directions at once. Host<->GPU copies of pinned memory are timed too: they are the legs of
the via-host route that Lab 5 plans with.

Written for N GPUs. The experiments declare that they need two GPUs and that their recording
lives in the two-GPU reference file (COURSE_P2P_REFERENCE, else config.DEFAULT_P2P_REFERENCE): with fewer GPUs
`ctx.get("p2p.matrices")` replays that recording and says why in `ev.why`, and the chapter
shows the live topology of the one GPU beside it. The recorder, which runs every experiment,
gets a SkipExperiment from them on a machine with fewer than two GPUs.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from helpers.ch08_peer_to_peer import topology
from helpers.core import gpu, validate
from helpers.core.errors import CourseError, DeviceTimeoutError, InputError, SkipExperiment
from helpers.core.experiments import P2P_REFERENCE, TWO_GPUS, experiment
from helpers.core.gpu import cp
from helpers.core.progress import Progress

SIZES = {"large": 64 << 20, "medium": 1 << 20, "small": 4}
QUICK_SIZES = {"large": 8 << 20, "medium": 1 << 20, "small": 4}
METHODS = ("peer", "staged", "driver")
WAIT_S = 30.0


class P2PError(CourseError):
    """A peer-to-peer request this machine cannot satisfy (too few GPUs, no NCCL, a failed child)."""


class P2PInputError(InputError):
    """Device indices that cannot name a pair of GPUs (repeated, or too few of them)."""


def device_count() -> int:
    """Number of CUDA devices CuPy sees (0 without a usable GPU)."""
    return gpu.probe().device_count if gpu.probe().usable else 0


def check_devices(devices, count: int | None = None, *, need: int = 2) -> list[int]:
    """Validate a list of device indices: whole numbers, distinct, in range, at least `need` of them.

    Too few GPUs on this machine is a P2PError (ctx.get replays the two-GPU recording instead);
    indices that are not GPUs of this machine are bad input (InputTypeError / InputError).
    """
    count = device_count() if count is None else count
    if count < need:
        raise P2PError(f"peer-to-peer needs at least {need} GPUs; this machine has {count}. "
                       "ctx.get replays the two-GPU recording instead.")
    devs = [validate.whole_number(d, "device index", 0, count - 1) for d in devices]
    if len(set(devs)) != len(devs):
        raise P2PInputError(f"device indices must be distinct, got {devs}")
    if len(devs) < need:
        raise P2PInputError(f"need at least {need} devices, got {devs}")
    return devs


def peer_access_matrix(devices=None) -> list[list[bool | None]]:
    """cudaDeviceCanAccessPeer for every ordered pair (None on the diagonal)."""
    cp = gpu.cupy()
    n = device_count()
    devs = list(range(n)) if devices is None else check_devices(devices, n, need=1)
    rt = cp.cuda.runtime
    return [[None if i == j else bool(rt.deviceCanAccessPeer(i, j)) for j in devs] for i in devs]


def device_names() -> list[dict]:
    cp = gpu.cupy()
    out = []
    for d in range(device_count()):
        p = cp.cuda.runtime.getDeviceProperties(d)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        out.append({"index": d, "name": name,
                    "pci_bus_id": f"{p['pciDomainID']:04x}:{p['pciBusID']:02x}:{p['pciDeviceID']:02x}.0"})
    return out


# -- timing ---------------------------------------------------------------------------------
def peer_copy(src, dst, stream):
    """Copy CuPy array `src` (on one GPU) into `dst` (on another GPU) on `stream`, between two CUDA
    events. With peer access enabled the copy engine writes straight into the peer's memory; with it
    off, the driver chooses the path (through host memory). Returns the events: their elapsed time
    is the copy's."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    cp.cuda.runtime.memcpyPeerAsync(dst.data.ptr, dst.device.id, src.data.ptr, src.device.id,
                                    src.nbytes, stream.ptr)
    stop.record(stream)
    return start, stop


class _Pair:
    """Buffers, staging memory, streams and events for copies between two devices."""

    def __init__(self, cp, a: int, b: int, *, nbytes: int, code=peer_copy):
        self.cp, self.n, self.code = cp, nbytes, code
        self.dev = {}
        for d in (a, b):
            with cp.cuda.Device(d):
                self.dev[d] = {"src": cp.zeros(nbytes, np.uint8), "dst": cp.empty(nbytes, np.uint8),
                               "streams": [cp.cuda.Stream(non_blocking=True) for _ in range(2)]}
        self.host = {d: cp.cuda.alloc_pinned_memory(nbytes) for d in (a, b)}  # one per direction

    def events(self, d: int):
        with self.cp.cuda.Device(d):
            return self.cp.cuda.Event(), self.cp.cuda.Event()

    def issue(self, method: str, s: int, t: int, lane: int):
        """Start one copy s -> t; return a function that waits and returns its seconds."""
        cp, rt, n = self.cp, self.cp.cuda.runtime, self.n
        src, dst = self.dev[s]["src"].data.ptr, self.dev[t]["dst"].data.ptr
        ss, ts = self.dev[s]["streams"][lane], self.dev[t]["streams"][lane]
        if method in ("peer", "driver"):
            with cp.cuda.Device(s):  # the page's peer_copy: the same calls, on the source GPU's stream
                p0, p1 = self.code(self.dev[s]["src"], self.dev[t]["dst"], ss)
            return lambda: _elapsed(p0, p1)
        host = self.host[s].ptr
        e0, e1 = self.events(s)
        f0, f1 = self.events(t)
        with cp.cuda.Device(s):
            e0.record(ss)
            rt.memcpyAsync(host, src, n, 2, ss.ptr)  # device -> host
            e1.record(ss)
        with cp.cuda.Device(t):
            ts.wait_event(e1)
            f0.record(ts)
            rt.memcpyAsync(dst, host, n, 1, ts.ptr)  # host -> device
            f1.record(ts)
        return lambda: _elapsed(e0, e1) + _elapsed(f0, f1)

    def free(self):
        for d in self.dev.values():
            for s in d["streams"]:
                s.synchronize()
        devices = list(self.dev)
        self.dev.clear()
        self.host.clear()
        for d in devices:  # CuPy's pools are per device: hand each one's blocks back
            with self.cp.cuda.Device(d):
                self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()


def _elapsed(e0, e1) -> float:
    deadline = time.monotonic() + WAIT_S
    while not e1.done:
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"a peer copy did not finish within {WAIT_S:g} s")
        time.sleep(0)
    return gpu.cupy().cuda.get_elapsed_time(e0, e1) / 1e3


def time_copy(method: str, src: int, dst: int, nbytes: int, *, both: bool = False,
              reps: int = 20, warmup: int = 3, code=peer_copy) -> dict:
    """Median/min seconds of `method` copies src -> dst (and dst -> src at once if `both`)."""
    validate.choice(method, "method", METHODS)
    src, dst = check_devices([src, dst])
    nbytes = validate.byte_size(nbytes, "nbytes", 1, 1 << 32)
    cp = gpu.cupy()
    _set_peer([src, dst], method == "peer")  # "driver" and "staged" run with peer access off
    pair = _Pair(cp, src, dst, nbytes=int(nbytes), code=code)
    fwd, back = [], []
    try:
        for r in range(warmup + reps):
            waits = [pair.issue(method, src, dst, 0)]
            if both:
                waits.append(pair.issue(method, dst, src, 1))
            ts = [w() for w in waits]
            if r >= warmup:
                fwd.append(ts[0])
                if both:
                    back.append(ts[1])
    finally:
        pair.free()
        if method == "peer":
            _set_peer([src, dst], False)
    out = {"median_s": float(np.median(fwd)), "min_s": float(np.min(fwd))}
    if both:
        out["reverse_median_s"] = float(np.median(back))
    return out


_PEER_ON: set[tuple[int, int]] = set()  # pairs this module enabled, so it disables only those


def _set_peer(devs: list[int], enable: bool) -> None:
    """Enable peer access for every ordered pair of `devs` that can, or disable what we enabled.

    Tracking our own state avoids asking CUDA to disable what was never enabled (an error).
    """
    cp = gpu.cupy()
    rt = cp.cuda.runtime
    for i in devs:
        for j in devs:
            if i == j or (enable and (i, j) in _PEER_ON) or (not enable and (i, j) not in _PEER_ON):
                continue
            if enable and not rt.deviceCanAccessPeer(i, j):
                continue
            with cp.cuda.Device(i):
                try:
                    (rt.deviceEnablePeerAccess if enable else rt.deviceDisablePeerAccess)(j)
                except rt.CUDARuntimeError as exc:
                    if "AlreadyEnabled" not in str(exc) and "NotEnabled" not in str(exc):
                        raise
            (_PEER_ON.add if enable else _PEER_ON.discard)((i, j))


def _host_legs(devs, sizes, reps, warmup) -> dict:
    """Pinned host<->device copy times per GPU: the legs of the via-host route."""
    cp = gpu.cupy()
    out = {"h2d": {k: [] for k in sizes}, "d2h": {k: [] for k in sizes}}
    for d in devs:
        with cp.cuda.Device(d):
            for key, n in sizes.items():
                dev = cp.empty(n, np.uint8)
                host = cp.cuda.alloc_pinned_memory(n)
                stream = cp.cuda.Stream(non_blocking=True)
                for direction, kind in (("h2d", 1), ("d2h", 2)):
                    ts = []
                    for r in range(warmup + reps):
                        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                        e0.record(stream)
                        a, b = (dev.data.ptr, host.ptr) if kind == 1 else (host.ptr, dev.data.ptr)
                        cp.cuda.runtime.memcpyAsync(a, b, n, kind, stream.ptr)
                        e1.record(stream)
                        t = _elapsed(e0, e1)
                        if r >= warmup:
                            ts.append(t)
                    out[direction][key].append(float(np.median(ts)))
                stream.synchronize()
                del dev, host
    return out


def measure_matrices(quick: bool = False, devices=None, reps: int | None = None, code=peer_copy) -> dict:
    """All P2P matrices for the given devices (default: all), in seconds (median)."""
    n = device_count()
    devs = check_devices(range(n) if devices is None else devices, n)
    sizes = QUICK_SIZES if quick else SIZES
    reps = reps or (5 if quick else 20)
    warmup = 2 if quick else 3
    mats = {m: {w: {k: [[None] * len(devs) for _ in devs] for k in sizes} for w in ("one", "both")}
            for m in METHODS}
    order = ["driver", "staged", "peer"]  # time_copy turns peer access on only for "peer"
    steps = len(order) * len(sizes) * 2 * len(devs) * (len(devs) - 1)
    bar = Progress(steps, "P2P matrices")
    _set_peer(devs, False)
    try:
        for method in order:
            for key, nb in sizes.items():
                for way in ("one", "both"):
                    for a, i in enumerate(devs):
                        for b, j in enumerate(devs):
                            if i == j:
                                continue
                            r = time_copy(method, i, j, nb, both=way == "both", reps=reps, warmup=warmup,
                                          code=code)
                            mats[method][way][key][a][b] = r["median_s"]
                            bar.step(f"{method} {way} {key} {i}->{j}")
    finally:
        _set_peer(devs, False)
        gpu.release_pools()
    return {"devices": [device_names()[d] for d in devs], "sizes": sizes, "reps": reps,
            "peer_access": peer_access_matrix(devs), "matrices": mats,
            "host": _host_legs(devs, sizes, reps, warmup)}


# -- copy-engine copies at nvbandwidth's size -------------------------------------------------------
NVBW_BYTES = 256 << 20  # the size the course compares with nvbandwidth at (nvbandwidth -b 256)
NVBW_LOOPS, NVBW_SAMPLES = 16, 3  # nvbandwidth's copies per sample and samples (common.h defaults)
# nvbandwidth's peer CE testcases, each as the copies one matrix entry (row r, column c) runs at once:
# (source, destination, the GPU whose stream issues the copy). "read" pulls (issued by the
# destination), "write" pushes (issued by the source) -- testcases_ce.cpp, DeviceToDevice*CE::run.
NVBW_TESTS = {
    "read": lambda r, c: [(c, r, r)],
    "write": lambda r, c: [(r, c, r)],
    "bidir_read": lambda r, c: [(c, r, r), (r, c, c)],
    "bidir_write": lambda r, c: [(c, r, c), (r, c, r)],
    "sm_read": lambda r, c: [(c, r, r)],  # testcases_sm.cpp DeviceToDeviceReadSM: r's SMs load c's memory
}
SM_TESTS = ("sm_read",)  # made by a copy kernel on the issuing GPU, not its copy engine
SM_THREADS = 512  # threads per block, one block per SM: nvbandwidth's copy kernel's shape (common.h)
_SM_COPY = r"""
extern "C" __global__ void course_sm_copy(const ulonglong2* __restrict__ src, ulonglong2* __restrict__ dst,
                                          unsigned long long n, unsigned int loops) {
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned int pass = 0; pass < loops; pass++) {  // the whole buffer `loops` times in one launch
        unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + 7 * step < n; i += 8 * step) {  // eight 16-byte loads in flight per thread, then the stores
            ulonglong2 v[8];
            #pragma unroll
            for (int k = 0; k < 8; k++) v[k] = src[i + k * step];
            #pragma unroll
            for (int k = 0; k < 8; k++) dst[i + k * step] = v[k];
        }
        for (; i < n; i += step) dst[i] = src[i];
    }
}
"""


def _copy(test: str, dst, src, nbytes: int, stream, times: int = 1) -> None:
    """`times` copies on `stream` (its GPU current): by the copy engine (cudaMemcpyDefault, 4: unified
    addressing finds both GPUs), or, for an SM test, one launch of the copy kernel on every SM that
    copies the buffer `times` over (as nvbandwidth's kernel loops inside one launch)."""
    cp = gpu.cupy()
    if test not in SM_TESTS:
        for _ in range(times):
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, 4, stream.ptr)
        return
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())["multiProcessorCount"]
    args = (np.uint64(src.data.ptr), np.uint64(dst.data.ptr), np.uint64(nbytes // 16), np.uint32(times))
    _sm_kernel()((sms,), (SM_THREADS,), args, stream=stream)


def _peers(a: int, b: int) -> bool:
    """Whether each of the two GPUs can map the other's memory (cudaDeviceCanAccessPeer both ways)."""
    rt = gpu.cupy().cuda.runtime
    return bool(rt.deviceCanAccessPeer(a, b)) and bool(rt.deviceCanAccessPeer(b, a))


@functools.lru_cache(maxsize=1)
def _sm_kernel():
    """The copy kernel, one RawKernel per process (CuPy compiles it once per GPU, at its first launch there)."""
    return gpu.cupy().RawKernel(_SM_COPY, "course_sm_copy")


def nvbw_sample(bufs: dict, copies: list[tuple[int, int, int]], nbytes: int, loops: int,
                test: str = "read") -> list[float]:
    """GB/s of each copy in `copies` (source, destination, issuing GPU) run at once: `loops` copies
    of `nbytes` back to back on the issuing GPU's stream between two events (nvbandwidth's sample:
    bytes x loops / time), after one warm-up copy. The other streams wait for the first one's start
    event, and the copies are queued in turns, one per stream, so the directions start together."""
    cp = gpu.cupy()
    streams = []
    for *_, issuer in copies:
        with cp.cuda.Device(issuer):
            streams.append((cp.cuda.Stream(non_blocking=True), cp.cuda.Event(), cp.cuda.Event()))
    for k, (s, t, issuer) in enumerate(copies):
        with cp.cuda.Device(issuer):
            _copy(test, bufs[t][k], bufs[s][k], nbytes, streams[k][0])
            streams[k][0].synchronize()
    for k, (stream, e0, _) in enumerate(streams):
        with cp.cuda.Device(copies[k][2]):
            if k:
                stream.wait_event(streams[0][1])
            e0.record(stream)
    turns, each = (1, loops) if test in SM_TESTS else (loops, 1)
    for _ in range(turns):
        for k, (s, t, issuer) in enumerate(copies):
            with cp.cuda.Device(issuer):
                _copy(test, bufs[t][k], bufs[s][k], nbytes, streams[k][0], each)
    for k, (stream, _, e1) in enumerate(streams):
        with cp.cuda.Device(copies[k][2]):
            e1.record(stream)
    return [nbytes * loops / _elapsed(e0, e1) / 1e9 for _, e0, e1 in streams]


def nvbw_copies(devs: list[int], nbytes: int = NVBW_BYTES, loops: int = NVBW_LOOPS,
                samples: int = NVBW_SAMPLES) -> dict:
    """nvbandwidth's four peer CE testcases and its SM read for every ordered pair (peer access on): one row per
    (test, row, column), each copy's median GB/s over `samples`, and for both-way tests their sum."""
    cp = gpu.cupy()
    bufs = {}
    for d in devs:
        with cp.cuda.Device(d):
            bufs[d] = [cp.zeros(nbytes, np.uint8) for _ in range(2)]
    rows = []
    _set_peer(devs, True)
    try:
        for test, plan in NVBW_TESTS.items():
            for r in devs:
                for c in devs:
                    if r != c and _peers(r, c):  # as nvbandwidth, a pair without peer access is left out
                        got = [nvbw_sample(bufs, plan(r, c), nbytes, loops, test) for _ in range(samples)]
                        parts = [float(np.median(col)) for col in zip(*got, strict=True)]
                        rows.append({"test": test, "row": r, "col": c, "gbps": sum(parts), "parts": parts})
    finally:
        _set_peer(devs, False)
        bufs.clear()
        for d in devs:  # CuPy's pools are per device: hand each one's blocks back
            with cp.cuda.Device(d):
                cp.get_default_memory_pool().free_all_blocks()
    return {"nbytes": nbytes, "loops": loops, "samples": samples, "rows": rows}


# -- recorder experiments ---------------------------------------------------------------------
def _need_two():
    if device_count() < 2:
        raise SkipExperiment(f"peer-to-peer needs two or more GPUs; this machine has {device_count()}")


@experiment("p2p.topology", chapter=8, needs=(TWO_GPUS,), reference=P2P_REFERENCE,
            title="GPU topology (nvidia-smi topo -m) and the peer-access matrix")
def topology_experiment(quick: bool) -> dict:
    _need_two()
    parsed, err = None, None
    try:
        text = topology.nvidia_smi_topo()
    except topology.TopologyError as exc:
        text, err = None, str(exc)
    if text is not None:
        try:
            parsed = topology.parse(text).as_dict()
        except topology.TopologyError as exc:
            err = str(exc)
    return {"nvidia_smi_topo": text, "parsed": parsed, "parse_error": err,
            "devices": device_names(), "peer_access": peer_access_matrix()}


@experiment("p2p.matrices", chapter=8, needs=(TWO_GPUS,), reference=P2P_REFERENCE,
            title="P2P bandwidth and latency matrices: peer access, staged via host, driver default")
def matrices_experiment(quick: bool, code=peer_copy) -> dict:
    _need_two()
    devs = list(range(min(device_count(), 4)))  # 4 GPUs at most keeps it well under a minute
    out = measure_matrices(quick, devs, code=code)
    out["nvbw_size"] = nvbw_copies(devs, samples=2 if quick else NVBW_SAMPLES)
    return out


NCCL_TIMEOUT_S = 180.0


@experiment("p2p.nccl_allreduce", chapter=8, needs=(TWO_GPUS,), reference=P2P_REFERENCE,
            title="NCCL all-reduce across all GPUs (where NCCL is available)")
def nccl_experiment(quick: bool) -> dict:
    _need_two()
    return nccl_in_child(quick)


def nccl_in_child(quick: bool, timeout_s: float = NCCL_TIMEOUT_S) -> dict:
    """Run `nccl_allreduce` in a child process, at most `timeout_s` seconds.

    NCCL keeps device memory and its own threads for the life of the process even after its
    communicators are destroyed (on the 2x H200, GPU 0 still held 378 MiB more at the end of
    Chapter 8), and a collective that never completes blocks without a timeout. In a child
    both end with it: the notebook's process keeps nothing and never hangs.
    """
    from helpers.measure import sandbox

    code = ("from helpers.ch08_peer_to_peer import p2p\nfrom helpers.measure import sandbox\n"
            "try:\n"
            f"    sandbox.emit(result=p2p.nccl_allreduce({bool(quick)}))\n"
            "except p2p.P2PError as exc:\n"
            "    sandbox.emit(skip=str(exc))\n")
    out = sandbox.run_python(code, timeout_s)
    if "skip" in out.results:
        raise SkipExperiment(out.results["skip"])
    if out.status == "timeout":
        raise DeviceTimeoutError(f"the NCCL all-reduce did not finish within {timeout_s:g} s (child killed)")
    if out.status != "ok" or "result" not in out.results:
        raise P2PError(f"the NCCL all-reduce child {out.summary()}: {out.stderr_tail[-600:]}")
    return out.results["result"]


def nccl_allreduce(quick: bool = False) -> dict:
    """Time an all-reduce (sum of float32) across every GPU with CuPy's NCCL bindings."""
    cp = gpu.cupy()
    try:
        import warnings

        with warnings.catch_warnings():  # CuPy warns on import when libnccl is missing; we say so below
            warnings.simplefilter("ignore")
            from cupy.cuda import nccl
    except Exception as exc:
        raise P2PError(f"CuPy's NCCL bindings are not importable ({type(exc).__name__}: {exc})") from None
    if not getattr(nccl, "available", False):
        raise P2PError("NCCL is not available to CuPy here (install the nvidia-nccl wheel)")
    ndev = device_count()
    counts = [1 << 10, 1 << 24] if not quick else [1 << 10, 1 << 20]
    try:
        comms = nccl.NcclCommunicator.initAll(list(range(ndev)))
    except Exception as exc:
        raise P2PError(f"NCCL could not create communicators ({type(exc).__name__}: {exc})") from None
    rows = []
    try:
        for count in counts:
            bufs, streams = [], []
            for d in range(ndev):
                with cp.cuda.Device(d):
                    bufs.append(cp.ones(count, np.float32))
                    streams.append(cp.cuda.Stream(non_blocking=True))
            times = []
            for r in range(3 + 10):
                t0 = time.perf_counter()
                nccl.groupStart()
                for d in range(ndev):
                    with cp.cuda.Device(d):
                        comms[d].allReduce(bufs[d].data.ptr, bufs[d].data.ptr, count, nccl.NCCL_FLOAT32,
                                           nccl.NCCL_SUM, streams[d].ptr)
                nccl.groupEnd()
                for s in streams:
                    s.synchronize()
                if r >= 3:
                    times.append(time.perf_counter() - t0)
            # 13 in-place all-reduces of ones: every element is now ndev**13 (exact in float32)
            ok = all(float(b[:1].get()[0]) == float(ndev) ** 13 for b in bufs)
            nbytes = count * 4
            med = float(np.median(times))
            rows.append({"nbytes": nbytes, "median_s": med, "algbw_gbps": nbytes / med / 1e9,
                         "busbw_gbps": nbytes / med / 1e9 * 2 * (ndev - 1) / ndev, "checked": ok})
            del bufs
    finally:
        for c in comms:
            c.destroy()
        gpu.release_pools()
    return {"ndev": ndev, "nccl_version": int(nccl.get_version()), "timer": "wall clock (perf_counter)",
            "rows": rows}


def bandwidth_gbps(nbytes: int, seconds) -> list | float | None:
    """GB/s of a time or a matrix of times (None stays None)."""
    if seconds is None:
        return None
    if isinstance(seconds, list):
        return [bandwidth_gbps(nbytes, s) for s in seconds]
    return nbytes / seconds / 1e9
