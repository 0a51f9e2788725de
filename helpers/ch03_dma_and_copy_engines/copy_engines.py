"""Copy engines seen from the host: what a copy costs to enqueue, what it costs on the device,
and how many copies the GPU runs at once.

Two times hide inside every `cudaMemcpyAsync`:

- the **host-side enqueue cost**: the CPU time of the call itself (argument checks, writing
  the copy's commands into the stream's push buffer, ringing the doorbell), and
- the **device-side copy time**: how long the copy engine is busy with it.

Timing a copy with events while the stream is idle mixes them: the first event may fire
before the host has finished submitting the copy. NVIDIA's nvbandwidth separates them by
*gating* the stream (NVIDIA/nvbandwidth, `kernels.cu` `spinKernel`, used from `memcpy.cpp`
`NodeHelperSingle::streamBlockerBlock` / `streamBlockerRelease`): a one-thread kernel spins
on a flag in mapped pinned host memory, the copies are enqueued behind it, and only then does
the host set the flag. The copies then run back to back at device speed, while the host
times each enqueue call on its own clock. `Gate` does the same, with a bounded spin: the
kernel gives up after `timeout_s` and says so, so nothing can hang.
"""

from __future__ import annotations

import ctypes
import os
import resource
import time
from dataclasses import dataclass

import numpy as np

from helpers.core import gpu, validate
from helpers.core.errors import DeviceTimeoutError, InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import experiment
from helpers.measure.host_memory import HostBuffer, check_nbytes
from helpers.measure.transfers import DIRECTIONS, MEMCPY_KIND, wait_event
from helpers.presentation import beside

MAX_GATE_TIMEOUT_S = 60.0
MAX_GATED_COPIES = 2000  # the stream's push buffer must hold them all while the gate is shut

_GATE_SRC = r"""
extern "C" __global__ void course_gate(volatile int *flag, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {  // bounded: the host never released the gate
            flag[1] = 1;
            __threadfence_system();
            return;
        }
    }
}
"""


class GateTimeoutError(DeviceTimeoutError):
    """The gate kernel gave up waiting for the host, so the gated measurement is invalid."""


class CopyEngineInputError(InputError):
    """An argument the copy-engine helpers cannot use (a wrong kind, count or timeout)."""


def check_gate_timeout(timeout_s: float) -> float:
    """A gate timeout in seconds: positive, finite, at most MAX_GATE_TIMEOUT_S."""
    return validate.seconds(timeout_s, "gate timeout", 0.0, MAX_GATE_TIMEOUT_S)


def check_count(count: int, what: str = "copies") -> int:
    """A number of gated copies: a whole number from 1 to MAX_GATED_COPIES."""
    return validate.whole_number(count, what, 1, MAX_GATED_COPIES)


def check_direction(direction: str) -> str:
    return validate.choice(direction, "direction", DIRECTIONS)


class Gate:
    """A flag in mapped pinned host memory and a kernel that holds a stream until it is set.

        with Gate(timeout_s=5) as g:
            g.block(stream)       # the stream now waits (at most timeout_s)
            ... enqueue work ...
            g.release()           # the work runs
            ... wait for it ...
            g.check()             # raises GateTimeoutError if the gate had opened by itself
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = check_gate_timeout(timeout_s)
        cp = gpu.cupy()
        self._cp = cp
        # portable | mapped: the kernel reads the flag straight from host memory over PCIe
        self._ptr = cp.cuda.runtime.hostAlloc(8, 0x01 | 0x02)
        self.flag = np.ctypeslib.as_array((ctypes.c_int32 * 2).from_address(self._ptr))
        self.flag[:] = 0
        self._kernel = cp.RawKernel(_GATE_SRC, "course_gate")

    def block(self, stream) -> None:
        """Shut the gate and launch the spinning kernel on `stream`."""
        self.flag[:] = 0
        self._kernel((1,), (1,), (np.uint64(self._ptr), np.uint64(int(self.timeout_s * 1e9))), stream=stream)

    def release(self) -> None:
        """Open the gate: the kernel sees the flag and exits, and the queued work runs."""
        self.flag[0] = 1

    @property
    def timed_out(self) -> bool:
        return bool(self.flag[1])

    def check(self) -> None:
        """Raise GateTimeoutError if the kernel gave up before the host released it."""
        if self.timed_out:
            raise GateTimeoutError(f"the gate kernel waited {self.timeout_s:g} s without being released "
                                   "and let the stream run; the gated timings are not valid")

    def close(self) -> None:
        """Open the gate (so a still-spinning kernel exits at once), then free the flag."""
        if self._ptr:
            self.flag[0] = 1
            self._cp.cuda.runtime.deviceSynchronize()  # the kernel must stop reading the flag first
            self.flag = None
            self._cp.cuda.runtime.freeHost(self._ptr)
            self._ptr = 0

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class _Pair:
    """A pinned host buffer and a device buffer of one size, with a copy in one direction."""

    host: HostBuffer
    dev: object

    def args(self, direction: str) -> tuple[int, int]:
        return (self.dev.ptr, self.host.ptr) if direction == "h2d" else (self.host.ptr, self.dev.ptr)


def gated_copies(nbytes: int, direction: str = "h2d", count: int = 200, *,
                 host_kind: str = "pinned", gate_timeout_s: float = 5.0,
                 wait_timeout_s: float = 30.0) -> dict:
    """Enqueue `count` copies behind a gate; return host enqueue and device times per copy.

    Pinned memory only: a pageable cudaMemcpyAsync stages through the driver's buffers on the
    CPU inside the call and would wait behind the shut gate until it timed out.
    """
    if host_kind != "pinned":
        raise CopyEngineInputError(f"gated copies need pinned host memory, got {host_kind!r}: a pageable "
                                   "copy waits inside the call for the stream, i.e. for the shut gate")
    check_direction(direction)
    count = check_count(count)
    n = check_nbytes(nbytes, f"gated {direction} copy", host=True, device=True)
    cp = gpu.cupy()
    rt = cp.cuda.runtime
    stream = cp.cuda.Stream(non_blocking=True)
    events = [cp.cuda.Event() for _ in range(count + 1)]
    dev = cp.cuda.memory.Memory(n)
    try:
        with HostBuffer(n, "pinned") as host, Gate(gate_timeout_s) as gate:
            dst, src = _Pair(host, dev).args(direction)
            for _ in range(3):  # warm-up, ungated
                rt.memcpyAsync(dst, src, n, MEMCPY_KIND[direction], stream.ptr)
            stream.synchronize()
            enqueue = np.empty(count)
            gate.block(stream)
            events[0].record(stream)
            for i in range(count):
                t = time.perf_counter()
                rt.memcpyAsync(dst, src, n, MEMCPY_KIND[direction], stream.ptr)
                enqueue[i] = time.perf_counter() - t
                events[i + 1].record(stream)
            held = not events[-1].done  # the gate really held the copies back
            gate.release()
            wait_event(events[-1], wait_timeout_s, f"{count} gated {direction} copies")
            gate.check()
            device = [cp.cuda.get_elapsed_time(events[i], events[i + 1]) / 1e3 for i in range(count)]
            span = cp.cuda.get_elapsed_time(events[0], events[-1]) / 1e3
    finally:
        stream.synchronize()
        del dev
    return {"nbytes": n, "direction": direction, "count": count, "gate_held": bool(held),
            "enqueue_s": enqueue.tolist(), "device_s": device, "span_s": span,
            "enqueue_median_s": float(np.median(enqueue)), "device_median_s": float(np.median(device)),
            "device_per_copy_s": span / count}


def synchronous_copy_wall(nbytes: int, direction: str = "h2d", reps: int = 200,
                          timeout_s: float = 30.0) -> list[float]:
    """Wall-clock time of copy-then-wait, one copy at a time: what a synchronous small copy costs."""
    check_direction(direction)
    reps = check_count(reps, "reps")
    n = check_nbytes(nbytes, f"{direction} copy", host=True, device=True)
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    done = cp.cuda.Event(disable_timing=True)
    dev = cp.cuda.memory.Memory(n)
    out = []
    try:
        with HostBuffer(n, "pinned") as host:
            dst, src = _Pair(host, dev).args(direction)
            for i in range(reps + 3):
                t = time.perf_counter()
                cp.cuda.runtime.memcpyAsync(dst, src, n, MEMCPY_KIND[direction], stream.ptr)
                done.record(stream)
                wait_event(done, timeout_s, f"a {n}-byte {direction} copy")
                if i >= 3:
                    out.append(time.perf_counter() - t)
    finally:
        stream.synchronize()
        del dev
    return out


def async_engine_count() -> int:
    """asyncEngineCount from the device's attributes: copy engines usable concurrently."""
    return int(gpu.cupy().cuda.runtime.getDeviceProperties(0)["asyncEngineCount"])


def concurrent_copies(nbytes: int = 64 << 20, copies: int = 8, directions=("h2d", "d2h"), *,
                      gate_timeout_s: float = 10.0, wait_timeout_s: float = 60.0) -> dict:
    """Run `copies` copies per direction, each direction on its own stream, all released at once.

    Returns the aggregate bandwidth (all bytes over the span from the first start to the last
    end, in GB/s) and each stream's own bandwidth.
    """
    directions = [check_direction(d) for d in directions]
    if not directions or len(set(directions)) != len(directions):
        raise CopyEngineInputError(f"directions must be distinct, got {directions}")
    copies = check_count(copies)
    n = check_nbytes(nbytes, "concurrent copy", host=True, device=True)
    if len(directions) * n * 2 > 0.5 * gpu.free_device_bytes():
        raise CopyEngineInputError("concurrent copies would need too much device memory; choose a smaller size")
    cp = gpu.cupy()
    rt = cp.cuda.runtime
    streams = [cp.cuda.Stream(non_blocking=True) for _ in directions]
    starts = [cp.cuda.Event() for _ in directions]
    ends = [cp.cuda.Event() for _ in directions]
    devs = [cp.cuda.memory.Memory(n) for _ in directions]
    hosts = []
    try:
        hosts = [HostBuffer(n, "pinned") for _ in directions]
        with Gate(gate_timeout_s) as gate:
            gate.block(streams[0])
            starts[0].record(streams[0])
            for i in range(1, len(directions)):  # every stream starts when the first does
                streams[i].wait_event(starts[0])
                starts[i].record(streams[i])
            for i, d in enumerate(directions):
                dst, src = _Pair(hosts[i], devs[i]).args(d)
                for _ in range(copies):
                    rt.memcpyAsync(dst, src, n, MEMCPY_KIND[d], streams[i].ptr)
                ends[i].record(streams[i])
            gate.release()
            for i, e in enumerate(ends):
                wait_event(e, wait_timeout_s, f"{copies} concurrent {directions[i]} copies")
            gate.check()
            per = {d: cp.cuda.get_elapsed_time(starts[i], ends[i]) / 1e3 for i, d in enumerate(directions)}
            span = max(cp.cuda.get_elapsed_time(starts[0], e) / 1e3 for e in ends)
    finally:
        for s in streams:
            s.synchronize()
        for h in hosts:
            h.close()
        del devs
    total = n * copies * len(directions)
    return {"nbytes": n, "copies": copies, "directions": directions, "span_s": span,
            "aggregate_gbps": total / span / 1e9,
            "per_stream_gbps": {d: n * copies / t / 1e9 for d, t in per.items()}}


def bidirectional(nbytes: int = 64 << 20, copies: int = 8, trials: int = 3) -> dict:
    """h2d alone, d2h alone, and both at once; the median aggregate GB/s of each over `trials`."""
    runs = {"h2d": ("h2d",), "d2h": ("d2h",), "both": ("h2d", "d2h")}
    out: dict = {"nbytes": nbytes, "copies": copies, "trials": trials, "async_engine_count": async_engine_count()}
    for name, dirs in runs.items():
        rs = [concurrent_copies(nbytes, copies, dirs) for _ in range(trials)]
        out[name] = {"aggregate_gbps": [r["aggregate_gbps"] for r in rs],
                     "median_gbps": float(np.median([r["aggregate_gbps"] for r in rs])),
                     "per_stream_gbps": rs[-1]["per_stream_gbps"]}
    return out


def bidirectional_verdict(data: dict, tolerance: float = 0.15) -> str:
    """Is both-directions aggregate about 2x one direction? Decided from the recorded numbers."""
    one = max(data["h2d"]["median_gbps"], data["d2h"]["median_gbps"])
    both = data["both"]["median_gbps"]
    ratio = both / one
    head = (f"one direction: h2d {data['h2d']['median_gbps']:.1f}, d2h {data['d2h']['median_gbps']:.1f} GB/s; "
            f"both at once: {both:.1f} GB/s aggregate = {ratio:.2f}x the faster single direction "
            f"(asyncEngineCount = {data['async_engine_count']}).")
    if ratio >= 2 * (1 - tolerance):
        v = ("verdict: yes — nearly 2x: each direction has its own copy engine, and the link is full duplex: "
             "both directions use the same lanes, each lane with one wire pair to send and one to receive.")
    elif ratio > 1 + tolerance:
        v = (f"verdict: partly — the directions overlap but the aggregate is {ratio:.2f}x, not 2x; "
             "something shared (host memory, the root complex, one engine) limits it.")
    else:
        v = "verdict: no — the directions do not overlap here; the copies are serialised."
    return head + "\n" + v


def which_cost_dominates(enqueue_s: float, device_s: float) -> str:
    """Which cost paces a stream of small asynchronous copies: the host's or the device's."""
    if enqueue_s <= 0 or device_s <= 0:
        raise CopyEngineInputError(f"times must be positive, got enqueue {enqueue_s!r}, device {device_s!r}")
    if enqueue_s > device_s:
        return (f"host-bound: each enqueue costs {enqueue_s * 1e6:.2f} us of CPU time and the copy engine "
                f"needs only {device_s * 1e6:.2f} us, so a stream of small copies runs at the host's pace")
    return (f"device-bound: the copy engine needs {device_s * 1e6:.2f} us per copy, more than the "
            f"{enqueue_s * 1e6:.2f} us enqueue, so the host gets ahead and the device sets the pace")


def cpu_cost_of_copies(nbytes: int = 256 << 20, reps: int = 5, timeout_s: float = 60.0) -> dict:
    """Wall time, process CPU time (user and system) of large copies, per kind and direction.

    Each copy is waited for with the same bounded poll, so what differs between kinds is the
    work inside the driver: a pageable copy memcpy's every byte through pinned staging
    buffers on the CPU; a pinned one hands the engine a DMA and returns.
    """
    n = check_nbytes(nbytes, "CPU-cost copy", host=True, device=True)
    reps = check_count(reps, "reps")
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    done = cp.cuda.Event(disable_timing=True)
    dev = cp.cuda.memory.Memory(n)
    out = {}
    try:
        for kind in ("pageable", "pinned"):
            with HostBuffer(n, kind) as host:
                for d in DIRECTIONS:
                    dst, src = _Pair(host, dev).args(d)
                    rows = []
                    for i in range(reps + 1):
                        r0, c0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
                        cp.cuda.runtime.memcpyAsync(dst, src, n, MEMCPY_KIND[d], stream.ptr)
                        done.record(stream)
                        wait_event(done, timeout_s, f"a {n}-byte {kind} {d} copy")
                        w1, c1, r1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
                        if i:  # the first one warms up
                            rows.append({"wall_s": w1 - w0, "cpu_s": c1 - c0, "user_s": r1.ru_utime - r0.ru_utime,
                                         "sys_s": r1.ru_stime - r0.ru_stime})
                    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
                    med["gbps"] = n / med["wall_s"] / 1e9
                    med["cpu_share"] = med["cpu_s"] / med["wall_s"]
                    out[f"{kind}/{d}"] = med
    finally:
        stream.synchronize()
        del dev
    return {"nbytes": n, "reps": reps, "cpus": os.cpu_count(), "results": out}


SMALL_SIZES = (4, 64, 1024, 4096)


@experiment("copy_engines.gated_small_copies", chapter=3,
            title="Small pinned copies behind a gate: host enqueue time vs device time per copy")
def record_gated(quick: bool) -> dict:
    sizes = SMALL_SIZES + (65536,)
    count = 50 if quick else 300
    out = {"sizes": list(sizes), "count": count, "runs": []}
    for d in DIRECTIONS:
        for n in sizes:
            g = gated_copies(n, d, count)
            wall = synchronous_copy_wall(n, d, reps=count)
            out["runs"].append({k: g[k] for k in ("nbytes", "direction", "count", "gate_held", "span_s",
                                                  "enqueue_median_s", "device_median_s", "device_per_copy_s")}
                               | {"sync_wall_median_s": float(np.median(wall)),
                                  "enqueue_p90_s": float(np.percentile(g["enqueue_s"], 90))})
    return out


@experiment("copy_engines.bidirectional", chapter=3,
            title="Pinned copies in both directions at once vs one direction; asyncEngineCount")
def record_bidirectional(quick: bool) -> dict:
    return bidirectional((16 << 20) if quick else (64 << 20), copies=4 if quick else 8, trials=2 if quick else 3)


@experiment("copy_engines.cpu_cost", chapter=3,
            title="Wall and process CPU time of 256 MiB pageable vs pinned copies")
def record_cpu_cost(quick: bool) -> dict:
    return cpu_cost_of_copies((16 << 20) if quick else (256 << 20), reps=3 if quick else 5)


def gated_rows(data: dict) -> list[tuple]:
    """Table rows per recorded size and direction: enqueue, device (gated), synchronous wall (us)."""
    return [(r["direction"], r["nbytes"], f"{r['enqueue_median_s'] * 1e6:.2f}", f"{r['device_median_s'] * 1e6:.2f}",
             f"{r['device_per_copy_s'] * 1e6:.2f}", f"{r['sync_wall_median_s'] * 1e6:.2f}",
             "yes" if r["gate_held"] else "NO") for r in data["runs"]]


def gated_figure(ev: Evidence):
    """Grouped bars per size: host enqueue, device time per copy, and a synchronous copy's wall time."""
    import plotly.graph_objects as go

    from helpers.measure.sysinfo import fmt_bytes
    from helpers.presentation.figures import CourseFigure

    fig = go.Figure()
    runs = ev.require()["runs"]
    cats = [f"{r['direction']} {fmt_bytes(r['nbytes'])}" for r in runs]
    for key, name, color in (("enqueue_median_s", "host: enqueue (cudaMemcpyAsync call from Python)", "#b2182b"),
                             ("device_median_s", "device: copy time per copy (gated, events)", "#2166ac"),
                             ("sync_wall_median_s", "wall: copy + wait, one at a time", "#878787")):
        fig.add_bar(x=cats, y=[r[key] * 1e6 for r in runs], name=name, marker_color=color)
    fig.update_layout(title="Small pinned copies: what the host pays vs what the device spends", barmode="group",
                      yaxis_title="time per copy (us, median)", legend={"orientation": "h", "y": -0.25})
    return CourseFigure(fig, ev.parts)


def bidirectional_figure(ev: Evidence):
    """Aggregate GB/s of h2d alone, d2h alone and both at once (each trial a point, bar = median)."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    data = ev.require()
    fig = go.Figure()
    names = {"h2d": "h2d alone", "d2h": "d2h alone", "both": "h2d + d2h at once"}
    fig.add_bar(x=list(names.values()), y=[data[k]["median_gbps"] for k in names], name="median of trials",
                marker_color=["#1b7837", "#5aae61", "#762a83"])
    for k, label in names.items():
        fig.add_scatter(x=[label] * len(data[k]["aggregate_gbps"]), y=data[k]["aggregate_gbps"], mode="markers",
                        marker={"color": "black", "size": 7}, showlegend=False, name="trials")
    one = max(data["h2d"]["median_gbps"], data["d2h"]["median_gbps"])
    fig.add_hline(y=2 * one, line_dash="dot", annotation_text="2x one direction")
    fig.update_layout(title=f"Copies in both directions at once ({data['nbytes'] >> 20} MiB x {data['copies']} "
                            f"per stream; asyncEngineCount = {data['async_engine_count']})",
                      yaxis_title="aggregate bandwidth (GB/s)", showlegend=False)
    return CourseFigure(fig, ev.parts)


def cpu_cost_figure(ev: Evidence):
    """Per kind and direction: bandwidth, and the share of the copy's wall time the process spent on CPU."""
    from plotly.subplots import make_subplots

    from helpers.presentation.figures import CourseFigure

    data = ev.require()
    res = data["results"]
    keys = [f"{k}/{d}" for k in ("pageable", "pinned") for d in DIRECTIONS]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bandwidth (GB/s)", "process CPU time / wall time"))
    colors = ["#2166ac", "#92c5de", "#1b7837", "#5aae61"]
    fig.add_bar(x=keys, y=[res[k]["gbps"] for k in keys], marker_color=colors, row=1, col=1, showlegend=False)
    fig.add_bar(x=keys, y=[res[k]["cpu_share"] for k in keys], marker_color=colors, row=1, col=2, showlegend=False)
    fig.update_yaxes(title_text="GB/s", row=1, col=1)
    fig.update_yaxes(title_text="CPU s per wall s", row=1, col=2)
    fig.update_layout(title=f"What a {data['nbytes'] >> 20} MiB copy costs the CPU (median of {data['reps']})")
    return CourseFigure(fig, ev.parts)


def cpu_cost_rows(data: dict) -> list[tuple]:
    return [(k, f"{v['gbps']:.1f}", f"{v['wall_s'] * 1e3:.2f}", f"{v['cpu_s'] * 1e3:.2f}", f"{v['user_s'] * 1e3:.2f}",
             f"{v['sys_s'] * 1e3:.2f}", f"{v['cpu_share']:.2f}") for k, v in data["results"].items()]


def cpu_cost_verdict(data: dict, busy: float = 0.8) -> str:
    """Which copies keep a CPU core busy, and whether that time is user or system time."""
    lines = []
    for key, v in data["results"].items():
        where = "user" if v["user_s"] >= v["sys_s"] else "system"
        state = "keeps a core busy" if v["cpu_share"] >= busy else "leaves the CPU mostly idle"
        lines.append(f"{key}: {state} (CPU/wall = {v['cpu_share']:.2f}, mostly {where} time)")
    pg = min(data["results"][f"pageable/{d}"]["cpu_share"] for d in DIRECTIONS)
    pn = max(data["results"][f"pinned/{d}"]["cpu_share"] for d in DIRECTIONS)
    lines.append("verdict: " + ("the pageable copies cost CPU time for their whole duration; the pinned ones do not."
                                if pg >= busy > pn else
                                "the CPU cost does not separate pageable from pinned here as expected; look at the rows."))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the page's sentences

DIRECTIONS_EQUAL = 0.05  # h2d/d2h within ±5 %: neither direction trails


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / 2 if len(values) > 1 else 0.0


def bidirectional_values(data: dict) -> dict[str, beside.Value]:
    """One-direction and both-at-once bandwidths (GB/s), each with half its trials' range as spread, and
    the overlap ratio (aggregate / faster single direction)."""
    v = {k: beside.Value(data[k]["median_gbps"], _spread(data[k]["aggregate_gbps"])) for k in ("h2d", "d2h", "both")}
    one = max(v["h2d"].value, v["d2h"].value)
    v["overlap"] = beside.Value(v["both"].value / one, v["both"].spread / one)
    return v


def direction_lines(here: Evidence, ref: Evidence) -> list[str]:
    """Does host→device trail device→host? Computed for the data shown, the reference's beside it live."""
    v = bidirectional_values(here.require())
    ratio = v["h2d"].value / v["d2h"].value
    trails = ("host→device trails device→host" if ratio < 1 - DIRECTIONS_EQUAL else
              "host→device is ahead of device→host" if ratio > 1 + DIRECTIONS_EQUAL else
              f"the two directions are equal within ±{DIRECTIONS_EQUAL:.0%}")
    out = [f"one-direction bandwidth, {here.said}: h2d {v['h2d'].value:.1f} GB/s, d2h {v['d2h'].value:.1f} GB/s "
           f"(h2d / d2h = {ratio:.3f}): {trails}."]
    if here.live:
        r = bidirectional_values(ref.require())
        out += [beside.sentence(f"{d} one direction, {here.require()['nbytes'] >> 20} MiB", "GB/s", here, v[d], ref,
                                r[d], "link") for d in ("h2d", "d2h")]
    return out


def overlap_line(here: Evidence, ref: Evidence) -> str:
    """Both directions at once as a multiple of one, the reference's beside it live (a key point's number)."""
    v = bidirectional_values(here.require())["overlap"]
    r = bidirectional_values(ref.require())["overlap"]
    return beside.sentence("both directions at once / the faster single direction", "x", here, v, ref, r, "link")


def overlap_key_point(here: Evidence, tolerance: float = 0.15) -> str:
    """The key point on overlap, computed with bidirectional_verdict's rule."""
    o = bidirectional_values(here.require())["overlap"].value
    how = ("close to 2×" if o >= 2 * (1 - tolerance) else f"{o:.2f}×: partly, not 2×" if o > 1 + tolerance
           else f"{o:.2f}×: not at all")
    return (f"Every PCIe lane carries both directions; with separate engines, opposite copies can overlap. On the data "
            f"shown ({here.said}) they overlapped {how}.")


def enqueue_lines(here: Evidence, ref: Evidence, nbytes: int = 4) -> list[str]:
    """The small copy's enqueue (host) and device time, live beside the reference's (replay: the recorded values)."""
    def vals(ev: Evidence) -> dict[str, beside.Value]:
        r = next(x for x in ev.require()["runs"] if x["direction"] == "h2d" and x["nbytes"] == nbytes)
        return {"enqueue": beside.Value(r["enqueue_median_s"] * 1e6,
                                        abs(r.get("enqueue_p90_s", r["enqueue_median_s"]) - r["enqueue_median_s"]) * 1e6),
                "device": beside.Value(r["device_median_s"] * 1e6, abs(r["device_per_copy_s"] - r["device_median_s"]) * 1e6)}
    mine, theirs = vals(here), vals(ref)
    return [beside.sentence(f"{nbytes}-byte h2d copy, enqueue (host)", "µs", here, mine["enqueue"], ref,
                            theirs["enqueue"], "host"),
            beside.sentence(f"{nbytes}-byte h2d copy, device time", "µs", here, mine["device"], ref,
                            theirs["device"], "device")]


def cpu_cost_beside(here: Evidence, ref: Evidence) -> list[str]:
    """Pageable copies' bandwidth and CPU share measured now beside the reference's (replay: the recorded values);
    both are host work, so a difference is named with the host's likely causes."""
    out = []
    for key in ("pageable/h2d", "pageable/d2h"):
        m, r = here.require()["results"][key], ref.require()["results"][key]
        out.append(beside.sentence(f"{key} of {here.require()['nbytes'] >> 20} MiB", "GB/s", here,
                                   beside.Value(m["gbps"]), ref, beside.Value(r["gbps"]), "host"))
    return out
