"""Lab 3's published examples and what its checks switch off.

The design examples carry the cheapest design the instructor's reference search found for them
(tests/labs check these against it). Grading uses hidden machines, rates and deadlines that
nobody has seen, so copying these answers earns nothing.
"""

from __future__ import annotations

from helpers.ch09_radar_pipeline import radar

MiB = 1 << 20
FRAMES = 300  # frames the model runs to judge a design

#: Chapter 9's own processing and summary: a learner's range_doppler and deadline_report must not use them
OWN_PROCESSING = {radar: ("doppler_map", "reference_map", "run_pipeline", "run_cpu_consumer")}
OWN_REPORT = {radar: ("summarize", "result_summary", "summary_rows", "closing_rows", "simulate")}

MACHINES = {
    "a 2009-era machine": radar.MachineParams(20e-6, 3.2e9, 20e-6, 1.8e9, 10e6, 2e-10, 50e-6, 100e-6, "2009"),
    "a modern machine": radar.MachineParams(8e-6, 25e9, 10e-6, 6e9, 8e9, 3e-11, 20e-6, 60e-6, "modern"),
    "a slow GPU": radar.MachineParams(8e-6, 25e9, 10e-6, 6e9, 8e9, 4e-10, 20e-6, 60e-6, "slow kernel"),
}

# (machine, frame MiB, period ms, deadline ms) -> the cheapest pick, or None when no design meets it
_DESIGNS = (
    ("a 2009-era machine", 4, 8, 8, {"design": "registered", "buffers": 1, "slots": 1}),
    ("a 2009-era machine", 16, 8, 16, {"design": "pipelined", "buffers": 2, "slots": 1}),
    ("a 2009-era machine", 16, 8, 8, None),
    ("a modern machine", 32, 8, 8, {"design": "registered", "buffers": 1, "slots": 1}),
    ("a slow GPU", 32, 8, 24, None),
)


def design_examples() -> list[tuple]:
    """(name, params, frame bytes, period s, deadline s, cheapest pick or None), published."""
    return [(f"{m}, {mb} MiB every {p} ms, deadline {d} ms", MACHINES[m], mb * MiB, p * 1e-3, d * 1e-3, want)
            for m, mb, p, d, want in _DESIGNS]


def judge(params, pick: dict, frame_bytes: int, period_s: float, deadline_s: float) -> dict:
    """The model's run of `pick`: what the checks read (misses against the deadline, drops)."""
    return radar.simulate(params, pick["design"], frame_bytes, period_s, FRAMES, buffers=pick["buffers"],
                          slots=pick["slots"], deadline_periods=deadline_s / period_s)
