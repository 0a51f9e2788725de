"""Which of the course's three modes an experiment runs in, and the banner that says so.

- live: a CUDA GPU is usable here; measurements are taken now, on this machine.
- replay: no usable GPU (or COURSE_MODE=replay); figures show data recorded on real GPUs
  by the course's recorder, with that machine named.
- simulated: always available for mechanisms hardware hides (the toy GPU, the TTM model);
  an experiment chooses it explicitly and labels its output as a model.

COURSE_MODE=auto (the default) picks live when the probe succeeds; COURSE_MODE=replay forces
replay on a GPU machine so both paths can be tested there; COURSE_MODE=live demands a GPU
and fails loudly without one.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import StrEnum

from helpers.core import config, gpu
from helpers.core.errors import NoGPUError


class Mode(StrEnum):
    """How an experiment's numbers come to be."""

    LIVE = "live"
    REPLAY = "replay"
    SIMULATED = "simulated"


@dataclass(frozen=True)
class ModeInfo:
    """The chosen mode and the reason for it."""

    mode: Mode
    reason: str
    probe: gpu.GPUProbe


def requested() -> str:
    """The COURSE_MODE the learner asked for (auto when unset); rejects unknown values."""
    return config.requested_mode()


def detect() -> ModeInfo:
    """Decide live or replay from COURSE_MODE and the GPU probe."""
    want = requested()
    if want == "replay":
        return ModeInfo(Mode.REPLAY, "COURSE_MODE=replay forces replay", gpu.GPUProbe(False, "not probed (replay forced)"))
    p = gpu.probe()
    if p.usable:
        return ModeInfo(Mode.LIVE, f"CuPy created a context on {p.name}", p)
    if want == "live":
        raise NoGPUError(f"COURSE_MODE=live, but no usable GPU: {p.reason}")
    return ModeInfo(Mode.REPLAY, f"no usable GPU ({p.reason})", p)


def current() -> Mode:
    """LIVE or REPLAY for this process."""
    return detect().mode


def is_live() -> bool:
    """True when experiments measure this machine's GPU now."""
    return current() is Mode.LIVE


def configure_numba(info: ModeInfo) -> bool:
    """Without a live GPU, run numba.cuda kernels on Numba's CUDA simulator.

    The simulator must be chosen before numba.cuda is first imported; course.start calls this
    once. Returns True when the simulator is (or already was) enabled.
    """
    if config.numba_simulator_on():
        return True
    if info.mode is Mode.LIVE or "numba.cuda" in sys.modules:
        return False  # a GPU is here, or too late to switch (kernels would fail to find a GPU)
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    return True


def banner(info: ModeInfo, chapter: str | None = None, *, simulator: bool = False,
           reference_name: str | None = None) -> str:
    """One short block naming the mode, the GPU (or its absence) and the replay machine.

    A formatter only: it reads nothing and changes nothing (course.start gathers the facts).
    """
    gpu_line = info.probe.name if info.probe.usable else "no GPU"
    if info.mode is Mode.LIVE:
        what = "LIVE: numbers below are measured now, on this machine"
    else:
        what = "REPLAY: numbers below were recorded on a reference GPU, not measured here"
        if not info.probe.usable and not info.reason.startswith("COURSE_MODE"):
            what += ("\n            this is the expected mode on a machine without an NVIDIA GPU:"
                     " nothing needs fixing")
    lines = [
        f"{'=' * 8} {chapter or 'course'} {'=' * 8}",
        f"mode      : {what}",
        f"why       : {info.reason}",
        f"GPU here  : {gpu_line}",
        f"reference : {reference_name or 'none found in data/reference'}",
    ]
    if simulator:
        lines.append("numba     : CUDA simulator (kernels run on the CPU, for correctness only)")
    return "\n".join(lines)
