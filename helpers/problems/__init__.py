"""Per-learner problems, OSTEP style: each learner gets a different but real problem.

    from helpers import problems
    p = problems.problem("lab2", "alice")      # the same learner id always gives the same problem
    print(p.text); p.data                       # what to do, with this learner's numbers
    python -m helpers.problems --lab 2 --learner alice [--solve]

A problem is seeded by a stable hash of (what, learner id), so a class can hand every student
their own numbers and an instructor can regenerate them from the class list. The inputs are
real: a recording of the reference machine perturbed (scaled, shifted, thinned, re-noised) so
that no two learners share answers, a radar machine with other parameters, a TTM workload of
another VRAM size and seed, a link matrix of other GPUs. The answers (`--solve`) come from the
instructor-only package (instructor.problems) and exist only in the instructor's copy.

Labs 2, 3, 4 and 5 and three chapter exercises have generators (KEYS): Chapter 3's
half-bandwidth size, Chapter 6's eviction victim, Chapter 9's breaking rate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from helpers.core import config, reference, validate
from helpers.core.errors import InputError
from helpers.models import copy_cost, routes

MiB = 1 << 20


@dataclass(kw_only=True)
class Problem:
    """One learner's problem: what to do (text) and the inputs (data), reproducible from the seed."""

    key: str
    learner: str
    seed: int
    title: str
    text: str
    data: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.title} — for {self.learner} (problem seed {self.seed})\n\n{self.text}"


def learner_seed(key: str, learner: str) -> int:
    """A stable 63-bit seed from (problem key, learner id): the same on every machine and run."""
    learner = validate.text(learner, "learner id (a name, login or student number)")
    digest = hashlib.sha256(f"cpu-gpu-datamove/{key}/{learner.strip().lower()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


# ----------------------------------------------------------------------------- real inputs, perturbed
def recorded_sweep(host_kind: str = "pinned", direction: str = "h2d") -> tuple[np.ndarray, np.ndarray, str]:
    """(bytes, median seconds, machine) of the reference machine's recorded copy sweep."""
    rec = reference.load(config.reference_name()).recording("transfers.pinned_vs_pageable")
    s = copy_cost.series_for(rec.data, host_kind, direction)
    return np.asarray(s["nbytes"], dtype=float), np.asarray(s["median_s"], dtype=float), rec.label


def perturb_sweep(nbytes, times_s, rng: np.random.Generator, *, keep: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A recorded sweep made someone else's: times scaled (bandwidth 0.4-1.1x, a slower or similar link), a fixed cost added
    (0-50 % of the smallest copy), 1 % fresh noise, and (keep < 1) a random share of sizes dropped.
    The shape — flat for small copies, linear for large — is the recording's own."""
    n, t = np.asarray(nbytes, dtype=float), np.asarray(times_s, dtype=float)
    scale = rng.uniform(0.9, 2.5)
    shift = rng.uniform(0.0, 0.5) * float(t.min()) * scale
    out = (t * scale + shift) * rng.lognormal(0.0, 0.01, t.size)
    mask = np.ones(n.size, bool)
    if keep < 1.0:
        drop = rng.choice(n.size, int(round(n.size * (1 - keep))), replace=False)
        mask[drop] = False
    return n[mask], out[mask]


def random_machine(rng: np.random.Generator, name: str = "a simulated machine"):
    """Radar-pipeline model parameters (helpers.models.radar.simulator.MachineParams) of a
    plausible machine: PCIe 3-5 copies, a kernel between 0.02 and 0.5 ns per byte, a CPU memcpy of
    2-12 GB/s, 20-120 µs of polling overhead."""
    from helpers.models.radar import simulator

    pinned = rng.uniform(3e9, 26e9)
    return simulator.MachineParams(
        pinned_t0_s=rng.uniform(5e-6, 20e-6), pinned_Bps=pinned,
        pageable_t0_s=rng.uniform(8e-6, 30e-6), pageable_Bps=pinned * rng.uniform(0.25, 0.6),
        memcpy_Bps=rng.uniform(2e9, 12e9), kernel_s_per_byte=rng.uniform(2e-11, 5e-10),
        kernel_t0_s=rng.uniform(10e-6, 60e-6), overhead_s=rng.uniform(20e-6, 120e-6), source=name)


# ----------------------------------------------------------------------------- generators
def _lab2(rng) -> tuple[str, str, dict]:
    n, t, label = recorded_sweep()
    n, t = perturb_sweep(n, t, rng, keep=0.8)
    size = int(rng.integers(3, 200)) * MiB
    count, each = int(2 ** rng.integers(4, 11)), int(2 ** rng.integers(12, 21))
    text = (f"Your sweep (a perturbed copy of a recording on {label}) has {n.size} sizes; `data['nbytes']` and "
            f"`data['median_s']`.\n1. Fit t(n) = t0 + n/B with relative (1/t-weighted) least squares: t0 in µs, B in GB/s.\n"
            f"2. Predict the time of one {size} B copy.\n"
            f"3. How many times longer do {count} copies of {each} B take than one copy of all {count * each} B?")
    return "Lab 2: your own sweep", text, {"nbytes": n.tolist(), "median_s": t.tolist(), "predict_bytes": size,
                                            "count": count, "each": each}


def _lab3(rng) -> tuple[str, str, dict]:
    p = random_machine(rng, "your simulated machine")
    frame = int(rng.choice([1, 2, 4, 8, 16])) * MiB
    copy, kernel = p.copy_s(frame, True), p.kernel_s(frame)
    one_at_a_time = copy + kernel + p.overhead_s
    if rng.random() < 0.5:  # faster than one frame at a time allows: only overlap can keep up
        period = rng.uniform(max(copy, kernel) + p.overhead_s, one_at_a_time)
    else:
        period = one_at_a_time * rng.uniform(1.1, 2.5)
    period = float(min(max(round(period, 4), 2e-4), 0.5))
    deadline = float(round(max(period * rng.uniform(1.0, 3.0), one_at_a_time * rng.uniform(0.9, 1.5)), 4))
    text = (f"A capture card delivers {frame >> 20} MiB every {period * 1e3:g} ms; each frame must be processed within "
            f"{deadline * 1e3:g} ms of its arrival. Your machine's model parameters are `data['params']`.\n"
            "Which design, how many device buffers and how many ring slots (the cheapest that meets every deadline "
            "with no dropped frame, preferring designs that keep the CPU out of the data path)?")
    return "Lab 3: your machine", text, {"params": p, "frame_bytes": frame, "period_s": period, "deadline_s": deadline}


def _lab4(rng) -> tuple[str, str, dict]:
    total = 1 << int(rng.integers(5, 9))
    requests = [int(rng.integers(1, total // 4)) for _ in range(int(rng.integers(3, 6)))]
    vram = int(rng.integers(40, 129)) * MiB
    wl_seed = int(rng.integers(1, 1 << 30))
    text = (f"1. On Buddy({total}), allocate {requests} chunks in that order: which offsets, and what are the free "
            f"lists after them?\n2. Workload `cyclic` and `hot-cold` on {vram >> 20} MiB of VRAM, seed {wl_seed}, "
            "120 and 150 steps: how many MiB does LRU move over the link, and how many does your policy move?")
    return "Lab 4: your allocator and workloads", text, {"total": total, "requests": requests, "vram": vram,
                                                         "seed": wl_seed}


def _lab5(rng) -> tuple[str, str, dict]:
    m = routes.synthetic(int(rng.integers(3, 5)), int(rng.integers(1, 1 << 30)))
    transfers = []
    for _ in range(int(rng.integers(2, 5))):
        a, b = (int(x) for x in rng.permutation(m.n_gpus)[:2])
        transfers.append((a, b, int(rng.integers(1, 256)) * MiB))
    text = (f"Your machine has {m.n_gpus} GPUs linked as in `data['M']` ({m.source}). Route the transfers "
            f"{transfers} (src, dst, bytes): which route for each, and what is the smallest makespan?")
    return "Lab 5: your topology", text, {"M": m, "transfers": transfers}


def _ch03(rng) -> tuple[str, str, dict]:
    n, t, label = recorded_sweep()
    n, t = perturb_sweep(n, t, rng)
    text = (f"Chapter 3 exercise: your sweep (a perturbed copy of a recording on {label}) is `data`. Fit t0 + n/B with "
            "the course's estimator (helpers.models.copy_cost.fit) and give the half-bandwidth size n½ = t0·B in KiB. "
            "Is a 64 KiB copy latency-bound or bandwidth-bound on your machine?")
    return "Chapter 3: your half-bandwidth size", text, {"nbytes": n.tolist(), "median_s": t.tolist()}


def _ch06(rng) -> tuple[str, str, dict]:
    vram = int(rng.choice([8, 16, 32]))
    gtt = int(rng.choice([vram // 4, vram // 2, vram]))
    sizes = []
    while sum(sizes) <= vram:
        sizes.append(int(rng.choice([1, 2, 4])) * max(1, vram // 8))
    names = [chr(ord("a") + i) for i in range(len(sizes))]
    text = (f"Chapter 6 exercise: VRAM {vram} MiB, GTT {gtt} MiB. Create BOs {', '.join(f'{k} ({s} MiB)' for k, s in zip(names, sizes, strict=True))} "
            "in that order, nothing else. Which BO(s) does the model evict, in what order, and where does each go?")
    return "Chapter 6: your eviction", text, {"vram_mib": vram, "gtt_mib": gtt, "bos": list(zip(names, sizes, strict=True))}


def _ch09(rng) -> tuple[str, str, dict]:
    p = random_machine(rng, "your simulated machine")
    frame = int(rng.choice([1, 4, 16])) * MiB
    text = (f"Chapter 9 exercise: on your machine (`data['params']`), what is the shortest frame period at which the "
            f"`registered` design keeps up with {frame >> 20} MiB frames (no miss, no drop), and what data rate is that?")
    return "Chapter 9: your breaking rate", text, {"params": p, "frame_bytes": frame}


GENERATORS: dict[str, Callable] = {"lab2": _lab2, "lab3": _lab3, "lab4": _lab4, "lab5": _lab5,
                                   "ch03": _ch03, "ch06": _ch06, "ch09": _ch09}
KEYS = tuple(GENERATORS)


def problem(key: str, learner: str) -> Problem:
    """Learner `learner`'s problem for `key` (one of KEYS: lab2..lab5, ch03, ch06, ch09)."""
    if key not in GENERATORS:
        raise InputError(f"no per-learner problem {key!r}; there are: {', '.join(KEYS)}")
    seed = learner_seed(key, learner)
    title, text, data = GENERATORS[key](np.random.default_rng(seed))
    return Problem(key=key, learner=learner.strip(), seed=seed, title=title, text=text, data=data)
