"""Chapter 9's flag design against the CPU-launched designs, in one recorded run (`radar.flag_wait`).

The flag design (helpers.models.radar.flagwait) queues each frame's work ahead behind a GPU-side wait on a
flag in pinned host memory; `registered` and `pipelined` launch each frame from the CPU when it arrives.
All three run here at the source question's rates (4 MB and 16 MB every 8 ms), interleaved, `repeats`
times each, so a verdict about a small difference can rest on the spread between repeats.
"""

from __future__ import annotations

import numpy as np

from helpers.core import validate
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.models.radar.designs import FLAG_DESIGN, MAX_DEPTH, SEED_PERIOD_S, SEED_SIZES
from helpers.models.radar.flagwait import FlagConfig, queue_frame, run_flag_pipeline
from helpers.models.radar.metrics import summarize
from helpers.models.radar.pipeline import PipelineConfig, run_pipeline
from helpers.models.radar.ring import CardHost

COMPARED = ("registered", "pipelined", FLAG_DESIGN)
RECORDED_FRAMES = 500  # per run: 3 designs x 2 sizes x REPEATS runs of 4 s each
REPEATS = 3
QUICK = {"frames": 60, "repeats": 2}
DEPTH = 3

PARAMS = {"frames": validate.count(20, 5000), "repeats": validate.count(2, 10),
          "depth": validate.count(1, MAX_DEPTH)}


def _one(design: str, n: int, frames: int, depth: int, host: CardHost, code) -> dict:
    if design == FLAG_DESIGN:
        r = run_flag_pipeline(FlagConfig(frame_bytes=n, period_s=SEED_PERIOD_S, frames=frames, depth=depth,
                                         code=code, progress=True, host=host))
    else:
        r = run_pipeline(PipelineConfig(design=design, frame_bytes=n, period_s=SEED_PERIOD_S, frames=frames,
                                        progress=True, host=host))
    return r.to_dict()


@experiment("radar.flag_wait", chapter=9, needs=(GPU,), params=PARAMS,
            title="Radar pipeline: the GPU waits on a flag in pinned memory (cuStreamWaitValue32) against "
                  "CPU-launched registered and pipelined, 4 MB and 16 MB per 8 ms, repeated")
def flag_wait_experiment(quick: bool, frames: int = RECORDED_FRAMES, repeats: int = REPEATS, depth: int = DEPTH,
                         code=queue_frame) -> dict:
    """Every design of COMPARED at both seed sizes, `repeats` rounds (each round runs them all, so a slow
    minute of the machine touches every design); what the device says about stream memory operations."""
    from helpers.measure import driver_api

    if quick:
        frames, repeats = min(frames, QUICK["frames"]), min(repeats, QUICK["repeats"])
    support = driver_api.memop_support()
    runs = []
    with CardHost() as host:
        for i in range(repeats):
            for n in SEED_SIZES:
                for design in COMPARED:
                    r = _one(design, n, frames, depth, host, code)
                    r["extra"]["repeat"] = i
                    r.pop("seq", None)
                    runs.append(r)
    return {"runs": runs, "frames": frames, "repeats": repeats, "depth": depth, "support": support}


# -- views ----------------------------------------------------------------------------------------
def run_stats(r: dict) -> dict:
    """One run's latency summary (ms), jitter (p99 - p50, ms) and CPU time per processed frame (µs)."""
    s = summarize(r["latency_us"], r["period_s"], r["dropped"], r["frames"])
    s["jitter_ms"] = s["p99_ms"] - s["p50_ms"] if s["n"] else None
    s["cpu_us_per_frame"] = 1e6 * r["cpu_s"] / s["n"] if s["n"] else None
    return s


STATS = ("p50_ms", "p99_ms", "max_ms", "jitter_ms", "cpu_us_per_frame")


def spread(data: dict) -> dict:
    """{(design, frame_bytes): {stat: (median over repeats, min, max)}, plus misses and dropped summed}."""
    groups: dict = {}
    for r in data["runs"]:
        groups.setdefault((r["design"], r["frame_bytes"]), []).append(run_stats(r))
    out = {}
    for key, stats in groups.items():
        row = {}
        for k in STATS:
            v = [s[k] for s in stats if s[k] is not None]
            row[k] = (float(np.median(v)), float(min(v)), float(max(v))) if v else None
        row.update(misses=sum(s["misses"] for s in stats), dropped=sum(s["dropped"] for s in stats),
                   frames=sum(s["n"] for s in stats), repeats=len(stats))
        out[key] = row
    return out


def _cell(v, fmt: str = "{:.3f}") -> str:
    return "—" if v is None else f"{fmt.format(v[0])} [{fmt.format(v[1])}–{fmt.format(v[2])}]"


FLAG_HEADERS = ("design", "frame", "repeats", "p50 ms", "p99 ms", "max ms", "jitter (p99−p50) ms",
                "CPU µs / frame", "misses", "dropped")


def flag_rows(ev: Evidence) -> list[tuple]:
    """A row per design and size: median over repeats [min–max across repeats]."""
    rows = []
    for (design, n), row in sorted(spread(ev.require()).items(), key=lambda kv: (kv[0][1], COMPARED.index(kv[0][0]))):
        rows.append((design, f"{n >> 20} MiB", row["repeats"], _cell(row["p50_ms"]), _cell(row["p99_ms"]),
                     _cell(row["max_ms"]), _cell(row["jitter_ms"]), _cell(row["cpu_us_per_frame"], "{:.0f}"),
                     row["misses"], row["dropped"]))
    return rows


def flag_figure(ev: Evidence):
    """Median latency and CPU per frame of each design, bars from the lowest to the highest repeat."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from helpers.presentation.figures import MARKERS, PALETTE, CourseFigure

    sp = spread(ev.require())
    fig = make_subplots(rows=1, cols=2, subplot_titles=("median latency (ms)", "CPU time per frame (µs)"))
    for i, design in enumerate(COMPARED):
        for col, stat in ((1, "p50_ms"), (2, "cpu_us_per_frame")):
            pts = [(f"{n >> 20} MiB", sp[(design, n)][stat]) for n in SEED_SIZES
                   if (design, n) in sp and sp[(design, n)][stat]]
            fig.add_trace(go.Scatter(
                x=[p[0] for p in pts], y=[p[1][0] for p in pts], mode="markers", name=design,
                legendgroup=design, showlegend=col == 1,
                marker={"color": PALETTE[i], "symbol": MARKERS[i], "size": 11},
                error_y={"type": "data", "symmetric": False, "array": [p[1][2] - p[1][0] for p in pts],
                         "arrayminus": [p[1][0] - p[1][1] for p in pts]}), row=1, col=col)
    fig.update_layout(title=ev.caption("The GPU waits on a flag vs CPU-launched designs, every 8 ms"),
                      height=440, xaxis_title="frame size", xaxis2_title="frame size")
    return CourseFigure(fig, ev.parts)


def _compare(a: tuple, b: tuple, what: str, unit: str, fmt: str) -> str:
    """One sentence: a vs b on one statistic, ranked only when their repeat ranges do not overlap."""
    if a[1] > b[2] or b[1] > a[2]:
        word = "lower" if a[0] < b[0] else "higher"
        return (f"{what}: {fmt.format(a[0])} {unit} against {fmt.format(b[0])} {unit}, {word}, beyond the spread "
                f"of the repeats ({fmt.format(a[1])}–{fmt.format(a[2])} vs {fmt.format(b[1])}–{fmt.format(b[2])})")
    return (f"{what}: {fmt.format(a[0])} {unit} against {fmt.format(b[0])} {unit}, within the spread of the "
            f"repeats ({fmt.format(a[1])}–{fmt.format(a[2])} vs {fmt.format(b[1])}–{fmt.format(b[2])}): not ranked")


def show(ev: Evidence) -> list:
    """What section 11 displays: the table, the figure and the verdicts against registered and pipelined
    (or, for an Evidence without data, the line that says why)."""
    from helpers.presentation import figures

    if not ev.ok:
        return [str(ev.missing or ev.why)]
    data = ev.require()
    table = figures.Table(flag_rows(ev), FLAG_HEADERS, caption=ev.caption(
        f"Each design {data['repeats']} times, {data['frames']:,} frames a run: median over the repeats "
        "[lowest–highest repeat]"))
    return [table, flag_figure(ev), "\n".join(flag_verdicts(ev) + flag_verdicts(ev, "pipelined"))]


def flag_verdicts(ev: Evidence, against: str = "registered") -> list[str]:
    """The flag design against `against` at each size, on median latency, p99 and CPU per frame; a
    difference is called only when the ranges over the repeats do not overlap."""
    data = ev.require()
    sp = spread(data)
    lines = []
    for n in SEED_SIZES:
        f, o = sp.get((FLAG_DESIGN, n)), sp.get((against, n))
        if not f or not o:
            lines.append(f"{n >> 20} MiB: no runs of both {FLAG_DESIGN} and {against}.")
            continue
        parts = [_compare(f[k], o[k], label, unit, fmt) for k, label, unit, fmt in
                 (("p50_ms", "median", "ms", "{:.3f}"), ("p99_ms", "p99", "ms", "{:.3f}"),
                  ("cpu_us_per_frame", "CPU per frame", "µs", "{:.0f}")) if f[k] and o[k]]
        lines.append(f"{n >> 20} MiB every 8 ms, {FLAG_DESIGN} (queue depth {data['depth']}) vs {against}, "
                     f"{f['repeats']} repeats: " + "; ".join(parts) + f". Misses {f['misses']} vs {o['misses']}, "
                     f"drops {f['dropped']} vs {o['dropped']}.")
    return lines
