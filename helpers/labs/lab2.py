"""Support for Lab 2 (build your own bandwidth test): copy jobs, timers and the reference sweep.

The learner writes `timed_copy(cuda, stream, dst, src, nbytes, kind)` against the small part
of `cupy.cuda` it needs (Event, runtime.memcpyAsync, get_elapsed_time). A `CopyJob` hands it
either the real thing (live: a pinned host buffer, a device buffer and a stream, freed on
exit) or `FakeCuda`, a *simulated* stand-in whose clock advances by a model copy time, so the
event protocol can be checked without a GPU. Timers (`replay_timer`, `warmup_timer`) feed a
benchmark recorded or simulated timings; every simulated value is labelled as such. The
recorded sweep and large copies come from `ctx.get(...)` as Evidence.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from helpers.core import gpu
from helpers.core.errors import CourseError, InputError, ReferenceDataError
from helpers.core.evidence import Evidence
from helpers.measure.host_memory import HostBuffer, check_nbytes
from helpers.models import copy_cost

H2D, D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


class NotReadyError(RuntimeError):
    """The simulated equivalent of cudaErrorNotReady from cudaEventElapsedTime."""


# ----------------------------------------------------------------------- simulated CUDA
class _Stream:
    """One simulated stream; its clock is when the work queued so far finishes."""

    def __init__(self, owner: FakeCuda) -> None:
        self.owner, self.ptr, self.clock_s = owner, 0x5EA, 0.0

    def synchronize(self) -> None:
        self.owner.synced_until = self.clock_s


class FakeCuda:
    """A SIMULATED `cupy.cuda` subset: events, one stream, memcpyAsync with a model copy time.

    A copy of n bytes takes t0_s + n / bw_Bps on the simulated clock. Events take the stream's
    clock when recorded and are complete only once waited for (`event.synchronize()`, polling
    `event.done`, or `stream.synchronize()`), as on a real GPU that is still busy.
    """

    def __init__(self, t0_s: float = 8e-6, bw_Bps: float = 20e9) -> None:
        self.t0_s, self.bw_Bps = t0_s, bw_Bps
        self.log: list[str] = []
        self.synced_until = -1.0
        self.stream = _Stream(self)
        self.runtime = _Runtime(self)
        fake = self

        class Event:
            def __init__(self, *a, **k) -> None:
                self.t: float | None = None

            def record(self, stream=None) -> None:
                self.t = fake.stream.clock_s
                fake.log.append("record")

            def synchronize(self) -> None:
                if self.t is not None:
                    fake.synced_until = max(fake.synced_until, self.t)
                fake.log.append("wait")

            @property
            def done(self) -> bool:
                self.synchronize()
                return True

        self.Event = Event

    def copy_time(self, nbytes: int) -> float:
        return self.t0_s + nbytes / self.bw_Bps

    def get_elapsed_time(self, start, end) -> float:
        """Milliseconds between two recorded, completed events (like cupy.cuda.get_elapsed_time)."""
        self.log.append("elapsed")
        if start.t is None or end.t is None:
            raise NotReadyError("get_elapsed_time: an event was never recorded (call event.record(stream))")
        if end.t > self.synced_until:
            raise NotReadyError("get_elapsed_time: cudaErrorNotReady — the end event has not completed; "
                                "wait for it (end.synchronize()) before reading the time")
        return (end.t - start.t) * 1e3


class _Runtime:
    def __init__(self, fake: FakeCuda) -> None:
        self.fake = fake

    def memcpyAsync(self, dst, src, size, kind, stream) -> None:  # noqa: N802 - CUDA's name
        if kind not in (H2D, D2H):
            raise InputError(f"memcpyAsync: kind {kind} is not host-to-device (1) or device-to-host (2)")
        self.fake.stream.clock_s += self.fake.copy_time(int(size))
        self.fake.log.append("copy")


# ----------------------------------------------------------------------- copy jobs
@dataclass(kw_only=True)
class CopyJob:
    """Everything one copy needs: pass `*job.args` to timed_copy."""

    cuda: object
    stream: object
    dst: int
    src: int
    nbytes: int
    kind: int
    simulated: bool
    _keep: list = field(default_factory=list, repr=False)

    @property
    def args(self) -> tuple:
        return (self.cuda, self.stream, self.dst, self.src, self.nbytes, self.kind)


@contextmanager
def simulated_copy(nbytes: int, direction: str = "h2d", *, t0_s: float = 8e-6, bw_Bps: float = 20e9):
    """A CopyJob on FakeCuda (SIMULATED); job.cuda.copy_time(nbytes) is the true answer."""
    if direction not in ("h2d", "d2h"):
        raise InputError(f"direction must be 'h2d' or 'd2h', got {direction!r}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
        raise InputError(f"nbytes must be a positive whole number of bytes, got {nbytes!r}")
    fake = FakeCuda(t0_s, bw_Bps)
    yield CopyJob(cuda=fake, stream=fake.stream, dst=0xD0, src=0x50, nbytes=int(nbytes),
                  kind=H2D if direction == "h2d" else D2H, simulated=True)


@contextmanager
def live_copy(nbytes: int, direction: str = "h2d"):
    """A CopyJob between a pinned host buffer and a device buffer on this GPU; freed on exit."""
    if direction not in ("h2d", "d2h"):
        raise InputError(f"direction must be 'h2d' or 'd2h', got {direction!r}")
    n = check_nbytes(nbytes, f"{direction} copy", host=True, device=True)
    cp = gpu.cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    dev = cp.cuda.memory.Memory(n)
    try:
        with HostBuffer(n, "pinned") as host:
            src, dst = (host.ptr, dev.ptr) if direction == "h2d" else (dev.ptr, host.ptr)
            yield CopyJob(cuda=cp.cuda, stream=stream, dst=dst, src=src, nbytes=n,
                          kind=H2D if direction == "h2d" else D2H, simulated=False)
    finally:
        stream.synchronize()
        del dev


# ----------------------------------------------------------------------- timers
class CountingTimer:
    """A zero-argument timer that serves given timings in order and counts its calls."""

    def __init__(self, times_s: list[float], label: str) -> None:
        self.times_s, self.label, self.calls = [float(t) for t in times_s], label, 0

    def __call__(self) -> float:
        if self.calls >= len(self.times_s):
            raise CourseError(f"{self.label}: only {len(self.times_s)} timings exist, and the "
                              f"benchmark asked for timing number {self.calls + 1}")
        self.calls += 1
        return self.times_s[self.calls - 1]


def replay_timer(times_s: list[float]) -> CountingTimer:
    """Serves recorded timings (REPLAY) in the order they were measured."""
    return CountingTimer(times_s, "recorded timings")


def warmup_timer(steady_s: float, calls: int, *, slow_calls: int = 2, slow_factor: float = 40.0,
                 jitter: float = 0.02, seed: int = 0) -> CountingTimer:
    """SIMULATED timings: the first `slow_calls` pay a one-time setup cost, the rest jitter."""
    rng = np.random.default_rng(seed)
    t = steady_s * rng.normal(1.0, jitter, calls).clip(0.9, 1.1)
    t[:slow_calls] *= slow_factor
    return CountingTimer(list(t), "simulated timings")


# ----------------------------------------------------------------------- data
def reference_sweep(sweep: Evidence, host_kind: str = "pinned", direction: str = "h2d") -> tuple[np.ndarray, np.ndarray]:
    """(nbytes, median seconds) of one series of a `transfers.pinned_vs_pageable` Evidence."""
    s = copy_cost.series_for(sweep.require(), host_kind, direction)
    return np.asarray(s["nbytes"], dtype=float), np.asarray(s["median_s"], dtype=float)


def reference_reps(large: Evidence, key: str = "pinned/h2d") -> tuple[int, list[float], float]:
    """(nbytes, every repetition in seconds, GB/s) of one large copy of a `transfers.large_copy` Evidence."""
    data = large.require()
    if key not in data:
        raise ReferenceDataError(f"{large.experiment_id} ({large.source}) has no {key!r} copy; it has {sorted(data)}")
    d = data[key]
    return int(d["nbytes"]), list(d["times_s"]), float(d["bandwidth_gbps"])


def synthetic_line(t0_s: float, bw_Bps: float, nbytes, *, noise: float = 0.03, seed: int = 0) -> np.ndarray:
    """SIMULATED copy times t0 + n/B with multiplicative noise (a fixed seed, so reproducible)."""
    n = np.asarray(nbytes, dtype=float)
    rng = np.random.default_rng(seed)
    return (t0_s + n / bw_Bps) * rng.normal(1.0, noise, n.size)



# ----------------------------------------------------------------------------- stand-ins
def _fit_line(nbytes, times_s) -> tuple[float, float]:
    """The course's stand-in for fit_line: the course's own estimator (models.copy_cost.fit,
    which Chapter 3 uses and the fit_line check refuses as the learner's answer)."""
    f = copy_cost.fit(nbytes, times_s)
    return f.t0_s, f.bandwidth_Bps


def _predict_time(nbytes, t0_s: float, bw_Bps: float):
    """The course's stand-in for predict_time: the copy-cost model's own prediction."""
    return copy_cost.LinearFit(float(t0_s), float(bw_Bps), (), ()).predict_s(nbytes)


#: the earlier parts each dependent check builds on
BUILDS_ON = {"predict": ("fit_line",), "batch": ("fit_line", "predict_time")}


def stand_ins(part: str) -> dict:
    """The course's stand-ins for the parts `part` ('predict' or 'batch') builds on, for the
    visible checks: a learner whose fit_line is unfinished still gets feedback on predict_time
    and batch_slowdown. The grade uses the instructor's reference instead, in the grader."""
    course = {"fit_line": _fit_line, "predict_time": _predict_time}
    return {name: course[name] for name in BUILDS_ON.get(part, ())}
