"""Chapter 9's pipeline timeline from CUPTI, set beside the one from CUDA events (experiment
`radar.cupti_timeline`).

`radar.timeline` draws each frame from three CUDA events that the pipeline records on the frame's
stream (before the copy, after it, after the kernels). An event is itself a command in the stream:
its time is when the stream's work reached it, and a Gantt chart from events has one lane per
stream. CUPTI's activity records (helpers.measure.cupti_trace) are the GPU's own account of each
copy and kernel: its start and end, the stream it was issued on and the hardware channel that ran
it. This experiment runs the same designs at the same load as `radar.timeline` with both on, so
the two timelines describe the same frames, and then runs each design again with and without
CUPTI to measure what tracing costs.

    ev = ctx.get("radar.cupti_timeline", code=traced_run)   # live with CUPTI, else the recording
    cupti_timeline.beside_figure(ev, "pipelined")           # events above, CUPTI's channels below
    cupti_timeline.difference_lines(ev)                     # what differs, computed from the frames
    cupti_timeline.overhead_lines(ev)                       # latency with and without CUPTI

A frame's CUPTI records are found without trusting any clock: its copy is one of the run's
frame-sized host-to-device copies (the last ones issued, by CUPTI's correlation id, so the
warm-up's copy is left out), and its kernels are what ran on the copy's stream after it and before
that stream's next frame copy (work in one stream runs in issue order).
"""

from __future__ import annotations

import numpy as np

from helpers.ch09_radar_pipeline.pipeline_runs import TIMELINE_DESIGNS, TIMELINE_POINT
from helpers.core import validate
from helpers.core.errors import NoGPUError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.measure import cupti_trace
from helpers.models.radar import pipeline
from helpers.models.radar.designs import RadarInputError
from helpers.models.radar.pipeline import PipelineConfig
from helpers.models.radar.ring import CardHost
from helpers.presentation import channel_lanes

EXPERIMENT_ID = "radar.cupti_timeline"
TIMELINE_FRAMES, QUICK_TIMELINE_FRAMES = 40, 12  # as radar.timeline
OVERHEAD_FRAMES, QUICK_OVERHEAD_FRAMES = 100, 20  # frames per run of the overhead runs
OVERHEAD_REPEATS, QUICK_OVERHEAD_REPEATS = 5, 2  # runs per design with CUPTI on, and as many with it off
# one record of a frame's GPU work, as the recording keeps it (times in ns from the trace's start)
ITEM_FIELDS = ("start_ns", "end_ns", "channel", "channel_type", "kind")
EVENT_RESOLUTION_US = 0.5  # cudaEventElapsedTime's stated resolution (CUDA Runtime API reference)


def traced_run(cfg, cupti: bool = True):
    """One run of the radar pipeline (cfg, a pipeline.PipelineConfig), with CUPTI's activity records
    of it when `cupti`: the run as the event timeline has it, and {t0_ns, records} on CUPTI's clock
    (t0_ns is CUPTI's timestamp when the trace began), or None without CUPTI."""
    if not cupti:
        return pipeline.run_pipeline(cfg).to_dict(), None
    with cupti_trace.trace() as t:
        run = pipeline.run_pipeline(cfg).to_dict()  # it synchronizes every stream before it returns
    return run, {"t0_ns": t.t0_ns, "records": t.records}


# -- the experiment -------------------------------------------------------------------------------
@experiment(EXPERIMENT_ID, chapter=9, needs=(GPU,), params={"overhead_frames": validate.count(20, 1000)},
            title="Radar pipeline timeline from CUPTI activity records beside the one from CUDA events, same "
                  "frames (registered, pipelined), and the pipeline's latency with and without CUPTI")
def cupti_timeline_experiment(quick: bool, overhead_frames: int = OVERHEAD_FRAMES, code=traced_run) -> dict:
    """Each design of radar.timeline at its load with events and CUPTI on (the frames matched to their
    CUPTI records), then OVERHEAD_REPEATS runs per design with CUPTI on and as many with it off, in
    alternating order, `overhead_frames` frames each (a page's live run may ask for fewer than the
    recorder's OVERHEAD_FRAMES: every frame costs a period of wall time), summarised by their latency.
    SkipExperiment with the reason where CUPTI cannot run."""
    cupti_trace.skip_unless_available()
    frame_bytes, period_s = TIMELINE_POINT
    frames = QUICK_TIMELINE_FRAMES if quick else TIMELINE_FRAMES
    each = min(overhead_frames, QUICK_OVERHEAD_FRAMES) if quick else overhead_frames
    repeats = QUICK_OVERHEAD_REPEATS if quick else OVERHEAD_REPEATS
    with CardHost() as host:
        def cfg(design: str, n: int) -> PipelineConfig:
            return PipelineConfig(design=design, frame_bytes=frame_bytes, period_s=period_s, frames=n,
                                  check_every=0, timeline=True, host=host)

        try:
            runs = []
            for design in TIMELINE_DESIGNS:
                run, tr = code(cfg(design, frames))
                run["cupti"] = match_frames(run, tr["records"], tr["t0_ns"])
                runs.append(run)
            overhead = [_overhead_run(code, cfg(design, each), on, rep)
                        for rep in range(repeats) for design in TIMELINE_DESIGNS
                        for on in ((True, False) if rep % 2 == 0 else (False, True))]
        except NoGPUError as exc:  # CUPTI refused the trace after all
            raise SkipExperiment(str(exc)) from None
    return {"frames": frames, "frame_bytes": frame_bytes, "period_s": period_s, "runs": runs,
            "overhead": {"frames": each, "repeats": repeats, "runs": overhead}}


def _overhead_run(code, cfg: PipelineConfig, cupti: bool, rep: int) -> dict:
    """One overhead run, summarised: latency quartiles (µs), the event-timed copy and processing medians,
    drops, CPU time and how many CUPTI records it made."""
    run, tr = code(cfg, cupti=cupti)
    if not run["latency_us"]:
        raise RadarInputError(f"an overhead run of {run['design']} completed no frame (dropped {run.get('dropped')})")
    q1, p50, q3 = (float(x) for x in np.percentile(run["latency_us"], [25, 50, 75]))
    return {"design": run["design"], "cupti": cupti, "repeat": rep, "frames": len(run["latency_us"]),
            "p50_us": p50, "q1_us": q1, "q3_us": q3, "copy_us_p50": run.get("copy_us_p50"),
            "kernel_us_p50": run.get("kernel_us_p50"), "dropped": run.get("dropped", 0),
            "cpu_s": run.get("cpu_s"), "records": len(tr["records"]) if tr else 0}


# -- matching CUPTI's records to the frames -------------------------------------------------------
def _item(rec: dict, t0_ns: int) -> list:
    return [rec["start_ns"] - t0_ns, rec["end_ns"] - t0_ns, rec["channel"], rec["channel_type"], rec["kind"]]


def item(values: list) -> dict:
    """A kept record of a frame's work as a dict of ITEM_FIELDS."""
    return dict(zip(ITEM_FIELDS, values, strict=True))


def _frame_copy(rec: dict, frame_bytes: int) -> bool:
    return rec["kind"] == "memcpy" and rec["copy"] == "HtoD" and rec["bytes"] == frame_bytes


def match_frames(run: dict, records: list, t0_ns: int) -> dict:
    """Each frame of `run` (a run with extra['timeline']) with its CUPTI records: its copy (one of the
    frame-sized host-to-device copies: the last len(frames) issued, by correlation id, then start) and
    its work (what ran on that copy's stream from the copy until the stream's next frame copy).
    Returns {frames: [{seq, buffer, stream, copy, work}], records, unmatched_records, problems}; times
    are ns from t0_ns, records as ITEM_FIELDS lists. A run whose records do not fit its frames says so
    in `problems` (and keeps no frames when there are fewer copies than frames)."""
    recs = cupti_trace.check_records(records)
    frames = sorted(run["extra"]["timeline"], key=lambda f: f["seq"])
    copies = sorted((r for r in recs if _frame_copy(r, run["frame_bytes"])),
                    key=lambda r: (r["correlation"], r["start_ns"]))
    out = {"t0_ns": int(t0_ns), "records": len(recs), "frames": [], "unmatched_records": len(recs), "problems": []}
    if len(copies) < len(frames):
        out["problems"].append(f"CUPTI recorded {len(copies)} host-to-device copies of {run['frame_bytes']} bytes "
                               f"for {len(frames)} frames: the frames were not matched")
        return out
    copies = copies[len(copies) - len(frames):]
    by_stream: dict[int, list] = {}
    for r in sorted((r for r in recs if _frame_copy(r, run["frame_bytes"])), key=lambda r: r["start_ns"]):
        by_stream.setdefault(r["stream"], []).append(r)
    matched = 0
    for f, c in zip(frames, copies, strict=True):
        later = [r["start_ns"] for r in by_stream[c["stream"]] if r["start_ns"] > c["start_ns"]]
        until = min(later, default=None)
        work = sorted((r for r in recs if r["stream"] == c["stream"] and not _frame_copy(r, run["frame_bytes"])
                       and r["start_ns"] >= c["start_ns"] and (until is None or r["start_ns"] < until)),
                      key=lambda r: r["start_ns"])
        matched += 1 + len(work)
        out["frames"].append({"seq": f["seq"], "buffer": f["buffer"], "stream": c["stream"],
                              "copy": _item(c, t0_ns), "work": [_item(r, t0_ns) for r in work]})
    out["unmatched_records"] = len(recs) - matched
    out["problems"] += _stream_problems(out["frames"])
    return out


def _stream_problems(frames: list[dict]) -> list[str]:
    """Each device buffer has its own stream in the pipeline: a matching that gives a buffer two streams,
    two buffers one stream, or a frame no work, has matched the wrong records."""
    out = []
    streams: dict[int, set] = {}
    for f in frames:
        streams.setdefault(f["buffer"], set()).add(f["stream"])
    for b, s in sorted(streams.items()):
        if len(s) > 1:
            out.append(f"buffer {b}'s frames were matched to CUPTI streams {sorted(s)}, not one")
    flat = [next(iter(s)) for s in streams.values() if len(s) == 1]
    if len(flat) != len(set(flat)):
        out.append("two device buffers were matched to one CUPTI stream")
    empty = [f["seq"] for f in frames if not f["work"]]
    if empty:
        out.append(f"{len(empty)} frame(s) have no kernels in the CUPTI records (first: frame {empty[0]})")
    return out


# -- what differs: computed from the matched frames ----------------------------------------------
def frame_pairs(run: dict) -> list[tuple[dict, dict]]:
    """(the events' frame, the CUPTI frame) for every frame with a copy and work in both, by seq."""
    events = {f["seq"]: f for f in run["extra"]["timeline"]}
    return [(events[c["seq"]], c) for c in run["cupti"]["frames"] if c["seq"] in events and c["work"]]


def frame_differences(ev_frame: dict, cu_frame: dict) -> dict:
    """One frame, both ways, in µs. offset: CUPTI's copy start minus the events' (the two clocks' offset
    for this frame). Aligned at the copy's start: copy_events/copy_cupti (durations), gap (CUPTI: copy end
    to the frame's first kernel start), processing_events (the 'copied' event to 'done') and
    processing_cupti (copy end to the last kernel's end), busy (CUPTI: the time a kernel of the frame ran)."""
    (a, b), (_, c) = ev_frame["copy_ms"], ev_frame["kernels_ms"]
    cs, ce = cu_frame["copy"][0], cu_frame["copy"][1]
    work = [item(w) for w in cu_frame["work"]]
    kernels = [w for w in work if w["kind"] == "kernel"] or work
    first, last = min(w["start_ns"] for w in kernels), max(w["end_ns"] for w in work)
    busy = sum(e - s for s, e in cupti_trace.merged([(w["start_ns"], w["end_ns"]) for w in work]))
    return {"offset": (cs - a * 1e6) / 1e3, "copy_events": (b - a) * 1e3, "copy_cupti": (ce - cs) / 1e3,
            "gap": (first - ce) / 1e3, "processing_events": (c - b) * 1e3, "processing_cupti": (last - ce) / 1e3,
            "busy": busy / 1e3}


def _spread(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())} if v.size else {}


def run_differences(run: dict) -> dict:
    """A run's frames both ways: for each of frame_differences' quantities its median, min and max (µs),
    the copy and processing differences (events minus CUPTI), how far the clocks' offset wandered, the
    channels each sort of work ran on, and the time copies and kernels overlapped by each timeline."""
    pairs = frame_pairs(run)
    per = [frame_differences(e, c) for e, c in pairs]
    keys = ("copy_events", "copy_cupti", "gap", "processing_events", "processing_cupti", "busy")
    out = {k: _spread([p[k] for p in per]) for k in keys}
    out["copy_diff"] = _spread([p["copy_events"] - p["copy_cupti"] for p in per])
    out["processing_diff"] = _spread([p["processing_events"] - p["processing_cupti"] for p in per])
    offsets = [p["offset"] for p in per]
    out["offset_ns"] = float(np.median(offsets)) * 1e3 if offsets else 0.0
    out["offset_wander"] = float(max(offsets) - min(offsets)) if offsets else 0.0
    out["frames"], out["streams"] = len(per), len({c["stream"] for _, c in pairs})
    out["copy_channels"] = sorted({c["copy"][2] for _, c in pairs})
    out["work_channels"] = sorted({w[2] for _, c in pairs for w in c["work"]})
    out["channels"] = sorted({(c["copy"][3], c["copy"][2]) for _, c in pairs}
                             | {(w[3], w[2]) for _, c in pairs for w in c["work"]})
    out["overlap_events_us"] = _events_overlap(pairs) / 1e3
    out["overlap_cupti_us"] = cupti_trace.set_overlap(
        [(c["copy"][0], c["copy"][1]) for _, c in pairs], [(w[0], w[1]) for _, c in pairs for w in c["work"]])["ns"] / 1e3
    return out


def _events_overlap(pairs: list[tuple[dict, dict]]) -> float:
    """ns during which, by the events, some frame's copy and some frame's processing were both under way."""
    ns = [((round(e["copy_ms"][0] * 1e6), round(e["copy_ms"][1] * 1e6)),
           (round(e["kernels_ms"][0] * 1e6), round(e["kernels_ms"][1] * 1e6))) for e, _ in pairs]
    return cupti_trace.set_overlap([c for c, _ in ns], [k for _, k in ns])["ns"]


def channels_used(ev: Evidence, design: str) -> int:
    """How many hardware channels (copy and compute together) ran the frames of `design`."""
    return len(run_differences(_run_of(ev, design))["channels"])


def _run_of(ev: Evidence, design: str) -> dict:
    run = next((r for r in ev.require()["runs"] if r["design"] == design), None)
    if run is None:
        raise RadarInputError(f"{EXPERIMENT_ID} has no run of design {design!r}; it has "
                              f"{', '.join(r['design'] for r in ev.require()['runs'])}")
    return run


# -- the page: the Evidence, sentences and tables from it -----------------------------------------
def _channels(pairs: list) -> str:
    return ", ".join(channel_lanes.lane_label(t, c) for t, c in pairs) or "none"


def _mid(d: dict, key: str) -> str:
    s = d[key]
    return f"{s['median']:+.1f} µs (median; {s['min']:+.1f} to {s['max']:+.1f})" if s else "n/a"


def run_lines(run: dict) -> str:
    """One design's comparison in words, every number from its frames."""
    d = run_differences(run)
    n = len(run["extra"]["timeline"])
    if not d["frames"]:
        return f"{run['design']}: no frame was matched to CUPTI records ({'; '.join(run['cupti']['problems'])})."
    copy_ch = sorted({(t, c) for t, c in d["channels"] if t == "async_memcpy"})
    work_ch = sorted({(t, c) for t, c in d["channels"] if t != "async_memcpy"})
    res = "within" if abs(d["copy_diff"]["median"]) <= EVENT_RESOLUTION_US else "more than"
    busy = d["busy"]["median"] / d["processing_cupti"]["median"] if d["processing_cupti"]["median"] > 0 else 0.0
    text = (f"{run['design']}: {d['frames']} of {n} frames matched, on {d['streams']} stream(s); their copies ran on "
            f"{_channels(copy_ch)}, their kernels on {_channels(work_ch)}. With each frame aligned at its copy's "
            f"start, the events' copy bar minus CUPTI's copy is {_mid(d, 'copy_diff')}, {res} the events' stated "
            f"{EVENT_RESOLUTION_US} µs resolution at the median. CUPTI puts {d['gap']['median']:.1f} µs (median) between "
            f"the copy's end and the frame's first kernel, which the events' bar counts as processing; the events' "
            f"processing (copied → done) minus CUPTI's (copy end → last kernel end) is {_mid(d, 'processing_diff')}, "
            f"and a kernel of the frame was running for {busy:.0%} of CUPTI's span (median frame). Over the run the "
            f"two clocks' offset moved by {d['offset_wander']:.1f} µs. Copies and kernels ran at the same time for "
            f"{d['overlap_cupti_us']:.0f} µs by CUPTI and {d['overlap_events_us']:.0f} µs by the events.")
    if run["cupti"]["problems"]:
        text += " The matching says: " + "; ".join(run["cupti"]["problems"]) + "."
    return text


def difference_lines(ev: Evidence) -> list[str]:
    """What the two timelines of the same frames show differently, per design, in the Evidence's words;
    without data, why there is none."""
    if not ev.ok:
        return [ev.missing or f"{EXPERIMENT_ID}: no data"]
    return channel_lanes.skip_note(ev) + [f"The same frames {ev.said}, from CUDA events and from CUPTI:"] + [
        "• " + run_lines(run) for run in ev.require()["runs"]]


DIFFERENCE_HEADERS = ("design", "frames matched", "streams", "channels", "copy µs: events / CUPTI",
                      "copy end → first kernel µs (CUPTI)", "processing µs: events / CUPTI",
                      "clock offset wander µs", "copy-kernel overlap µs: events / CUPTI")


def difference_rows(ev: Evidence) -> list[tuple]:
    """The table of run_differences, one row per design (medians over the matched frames)."""
    rows = []
    for run in ev.require()["runs"]:
        d = run_differences(run)
        if not d["frames"]:
            rows.append((run["design"], 0, "", "", "", "", "", "", ""))
            continue
        rows.append((run["design"], f"{d['frames']} of {len(run['extra']['timeline'])}", d["streams"],
                     _channels(d["channels"]),
                     f"{d['copy_events']['median']:.1f} / {d['copy_cupti']['median']:.1f}", f"{d['gap']['median']:.1f}",
                     f"{d['processing_events']['median']:.1f} / {d['processing_cupti']['median']:.1f}",
                     f"{d['offset_wander']:.1f}", f"{d['overlap_events_us']:.0f} / {d['overlap_cupti_us']:.0f}"))
    return rows


# -- what tracing costs ---------------------------------------------------------------------------
def overhead_summary(data: dict) -> list[dict]:
    """Per design, with CUPTI on and off: the runs' median latencies (µs), their median and range, the
    event-timed copy and processing medians, and the CUPTI records per run."""
    out = []
    runs = data["overhead"]["runs"]
    for design in dict.fromkeys(r["design"] for r in runs):
        for on in (True, False):
            mine = [r for r in runs if r["design"] == design and r["cupti"] == on]
            if not mine:
                continue
            p50 = [r["p50_us"] for r in mine]
            out.append({"design": design, "cupti": on, "runs": len(mine), "p50_us": float(np.median(p50)),
                        "lo_us": min(p50), "hi_us": max(p50),
                        "copy_us": float(np.median([r["copy_us_p50"] or 0.0 for r in mine])),
                        "kernel_us": float(np.median([r["kernel_us_p50"] or 0.0 for r in mine])),
                        "records": float(np.median([r["records"] for r in mine]))})
    return out


OVERHEAD_HEADERS = ("design", "CUPTI", "runs", "median latency ms (median of runs)", "run medians ms: range",
                    "copy µs (events)", "processing µs (events)", "CUPTI records per run")


def overhead_rows(ev: Evidence) -> list[tuple]:
    return [(s["design"], "on" if s["cupti"] else "off", s["runs"], f"{s['p50_us'] / 1e3:.3f}",
             f"{s['lo_us'] / 1e3:.3f} – {s['hi_us'] / 1e3:.3f}", f"{s['copy_us']:.1f}", f"{s['kernel_us']:.1f}",
             f"{s['records']:.0f}") for s in overhead_summary(ev.require())]


def overhead_lines(ev: Evidence) -> list[str]:
    """CUPTI's cost on the pipeline's latency, per design, and whether it is beyond the spread of the
    repeats (the ranges of the runs' medians with and without CUPTI do not overlap)."""
    if not ev.ok:
        return ["No runs with and without CUPTI to compare: " + (ev.missing or f"{EXPERIMENT_ID} has no data")]
    data = ev.require()
    by = {(s["design"], s["cupti"]): s for s in overhead_summary(data)}
    out = [f"Latency with and without CUPTI, {ev.said} ({data['overhead']['repeats']} runs of "
           f"{data['overhead']['frames']} frames each way, alternating):"]
    for design in dict.fromkeys(d for d, _ in by):
        on, off = by.get((design, True)), by.get((design, False))
        if on is None or off is None:
            continue
        diff = on["p50_us"] - off["p50_us"]
        apart = on["lo_us"] > off["hi_us"] or on["hi_us"] < off["lo_us"]
        out.append(f"• {design}: median {on['p50_us'] / 1e3:.3f} ms with CUPTI, {off['p50_us'] / 1e3:.3f} ms without "
                   f"({diff:+.1f} µs, {diff / off['p50_us']:+.1%}); "
                   + ("beyond the spread of the repeats (their ranges do not overlap)" if apart else
                      "within the spread of the repeats (their ranges overlap), so these runs show no cost of tracing "
                      "that stands out from run-to-run variation")
                   + f"; about {on['records']:.0f} CUPTI records per traced run.")
    return out


# -- the figure: the two timelines of the same frames, one above the other ------------------------
def _event_bars(frames: list[dict]) -> dict[str, list[tuple]]:
    """{'copy H→D' / 'kernels': [(lane, frame, start ms, end ms)]} from the events, a lane per stream."""
    out: dict[str, list[tuple]] = {"copy H→D": [], "kernels": []}
    for f in sorted(frames, key=lambda f: f["seq"]):
        out["copy H→D"].append((f"events: stream {f['buffer']}", f["seq"], *f["copy_ms"]))
        out["kernels"].append((f"events: stream {f['buffer']}", f["seq"], *f["kernels_ms"]))
    return out


def _lane(channel_type: str, channel: int) -> str:
    return f"CUPTI: {channel_lanes.lane_label(channel_type, channel)}"


WORK_WORDS = {"kernel": "kernels", "memset": "memsets", "memcpy": "device copies"}


def _cupti_bars(frames: list[dict], offset_ns: float) -> dict[str, list[tuple]]:
    """The same from CUPTI, a lane per channel, on the events' clock (CUPTI's minus the median offset):
    the frame's copy, its kernels, and any memset or other copy the processing made."""
    out: dict[str, list[tuple]] = {"copy H→D": [], "kernels": []}
    for f in frames:
        for what, rec in [("copy H→D", f["copy"])] + [(WORK_WORDS.get(w[4], w[4]), w) for w in f["work"]]:
            r = item(rec)
            out.setdefault(what, [])
            lane = _lane(r["channel_type"], r["channel"])
            out[what].append((lane, f["seq"], (r["start_ns"] - offset_ns) / 1e6, (r["end_ns"] - offset_ns) / 1e6))
    return out


def beside_figure(ev: Evidence, design: str, first: int = 12):
    """The first `first` frames of one design of radar.cupti_timeline twice, on one time axis: in the
    upper lanes the CUDA events' bars (a lane per stream: the copy, then copied → done); in the lower
    lanes CUPTI's records of the same frames (a lane per hardware channel: the copy and every kernel),
    shifted onto the events' clock by the median offset between the two (run_differences)."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import PALETTE, CourseFigure

    run = _run_of(ev, design)
    d = run_differences(run)
    if not d["frames"]:
        raise RadarInputError(f"{EXPERIMENT_ID}: no frame of {design} was matched to CUPTI records")
    start = min(f["seq"] for f in run["extra"]["timeline"])
    events = _event_bars([f for f in run["extra"]["timeline"] if f["seq"] < start + first])
    cupti = _cupti_bars([f for f in run["cupti"]["frames"] if f["seq"] < start + first], d["offset_ns"])
    fig = go.Figure()
    for bars, who, pattern in ((cupti, "CUPTI", "/"), (events, "events", "")):
        for k, (what, rs) in enumerate(bars.items()):
            fig.add_bar(name=f"{what} ({who})", orientation="h", y=[r[0] for r in rs], x=[r[3] - r[2] for r in rs],
                        base=[r[2] for r in rs], customdata=[r[1] for r in rs],
                        marker={"color": PALETTE[k % len(PALETTE)], "pattern": {"shape": pattern}},
                        hovertemplate="frame %{customdata}: %{base:.3f} → +%{x:.3f} ms<extra></extra>")
    # plotly draws the first category at the bottom: CUPTI's channels (copy, then compute) below the streams
    shown = {r[0] for rs in cupti.values() for r in rs}
    lanes = [x for x in (_lane(t, c) for t, c in d["channels"]) if x in shown][::-1] + sorted(
        {r[0] for rs in events.values() for r in rs}, reverse=True)
    fig.add_hline(y=len(shown) - 0.5, line_dash="dot", line_color="grey")
    fig.update_layout(title=f"Timeline of the {design} pipeline, {run['frame_bytes'] >> 20} MiB every "
                            f"{run['period_s'] * 1e3:g} ms: the same frames from CUDA events (upper lanes, one per "
                            "stream) and from CUPTI (lower lanes, one per hardware channel)",
                      barmode="overlay", height=200 + 34 * len(lanes),
                      xaxis_title="time since the run's origin event (ms; CUPTI shifted by the median clock offset)",
                      yaxis={"title": "lane", "categoryorder": "array", "categoryarray": lanes})
    return CourseFigure(fig, ev.parts)
