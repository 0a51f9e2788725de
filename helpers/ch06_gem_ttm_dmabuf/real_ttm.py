"""Chapter 6, part 2: TTM placement and eviction in a real kernel, beside the course's model.

Experiment ``real_ttm.eviction`` boots the kernel lab's VM with QEMU's ``bochs-display``
(16 MiB of VRAM). Its driver, bochs (drivers/gpu/drm/tiny/bochs.c), keeps buffers with the
VRAM helper (drivers/gpu/drm/drm_gem_vram_helper.c), which is built on TTM. The probe creates
``buffers`` 1024x768 XRGB8888 dumb buffers (3 MiB each: five fit), tags every page of each,
and shows them one after the other with a legacy SETCRTC per entry of a flip sequence, as DRM
master. A flip pins the new buffer in VRAM for scanout (evicting if VRAM is full) and unpins
the one shown before, which goes to the tail of TTM's LRU list.

After each flip the probe records which buffer sits where (the allocated ranges of debugfs
``vram-mm``, each identified by its first word read through the device's BAR0) and the TTM
functions the flip called (ftrace): ``ttm_mem_evict_first <- ttm_bo_mem_space`` and
``ttm_bo_move_memcpy`` when a buffer had to leave. At the end it reads every buffer back and
counts the words that differ from what it wrote.

:func:`timeline` turns that into a per-flip list (shown, placed, evicted, resident);
:func:`compare` runs the course's TTM model (helpers.models.ttm.scanout_flips) on the same
sequence and lists the flips where the victims differ; :func:`check_policy` does the same for
a learner's eviction policy (Lab 4), on a relabelled trace with shuffled candidates.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from helpers.core import transcript, validate
from helpers.core.errors import InputError, InputTypeError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.core.mode import Mode
from helpers.measure import kernel_vm
from helpers.models import ttm
from helpers.presentation import figures

EXPERIMENT = "real_ttm.eviction"
PAGE = 4096
MiB = 1 << 20
MAX_BUFFERS = 16
MAX_FLIPS = 64
# The chapter's sequence (buffer 1 is shown again before VRAM runs out, so LRU is not FIFO),
# then two seeded random ones: Lab 4 grades on one of them, relabelled.
DEFAULT_BUFFERS = 8
DEFAULT_FLIPS = ((0, 1, 2, 3, 4, 5, 1, 6, 2, 7, 0, 3),)


def _random_sequence(seed: int, buffers: int = DEFAULT_BUFFERS, n: int = 16) -> tuple[int, ...]:
    rng = random.Random(f"kernel-lab-flips:{seed}")
    seq = [rng.randrange(buffers)]
    while len(seq) < n:
        b = rng.randrange(buffers)
        if b != seq[-1]:
            seq.append(b)
    return tuple(seq)


DEFAULT_SEQUENCES = DEFAULT_FLIPS + (_random_sequence(1), _random_sequence(2))


def flip_sequences(value, what: str = "flips") -> list[list[int]]:
    """One or more flip sequences: lists of buffer indices (0..15), 1 to 64 flips each."""
    if not isinstance(value, (list, tuple)) or not value:
        raise InputTypeError(f"{what} must be a non-empty list of flip sequences (lists of buffer indices), "
                             f"got {value!r}")
    out = []
    for k, seq in enumerate(value):
        if not isinstance(seq, (list, tuple)) or not 1 <= len(seq) <= MAX_FLIPS:
            raise InputError(f"{what}[{k}] must be a list of 1 to {MAX_FLIPS} buffer indices, got {seq!r}")
        for i, b in enumerate(seq):
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < MAX_BUFFERS:
                raise InputError(f"{what}[{k}][{i}] must be a buffer index from 0 to {MAX_BUFFERS - 1}, got {b!r}")
        out.append(list(seq))
    return out


def _check(params: dict) -> None:
    n = params.get("buffers", DEFAULT_BUFFERS)
    for k, seq in enumerate(params.get("flips", DEFAULT_SEQUENCES)):
        if max(seq) >= n:
            raise InputError(f"flips[{k}] shows buffer {max(seq)}, but only buffers 0..{n - 1} exist (buffers={n})")


@experiment(EXPERIMENT, chapter=6, needs=(QEMU,), reference=KERNEL_LAB_REFERENCE,
            title="TTM eviction in a real kernel: bochs's 16 MiB of VRAM filled by scanout buffers (QEMU)",
            params={"buffers": validate.count(1, MAX_BUFFERS), "flips": flip_sequences}, params_check=_check)
def eviction(quick: bool, buffers: int = DEFAULT_BUFFERS, flips: Sequence[Sequence[int]] = DEFAULT_SEQUENCES) -> dict:
    """Boot the VM once with bochs-display; one run per flip sequence (quick changes nothing)."""
    arg = "/".join(",".join(map(str, s)) for s in flips)
    run = kernel_vm.run("evict", {"run": "evict", "buffers": str(buffers), "flips": arg})
    res = run["result"]
    runs = res.get("devices", [])
    problems = [r["error"] for r in runs if "error" in r] + ([res["error"]] if "error" in res else [])
    if problems or len(runs) != len(flips):
        raise SkipExperiment(f"the probe did not complete in the VM: {problems or 'runs missing'}")
    return {"buffers": buffers, "runs": runs, "kernel_version": res.get("kernel_version"), "vm": run["vm"]}


# --------------------------------------------------------------------------------------------
# The kernel's timeline
# --------------------------------------------------------------------------------------------
def timeline(run: dict) -> list[dict]:
    """Per flip of one recorded run: shown, placed (moved into VRAM), evicted, resident, where
    each resident buffer sits (MiB from the start of VRAM), and the TTM calls counted."""
    out, before = [], set()
    for s in run["steps"]:
        where = {r["buffer"]: r["start_page"] * PAGE / MiB for r in s["vram"] if r.get("used") and "buffer" in r}
        if -1 in where:
            raise SkipExperiment(f"flip {s['step']}: a VRAM range holds no buffer the probe wrote (BAR0 read failed?)")
        now = set(where)
        calls = s.get("calls", [])
        out.append({"step": s["step"], "show": s["show"], "setcrtc_rc": s["setcrtc_rc"],
                    "placed": s["show"] if s["show"] not in before else None,
                    "evicted": sorted(before - now), "resident": sorted(now), "where_mib": where,
                    "evict_calls": sum(c.startswith("ttm_mem_evict_first") for c in calls),
                    "memcpy_moves": sum(c.startswith("ttm_bo_move_memcpy") for c in calls),
                    "calls": calls})
        before = now
    return out


def buffer_bytes(run: dict) -> int:
    sizes = {b["size"] for b in run["buffers"]}
    if len(sizes) != 1:
        raise SkipExperiment(f"the run's buffers differ in size ({sorted(sizes)})")
    return sizes.pop()


def vram_bytes(run: dict) -> int:
    """The VRAM the kernel manages: the end of the last vram-mm range, in bytes."""
    return max(r["end_page"] for s in run["steps"] for r in s["vram"]) * PAGE


def intact(run: dict) -> bool:
    """True when every buffer read back exactly what the probe wrote, after all the moves."""
    return all(b["mismatched_words"] == 0 for b in run["intact"])


# --------------------------------------------------------------------------------------------
# Model vs kernel
# --------------------------------------------------------------------------------------------
def compare(run: dict, policy: ttm.Policy | str = "lru") -> list[dict]:
    """The flips where the model (with `policy`) evicts other buffers than the kernel did.

    Each entry: {"step", "show", "kernel": [victims], "model": [victims]}; empty: the same
    victims at every flip.
    """
    kernel = timeline(run)
    model = ttm.scanout_flips(run["flips"], buffer_bytes(run), vram_bytes(run), policy=policy)
    return [{"step": k["step"], "show": k["show"], "kernel": k["evicted"], "model": m["evicted"]}
            for k, m in zip(kernel, model, strict=True) if k["evicted"] != m["evicted"]]


def comparison_table(ev: Evidence, run_index: int = 0) -> figures.Table:
    """Flip by flip: shown, the kernel's victim, the model's victim (LRU), agree?"""
    run = ev.require()["runs"][run_index]
    kernel = timeline(run)
    model = ttm.scanout_flips(run["flips"], buffer_bytes(run), vram_bytes(run))
    rows = [(k["step"], f"fb{k['show']}", _names(k["evicted"]), _names(m["evicted"]),
             "yes" if k["evicted"] == m["evicted"] else "NO") for k, m in zip(kernel, model, strict=True)]
    return figures.Table(rows, ("flip", "shown", "kernel evicted", "model evicted (LRU)", "same"),
                         caption=f"kernel: {ev.mode.value.upper()} · {transcript.source_line(ev)}; model: SIMULATED · "
                                 "helpers.models.ttm.scanout_flips")


def _names(idx: list[int]) -> str:
    return ", ".join(f"fb{i}" for i in idx) or "—"


# --------------------------------------------------------------------------------------------
# The figure: VRAM flip by flip
# --------------------------------------------------------------------------------------------
MARKERS = ("circle", "square", "diamond", "triangle-up", "triangle-down", "cross", "x", "star",
           "hexagon", "pentagon", "hourglass", "bowtie", "star-square", "circle-open", "square-open", "diamond-open")
PATTERNS = ("", "/", "\\", "x", "-", "|", "+", ".")
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def figure_timeline(ev: Evidence, run_index: int = 0) -> figures.CourseFigure:
    """Each flip a column of VRAM (0 to 16 MiB): which buffer sits where, read from the kernel;
    the kernel's victim above each column, and the model's victim beside it."""
    import plotly.graph_objects as go

    run = ev.require()["runs"][run_index]
    tl = timeline(run)
    model = ttm.scanout_flips(run["flips"], buffer_bytes(run), vram_bytes(run))
    size_mib = buffer_bytes(run) / MiB
    fig = go.Figure()
    for b in range(ev.data["buffers"]):
        xs = [t["step"] for t in tl if b in t["where_mib"]]
        if not xs:
            continue
        fig.add_trace(go.Bar(
            x=xs, y=[size_mib] * len(xs), base=[t["where_mib"][b] for t in tl if b in t["where_mib"]],
            name=f"fb{b}", marker={"color": PALETTE[b % len(PALETTE)],
                                  "pattern": {"shape": PATTERNS[b % len(PATTERNS)]},
                                  "line": {"color": "white", "width": 1}},
            text=[f"fb{b}" + (" (shown)" if t["show"] == b else "") for t in tl if b in t["where_mib"]],
            textposition="inside", insidetextanchor="middle",
            hovertemplate=f"fb{b} at %{{base:.0f}} MiB after flip %{{x}}<extra></extra>"))
    top = vram_bytes(run) / MiB
    ev_steps = [t for t in tl if t["evicted"]]
    fig.add_trace(go.Scatter(x=[t["step"] for t in ev_steps], y=[top + 1.2] * len(ev_steps), mode="markers+text",
                             marker={"symbol": "triangle-down", "size": 12, "color": "#D55E00"},
                             text=[_names(t["evicted"]) for t in ev_steps], textposition="top center",
                             name="kernel evicted (to system memory)"))
    m_steps = [m for m in model if m["evicted"]]
    fig.add_trace(go.Scatter(x=[m["step"] for m in m_steps], y=[top + 3.4] * len(m_steps), mode="markers+text",
                             marker={"symbol": "x", "size": 11, "color": "#000000"},
                             text=[_names(m["evicted"]) for m in m_steps], textposition="top center",
                             name="model's victim (LRU)"))
    fig.add_hline(y=top, line_dash="dash", annotation_text=f"end of VRAM ({top:.0f} MiB)")
    fig.update_layout(title=f"bochs VRAM after each flip: {ev.data['buffers']} scanout buffers of {size_mib:.0f} MiB",
                      barmode="overlay", height=520, legend={"traceorder": "normal"})
    fig.update_xaxes(title="flip (SETCRTC) number; label below: the buffer shown", tickvals=[t["step"] for t in tl],
                     ticktext=[f"{t['step']}<br>fb{t['show']}" for t in tl])
    fig.update_yaxes(title="VRAM offset (MiB)", range=[0, top + 6])
    parts = [(ev.mode, f"{transcript.source_line(ev)} — a real Linux kernel (bochs, TTM) under QEMU; placements from debugfs "
                       "vram-mm and BAR0"),
             (Mode.SIMULATED, "the course's TTM model on the same flips (helpers.models.ttm.scanout_flips)")]
    return figures.CourseFigure(fig, parts)


def describe(ev: Evidence, run_index: int = 0) -> str:
    """The figure in words, generated from the data."""
    run = ev.require()["runs"][run_index]
    tl = timeline(run)
    ev_steps = [t for t in tl if t["evicted"]]
    first = ev_steps[0] if ev_steps else None
    lines = [f"{len(tl)} flips over {ev.data['buffers']} buffers of {buffer_bytes(run) // MiB} MiB in "
             f"{vram_bytes(run) // MiB} MiB of VRAM; {sum(len(t['evicted']) for t in tl)} evictions."]
    if first:
        lines.append(f"VRAM first ran out at flip {first['step']} (showing fb{first['show']}): the kernel evicted "
                     f"{_names(first['evicted'])} and put fb{first['show']} at {first['where_mib'][first['show']]:.0f} MiB.")
    lines.append(f"Every buffer read back intact at the end: {intact(run)}. "
                 f"Flips where the model's LRU victim differs from the kernel's: {len(compare(run))}.")
    return " ".join(lines)


def timeline_csv(ev: Evidence, run_index: int = 0) -> str:
    """The figure's data as CSV: one row per flip and resident buffer, with the victims."""
    run = ev.require()["runs"][run_index]
    model = ttm.scanout_flips(run["flips"], buffer_bytes(run), vram_bytes(run))
    lines = ["flip,shown,buffer,vram_offset_mib,kernel_evicted,model_evicted"]
    for t, m in zip(timeline(run), model, strict=True):
        for b, mib in sorted(t["where_mib"].items(), key=lambda kv: kv[1]):
            lines.append(f"{t['step']},{t['show']},{b},{mib:g},{' '.join(map(str, t['evicted']))},"
                         f"{' '.join(map(str, m['evicted']))}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Lab 4: a learner's policy against the kernel's choices
# --------------------------------------------------------------------------------------------
def recorded_runs() -> list[dict]:
    """The recorded kernel runs (data/kernel_lab/real_ttm.eviction.json), for graders."""
    return transcript.load(EXPERIMENT).data["runs"]


def check_policy(policy: ttm.Policy, *, run: dict | None = None, relabel_seed: int | None = None,
                 shuffle_seed: int | None = 0) -> list[dict]:
    """The flips where `policy` evicts other buffers than the real kernel did; empty: none.

    `run`: one recorded kernel run (default: the chapter's, from the transcript). With
    `relabel_seed` the buffers are renamed by a seeded permutation (the kernel's victims are
    renamed the same way), so a list of victims learnt by heart fails; with `shuffle_seed` the
    candidates reach the policy in a seeded random order instead of TTM's walk order, so the
    policy must choose from the BOs' own fields (``last_use``, ``priority``, ``size``).
    Each entry: {"step", "show", "kernel": [victims], "yours": [victims]}.

    The kernel's victims are worked out (timeline) only after the policy has made every choice,
    so no frame the policy can reach holds them; `run` and the relabelling are reachable, but
    the recording is the learner's anyway (the notebook hands it to the check) and the
    relabelling builds the input.
    """
    if not callable(policy):
        raise InputTypeError(f"policy must be a function (candidates, needed, model) -> victim, got {policy!r}")
    run = run if run is not None else recorded_runs()[0]
    n = max(max(run["flips"]), max(b["index"] for b in run["buffers"])) + 1
    perm = list(range(n))
    if relabel_seed is not None:
        random.Random(f"relabel:{relabel_seed}").shuffle(perm)
    flips = [perm[b] for b in run["flips"]]
    rng = random.Random(f"shuffle:{shuffle_seed}")

    def shown_to(candidates, needed, model):
        c = list(candidates)
        if shuffle_seed is not None:
            rng.shuffle(c)
        return policy(c, needed, model)

    shown_to.__name__ = getattr(policy, "__name__", "policy")
    yours = ttm.scanout_flips(flips, buffer_bytes(run), vram_bytes(run), policy=shown_to)
    kernel = timeline(run)
    return [{"step": k["step"], "show": perm[k["show"]], "kernel": sorted(perm[v] for v in k["evicted"]),
             "yours": y["evicted"]}
            for k, y in zip(kernel, yours, strict=True) if sorted(perm[v] for v in k["evicted"]) != sorted(y["evicted"])]
