"""The radar pipeline's discrete-event model (SIMULATED): what each design's latency and drops would be on
a machine described by `MachineParams`, without a GPU.

`simulate` plays the pipeline frame by frame on four resources (the consumer's CPU thread, one
copy engine, the compute engine, `buffers` device buffers) and a ring of `slots` slots;
`machine_params` fits the parameters to one machine's recorded evidence; `breaking_rate`
bisects for the shortest period a design sustains. Chapter 9 shows it beside the live runs, and
Lab 3 asks the learner to search it for the cheapest design that meets a deadline.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from helpers.core import validate
from helpers.core.evidence import Evidence
from helpers.models.radar import card, metrics
from helpers.models.radar.designs import (
    MAX_BUFFERS,
    RadarInputError,
    check_design,
    check_frame_bytes,
    check_period,
)
from helpers.models.radar.metrics import runs_of


@dataclass(frozen=True, kw_only=True)
class MachineParams:
    """What the discrete-event model needs to know about a machine (all in seconds / B/s)."""

    pinned_t0_s: float
    pinned_Bps: float
    pageable_t0_s: float
    pageable_Bps: float
    memcpy_Bps: float           # CPU memcpy from the ring into pinned staging
    kernel_s_per_byte: float    # processing time per input byte (FFT work is ~linear here)
    kernel_t0_s: float
    overhead_s: float           # polling and wake-up: the host sees completion this late
    source: str = ""

    def copy_s(self, n: int, pinned: bool) -> float:
        return (self.pinned_t0_s + n / self.pinned_Bps) if pinned else (self.pageable_t0_s + n / self.pageable_Bps)

    def kernel_s(self, n: int) -> float:
        return self.kernel_t0_s + n * self.kernel_s_per_byte

    def describe(self) -> list[str]:
        """The parameters in words, including what a processing time that does not grow with the frame means."""
        k4, k16 = self.kernel_s(4 << 20), self.kernel_s(16 << 20)
        if self.kernel_s_per_byte == 0:
            kern = (f"GPU processing (copy end to kernels end) {k4 * 1e6:.0f} µs per frame, the same for 4 MiB and "
                    "16 MiB frames: those times do not grow with the frame at these sizes, so something other "
                    "than arithmetic sets them (most likely the CPU issuing the FFTs' launches) and the model uses "
                    "one constant")
        else:
            kern = (f"GPU processing {k4 * 1e6:.0f} µs for a 4 MiB frame and {k16 * 1e6:.0f} µs for 16 MiB "
                    f"({self.kernel_t0_s * 1e6:.0f} µs + {self.kernel_s_per_byte * 1e12:.1f} µs per MB)")
        return [f"pinned copy    t0 = {self.pinned_t0_s * 1e6:.1f} µs, B = {self.pinned_Bps / 1e9:.1f} GB/s",
                f"pageable copy  t0 = {self.pageable_t0_s * 1e6:.1f} µs, B = {self.pageable_Bps / 1e9:.1f} GB/s",
                f"memcpy into staging {self.memcpy_Bps / 1e9:.1f} GB/s", kern,
                f"polling overhead (the host sees 'done' this late) {self.overhead_s * 1e6:.0f} µs"]


def fit_t0_bw(nbytes, times_s, lo: int = 1 << 16) -> tuple[float, float]:
    """(t0 in s, B in bytes/s): the course's copy-cost fit (helpers.models.copy_cost, weights
    1/t²) over the sizes >= lo only. The radar's frames are 64 KiB and larger, so the line is
    fitted where the model is used; the smallest copies, which pull t0 down, are left out."""
    from helpers.models import copy_cost

    try:
        f = copy_cost.fit_series({"nbytes": list(nbytes), "median_s": list(times_s)}, lo=lo)
    except copy_cost.ModelInputError as exc:
        raise RadarInputError(f"cannot fit t0 + n/B to the copies of {lo} bytes or more: {exc}") from None
    return f.t0_s, f.bandwidth_Bps


def machine_params(sweep: Evidence, radar_runs: Sequence[Evidence]) -> MachineParams:
    """Model parameters from one machine's evidence: the copy fits from the
    transfers.pinned_vs_pageable sweep, memcpy and kernel times and the polling overhead from
    the radar.* runs (give both from the same machine, e.g. both `recorded=True`)."""
    fits = {}
    for s in sweep.require()["series"]:
        if s["direction"] == "h2d":
            fits[s["host_kind"]] = fit_t0_bw(s["nbytes"], s["median_s"])
    runs = runs_of(radar_runs)
    ker = [(r["frame_bytes"], r["kernel_us_p50"] * 1e-6) for r in runs if r.get("kernel_us_p50")]
    by_n: dict[int, list[float]] = {}
    for n, k in ker:
        by_n.setdefault(n, []).append(k)
    ns = sorted(by_n)
    ks = [float(np.median(by_n[n])) for n in ns]
    slope, k0 = (np.polyfit(ns, ks, 1) if len(ns) >= 2 else (ks[0] / ns[0], 0.0))
    if slope <= 0 or k0 < 0:  # measured kernel time does not grow with size (clocks, launch-bound): use the median
        slope, k0 = (0.0, float(np.median(ks))) if slope <= 0 else (ks[-1] / ns[-1], 0.0)
    mem = [r["frame_bytes"] / (r["memcpy_us_p50"] * 1e-6) for r in runs if r.get("memcpy_us_p50")]
    over = []
    for r in runs:
        if r["design"] == "registered" and r.get("kernel_us_p50"):
            p50 = float(np.median(r["latency_us"])) * 1e-6
            over.append(max(p50 - (r["copy_us_p50"] + r["kernel_us_p50"]) * 1e-6, 0.0))
    return MachineParams(pinned_t0_s=fits["pinned"][0], pinned_Bps=fits["pinned"][1],
                         pageable_t0_s=fits["pageable"][0], pageable_Bps=fits["pageable"][1],
                         memcpy_Bps=float(np.median(mem)), kernel_s_per_byte=float(slope), kernel_t0_s=float(k0),
                         overhead_s=float(np.median(over)) if over else 50e-6, source=sweep.source)


@dataclass(kw_only=True)
class _Engines:
    """When each resource of the modelled pipeline is next free (seconds since the first frame)."""

    copy: float = 0.0
    compute: float = 0.0
    cpu: float = 0.0


def _copy_span(params: MachineParams, design: str, n: int, start: float, eng: _Engines, d) -> tuple[float, float]:
    """(slot release time, copy end) of one frame whose issue starts at `start`; moves the CPU's and the
    copy engine's free times on. A staged frame's slot is free after the CPU memcpy; a pageable copy holds
    the calling thread until the data is staged; a registered ring's slot is free when its DMA ends."""
    if design == "staged":
        release = start + d(n / params.memcpy_Bps)
        c1 = max(release, eng.copy) + d(params.copy_s(n, True))
        eng.cpu = release
    elif design == "pageable":
        c1 = max(start, eng.copy) + d(params.copy_s(n, False))
        release = eng.cpu = c1
    else:
        c1 = max(start, eng.copy) + d(params.copy_s(n, True))
        release, eng.cpu = c1, start
    eng.copy = c1
    return release, c1


def simulate(params: MachineParams, design: str, frame_bytes: int, period_s: float, frames: int = 2000, *,
             slots: int = 4, buffers: int | None = None, jitter: float = 0.0, seed: int = 0,
             deadline_periods: float = 1.0) -> dict:
    """Discrete-event model of the pipeline; returns latency_us, dropped and a summary.

    Resources: the consumer's CPU thread, one copy engine, the compute engine, `buffers`
    device buffers and `slots` ring slots. Frame k is complete in host memory at k*period.
    pageable/staged/registered run one frame at a time (copy, then kernel); pipelined issues
    the next copy while earlier kernels run. A pageable copy also holds the CPU. `jitter`
    multiplies every duration by a lognormal factor with that sigma (seeded). A miss is a
    latency above deadline_periods x period (1: done before the next frame arrives).
    """
    design = check_design(design)
    frame_bytes, period_s = check_frame_bytes(frame_bytes), check_period(period_s)
    frames = validate.whole_number(frames, "frames", 1, 1_000_000)
    slots = validate.whole_number(slots, "ring slots", 1, card.MAX_SLOTS)
    if buffers is None:
        buffers = 3 if design == "pipelined" else 1
    buffers = validate.whole_number(buffers, "buffers", 1, MAX_BUFFERS)
    rng = np.random.default_rng(seed)

    def d(x):
        return x * float(rng.lognormal(0, jitter)) if jitter else x

    eng, buf_free = _Engines(), [0.0] * buffers
    releases: deque = deque()  # release times of accepted frames still holding a slot
    lat, dropped = [], 0
    for k in range(frames):
        a = (k + 1) * period_s
        while releases and releases[0] <= a:
            releases.popleft()
        if len(releases) >= slots:
            dropped += 1
            continue
        b = k % buffers
        release, c1 = _copy_span(params, design, frame_bytes, max(a, eng.cpu, buf_free[b]), eng, d)
        eng.compute = max(c1, eng.compute) + d(params.kernel_s(frame_bytes))
        done = buf_free[b] = eng.compute + params.overhead_s
        if buffers == 1 or design != "pipelined":
            eng.cpu = max(eng.cpu, done)  # one frame at a time: the next starts after this one
        releases.append(release)
        lat.append(int(round((done - a) * 1e6)))
    return {"design": design, "frame_bytes": frame_bytes, "period_s": period_s, "buffers": buffers,
            "slots": slots, "frames": frames, "latency_us": lat, "dropped": dropped,
            "summary": metrics.summarize(lat, period_s * deadline_periods, dropped, frames)}


def breaking_rate(params: MachineParams, design: str, frame_bytes: int, buffers: int | None = None,
                  frames: int = 300, deadline_periods: float = 1.0) -> float:
    """The shortest period (s) at which the model predicts no miss and no drop (bisection)."""
    lo, hi = 1e-4, 1.0
    ok = simulate(params, design, frame_bytes, hi, frames, buffers=buffers, deadline_periods=deadline_periods)
    if ok["summary"]["misses"] or ok["dropped"]:
        return float("inf")
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        r = simulate(params, design, frame_bytes, mid, frames, buffers=buffers, deadline_periods=deadline_periods)
        if r["summary"]["misses"] or r["dropped"]:
            lo = mid
        else:
            hi = mid
    return hi
