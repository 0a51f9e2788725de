"""Lab 3 (a real-time pipeline): the reference answers and the hidden cases.

`range_doppler` and `deadline_report` are the learner's processing step and real-time report;
`choose_design` searches the pipeline model (helpers.models.radar.simulator.simulate) for
the cheapest design that meets a latency budget: designs that keep the CPU out of the data path
first, then fewer device buffers, then fewer ring slots.
"""

from __future__ import annotations

import numpy as np

from helpers.models.radar import designs, simulator
from helpers.problems import random_machine
from instructor.labs.common import draw_seed

PARTS = ("range_doppler", "targets", "deadline_report", "choose_design")
FRAMES = 300          # frames the model runs to judge a design (the lab's text says so)
MAX_BUFFERS = 8
MAX_SLOTS = 16


# ----------------------------------------------------------------------------- the answers
def range_doppler(xp, frame, mf):
    compressed = xp.fft.ifft(xp.fft.fft(frame, axis=1) * mf, axis=1)
    rd = xp.fft.fftshift(xp.fft.fft(compressed, axis=0), axes=0)
    return (rd.real ** 2 + rd.imag ** 2).astype(xp.float32)


def deadline_report(latency_us, period_s, dropped):
    lat = np.asarray(latency_us, dtype=float) / 1e3
    p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
    misses = int(np.sum(lat > period_s * 1e3))
    return {"p50_ms": float(p50), "p99_ms": float(p99), "p999_ms": float(p999), "max_ms": float(lat.max()),
            "misses": misses, "dropped": int(dropped), "ok": misses == 0 and dropped == 0}


def meets(params, design: str, frame_bytes: int, period_s: float, deadline_s: float, buffers: int, slots: int) -> bool:
    """True when the model predicts no frame later than deadline_s and none dropped."""
    r = simulator.simulate(params, design, frame_bytes, period_s, FRAMES, buffers=buffers, slots=slots,
                       deadline_periods=deadline_s / period_s)
    return r["summary"]["misses"] == 0 and r["dropped"] == 0


def cost(pick: dict) -> tuple:
    """What the lab minimises, in order: CPU in the data path, device buffers, ring slots."""
    return (pick["design"] not in ("registered", "pipelined"), int(pick["buffers"]), int(pick["slots"]))


def choose_design(frame_bytes, period_s, deadline_s, params):
    """The cheapest design that meets every deadline with no drop, or None when none can."""
    candidates = [("registered", 1)] + [("pipelined", b) for b in range(2, MAX_BUFFERS + 1)] + \
                 [("staged", 1), ("pageable", 1)]
    for design, buffers in sorted(candidates, key=lambda c: cost({"design": c[0], "buffers": c[1], "slots": 0})):
        for slots in range(1, MAX_SLOTS + 1):
            if meets(params, design, frame_bytes, period_s, deadline_s, buffers, slots):
                return {"design": design, "buffers": buffers, "slots": slots}
    return None


# ----------------------------------------------------------------------------- grading
def earlier(part: str) -> dict:
    """Every part of Lab 3 is graded on its own inputs: nothing earlier is used."""
    return {}


def cases(part: str, seed: int | None = None) -> list:
    """Hidden cases of `part`, in the shape of the published ones in the lab's check cells."""
    if part not in PARTS:
        raise ValueError(f"lab3 has no part {part!r}; parts: {PARTS}")
    rng = np.random.default_rng(draw_seed(f"lab3 {part}", seed))
    if part == "range_doppler":  # (frame bytes, card seed, variant)
        return [(int(rng.choice([64, 128, 256, 512])) * 8 * designs.N_SAMPLES, int(rng.integers(1 << 30)),
                 int(rng.integers(0, 4))) for _ in range(3)]
    if part == "targets":  # (pulses, range bin, Doppler bin)
        out = []
        for _ in range(3):
            pulses = int(rng.choice([32, 64, 128, 256]))
            out.append((pulses, int(rng.integers(0, 1024 - 128)), int(rng.integers(-pulses // 2 + 1, pulses // 2))))
        return out
    if part == "deadline_report":  # (period s, late frames, dropped, latency seed)
        return [(float(rng.choice([2e-3, 4e-3, 8e-3, 16e-3])), int(rng.integers(0, 12)), int(rng.integers(0, 6)),
                 int(rng.integers(1 << 30))) for _ in range(3)]
    return design_cases(rng)


def design_cases(rng, extra: int = 2) -> list[tuple]:
    """(name, params, frame bytes, period, deadline, the cheapest pick or None): one case that
    needs several device buffers, one the registered ring meets alone, and `extra` drawn freely,
    so that no single fixed answer passes."""
    need = ["buffers", "registered"] + ["any"] * extra
    out = []
    for _ in range(2000):
        if not need:
            break
        p = random_machine(rng, "a hidden machine")
        frame = int(rng.choice([1, 2, 4, 8, 16, 32])) << 20
        period = float(rng.choice([2e-3, 4e-3, 8e-3, 16e-3]))
        deadline = period * float(rng.choice([1.0, 1.5, 2.0, 3.0, 4.0]))
        pick = choose_design(frame, period, deadline, p)
        kind = "none" if pick is None else ("buffers" if pick["buffers"] > 1 else pick["design"])
        if kind in need:
            need.remove(kind)
        elif "any" in need and "buffers" not in need:
            need.remove("any")
        else:
            continue
        out.append((f"hidden machine {len(out) + 1}: {frame >> 20} MiB every {period * 1e3:g} ms, "
                    f"deadline {deadline * 1e3:g} ms", p, frame, period, deadline, pick))
    return out
