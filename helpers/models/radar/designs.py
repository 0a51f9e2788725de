"""The radar pipeline's designs, units and input checks, shared by the model, the live pipeline,
Chapter 9 and Lab 3.

A frame is pulses x 1024 complex64 samples (`N_SAMPLES`), written every period by the capture
card (helpers.models.radar.card) into a ring of slots in host memory. The consumer copies it to
the GPU in one of four `DESIGNS`, or in the
`FLAG_DESIGN`, where the GPU waits for a flag (helpers.models.radar.flagwait). Bad sizes, rates or designs raise `RadarInputError`.
"""

from __future__ import annotations

from helpers.core import validate
from helpers.core.errors import CourseError, InputError
from helpers.models.radar import card

DESIGNS = ("pageable", "staged", "registered", "pipelined")
DESIGN_TEXT = {
    "pageable": "cudaMemcpy straight from the (unpinned) ring",
    "staged": "memcpy into a pinned staging buffer, then DMA",
    "registered": "cudaHostRegister the ring itself, DMA straight from it",
    "pipelined": "registered ring + N streams overlapping copy and compute",
    "flag": "registered ring, work queued ahead waits on the GPU for a flag the capture side writes",
}
FLAG_DESIGN = "flag"  # not in DESIGNS: its own runner (flagwait.py) and experiment (radar.flag_wait)
MAX_DEPTH = 8  # frames the flag design may queue ahead: bounded, since launches block once the GPU's queue is full
SEED_PERIOD_S = 8e-3  # seed 002: a frame every 8 ms
SEED_SIZES = (4 << 20, 16 << 20)  # 4 MB a frame, and the full system's 2 GB/s
SEED_RATES = tuple((n, SEED_PERIOD_S) for n in SEED_SIZES)
MAX_BUFFERS = 8
N_SAMPLES = card.N_SAMPLES


class RadarInputError(InputError):
    """A frame size, rate, design or ring the pipeline cannot run (too big for this machine too)."""


class CaptureCardError(CourseError, RuntimeError):
    """The capture-card process did not start, or stopped unexpectedly."""


def check_frame_bytes(frame_bytes, what: str = "frame size") -> int:
    """A frame is pulses x 1024 complex64 samples, at least 2 pulses, at most 256 MiB.

    Not a whole number: InputTypeError; a size no frame has: RadarInputError."""
    frame_bytes = validate.whole_number(frame_bytes, what)
    unit = 8 * N_SAMPLES
    if frame_bytes < 2 * unit or frame_bytes > 256 << 20:
        raise RadarInputError(f"frame size {frame_bytes} B is outside 16 KiB … 256 MiB "
                              f"(a frame is at least 2 pulses of {N_SAMPLES} complex64 samples)")
    if frame_bytes % unit:
        raise RadarInputError(f"frame size {frame_bytes} B does not fit whole pulses: it must be a "
                              f"multiple of {unit} B ({N_SAMPLES} complex64 samples per pulse)")
    return int(frame_bytes)


def check_period(period_s, what: str = "frame period") -> float:
    """A frame period from 0.1 ms to 1 s (zero or negative rates are refused: no frame would come)."""
    p = validate.seconds(period_s, what)
    if not 1e-4 <= p <= 1.0:
        raise RadarInputError(f"{what} {p * 1e3:g} ms is outside 0.1 ms … 1000 ms")
    return p


def check_design(design: str) -> str:
    if design not in DESIGNS + ("cpu",):
        raise RadarInputError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    return design


def check_ring_memory(slots: int, frame_bytes: int, variants: int = 1) -> int:
    """The ring (and the card's frame variants) must fit in a quarter of the memory available now."""
    from helpers.measure.host_memory import available_host_bytes

    need = card.layout_bytes(slots, frame_bytes, variants)
    avail = available_host_bytes()
    if need > avail // 4:
        raise RadarInputError(f"a ring of {slots} x {frame_bytes / 2**20:.0f} MiB needs {need / 2**30:.2f} GiB, "
                              f"more than a quarter of the {avail / 2**30:.1f} GiB available")
    return need


