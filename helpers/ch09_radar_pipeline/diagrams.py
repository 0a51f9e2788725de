"""Chapter 9's pictures: latency over time and its distribution, the timeline (Gantt) of the copies and
kernels from CUDA events, a range-Doppler map, the pipeline diagram, the model's sweep and its
comparison with the measured runs, and the ipywidgets panel that runs one design (live, or the model).

Every figure takes its provenance from the Evidence (or says it is the model's, SIMULATED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from helpers.core import validate
from helpers.core.errors import CourseError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.models.radar import metrics, simulator
from helpers.models.radar.designs import DESIGNS, RadarInputError
from helpers.models.radar.simulator import MachineParams, breaking_rate

if TYPE_CHECKING:
    from helpers.course import Context


def latency_figure(runs: list[dict], parts, title: str = "End-to-end latency of every frame"):
    """Latency over time, one trace per run, with the deadline drawn."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    fig = go.Figure()
    for r in runs:
        x = np.asarray(r["seq"]) * r["period_s"]
        fig.add_trace(go.Scattergl(x=x, y=np.asarray(r["latency_us"]) / 1e3, mode="markers", marker={"size": 3},
                                   name=f"{r['design']} {r['frame_bytes'] >> 20} MiB"))
    if runs:
        fig.add_hline(y=runs[0]["period_s"] * 1e3, line_dash="dash", annotation_text="deadline (next frame)")
    fig.update_layout(title=title, xaxis_title="time since the first frame (s)",
                      yaxis_title="latency (ms)", yaxis_type="log", height=420)
    return CourseFigure(fig, parts)


def histogram_figure(runs: list[dict], parts, title: str = "Latency distribution"):
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    fig = go.Figure()
    for r in runs:
        fig.add_trace(go.Histogram(x=np.asarray(r["latency_us"]) / 1e3, nbinsx=80, opacity=0.6,
                                   name=f"{r['design']} {r['frame_bytes'] >> 20} MiB"))
    fig.update_layout(title=title, barmode="overlay", xaxis_title="latency (ms)",
                      yaxis_title="frames", yaxis_type="log", height=400)
    return CourseFigure(fig, parts)


# -- the timeline (Gantt) --------------------------------------------------------------------------
def timeline_rows(run: dict) -> list[tuple]:
    """(lane, what, frame, start ms, end ms) for every copy, kernel span and host event of one run."""
    rows = []
    for f in run["extra"]["timeline"]:
        lane = f"buffer {f['buffer']}"
        rows.append((f"{lane}: copy", "copy H→D", f["seq"], f["copy_ms"][0], f["copy_ms"][1]))
        rows.append((f"{lane}: kernels", "kernels", f["seq"], f["kernels_ms"][0], f["kernels_ms"][1]))
        rows.append(("host", "frame ready → seen done", f["seq"], f["ready_ms"], f["seen_ms"]))
    return rows


def timeline_figure(ev: Evidence, design: str, first: int = 12):
    """A Gantt chart of the first `first` frames of one design in radar.timeline: bars from CUDA event
    times (copy, then the kernels queued behind it) and the host's view (frame ready → seen done)."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    run = next((r for r in ev.require()["runs"] if r["design"] == design), None)
    if run is None:
        raise RadarInputError(f"radar.timeline has no run of design {design!r}")
    rows = [r for r in timeline_rows(run) if r[2] < min(x["seq"] for x in run["extra"]["timeline"]) + first]
    fig = go.Figure()
    for what in ("copy H→D", "kernels", "frame ready → seen done"):
        rs = [r for r in rows if r[1] == what]
        fig.add_bar(name=what, orientation="h", y=[r[0] for r in rs], x=[r[4] - r[3] for r in rs],
                    base=[r[3] for r in rs], customdata=[r[2] for r in rs],
                    hovertemplate="frame %{customdata}: %{base:.2f} → +%{x:.2f} ms<extra></extra>")
    fig.update_layout(title=f"Timeline of the {design} pipeline, {run['frame_bytes'] >> 20} MiB every "
                            f"{run['period_s'] * 1e3:g} ms (CUDA event times)", barmode="overlay",
                      xaxis_title="time since the run's origin event (ms)", yaxis_title="lane", height=380)
    return CourseFigure(fig, ev.parts)


def map_figure(rd, ranges: int = 900, max_cells: int = 20_000):
    """The range-Doppler map of one frame in dB (its first `ranges` range bins), as a heatmap whose cells
    are the maximum over square blocks of bins (figures.block_max): a target's peak keeps its power, and
    the page stays light (the full 512 x 900 grid embedded 8.6 MB). The title says what a cell is."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure, block_max

    db = 10 * np.log10(np.asarray(rd)[:, :ranges] + 1e-3)
    z, sy, sx = block_max(db, max_cells)
    cell = f", each cell the maximum of {sy} x {sx} bins" if sy * sx > 1 else ""
    fig = go.Figure(go.Heatmap(z=np.round(z, 1).astype(np.float32), x=np.arange(z.shape[1]) * sx, y=np.arange(z.shape[0]) * sy,
                               colorscale="Viridis", colorbar={"title": "dB"}))
    fig.update_layout(title=f"Range-Doppler map of one frame{cell}", xaxis_title="range bin",
                      yaxis_title="Doppler bin", height=420)
    return CourseFigure(fig, [(Mode.SIMULATED, "synthetic echoes (three targets in noise), processed with NumPy here")])


def pipeline_diagram():
    """The radar pipeline as stages on a clock: card → ring → copy engine → SMs → host sees done."""
    from helpers.presentation.diagrams import Diagram

    d = Diagram("The radar pipeline, one frame",
                "Every period the capture card (a separate process) writes a frame into a ring slot in host "
                "memory and stamps it. The consumer takes it, queues a copy on a stream (the copy engine reads the "
                "slot by DMA) and the kernels behind it (range compression and Doppler FFTs on the SMs), with CUDA "
                "events before the copy, after it and after the kernels. When the last event completes the "
                "host releases the slot and the frame's latency is the host's clock minus the card's stamp.",
                width=900, height=300)
    d.box("card", "capture card\n(a process)", "device", 10, 30, 140, 54)
    d.box("ring", "ring slot\n(host memory)", "memory", 190, 30, 140, 54)
    d.box("cpu", "consumer thread\n(take, issue, wait)", "cpu", 190, 190, 160, 54)
    d.box("ce", "copy engine", "gpu", 400, 30, 130, 54)
    d.box("vram", "frame in VRAM", "vram", 570, 30, 130, 54)
    d.box("sm", "SMs: FFTs", "gpu", 740, 30, 140, 54)
    d.arrow("card", "ring", "write + stamp", "data")
    d.arrow("ring", "ce", "DMA read", "data")
    d.arrow("ce", "vram", "", "data")
    d.arrow("vram", "sm", "kernels", "data")
    d.arrow("cpu", "ce", "memcpyAsync + events", "control")
    d.arrow("sm", "cpu", "event done: spin, poll or block", "completion")
    d.arrow("cpu", "ring", "release slot", "control", bend=-30)
    d.note(400, 130, "events: start · copied · done  →  copy time, kernel time")
    d.note(400, 280, "latency = host sees 'done' − card's stamp;  a miss: latency > period")
    return d


# -- the model beside the runs, and the panel -------------------------------------------------
def model_vs_measured_rows(measured: list[dict], params: MachineParams) -> list[tuple]:
    rows = []
    for r in measured:
        m = simulator.simulate(params, r["design"], r["frame_bytes"], r["period_s"], 200, buffers=r["buffers"])
        ms = m["summary"]
        s = metrics.result_summary(r)
        rows.append((r["design"], f"{r['frame_bytes'] >> 20} MiB", f"{s['p50_ms']:.3f}", f"{ms['p50_ms']:.3f}",
                     f"{ms['p50_ms'] / s['p50_ms']:.2f}"))
    return rows


def sweep_figure(params: MachineParams, sizes=(1 << 20, 4 << 20, 16 << 20, 64 << 20)):
    """Model: the highest sustainable data rate (GB/s) of each design against frame size."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    fig = go.Figure()
    for d in DESIGNS:
        rates = [n / breaking_rate(params, d, n) / 1e9 for n in sizes]
        fig.add_trace(go.Scatter(x=[n >> 20 for n in sizes], y=rates, mode="lines+markers", name=d))
    rates = [n / breaking_rate(params, "pipelined", n, deadline_periods=2) / 1e9 for n in sizes]
    fig.add_trace(go.Scatter(x=[n >> 20 for n in sizes], y=rates, mode="lines+markers", line={"dash": "dot"},
                             name="pipelined, deadline 2 periods"))
    fig.add_hline(y=2.0, line_dash="dash", annotation_text="source question 002: 2 GB/s")
    fig.update_layout(title="Highest data rate each design sustains with no miss (model)",
                      xaxis_title="frame size (MiB)", xaxis_type="log", yaxis_title="data rate (GB/s)", height=420)
    return CourseFigure(fig, [(Mode.SIMULATED, f"discrete-event model with parameters from {params.source}")])


def panel_items(ctx: Context, params: MachineParams | None, frame_bytes: int, period_s: float, design: str,
                buffers: int, frames: int = 500) -> list:
    """What the panel shows for one choice: a live run of radar.<design> through ctx.get, or
    (without a GPU) the discrete-event model's run. Bad choices raise in both modes."""
    from helpers.presentation.figures import Table

    validate.choice(design, "design", DESIGNS)
    ev = ctx.get(f"radar.{design}", frames=frames, frame_bytes=frame_bytes, period_s=period_s,
                 buffers=buffers)
    if ev.live:
        r = ev.data["runs"][0]
        parts = ev.parts
        note = ev.caption(f"one run of {frames} frames")
    else:
        if params is None:
            return ["No GPU and no recorded radar runs to drive the model: nothing to show."]
        r = simulator.simulate(params, design, frame_bytes, period_s, frames, buffers=buffers, jitter=0.05, seed=1)
        r.update(cpu_s=0.0, wall_s=frames * period_s, seq=list(range(len(r["latency_us"]))))
        parts = [(Mode.SIMULATED, f"discrete-event model, parameters from {params.source}")]
        note = "SIMULATED — no GPU here: the discrete-event model's prediction, not a measurement"
    table = Table(metrics.summary_rows([r]), metrics.SUMMARY_HEADERS, caption=note)
    return [table, latency_figure([r], parts, f"{design}, {frame_bytes / 2**20:g} MiB every "
                                              f"{period_s * 1e3:g} ms, {buffers} buffer(s)")]


def panel(ctx: Context, params: MachineParams | None):
    """The ipywidgets panel: frame size, period, design, buffer count, a run button, an Output."""
    import ipywidgets as w

    from helpers.presentation.widgets import show

    size = w.Dropdown(options=[("1 MiB", 1 << 20), ("4 MiB", 4 << 20), ("8 MiB", 8 << 20),
                               ("16 MiB", 16 << 20), ("32 MiB", 32 << 20)], value=4 << 20, description="frame")
    period = w.Dropdown(options=[("1 ms", 1e-3), ("2 ms", 2e-3), ("4 ms", 4e-3), ("8 ms", 8e-3),
                                 ("16 ms", 16e-3)], value=8e-3, description="period")
    design = w.Dropdown(options=list(DESIGNS), value="registered", description="design")
    bufs = w.IntSlider(value=1, min=1, max=4, description="buffers")
    button = w.Button(description="run", button_style="primary")
    out = w.Output()

    def run(_=None):
        show(out, "running…")
        try:
            items = panel_items(ctx, params, size.value, period.value, design.value, bufs.value)
        except CourseError as exc:
            items = [f"{type(exc).__name__}: {exc}"]
        show(out, *items)

    button.on_click(run)
    return w.VBox([w.HBox([size, period]), w.HBox([design, bufs, button]), out]), run
