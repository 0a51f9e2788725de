"""Chapter 7's sentences that depend on a real GPU's data, computed from the Evidence on the page.

What a launch costs on each side, how a live run compares with the reference recording (and, where
they differ by more than their spreads, the likely cause), what the stream experiments showed, and
the key points that depend on them. Each sentence takes its verb from the Evidence ("measured now
on …" live, "recorded on …" in replay); the toy GPU's sentences live in toy_ring ("the model gives").
"""

from __future__ import annotations

import statistics

from helpers.ch07_command_submission import launch
from helpers.core.evidence import Evidence


def said(ev: Evidence, short: bool = False) -> str:
    """How these values came to be, by the Evidence's mode (`Evidence.said`); short: the GPU only."""
    return ev.said_short if short else ev.said


def _span(values: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of the per-block figures."""
    return statistics.median(values), min(values), max(values)


def _apart(a: tuple, b: tuple) -> bool:
    """Two (median, low, high) figures differ beyond their spreads: their ranges over blocks do not overlap
    (a single reading is given a 5% spread, so noise any timing has is not called a difference)."""
    lo_a, hi_a = min(a[1], a[0] * 0.95), max(a[2], a[0] * 1.05)
    lo_b, hi_b = min(b[1], b[0] * 0.95), max(b[2], b[0] * 1.05)
    return hi_a < lo_b or hi_b < lo_a


HOST_CAUSE = ("CPU time in the CUDA library (and CuPy's Python layer), so it follows the host CPU: its model and "
              "clocks, its caches and memory, what else it runs, and in a virtual machine the vCPUs and the host "
              "under them")
DEVICE_CAUSE = "the GPU's front end and clocks (power state, application clocks) and other work on the GPU"


def host_facts(ev: Evidence) -> str:
    host = (ev.provenance or {}).get("host") or {}
    return ", ".join(f"{k} {v}" for k, v in (("CPU", host.get("cpu")), ("kernel", host.get("kernel"))) if v)


def launch_beside(lo: Evidence, ref: Evidence | None, here_host: str = "") -> list[str]:
    """Live: each launch figure beside the reference recording's (medians with their ranges over blocks),
    whether they differ beyond those ranges, and the likely cause. Replay: one line naming the recording."""
    if not lo.ok:
        return [lo.missing or "no data"]
    if not lo.live or ref is None or not ref.ok:
        return [f"These launch costs were {said(lo)}."]
    out = [f"This machine ({said(lo)}) beside the reference (recorded on {ref.source}):"]
    host_apart = dev_apart = False
    for kind in launch.LAUNCH_KINDS:
        if kind not in lo.data["kinds"] or kind not in ref.data["kinds"]:
            continue
        a, b = lo.data["kinds"][kind]["queued"], ref.data["kinds"][kind]["queued"]
        for key, side in (("host_us", "CPU µs to enqueue"), ("device_us", "GPU µs per kernel")):
            x, y = _span(a[key]), _span(b[key])
            apart = _apart(x, y)
            host_apart |= apart and key == "host_us"
            dev_apart |= apart and key == "device_us"
            out.append(f"• {launch.KIND_TEXT[kind]}, {side}: {x[0]:.2f} [{x[1]:.2f}–{x[2]:.2f}] here, {y[0]:.2f} "
                       f"[{y[1]:.2f}–{y[2]:.2f}] in the reference, {x[0] / y[0]:.2f}x"
                       + (" — beyond the spreads" if apart else " — within the spreads"))
    c, d = lo.data["cpu_time"], ref.data["cpu_time"]
    per_here, per_ref = c["wall_s"] / c["n"] * 1e6, d["wall_s"] / d["n"] * 1e6
    out.append(f"• {c['n']:,} empty launches: {c['wall_s'] * 1e3:.0f} ms here ({per_here:.2f} µs each), "
               f"{d['n']:,} in the reference: {d['wall_s'] * 1e3:.0f} ms ({per_ref:.2f} µs each), "
               f"{per_here / per_ref:.2f}x per launch (one reading each)")
    host_apart |= _apart((per_here,) * 3, (per_ref,) * 3)
    if host_apart:
        facts = host_facts(ref)
        out.append(f"The CPU side differs beyond its spread: enqueuing a launch is {HOST_CAUSE}. Reference host: "
                   f"{facts or 'not recorded'}" + (f"; this host: {here_host}" if here_host else "") + ".")
    if dev_apart:
        out.append(f"The GPU side differs beyond its spread: that is {DEVICE_CAUSE}.")
    if not host_apart and not dev_apart:
        out.append("Within their spreads, this machine's launch costs agree with the reference's.")
    return out


def launch_key_point(lo: Evidence) -> str | None:
    """The key point about a real launch, from the launch table: which side sets a loop's pace."""
    if not lo.ok:
        return None
    s = launch.launch_summary(lo.data)
    tiny = s.get("tiny") or s.get("empty")
    cpu_bound = tiny["host_us"] > tiny["device_us"]
    return (f"A launch cost {tiny['host_us']:.1f} µs of CPU time and {tiny['device_us']:.1f} µs on the GPU "
            f"({said(lo, True)}): " + ("a loop of tiny kernels runs at the CPU's pace." if cpu_bound else
                                         "here the GPU, not the CPU, sets a loop of tiny kernels' pace."))


def graph_key_point(gr: Evidence, lo: Evidence, doorbell_us: float) -> str | None:
    """The key point about CUDA Graphs, from the graph and launch Evidence (launch.graph_gain)."""
    if not (gr.ok and lo.ok):
        return None
    g = launch.graph_gain(gr, lo, doorbell_us)
    if not g["result_ok"] or g["one_by_one_us"] < 1.1 * g["graph_us"]:
        return f"CUDA Graphs gave no clear gain per kernel in the runs {said(gr, True)}."
    gpu_lighter = g["gpu_graph_us"] < g["gpu_separate_us"]
    return (f"A chain of {g['n']} kernels as one CUDA Graph took {g['graph_us']:.2f} µs per kernel against "
            f"{g['one_by_one_us']:.2f} one by one ({said(gr, True)}): graphs remove per-launch driver work"
            + (" and lighten the GPU's per-kernel work" if gpu_lighter else "") + " — not the doorbell.")


def streams_verdict(st: Evidence) -> str:
    """What the stream experiments showed, in the Evidence's words: ordering, event timing, overlap."""
    if not st.ok:
        return st.missing or "no data"
    seen = st.data["ordering"]["seen"]

    def ones(case: str) -> str:
        n, k = len(seen[case]), sum(v == 1 for v in seen[case])
        return "always" if k == n else "never" if k == 0 else f"in {k} of {n} trials"
    ev, ov = st.data["events"], st.data["overlap"]
    worst = max(abs(m / r - 1) for r, m in zip(ev["requested_s"], ev["measured_s"], strict=True))
    ind, dep, h = ov["span_s"]["independent"], ov["span_s"]["dependent"], ov["hold_s"]
    return (f"In the runs {said(st)}: B saw A's store {ones('same')} on the same stream, {ones('other')} on "
            f"another stream, and {ones('event')} on another stream behind an event. Event-timed spins came out "
            f"within {worst:.1%} of the requested length. Two {h * 1e3:g} ms spins on two streams took "
            f"{ind * 1e3:.2f} ms independent ({ind / h:.2f}x one spin) and {dep * 1e3:.2f} ms when the second "
            f"waited for the first ({dep / h:.2f}x)"
            + (": independent streams overlapped." if ind < 0.75 * dep else ": the independent spins did not overlap."))


def graph_beside(gr: Evidence, ref: Evidence | None) -> str | None:
    """Live: the longest chain's per-kernel times beside the reference recording's (one line); None in replay."""
    if not (gr.ok and gr.live and ref is not None and ref.ok):
        return None

    def longest(ev: Evidence) -> dict:
        return max(launch.graph_summary(ev.data), key=lambda r: r["n"])
    a, b = longest(gr), longest(ref)
    return (f"Reference (recorded on {ref.source}), N = {b['n']}: {b['graph_wall_us_per_kernel']:.2f} µs per kernel as "
            f"one graph against {b['individual_wall_us_per_kernel']:.2f} one by one ({b['speedup_wall']:.1f}x); here, "
            f"N = {a['n']}: {a['graph_wall_us_per_kernel']:.2f} against {a['individual_wall_us_per_kernel']:.2f} "
            f"({a['speedup_wall']:.1f}x).")
