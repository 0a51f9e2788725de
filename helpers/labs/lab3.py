"""Lab 3's published examples and what its checks switch off.

The design examples carry the cheapest design the instructor's reference search found for them
(tests/labs check these against it). Grading uses hidden machines, rates and deadlines that
nobody has seen, so copying these answers earns nothing.
"""

from __future__ import annotations

from helpers.models.radar import dsp, metrics, pipeline, simulator
from helpers.models.radar.simulator import MachineParams

MiB = 1 << 20
FRAMES = 300  # frames the model runs to judge a design

#: the course's own processing and summary (the radar model's): a learner's range_doppler and deadline_report
#: must not use them
OWN_PROCESSING = {dsp: ("doppler_map", "reference_map"), pipeline: ("run_pipeline", "run_cpu_consumer")}
OWN_REPORT = {metrics: ("summarize", "result_summary", "summary_rows", "closing_rows"), simulator: ("simulate",)}

MACHINES = {
    "a 2009-era machine": MachineParams(pinned_t0_s=20e-6, pinned_Bps=3.2e9, pageable_t0_s=20e-6, pageable_Bps=1.8e9,
                                        memcpy_Bps=10e6, kernel_s_per_byte=2e-10, kernel_t0_s=50e-6,
                                        overhead_s=100e-6, source="2009"),
    "a modern machine": MachineParams(pinned_t0_s=8e-6, pinned_Bps=25e9, pageable_t0_s=10e-6, pageable_Bps=6e9,
                                      memcpy_Bps=8e9, kernel_s_per_byte=3e-11, kernel_t0_s=20e-6, overhead_s=60e-6,
                                      source="modern"),
    "a slow GPU": MachineParams(pinned_t0_s=8e-6, pinned_Bps=25e9, pageable_t0_s=10e-6, pageable_Bps=6e9,
                                memcpy_Bps=8e9, kernel_s_per_byte=4e-10, kernel_t0_s=20e-6, overhead_s=60e-6,
                                source="slow kernel"),
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
    return simulator.simulate(params, pick["design"], frame_bytes, period_s, FRAMES, buffers=pick["buffers"],
                          slots=pick["slots"], deadline_periods=deadline_s / period_s)
