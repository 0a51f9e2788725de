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

from . import gpu
from .errors import InputError, NoGPUError


class Mode(StrEnum):
    """How an experiment's numbers come to be."""

    LIVE = "live"
    REPLAY = "replay"
    SIMULATED = "simulated"


_VALID = ("auto", "live", "replay")


@dataclass(frozen=True)
class ModeInfo:
    """The chosen mode and the reason for it."""

    mode: Mode
    reason: str
    probe: gpu.GPUProbe


def requested() -> str:
    """The COURSE_MODE the learner asked for (auto when unset); rejects unknown values."""
    value = os.environ.get("COURSE_MODE", "auto").strip().lower() or "auto"
    if value not in _VALID:
        raise InputError(f"COURSE_MODE={value!r} is not one of {', '.join(_VALID)}")
    return value


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


def configure_numba() -> bool:
    """In replay mode, run numba.cuda kernels on Numba's CUDA simulator.

    The simulator must be chosen before numba.cuda is first imported. Returns True when the
    simulator is (or already was) enabled.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    if current() is Mode.LIVE:
        return False
    if "numba.cuda" in sys.modules:
        return False  # too late to switch; kernels would fail to find a GPU
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    return True


def banner(chapter: str | None = None) -> str:
    """One short block naming the mode, the GPU (or its absence) and the replay machine.

    Every notebook calls this first (via helpers.course.start), so a reader always knows
    whether the numbers below are measured here or replayed from elsewhere.
    """
    from . import reference

    info = detect()
    sim = configure_numba()
    ref = reference.default_reference_name()
    gpu_line = info.probe.name if info.probe.usable else "no GPU"
    if info.mode is Mode.LIVE:
        what = "LIVE: numbers below are measured now, on this machine"
    else:
        what = "REPLAY: numbers below were recorded on a reference GPU, not measured here"
    lines = [
        f"{'=' * 8} {chapter or 'course'} {'=' * 8}",
        f"mode      : {what}",
        f"why       : {info.reason}",
        f"GPU here  : {gpu_line}",
        f"reference : {ref or 'none found in data/reference'}",
    ]
    if sim:
        lines.append("numba     : CUDA simulator (kernels run on the CPU, for correctness only)")
    return "\n".join(lines)
