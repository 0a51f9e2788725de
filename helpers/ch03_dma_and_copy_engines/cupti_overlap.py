"""Chapter 3b, both directions at once seen by the GPU itself: CUPTI's records of an h2d and a
d2h copy issued together on two streams, each on its copy channel, and how long they overlapped.

`copy_engines.bidirectional` infers overlap from bandwidth (both at once vs one direction). The
activity records (helpers.measure.cupti_trace) show it directly: each copy's channel, and its
start and end in device nanoseconds. `copy_engines.cupti_bidirectional` repeats the pair several
times; the page reports the overlap of each repeat in ns and as a fraction of each copy's own
duration, with the spread over repeats. Where CUPTI cannot trace the run is skipped with
`cupti_trace.unavailable_reason()` and the page replays the recording.
"""

from __future__ import annotations

import statistics

from helpers.ch03_dma_and_copy_engines.copy_engines import Gate
from helpers.core import gpu
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp, cupyx
from helpers.measure import cupti_trace
from helpers.measure.transfers import wait_event
from helpers.presentation import beside, channel_lanes, figures

TIMEOUT_S = 30.0
GATE_TIMEOUT_S = 5.0  # the gate opens by itself after this (and the run is refused: Gate.check)
MiB = 1 << 20


def both_directions_under_cupti(gate, streams, host_in, dev_in, dev_out, host_out) -> list[dict]:
    """An h2d copy on one stream and a d2h copy on another, both held behind one gate and released
    together, while CUPTI records which channel ran each and when. Without the gate the second copy
    would start a Python call later (hundreds of µs, measured on the H100), and the overlap would
    measure the interpreter as much as the link."""
    up, down = streams
    with cupti_trace.trace(kinds=["memcpy"]) as tr:
        gate.block(up)                              # both streams wait on one flag in host memory
        gate.block(down)
        dev_in.set(host_in, stream=up)              # host -> device on stream `up`
        dev_out.get(stream=down, out=host_out, blocking=False)  # device -> host on `down`, no wait here
        gate.release()                              # ... and both copies start together
        for s in streams:                           # wait (with a timeout) before the trace closes
            done = cp.cuda.Event()
            done.record(s)
            wait_event(done, TIMEOUT_S, "the traced copies")
    gate.check()                                    # the gate was opened by us, not by its timeout
    return tr.records


def run_repeats(code, nbytes: int, repeats: int) -> list[dict]:
    """Buffers, two non-blocking streams and a gate, one untraced warm-up pair (which also loads the
    gate's kernel: a kernel loaded while a stream spins behind the gate could wait for it), then
    `repeats` traced pairs."""
    gpu.cupy()  # NoGPUError here, before any buffer, when there is no GPU
    n = nbytes // 4
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    host_in, host_out = (cupyx.empty_pinned(n, dtype="float32") for _ in range(2))
    dev_in, dev_out = (cp.ones(n, dtype="float32") for _ in range(2))
    host_in[:] = 1.0
    with Gate(timeout_s=GATE_TIMEOUT_S) as gate:
        for s in streams:
            gate.block(s)
        gate.release()
        dev_in.set(host_in, stream=streams[0])
        dev_out.get(stream=streams[1], out=host_out)
        for s in streams:
            s.synchronize()
        return [{"records": code(gate, streams, host_in, dev_in, dev_out, host_out)} for _ in range(repeats)]


@experiment("copy_engines.cupti_bidirectional", chapter=3, needs=(GPU,),
            title="CUPTI activity records of an h2d and a d2h copy issued together: channels and overlap")
def record_cupti_bidirectional(quick: bool, code=both_directions_under_cupti) -> dict:
    """Several repeats of one h2d and one d2h held behind one gate and released together, each traced by CUPTI."""
    cupti_trace.skip_unless_available()
    nbytes = (16 if quick else 64) * MiB
    return {"nbytes": nbytes, "repeats": run_repeats(code, nbytes, 3 if quick else 10)}


# -- what the records show (pure) ---------------------------------------------------------------------
def repeat_overlap(records) -> dict:
    """One repeat: the channels of its h2d and d2h copies and their overlap (ns, and fraction of
    each direction's busy time)."""
    recs = cupti_trace.check_records(records)
    h2d = [r for r in recs if r["copy"] == "HtoD"]
    d2h = [r for r in recs if r["copy"] == "DtoH"]
    if not h2d or not d2h:
        raise InputError(f"a repeat needs an HtoD and a DtoH copy record, found {len(h2d)} and {len(d2h)}")
    ov = cupti_trace.set_overlap(h2d, d2h)
    return {"h2d_channels": sorted({r["channel"] for r in h2d}), "d2h_channels": sorted({r["channel"] for r in d2h}),
            "h2d_us": sum(r["end_ns"] - r["start_ns"] for r in h2d) / 1e3,
            "d2h_us": sum(r["end_ns"] - r["start_ns"] for r in d2h) / 1e3,
            "overlap_us": ov["ns"] / 1e3, "frac_h2d": ov["frac_a"], "frac_d2h": ov["frac_b"],
            "start_gap_us": abs(min(r["start_ns"] for r in d2h) - min(r["start_ns"] for r in h2d)) / 1e3}


def _spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def summary(data: dict) -> dict:
    """Per repeat (repeat_overlap) and over repeats: median, min and max of each figure, the
    channels seen per direction, and whether the two directions never shared a channel."""
    reps = data.get("repeats") if isinstance(data, dict) else None
    if not reps:
        raise InputError("copy_engines.cupti_bidirectional: the data holds no repeats")
    per = [repeat_overlap(r["records"]) for r in reps]
    return {"repeats": per, "n": len(per),
            **{k: _spread([p[k] for p in per]) for k in ("overlap_us", "frac_h2d", "frac_d2h", "h2d_us", "d2h_us",
                                                  "start_gap_us")},
            "h2d_channels": sorted({c for p in per for c in p["h2d_channels"]}),
            "d2h_channels": sorted({c for p in per for c in p["d2h_channels"]}),
            "apart": all(not set(p["h2d_channels"]) & set(p["d2h_channels"]) for p in per)}


# -- the page's views ---------------------------------------------------------------------------------
def lanes_figure(ev: Evidence, repeat: int | None = None):
    """One repeat's two copies on their channels (default: the repeat with the median overlap)."""
    if not ev.ok:
        return ev
    data = ev.require()
    s = summary(data)
    if repeat is None:
        order = sorted(range(s["n"]), key=lambda i: s["repeats"][i]["overlap_us"])
        repeat = order[len(order) // 2]
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 0 <= repeat < s["n"]:
        raise InputError(f"repeat must be a whole number from 0 to {s['n'] - 1}, not {repeat!r}")
    recs = data["repeats"][repeat]["records"]
    names = {r["stream"]: ("h2d stream" if r["copy"] == "HtoD" else "d2h stream") for r in recs}
    return channel_lanes.lanes_figure(recs, ev.parts, f"h2d and d2h issued together, {data['nbytes'] // MiB} MiB each "
                                      f"(repeat {repeat + 1} of {s['n']})", names)


def rows(ev: Evidence) -> list[tuple[str, ...]]:
    """Table rows, one per repeat: channels, durations, overlap µs and fractions."""
    return [(str(i + 1), f"{', '.join(map(str, p['h2d_channels']))} / {', '.join(map(str, p['d2h_channels']))}",
             f"{p['h2d_us']:.0f}", f"{p['d2h_us']:.0f}", f"{p['overlap_us']:.0f}",
             f"{p['frac_h2d']:.0%}", f"{p['frac_d2h']:.0%}") for i, p in enumerate(summary(ev.require())["repeats"])]


def table(ev: Evidence):
    """The per-repeat table, or the Evidence itself (which says why) when there is no data."""
    if not ev.ok:
        return ev
    return figures.Table(rows(ev), ("repeat", "channel h2d / d2h", "h2d µs", "d2h µs", "overlap µs",
                                    "of the h2d", "of the d2h"),
                         caption=ev.caption("CUPTI records of an h2d and a d2h copy issued together"))


def overlap_lines(here: Evidence, ref: Evidence) -> list[str]:
    """What the records show, computed from them, with the reference's fraction beside a live one."""
    if not here.ok:
        return [str(here.missing or here.why)]
    s, r = summary(here.require()), summary(ref.require())
    lines = channel_lanes.skip_note(here) + [f"{s['n']} repeats, {here.said_short}: the h2d copies ran on copy channel(s) "
             f"{', '.join(map(str, s['h2d_channels']))} and the d2h on {', '.join(map(str, s['d2h_channels']))}"
             f" ({'never the same channel' if s['apart'] else 'sharing a channel at least once'}).",
             f"They overlapped for {s['overlap_us']['median']:.0f} µs at the median "
             f"(from {s['overlap_us']['min']:.0f} to {s['overlap_us']['max']:.0f} µs): "
             f"{s['frac_h2d']['median']:.0%} of the h2d copy's time ({s['frac_h2d']['min']:.0%}–"
             f"{s['frac_h2d']['max']:.0%}) and {s['frac_d2h']['median']:.0%} of the d2h copy's "
             f"({s['frac_d2h']['min']:.0%}–{s['frac_d2h']['max']:.0%}); the second copy started "
             f"{s['start_gap_us']['median']:.0f} µs after the first (median)."]
    half = (s["frac_d2h"]["max"] - s["frac_d2h"]["min"]) / 2
    ref_half = (r["frac_d2h"]["max"] - r["frac_d2h"]["min"]) / 2
    lines.append(beside.sentence("overlap as a share of the d2h copy's time, median", "%", here,
                                 beside.Value(100 * s["frac_d2h"]["median"], 100 * half), ref,
                                 beside.Value(100 * r["frac_d2h"]["median"], 100 * ref_half), "link"))
    return lines
