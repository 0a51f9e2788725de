"""Tables, figures and verdicts for Chapter 8, so the notebook stays thin.

Everything takes the Evidence of a p2p experiment (`ctx.get("p2p.matrices")`, live with two
GPUs, else the two-GPU recording) or its data, and returns a `figures.Table`, a
`figures.CourseFigure` or text computed from the numbers. `topology_here` is the one live
part that works on any number of GPUs: this machine's own `nvidia-smi topo -m`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from helpers.ch08_peer_to_peer import p2p, topology
from helpers.core import gpu
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.presentation.figures import CourseFigure, Table

if TYPE_CHECKING:
    from helpers.course import Context

METHOD_WORDS = {"peer": "peer access on (direct)", "staged": "staged via pinned host memory",
                "driver": "cudaMemcpyPeer, peer access off"}


def topology_here(ctx: Context) -> tuple[str | None, str]:
    """This machine's `nvidia-smi topo -m` text and a note on it: live on any number of GPUs
    (one is enough to show how it is attached), nothing without a GPU (ctx: the course Context)."""
    if not ctx.live:
        return None, "no GPU here: the topology below is the recording's"
    try:
        text = topology.nvidia_smi_topo()
    except topology.TopologyError as exc:
        return None, str(exc)
    if text is None:
        return None, "nvidia-smi is not on PATH here"
    return text, f"live, {gpu.probe().device_count} GPU(s) here"


def topology_table(t: topology.Topology, caption: str) -> Table:
    rows = [(a, *(t.links[a][b] for b in t.devices)) for a in t.devices]
    return Table(rows, ("", *t.devices), caption)


def here_table(ctx: Context, text: str) -> Table:
    """This machine's topology (the text topology_here gave), captioned as measured now."""
    return topology_table(topology.parse(text), f"nvidia-smi topo -m (LIVE: measured now on {ctx.gpu_name})")


def legend_table(t: topology.Topology) -> Table:
    kinds = sorted({t.links[a][b] for a in t.devices for b in t.devices if a != b}, key=topology.rank)
    return Table([(k, topology.describe(k)) for k in kinds], ("link", "meaning"), "link kinds in this matrix")


def peer_table(matrix: list[list], caption: str) -> Table:
    n = len(matrix)
    rows = [(f"GPU{i}", *("—" if v is None else ("yes" if v else "no") for v in matrix[i])) for i in range(n)]
    return Table(rows, ("can access →", *(f"GPU{j}" for j in range(n))), caption)


def gbps_matrix(data: dict, method: str, way: str = "one", key: str = "large") -> list[list[float | None]]:
    """GB/s of each ordered pair (one direction's bytes over its own median time)."""
    n = data["sizes"][key]
    return [[None if t is None else n / t / 1e9 for t in row] for row in data["matrices"][method][way][key]]


def us_matrix(data: dict, method: str, way: str = "one", key: str = "small") -> list[list[float | None]]:
    return [[None if t is None else t * 1e6 for t in row] for row in data["matrices"][method][way][key]]


def matrix_rows(data: dict, key: str, unit: str, way: str = "one") -> list[tuple]:
    """One row per (method, src -> dst): the numbers the closing note and the tables show."""
    fn = gbps_matrix if unit == "GB/s" else us_matrix
    rows = []
    for method in p2p.METHODS:
        mat = fn(data, method, way, key)
        for i, row in enumerate(mat):
            for j, v in enumerate(row):
                if v is not None:
                    rows.append((METHOD_WORDS[method], f"GPU{i} → GPU{j}", f"{v:.1f}" if unit == "GB/s" else f"{v:.2f}"))
    return rows


def matrices_table(ev: Evidence, key: str, unit: str, way: str = "one") -> Table:
    n = ev.data["sizes"][key]
    what = "bandwidth" if unit == "GB/s" else "latency (median time of one copy)"
    dirs = "one direction at a time" if way == "one" else "both directions at once (per direction)"
    return Table(matrix_rows(ev.data, key, unit, way), ("path", "pair", unit), ev.caption(f"{what}, {n:,} B copies, {dirs}"))


def bandwidth_figure(ev: Evidence) -> CourseFigure:
    """Bars: large-copy bandwidth per method, one direction vs both directions (sum of both)."""
    d = ev.data
    fig = go.Figure()
    n = len(d["devices"])
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    for way, label in (("one", "one direction"), ("both", "both directions (sum)")):
        ys = []
        for method in p2p.METHODS:
            g = gbps_matrix(d, method, way, "large")
            vals = [g[i][j] + (g[j][i] if way == "both" else 0) for i, j in pairs if g[i][j] is not None]
            ys.append(float(np.mean(vals)) if vals else None)
        fig.add_bar(name=label, x=[METHOD_WORDS[m] for m in p2p.METHODS], y=ys)
    fig.update_layout(title=f"GPU to GPU copy bandwidth, {d['sizes']['large'] >> 20} MiB copies (mean over pairs)",
                      yaxis_title="GB/s (1e9 bytes/s)", barmode="group")
    return CourseFigure(fig, ev.parts)


def peer_vs_staged(d: dict, key: str = "large") -> float:
    """Mean over pairs of (staged time / peer time): how many times faster direct P2P is."""
    p, s = d["matrices"]["peer"]["one"][key], d["matrices"]["staged"]["one"][key]
    ratios = [s[i][j] / p[i][j] for i in range(len(p)) for j in range(len(p)) if i != j and p[i][j]]
    return float(np.mean(ratios))


def link_kind(topo: dict | None) -> str | None:
    """The link kind between GPU0 and GPU1 in a p2p.topology recording ('NV18', 'PIX', …), or None."""
    try:
        return topo["parsed"]["links"]["GPU0"]["GPU1"]
    except (KeyError, TypeError):
        return None


def source_verdict(d: dict, link: str | None, verb: str = "recorded") -> str:
    """Source question 002 saw its "peer to peer" copy about twice as fast as the copy through the
    host, over PCIe. Say what these data (`verb`: their Evidence's `said`, 'measured now on <GPU>' or
    'recorded on <machine>') show and what
    they can and cannot judge: data from
    one kind of link never judges a claim about another."""
    r = peer_vs_staged(d)
    n = d["sizes"]["large"]
    peer = float(np.mean([x for row in gbps_matrix(d, "peer") for x in row if x is not None]))
    legs = float(np.mean([n / t / 1e9 for t in d["host"]["d2h"]["large"] + d["host"]["h2d"]["large"]]))
    measured = (f"{verb[:1].upper()}{verb[1:]}: direct peer copies of {n >> 20} MiB are {r:.1f}x faster than staging through "
                f"pinned host memory (the direct path {peer:.0f} GB/s, one host leg {legs:.0f} GB/s, and "
                "staging needs two legs).")
    if link is None:
        return measured + " These data do not say how the GPUs are linked, so they cannot judge a PCIe claim."
    if link.startswith("NV"):
        return (measured + f" But the link is {link}: NVLink, which carries no PCIe at all, so this ratio says "
                "nothing about the source's PCIe claim. Judged on PCIe, a direct copy crosses the bus once and "
                "a staged one twice, which bounds the gain near 2x when both host legs run at link speed; and the "
                "source's own 'peer' copy was not a peer DMA (see the fold), so its 2x measured something else again.")
    return (measured + f" The link is {link} (PCIe): this is the kind of path the source's claim was about, "
            f"so the claim of about 2x is {'confirmed' if 1.5 <= r <= 2.6 else 'not what this machine shows'}.")


def capture_rows(frame_bytes: int, placements=("same_switch", "root_ports", "acs_redirect"),
                 seed: int = 1) -> list[dict]:
    """Deliver one frame by each route on each placement with the toy GPU; the model's costs."""
    from helpers.models.toygpu import ToyGPU
    from helpers.models.toygpu.capture import CaptureCard
    from helpers.models.toygpu.link import FabricParams

    frame = np.random.default_rng(seed).integers(0, 256, frame_bytes, dtype=np.uint8)
    vram = max(4 << 20, 1 << int(np.ceil(np.log2(frame_bytes * 4 + (1 << 20)))))
    g = ToyGPU(vram_bytes=vram, sysmem_bytes=vram, seed=seed)
    out = []
    try:
        for placement in placements:
            card = CaptureCard(g, FabricParams(placement=placement))
            for route in ("bounce", "peer"):
                dva = g.alloc_vram(frame_bytes)
                r = card.deliver(frame, dva, route)
                ok = bool(np.array_equal(g.download(dva, frame_bytes), frame))
                g.unmap(dva, frame_bytes)
                out.append({"placement": placement, "route": route, "root_complex_bytes": r.root_complex_bytes,
                            "dram_bytes": r.dram_bytes, "model_us": r.model_ns / 1e3, "page_runs": r.page_runs,
                            "rdma_pages_64k": rdma_pages(frame_bytes), "bytes_arrived_intact": ok})
    finally:
        g.close()
    return out


TOY_PAGE = 4096  # the toy GPU's MMU page (helpers/models/toygpu/regs.py PAGE_SIZE)
RDMA_PAGE = 64 << 10  # what nvidia_p2p_get_pages hands out: NVIDIA_P2P_PAGE_SIZE_64KB (nv-p2p.h)


def rdma_pages(nbytes: int) -> int:
    """Entries of a GPUDirect RDMA page table for a 64 KiB-aligned buffer of `nbytes` (64 KiB pages)."""
    return -(-int(nbytes) // RDMA_PAGE)


def capture_table(rows: list[dict]) -> Table:
    """The toy capture card's deliveries, with the page counts named for what they are."""
    return Table([(r["placement"], r["route"], f"{r['root_complex_bytes']:,}", f"{r['dram_bytes']:,}",
                   f"{r['model_us']:.0f}", r["page_runs"], r["rdma_pages_64k"], r["bytes_arrived_intact"])
                  for r in rows],
                 ("placement", "route", "bytes via root complex", "DRAM bytes", "modelled µs",
                  "toy: runs of 4 KiB pages / descriptors", "real GPUDirect RDMA: 64 KiB pages", "data intact"),
                 caption="SIMULATED: the toy GPU's link model — one frame, capture to VRAM")


def capture_figure(rows: list[dict], frame_bytes: int) -> CourseFigure:
    fig = go.Figure()
    for route in ("bounce", "peer"):
        rs = [r for r in rows if r["route"] == route]
        fig.add_bar(name=f"{route}: bytes through the root complex (MB)", x=[r["placement"] for r in rs],
                    y=[r["root_complex_bytes"] / 1e6 for r in rs], offsetgroup=route)
    fig.update_layout(title=f"One {frame_bytes / 1e6:.1f} MB frame from a capture card into the toy GPU",
                      yaxis_title="MB through the root complex", barmode="group")
    return CourseFigure(fig, [(Mode.SIMULATED, "the toy GPU's link model (helpers/toygpu/link.py)")])


def nccl_table(ev: Evidence) -> Table | Evidence:
    """The all-reduce timings; without them (no live run and no recording) the Evidence itself,
    which shows why."""
    if not ev.ok:
        return ev
    rows = [(f"{r['nbytes']:,}", f"{r['median_s'] * 1e6:.1f}", f"{r['algbw_gbps']:.1f}", f"{r['busbw_gbps']:.1f}",
             "yes" if r["checked"] else "NO") for r in ev.data["rows"]]
    return Table(rows, ("bytes per GPU", "median µs", "algbw GB/s", "busbw GB/s", "sum correct"),
                 ev.caption(f"NCCL {ev.data['nccl_version']} all-reduce over {ev.data['ndev']} GPUs"))


def driver_vs_staged(d: dict) -> str:
    """Large-copy bandwidth of the driver's peer-off copy vs our two-leg staging, worded from the data."""
    n = d["sizes"]["large"]
    drv = float(np.mean([x for row in gbps_matrix(d, "driver") for x in row if x is not None]))
    stg = float(np.mean([x for row in gbps_matrix(d, "staged") for x in row if x is not None]))
    peer = float(np.mean([x for row in gbps_matrix(d, "peer") for x in row if x is not None]))
    legs = [n / t / 1e9 for t in d["host"]["d2h"]["large"] + d["host"]["h2d"]["large"]]
    if drv > 1.15 * stg:
        cap = ("and stays below" if drv <= min(legs) else "yet exceeds")
        how = ("faster than our store-and-forward staging: the driver overlaps the two legs, "
               f"{cap} the slowest host leg's {min(legs):.1f} GB/s")
    elif drv < 0.87 * stg:
        how = "slower than our staging: the driver's bounce buffers are smaller or not pinned for this size"
    else:
        how = "about the same as our staging: the driver does not overlap the legs here"
    if drv > 0.6 * peer:
        how = "close to the direct peer copy: with peer access off the driver still used a direct path"
    return (f"{n >> 20} MiB copies: cudaMemcpyPeer with peer access off {drv:.1f} GB/s, staged by hand {stg:.1f} GB/s, "
            f"direct peer {peer:.1f} GB/s — the driver's fallback is {how}.")


# -- which machine: the recording's words, not the author's -------------------------------------
def pair_words(topo: dict) -> str:
    """'2× NVIDIA H100 80GB HBM3' (or 'NVIDIA A · NVIDIA B' for unlike GPUs) from a p2p.topology recording's devices."""
    names = [d["name"] for d in topo.get("devices") or []]
    if not names:
        return "the GPUs of this recording"
    return f"{len(names)}× {names[0]}" if len(set(names)) == 1 else " · ".join(names)


def topology_reading(topo: dict) -> str:
    """What the topology recording (or live topology) shows about GPU0-GPU1, worded from its data:
    the GPUs, their link, and whether their PCI addresses sit on one flat bus (a virtual machine's
    virtual PCIe tree, which says nothing about the host's PCIe layout)."""
    link = link_kind(topo)
    devs = topo.get("devices") or []
    out = f"GPU0 and GPU1 ({pair_words(topo)}) are joined by {link or 'a link these data do not name'}"
    if link and link.startswith("NV") and link[2:].isdigit():
        out += f": {int(link[2:])} bonded NVLinks"
    out += "."
    buses = {d["pci_bus_id"].rsplit(":", 1)[0] for d in devs if d.get("pci_bus_id")}
    if len(devs) > 1 and len(buses) == 1:
        out += (f" Their PCI addresses ({', '.join(d['pci_bus_id'] for d in devs)}) share one bus: a flat virtual "
                "PCIe tree, as a virtual machine shows it, so these data say nothing about the host's PCIe layout.")
    return out


# -- the peer read's latency (p2p.peer_read_latency) ----------------------------------------------
def latency_table(ev: Evidence) -> Table:
    """Per pair: peer median and the rounds' range, the reader's local median, what the hop adds."""
    from helpers.ch08_peer_to_peer import peer_latency

    rows = [(r["pair"], f"{r['peer_ns']:.0f}", f"{r['peer_min']:.0f}–{r['peer_max']:.0f}", f"{r['local_ns']:.0f}",
             f"{r['added_ns']:+.0f}", f"{r['ratio']:.2f}") for r in peer_latency.pair_rows(ev.data)]
    return Table(rows, ("pair", "peer ns/read (median)", "rounds", "local ns/read", "peer − local", "peer / local"),
                 ev.caption(f"one thread per SM chasing a {ev.data['nbytes'] >> 20} MiB chain in "
                            f"{ev.data['stride_bytes']}-byte steps, {ev.data['rounds']} rounds"))


def latency_figure(ev: Evidence) -> CourseFigure:
    """Bars per reading GPU: a local read and a read of the peer's memory, ns per read, every round as a dot."""
    from helpers.ch08_peer_to_peer import peer_latency

    fig = go.Figure()
    rows = peer_latency.pair_rows(ev.data)
    local = {r["reader"]: r for r in ev.data["local"]}
    x = [f"GPU {r['reader']}" for r in rows]
    fig.add_bar(name="local read (own memory)", x=x, y=[r["local_ns"] for r in rows], marker_pattern_shape="")
    fig.add_bar(name="peer read (the other GPU's memory)", x=x, y=[r["peer_ns"] for r in rows], marker_pattern_shape="/")
    for r in rows:
        peer = next(p for p in ev.data["peer"] if p["reader"] == r["reader"] and p["memory"] == r["memory"])
        fig.add_scatter(x=[f"GPU {r['reader']}"] * (len(peer["ns"]) + len(local[r["reader"]]["ns"])),
                        y=local[r["reader"]]["ns"] + peer["ns"], mode="markers", name=f"rounds, GPU {r['reader']}",
                        marker={"symbol": "diamond", "color": "black", "size": 6})
    fig.update_layout(title="One dependent read at a time: own memory vs the peer's, over the link",
                      yaxis_title="ns per read", xaxis_title="the GPU that reads", barmode="group")
    return CourseFigure(fig, ev.parts)


def _span(values, fmt: str = ".0f") -> str:
    """'828' for one value (or equal ones), '828–831' for a range."""
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def latency_explained(data: dict, verb: str) -> str:
    """What the peer hop adds over a local read, worded from the data (`verb`: the Evidence's `said`)."""
    from helpers.ch08_peer_to_peer import peer_latency

    rows = peer_latency.pair_rows(data)
    if not rows:
        return "These data have no peer pair (peer access was refused), so they say nothing about a peer read."
    said = f"{verb[:1].upper()}{verb[1:]}"
    peer, local = _span([r["peer_ns"] for r in rows]), _span([r["local_ns"] for r in rows])
    added = [r["added_ns"] for r in rows]
    spreads = [peer_latency.spread(p["ns"]) for p in data["peer"]]
    if min(added) <= max(spreads) * max(r["peer_ns"] for r in rows):
        return (f"{said}: a read of the peer's memory took {peer} ns and a local read {local} ns: for at least one "
                f"pair the difference is within the rounds' spread ({max(spreads):.1%}), so these data do not show "
                "what the hop adds. Was peer access really over a link, and did each chase read memory the reader "
                "does not own?")
    return (f"{said}: a read of the peer's memory took {peer} ns, a read of the reader's own memory {local} ns: the hop "
            f"to the other GPU adds {_span(added)} ns per read ({_span([r['ratio'] for r in rows], '.1f')}x as long). "
            f"The rounds of one pair lie within {max(spreads):.1%} of each other. The {data['nbytes'] >> 20} MiB chain "
            "fits the L2 of the GPU that owns it, so both should be answered from an L2: the difference is the trip "
            "itself (out of the reader's SM, across the link to the other GPU's L2 and back), not a slower memory.")


def nvbw_size_table(ev: Evidence) -> Table | None:
    """p2p.matrices' copies at nvbandwidth's size (None for a recording made before they existed)."""
    size = ev.data.get("nvbw_size")
    if not size:
        return None
    words = {"read": "read (pulled by row)", "write": "write (pushed by row)",
             "bidir_read": "both ways, read (total)", "bidir_write": "both ways, write (total)",
             "sm_read": "SM read (row's kernel loads column's memory)"}
    rows = [(words[r["test"]], f"GPU{r['row']} / GPU{r['col']}", f"{r['gbps']:.1f}") for r in size["rows"]]
    return Table(rows, ("copy (copy engine unless SM)", "row / column", "GB/s"),
                 ev.caption(f"{size['nbytes'] >> 20} MiB peer copies as nvbandwidth makes them "
                            f"({size['loops']} back to back per sample, median of {size['samples']})"))
