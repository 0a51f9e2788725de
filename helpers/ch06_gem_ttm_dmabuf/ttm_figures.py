"""The TTM model's figures, its row tables and its panel (Chapter 6, Lab 4): VRAM occupancy, evictions and
bytes moved, the buddy allocator's VRAM map, and a widget panel that redraws them.

The model itself (helpers.models.ttm) draws nothing: figures belong above the models, so a
model never imports the presentation layer. Every figure says it is simulated, and names the
recording its move costs came from when they came from one.
"""

from __future__ import annotations

from helpers.core.errors import InputTypeError
from helpers.core.mode import Mode
from helpers.models.buddy import BuddyAllocator
from helpers.models.ttm import POLICIES, WORKLOADS, GiB, LinkModel, MiB, Run, TTMModel, simulate
from helpers.presentation import widgets
from helpers.presentation.figures import CourseFigure


def _provenance(run: Run) -> list[tuple]:
    parts = [(Mode.SIMULATED, f"TTM + drm_buddy model, workload '{run.workload}', policy '{run.policy}', "
                              f"seed {run.seed}; moves are simulated")]
    if run.link.source.startswith("pinned-copy fit of"):
        parts.append((Mode.REPLAY, f"{run.link.source.removeprefix('pinned-copy fit of ')} — used only for the "
                                   f"move-cost parameters ({run.link.h2d_bytes_per_s / 1e9:.1f} GB/s h2d, "
                                   f"{run.link.latency_s * 1e6:.1f} us latency)"))
    return parts


def figure_occupancy(run: Run):
    """VRAM and GTT in use, and VRAM fragmentation, against the operation number."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = [t["step"] for t in run.timeline]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=x, y=[t["vram_used"] / MiB for t in run.timeline], name="VRAM in use (MiB)",
                             fill="tozeroy"), secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[t["gtt_used"] / MiB for t in run.timeline], name="GTT in use (MiB)"),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[t["fragmentation"] for t in run.timeline], name="VRAM fragmentation",
                             line={"dash": "dot"}), secondary_y=True)
    fig.add_hline(y=run.vram_bytes / MiB, line_dash="dash", annotation_text="VRAM size")
    fig.update_layout(title=f"VRAM occupancy over time ({run.vram_bytes // MiB} MiB VRAM)", height=420)
    fig.update_xaxes(title="operation number (model time)")
    fig.update_yaxes(title="MiB", secondary_y=False)
    fig.update_yaxes(title="1 - largest free block / free bytes", range=[0, 1], secondary_y=True)
    return CourseFigure(fig, _provenance(run))


def figure_moves(run: Run):
    """Cumulative evictions and bytes moved over the link against the operation number."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = [t["step"] for t in run.timeline]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=x, y=[t["link_bytes"] / MiB for t in run.timeline], name="bytes over the link (MiB)"),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=[t["evictions"] for t in run.timeline], name="evictions",
                             line={"dash": "dot"}), secondary_y=True)
    fig.update_layout(title=f"Evictions and bytes moved (modelled copy time {run.totals['seconds'] * 1e3:.2f} ms)",
                      height=420)
    fig.update_xaxes(title="operation number (model time)")
    fig.update_yaxes(title="cumulative MiB over PCIe", secondary_y=False)
    fig.update_yaxes(title="cumulative evictions", secondary_y=True)
    return CourseFigure(fig, _provenance(run))


def figure_vram_map(model_or_run_blocks: BuddyAllocator, title: str = "VRAM map"):
    """One bar per buddy leaf block, coloured free/allocated, along the VRAM address range."""
    import plotly.graph_objects as go

    a = model_or_run_blocks
    if not isinstance(a, BuddyAllocator):
        raise InputTypeError(f"expected a BuddyAllocator, got {type(a).__name__}")
    fig = go.Figure()
    for state, colour in (("allocated", "#b2182b"), ("free", "#d9d9d9")):
        bl = [b for b in a.leaves() if b.state == state]
        fig.add_trace(go.Bar(x=[b.size / MiB for b in bl], base=[b.offset / MiB for b in bl],
                             y=["VRAM"] * len(bl), orientation="h", name=state,
                             marker={"color": colour, "line": {"width": 1, "color": "white"}},
                             hovertext=[f"{b.offset:#x}, order {b.order}, {b.size // 1024} KiB" for b in bl]))
    fig.update_layout(title=title, barmode="overlay", height=220, xaxis_title="VRAM offset (MiB)")
    return CourseFigure(fig, [(Mode.SIMULATED, f"drm_buddy model, {a.size // MiB} MiB, chunk {a.chunk_size // 1024} KiB")])


def panel(link: LinkModel | None = None):
    """An ipywidgets panel: VRAM size, workload, policy and seed; both figures redraw.

    Optional: the chapter runs top to bottom without it (and without ipywidgets).

    The figures are written into the Output widget's state (helpers.presentation.widgets.show), never
    captured with ``with out:``, which can stall a headless executor (see helpers.presentation.widgets).
    """
    import ipywidgets as w

    vram = w.Dropdown(options=[("64 MiB", 64 * MiB), ("256 MiB", 256 * MiB), ("1 GiB", GiB)], value=256 * MiB,
                      description="VRAM")
    wl = w.Dropdown(options=list(WORKLOADS), value="hot-cold", description="workload")
    pol = w.Dropdown(options=sorted(POLICIES), value="lru", description="policy")
    seed = w.IntSlider(value=1, min=1, max=20, description="seed")
    out = w.Output()

    def redraw(*_):
        run = simulate(wl.value, vram.value, policy=pol.value, seed=seed.value, link=link)
        t = run.totals
        line = (f"{t['evictions']} evictions, {t['link_bytes'] / MiB:.0f} MiB over the link, "
                f"{t['seconds'] * 1e3:.2f} ms modelled copy time, {run.failures} failed operations\n")
        widgets.show(out, line, figure_occupancy(run), figure_moves(run))

    for c in (vram, wl, pol, seed):
        c.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([vram, wl]), w.HBox([pol, seed]), out])


def move_rows(model: TTMModel) -> list[tuple]:
    """One row per move the model made: step, BO, from, to, why, and the jobs it waited for."""
    return [(mv.step, mv.bo, str(mv.src), str(mv.dst), mv.reason, ", ".join(mv.waited_for) or "-")
            for mv in model.moves]


def bo_rows(model: TTMModel) -> list[tuple[str, str, str, str]]:
    """One row per BO: where it is, what moved it (and which fences each move waited for), and the
    fences it still carries."""
    rows = []
    for name, bo in sorted(model.bos.items()):
        moved = [f"{mv.reason} {mv.src}→{mv.dst}" + (f" after waiting for {', '.join(mv.waited_for)}"
                                                     if mv.waited_for else "")
                 for mv in model.moves if mv.bo == name]
        rows.append((name, str(bo.domain), "; ".join(moved) or "not moved", ", ".join(sorted(bo.fences)) or "none"))
    return rows
