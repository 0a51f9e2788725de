"""Chapter 7, live part: what one kernel launch costs, stream ordering and events, CUDA Graphs.

A kernel launch is command submission on a real GPU: the CUDA user-space driver writes the
launch into a push buffer, appends a GPFIFO entry, updates GP_PUT in the channel's USERD and
writes the channel's token to the usermode doorbell — stores to memory and one MMIO write,
no system call (the toy GPU's ring and DOORBELL, on hardware). This module measures that:

- `launch_overhead`: host-side cost of a launch (CPU time to enqueue, with the GPU held busy
  so the queue runs ahead of it), device-side cost (event time per kernel back to back), the
  round trip of launch + wait, user vs system CPU time over many launches, and the process's
  mappings of the NVIDIA device files.
- `streams`: work on one stream is ordered; on two streams it is not, until an event joins
  them; events time the device's work; independent streams overlap.
- `graphs`: a chain of N small kernels launched one by one vs captured once as a CUDA Graph
  and launched with one call.

Every wait polls an event with a timeout (helpers.measure.transfers.wait_event): nothing blocks
forever. Kernels are compiled once per process with NVRTC through cupy.RawModule.

The notebook gets each experiment's data with `ctx.get("submission.launch_overhead")`
(live on a GPU, else the recording); the views below take that Evidence and, when a recording
is missing (an experiment declared optional on a machine), say why its figure is absent.
"""

from __future__ import annotations

import functools
import os
import statistics
import time

import numpy as np
import plotly.graph_objects as go

from helpers.core import gpu, validate
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp
from helpers.measure.transfers import wait_event
from helpers.presentation import figures

TIMEOUT_S = 30.0
LAUNCH_KINDS = ("empty", "tiny", "cupy")
KIND_TEXT = {"empty": "empty RawKernel", "tiny": "1-thread RawKernel (x[0] += 1)",
             "cupy": "CuPy elementwise (x += 1)"}
MAX_LAUNCHES = 100_000
MAX_CHAIN = 10_000

_SOURCE = r"""
extern "C" {
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__global__ void empty_kernel() {}
__global__ void add_one(int* x) { if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1; }
__global__ void spin_ns(unsigned long long ns) {
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) { }
}
__global__ void spin_then_store(unsigned long long ns, volatile int* flag, int value) {
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) { }
    flag[0] = value;
}
__global__ void load_into(const volatile int* flag, int* out) { out[0] = flag[0]; }
}
"""


# -- kernels and small tools -----------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _module():
    cp = gpu.cupy()
    return cp.RawModule(code=_SOURCE, options=("-std=c++11",))


def _kernel(name: str):
    return _module().get_function(name)


def _check_kind(kind: str) -> None:
    validate.choice(kind, "kind", LAUNCH_KINDS)


def _launcher(kind: str, x):
    """A zero-argument function that launches one kernel of `kind` on the current stream.

    Callers make their stream current with `with stream:` around the launches (CuPy 13+
    and 14 alike), so the loop itself measures nothing but launches.
    """
    _check_kind(kind)
    if kind == "empty":
        k = _kernel("empty_kernel")
        return lambda: k((1,), (1,), ())
    if kind == "tiny":
        k = _kernel("add_one")
        return lambda: k((1,), (1,), (x,))

    cp = gpu.cupy()

    def cupy_op():
        cp.add(x, 1, out=x)  # CuPy's own elementwise kernel, through its Python layer
    return cupy_op


def spin(stream, seconds: float) -> None:
    """Keep the GPU busy on `stream` for `seconds` (a 1-thread kernel watching the clock)."""
    with stream:
        _kernel("spin_ns")((1,), (1,), (np.uint64(int(seconds * 1e9)),))


def _sync(stream, what: str) -> None:
    cp = gpu.cupy()
    ev = cp.cuda.Event()
    ev.record(stream)
    wait_event(ev, TIMEOUT_S, what)


def _median(xs) -> float:
    return float(statistics.median(xs))


# -- launch overhead ---------------------------------------------------------------------------
def time_queued_launches(launch, stream, n: int, hold_s: float) -> dict:
    """Launch n kernels behind a spin that holds the GPU busy: CPU µs per launch, GPU µs per kernel.

    While the spin runs, every launch only queues, so the loop's CPU time is the enqueue cost
    alone and the event time from `start` to `end` is the GPU's cost of kernels back to back.
    """
    start, end, held = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
    spin(stream, hold_s)                  # the GPU is busy for hold_s from now on
    held.record(stream)
    start.record(stream)
    with stream:                          # launches go to `stream`
        t0 = time.perf_counter_ns()
        for _ in range(n):
            launch()
        t1 = time.perf_counter_ns()
    end.record(stream)
    ahead = not held.done                 # the CPU finished before the GPU was free
    wait_event(end, TIMEOUT_S, f"{n} queued launches")
    return {"host_us": (t1 - t0) / n / 1e3, "device_us": cp.cuda.get_elapsed_time(start, end) * 1e3 / n,
            "ahead": ahead}


def queued_launches(kind: str = "empty", n: int = 500, blocks: int = 5, hold_s: float = 0.05,
                    code=time_queued_launches) -> dict:
    """`code` (time_queued_launches) `blocks` times for `n` launches of `kind`; per-launch costs in µs.

    'ahead' says, per block, that the CPU really finished enqueuing before the GPU was free
    (else the host time includes waiting for queue space and the numbers mean less).
    """
    _check_kind(kind)
    n = validate.whole_number(n, "n", 1, MAX_LAUNCHES)
    blocks = validate.whole_number(blocks, "blocks", 1, 100)
    validate.seconds(hold_s, "hold_s", 0.0, 1.0)
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1, dtype=cp.int32)
    launch = _launcher(kind, x)
    with stream:
        launch()
    _sync(stream, "warm-up launch")
    host, device, ahead = [], [], []
    for _ in range(blocks):
        r = code(launch, stream, n, hold_s)
        host.append(float(r["host_us"]))
        device.append(float(r["device_us"]))
        ahead.append(bool(r["ahead"]))
    ok = kind == "empty" or int(x.get()[0]) == 1 + n * blocks
    del x
    return {"kind": kind, "n": n, "blocks": blocks, "host_us": host, "device_us": device,
            "ahead": ahead, "host_us_median": _median(host), "device_us_median": _median(device),
            "result_ok": bool(ok)}


def round_trips(kind: str = "empty", reps: int = 200) -> dict:
    """Launch one kernel and wait for it, `reps` times: the latency of a lone launch, in µs."""
    _check_kind(kind)
    reps = validate.whole_number(reps, "reps", 1, MAX_LAUNCHES)
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1, dtype=cp.int32)
    launch = _launcher(kind, x)
    ev = cp.cuda.Event()
    times = []
    with stream:
        launch()
        _sync(stream, "warm-up launch")
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            launch()
            ev.record(stream)
            wait_event(ev, TIMEOUT_S, f"a {kind} launch")
            times.append((time.perf_counter_ns() - t0) / 1e3)
    del x
    return {"kind": kind, "reps": reps, "us": times, "us_median": _median(times)}


def cpu_time_of_launches(n: int = 20_000) -> dict:
    """User and system CPU seconds spent launching `n` empty kernels (source question 000's time(1) test).

    A system call per launch would show as system time; a user-space doorbell shows as
    user time only.
    """
    n = validate.whole_number(n, "n", 1, MAX_LAUNCHES * 10)
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    launch = _launcher("empty", None)
    with stream:
        launch()
        _sync(stream, "warm-up launch")
        t0, w0 = os.times(), time.perf_counter()
        for _ in range(n):
            launch()
        _sync(stream, f"{n} empty launches")
    t1, w1 = os.times(), time.perf_counter()
    return {"n": n, "user_s": t1.user - t0.user, "sys_s": t1.system - t0.system, "wall_s": w1 - w0}


def device_file_mappings(maps_path: str = "/proc/self/maps") -> dict[str, int]:
    """How many mappings of each /dev/nvidia* file this process has (doorbells, USERD, ...)."""
    counts: dict[str, int] = {}
    try:
        with open(maps_path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/dev/nvidia"):
                    counts[parts[5]] = counts.get(parts[5], 0) + 1
    except OSError:
        return {}
    return dict(sorted(counts.items()))


def measure_launch_overhead(quick: bool = False, code=time_queued_launches) -> dict:
    """Everything the launch-overhead figure needs, for every launch kind, in one run."""
    n, blocks, reps = (200, 3, 50) if quick else (500, 7, 300)
    out = {"kinds": {}}
    for kind in LAUNCH_KINDS:
        q = queued_launches(kind, n, blocks, code=code)
        r = round_trips(kind, reps)
        out["kinds"][kind] = {"queued": q, "round_trip": r}
    out["cpu_time"] = cpu_time_of_launches(5_000 if quick else 50_000)
    out["device_files"] = device_file_mappings()
    return out


@experiment("submission.launch_overhead", chapter=7, needs=(GPU,),
            title="Kernel launch cost: host enqueue vs device time vs round trip; user vs system CPU time")
def record_launch_overhead(quick: bool, code=time_queued_launches) -> dict:
    return measure_launch_overhead(quick, code)


# -- streams and events ------------------------------------------------------------------------
def ordering_trials(trials: int = 5, hold_s: float = 0.005) -> dict:
    """Kernel A waits `hold_s` then stores 1; kernel B copies the flag. What does B see?

    'same': A and B on one stream; 'other': B on a second stream, no dependency;
    'event': B on a second stream that first waits on an event recorded after A.
    Returns, per case, the values B read in each trial.
    """
    trials = validate.whole_number(trials, "trials", 1, 100)
    cp = gpu.cupy()
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    flag, out = cp.zeros(1, dtype=cp.int32), cp.zeros(1, dtype=cp.int32)
    a, b = _kernel("spin_then_store"), _kernel("load_into")
    seen: dict[str, list[int]] = {"same": [], "other": [], "event": []}
    after_a = cp.cuda.Event()
    for case in seen:
        for _ in range(trials):
            flag.fill(0)
            out.fill(-1)
            _sync(cp.cuda.get_current_stream(), "resetting the flag")
            with s1:
                a((1,), (1,), (np.uint64(int(hold_s * 1e9)), flag, np.int32(1)))
            if case == "event":
                after_a.record(s1)
                s2.wait_event(after_a)
            with s1 if case == "same" else s2:
                b((1,), (1,), (flag, out))
            _sync(s1, "kernel A")
            _sync(s2, "kernel B")
            seen[case].append(int(out.get()[0]))
    del flag, out
    return {"hold_s": hold_s, "trials": trials, "seen": seen}


def event_timing(holds_s=(0.001, 0.002, 0.005, 0.01)) -> dict:
    """Events around a kernel that spins for a known time: do they measure it?"""
    cp = gpu.cupy()
    s = cp.cuda.Stream(non_blocking=True)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    spin(s, 1e-5)
    _sync(s, "warm-up")
    measured = []
    for h in holds_s:
        start.record(s)
        spin(s, h)
        end.record(s)
        wait_event(end, TIMEOUT_S, "a timed spin")
        measured.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return {"requested_s": list(holds_s), "measured_s": measured}


def overlap(hold_s: float = 0.01, reps: int = 3) -> dict:
    """Two `hold_s` kernels on two streams, independent vs the second waiting on the first.

    Event time from before both to after both, in seconds, median of `reps`.
    """
    reps = validate.whole_number(reps, "reps", 1, 50)
    cp = gpu.cupy()
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    start, end, mid, done2 = (cp.cuda.Event() for _ in range(4))
    res = {}
    for case in ("independent", "dependent"):
        times = []
        for _ in range(reps):
            start.record(s1)
            s2.wait_event(start)
            spin(s1, hold_s)
            if case == "dependent":
                mid.record(s1)
                s2.wait_event(mid)
            spin(s2, hold_s)
            done2.record(s2)
            s1.wait_event(done2)
            end.record(s1)
            wait_event(end, TIMEOUT_S, "two spins")
            times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
        res[case] = _median(times)
    return {"hold_s": hold_s, "reps": reps, "span_s": res}


def measure_streams(quick: bool = False) -> dict:
    return {"ordering": ordering_trials(3 if quick else 10),
            "events": event_timing(),
            "overlap": overlap(0.01, 3 if quick else 5)}


@experiment("submission.streams", chapter=7, needs=(GPU,),
            title="Stream ordering (same stream, other stream, event wait), event timing, overlap of two streams")
def record_streams(quick: bool) -> dict:
    return measure_streams(quick)


# -- CUDA Graphs -------------------------------------------------------------------------------
def timed(submit, stream) -> tuple[float, float, float]:
    """(CPU µs inside submit(), µs from its start until the stream is done, GPU µs between events)."""
    cp = gpu.cupy()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    t0 = time.perf_counter_ns()
    submit()
    t1 = time.perf_counter_ns()
    end.record(stream)
    wait_event(end, TIMEOUT_S, "a chain of kernels")
    t2 = time.perf_counter_ns()
    return (t1 - t0) / 1e3, (t2 - t0) / 1e3, cp.cuda.get_elapsed_time(start, end) * 1e3


def graph_vs_one_by_one(kernel, x, n: int, reps: int, stream) -> dict:
    """A chain of n kernel(x) launches: submitted one by one, and captured once as a CUDA Graph."""
    def one_by_one():
        for _ in range(n):
            kernel((1,), (1,), (x,))
    with stream:                            # launches go to `stream`
        t0 = time.perf_counter_ns()
        stream.begin_capture()              # from here, launches are recorded, not run
        try:
            one_by_one()
        finally:
            graph = stream.end_capture()
        capture_us = (time.perf_counter_ns() - t0) / 1e3
        graph.launch(stream)                # the first launch uploads the graph: not timed
        rows = {"individual": [], "graph": []}
        for _ in range(reps):
            rows["individual"].append(timed(one_by_one, stream))
            rows["graph"].append(timed(lambda: graph.launch(stream), stream))
    return {"capture_us": capture_us, **rows}


def graph_vs_launches(n: int = 100, reps: int = 20, code=graph_vs_one_by_one) -> dict:
    """`code` (graph_vs_one_by_one) on a chain of `n` x[0] += 1 kernels, and whether x ends right.

    Per repetition: host µs to submit, µs from the first submission until the work is done
    (wall clock), and device µs between events around the chain; the one-time cost of
    capturing and instantiating the graph.
    """
    n = validate.whole_number(n, "n", 1, MAX_CHAIN)
    reps = validate.whole_number(reps, "reps", 1, 1000)
    cp = gpu.cupy()
    k = _kernel("add_one")
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1, dtype=cp.int32)
    with s:
        k((1,), (1,), (x,))
    _sync(s, "warm-up")
    r = code(k, x, n, reps, s)
    _sync(s, "the last chain")
    got = int(x.get()[0])
    expected = 1 + n + 2 * n * reps  # warm-up, the graph's first launch, then both ways per rep
    out = {"n": n, "reps": reps, "capture_us": float(r["capture_us"]), "result_ok": got == expected}
    for name in ("individual", "graph"):
        rows = r[name]
        out[name] = {"submit_us": [a for a, _, _ in rows], "wall_us": [b for _, b, _ in rows],
                     "device_us": [c for _, _, c in rows]}
    return out


def measure_graphs(quick: bool = False, chains=(1, 10, 100, 1000), code=graph_vs_one_by_one) -> dict:
    reps = 5 if quick else 30
    return {"chains": [graph_vs_launches(n, reps, code) for n in chains]}


@experiment("submission.graphs", chapter=7, needs=(GPU,),
            title="Chains of 1 to 1000 small kernels: launched one by one vs one CUDA Graph launch")
def record_graphs(quick: bool, code=graph_vs_one_by_one) -> dict:
    return measure_graphs(quick, code=code)


# -- figures, tables and verdicts --------------------------------------------------------------
def launch_summary(data: dict) -> dict[str, dict[str, float]]:
    """Per kind: median host enqueue µs, device µs per kernel, round-trip µs."""
    return {k: {"host_us": v["queued"]["host_us_median"], "device_us": v["queued"]["device_us_median"],
                "round_trip_us": v["round_trip"]["us_median"]} for k, v in data["kinds"].items()}


def launch_figure(ev: Evidence):
    """Grouped bars: per launch kind, host enqueue vs device time vs launch-and-wait (µs)."""
    if not ev.ok:
        return ev
    s = launch_summary(ev.data)
    kinds = [k for k in LAUNCH_KINDS if k in s]
    fig = go.Figure()
    for key, name in (("host_us", "CPU time to enqueue one launch"),
                      ("device_us", "GPU time per kernel, back to back"),
                      ("round_trip_us", "launch + wait for it (round trip)")):
        fig.add_bar(name=name, x=[KIND_TEXT[k] for k in kinds], y=[s[k][key] for k in kinds],
                    text=[f"{s[k][key]:.2f}" for k in kinds], textposition="outside")
    fig.update_layout(title="What one kernel launch costs", barmode="group",
                      yaxis_title="µs per launch (median)", legend={"orientation": "h", "y": -0.2})
    return figures.CourseFigure(fig, ev.parts)


def launch_rows(ev: Evidence) -> list[tuple[str, ...]]:
    """Table rows: kind, host µs, device µs, round trip µs, host/device, queue ahead of GPU."""
    if not ev.ok:
        return []
    s = launch_summary(ev.data)
    rows = []
    for k in LAUNCH_KINDS:
        if k not in s:
            continue
        q = ev.data["kinds"][k]["queued"]
        rows.append((KIND_TEXT[k], f"{s[k]['host_us']:.2f}", f"{s[k]['device_us']:.2f}",
                     f"{s[k]['round_trip_us']:.2f}", f"{s[k]['host_us'] / s[k]['device_us']:.1f}x",
                     f"{sum(q['ahead'])}/{len(q['ahead'])}"))
    return rows


def syscall_verdict(ev: Evidence) -> str:
    """Source question 000's answer ('a single kernel call starts the command queue') vs the CPU time split."""
    if not ev.ok:
        return ev.missing or "no data"
    c = ev.data["cpu_time"]
    total = c["user_s"] + c["sys_s"]
    share = c["sys_s"] / total if total > 0 else float("nan")
    us = c["wall_s"] / c["n"] * 1e6
    where = f"measured now on {ev.source}" if ev.live else f"recorded on {ev.source}"
    lines = [f"{where}: {c['n']:,} empty launches took {c['wall_s'] * 1e3:.1f} ms of wall time ({us:.2f} µs each): "
             f"{c['user_s']:.3f} s user, {c['sys_s']:.3f} s system CPU time (os.times ticks are 10 ms)."]
    files = ev.data.get("device_files") or {}
    if files:
        lines.append("mappings of NVIDIA device files in the process: "
                     + ", ".join(f"{k} x{v}" for k, v in files.items()))
    # one system call costs at least ~0.1 µs of system time; per launch it would add up to
    # n * 0.1 µs and show as a clearly nonzero share
    if total > 0 and share < 0.1:
        lines.append(f"verdict: {share:.0%} of the CPU time was system time — launching is user-space work. "
                     "The answer in source question 000 says a kernel call starts the queue; in this run the start was "
                     "the usermode doorbell, a store the process makes itself (no system call per launch).")
    elif total > 0:
        lines.append(f"verdict: {share:.0%} of the CPU time was system time — more than user-space submission "
                     "alone explains; something in this run entered the kernel often (look with strace -c).")
    else:
        lines.append("verdict: too little CPU time to split (increase n).")
    return "\n".join(lines)


def ordering_rows(ev: Evidence) -> list[tuple[str, ...]]:
    """Rows: case, what B read in each trial, the verdict computed from it."""
    if not ev.ok:
        return []
    seen = ev.data["ordering"]["seen"]
    text = {"same": "A and B on one stream", "other": "B on another stream, no wait",
            "event": "B on another stream, waits on an event after A"}
    rows = []
    for case in ("same", "other", "event"):
        vals = seen[case]
        ones = sum(v == 1 for v in vals)
        verdict = ("always after A" if ones == len(vals) else "never saw A's store" if ones == 0
                   else f"raced: saw A's store {ones} of {len(vals)} times")
        rows.append((text[case], " ".join(map(str, vals)), verdict))
    return rows


def overlap_rows(ev: Evidence) -> list[tuple[str, ...]]:
    """Rows: event-timed spins (requested vs measured) and the two-stream spans."""
    if not ev.ok:
        return []
    timed, ov = ev.data["events"], ev.data["overlap"]
    rows = [(f"one spin of {r * 1e3:g} ms", f"{m * 1e3:.3f} ms", f"{m / r:.3f}")
            for r, m in zip(timed["requested_s"], timed["measured_s"], strict=True)]
    h = ov["hold_s"]
    for case in ("independent", "dependent"):
        t = ov["span_s"][case]
        rows.append((f"two spins of {h * 1e3:g} ms, {case}", f"{t * 1e3:.3f} ms", f"{t / h:.2f}"))
    return rows


def graph_summary(data: dict) -> list[dict]:
    """Per chain length: median µs per kernel (wall to completion, submit, device), both ways."""
    out = []
    for c in data["chains"]:
        n = c["n"]
        row = {"n": n, "capture_us": c["capture_us"], "result_ok": c["result_ok"]}
        for way in ("individual", "graph"):
            for key in ("wall_us", "submit_us", "device_us"):
                row[f"{way}_{key}_per_kernel"] = _median(c[way][key]) / n
        row["speedup_wall"] = row["individual_wall_us_per_kernel"] / row["graph_wall_us_per_kernel"]
        row["speedup_submit"] = row["individual_submit_us_per_kernel"] / row["graph_submit_us_per_kernel"]
        out.append(row)
    return out


def graph_figure(ev: Evidence):
    """Per-kernel time vs chain length, one by one vs one graph launch (log-log, µs)."""
    if not ev.ok:
        return ev
    rows = graph_summary(ev.data)
    ns = [r["n"] for r in rows]
    fig = go.Figure()
    for way, dash in (("individual", "solid"), ("graph", "dash")):
        label = "one launch per kernel" if way == "individual" else "one CUDA Graph launch"
        fig.add_scatter(x=ns, y=[r[f"{way}_wall_us_per_kernel"] for r in rows], mode="lines+markers",
                        name=f"{label}: submit → done", line={"dash": dash})
        fig.add_scatter(x=ns, y=[r[f"{way}_device_us_per_kernel"] for r in rows], mode="lines+markers",
                        name=f"{label}: GPU time (events)", line={"dash": dash, "width": 1})
    fig.update_layout(title="A chain of N small kernels: per-kernel cost",
                      xaxis={"type": "log", "title": "kernels in the chain (N)"},
                      yaxis={"type": "log", "title": "µs per kernel (median, log)"},
                      legend={"orientation": "h", "y": -0.25})
    return figures.CourseFigure(fig, ev.parts)


def graph_rows(ev: Evidence) -> list[tuple[str, ...]]:
    if not ev.ok:
        return []
    return [(str(r["n"]), f"{r['individual_wall_us_per_kernel']:.2f}", f"{r['graph_wall_us_per_kernel']:.2f}",
             f"{r['speedup_wall']:.1f}x", f"{r['individual_submit_us_per_kernel']:.2f}",
             f"{r['graph_submit_us_per_kernel']:.3f}", f"{r['capture_us']:.0f}",
             "yes" if r["result_ok"] else "NO") for r in graph_summary(ev.data)]


def graph_gain(graphs: Evidence, launches: Evidence, doorbell_us: float) -> dict:
    """Where a CUDA Graph's gain comes from, in µs per kernel, for the longest recorded chain.

    CPU side: submit time per kernel one by one vs as one graph launch. GPU side: the GPU's time
    per separately launched x[0] += 1 kernel queued back to back (launch_overhead's 'tiny' row)
    vs per kernel inside the graph. `doorbell_us`: what one doorbell store costs (the toy GPU's
    model), set beside them so the size of "ringing the doorbell less often" is in view.
    """
    rows = graph_summary(graphs.data)
    big = max(rows, key=lambda r: r["n"])
    tiny = launch_summary(launches.data)["tiny"]
    return {"n": big["n"], "one_by_one_us": big["individual_wall_us_per_kernel"],
            "graph_us": big["graph_wall_us_per_kernel"],
            "cpu_one_by_one_us": big["individual_submit_us_per_kernel"],
            "cpu_graph_us": big["graph_submit_us_per_kernel"],
            "gpu_separate_us": tiny["device_us"], "gpu_graph_us": big["graph_device_us_per_kernel"],
            "doorbell_us": float(doorbell_us), "result_ok": all(r["result_ok"] for r in rows)}


def graph_gain_rows(g: dict) -> list[tuple[str, str, str]]:
    """Table rows: what each side costs per kernel, one by one vs in one graph."""
    return [("CPU: submitting one kernel", f"{g['cpu_one_by_one_us']:.2f}", f"{g['cpu_graph_us']:.3f}"),
            ("GPU: running one kernel, queued back to back", f"{g['gpu_separate_us']:.2f}", f"{g['gpu_graph_us']:.2f}"),
            ("submit → done, per kernel (what the chain took)", f"{g['one_by_one_us']:.2f}", f"{g['graph_us']:.2f}"),
            ("one doorbell store (toy GPU's model, for scale)", f"{g['doorbell_us']:.3f}", "")]


def graph_verdict(graphs: Evidence, launches: Evidence, doorbell_us: float) -> str:
    """Do graphs cut the per-kernel cost of a long chain, and which side's work do they remove?
    Decided from the two recordings (or live runs)."""
    for ev in (graphs, launches):
        if not ev.ok:
            return ev.missing or "no data"
    g = graph_gain(graphs, launches, doorbell_us)
    if not g["result_ok"]:
        return "verdict: the chain's result was wrong in some run — the timings are not trustworthy."
    if g["one_by_one_us"] < 1.1 * g["graph_us"]:
        return (f"verdict: no clear gain here — {g['graph_us']:.2f} vs {g['one_by_one_us']:.2f} µs per kernel "
                f"at N = {g['n']}.")
    saved = g["one_by_one_us"] - g["graph_us"]
    cpu_bound = g["cpu_one_by_one_us"] > g["gpu_separate_us"]
    lines = [f"verdict: at N = {g['n']} the graph finishes in {g['graph_us']:.2f} µs per kernel against "
             f"{g['one_by_one_us']:.2f} one by one ({g['one_by_one_us'] / g['graph_us']:.1f}x), {saved:.2f} µs saved per kernel."]
    if cpu_bound:
        lines.append(f"One by one, the chain ran at the CPU's pace: {g['cpu_one_by_one_us']:.2f} µs of driver work per "
                     f"launch, while the GPU needs {g['gpu_separate_us']:.2f} µs per kernel.")
    lines.append(f"As one graph the CPU's share falls to {g['cpu_graph_us']:.3f} µs per kernel (one launch call for "
                 f"the chain), and the GPU runs the pre-built work at {g['gpu_graph_us']:.2f} µs per kernel instead of "
                 f"{g['gpu_separate_us']:.2f}: the front end does less per kernel too.")
    lines.append(f"One doorbell store costs about {g['doorbell_us']:.2f} µs (the toy's model): ringing it "
                 f"{g['n']} times less often saves at most {g['doorbell_us'] / saved:.0%} of the gain. The gain is "
                 "driver software on the CPU and front-end work on the GPU, not the doorbell.")
    return "\n".join(lines)


def table(ev: Evidence, rows: list[tuple[str, ...]], headers: tuple[str, ...], what: str):
    """A figures.Table whose caption names the mode and machine; the Evidence itself (which
    says why) when there is no data."""
    if not ev.ok:
        return ev
    return figures.Table(rows, headers, caption=ev.caption(what))
