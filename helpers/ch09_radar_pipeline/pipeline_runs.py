"""Chapter 9's recorded experiments: the live pipeline of each design at the source question's rates
(`radar.pageable`, `radar.staged`, `radar.registered`, `radar.pipelined`), its timeline from CUDA
events (`radar.timeline`) and each design's breaking point (`radar.breaking_point`).

The notebook asks for them with `ctx.get("radar.staged", frames=200)`; the pipeline they run is the
course's radar model (helpers.models.radar.pipeline), and what they return goes into the reference file.
"""

from __future__ import annotations

import time

from helpers.ch09_radar_pipeline import breaking as bp
from helpers.core import validate
from helpers.core.experiments import GPU, experiment
from helpers.models.radar.designs import (
    DESIGNS,
    MAX_BUFFERS,
    SEED_PERIOD_S,
    SEED_SIZES,
    check_frame_bytes,
    check_period,
)
from helpers.models.radar.metrics import RunResult
from helpers.models.radar.pipeline import PipelineConfig, process_frame, run_pipeline, wait_done
from helpers.models.radar.ring import shared_host

RECORDED_FRAMES = 2000  # frames per run the recorder measures
QUICK_FRAMES = 200  # at most this many with quick=True (the recorder's smoke test)
MAX_FRAMES = 20_000  # a run the experiments accept: 160 s at 8 ms a frame

# What each radar experiment takes (checked by ctx.get before anything runs, live or replay).
RUN_PARAMS = {"frames": validate.count(1, MAX_FRAMES), "frame_bytes": check_frame_bytes,
              "period_s": check_period, "buffers": validate.count(1, MAX_BUFFERS)}


def record_design(design: str, quick: bool, frames: int = RECORDED_FRAMES, frame_bytes: int | None = None,
                  period_s: float = SEED_PERIOD_S, buffers: int | None = None) -> dict:
    """Run one design live: `frames` frames (at most QUICK_FRAMES when quick) of each seed frame
    size, or of `frame_bytes` alone, every `period_s`; `buffers` as PipelineConfig takes them."""
    frames = min(frames, QUICK_FRAMES) if quick else frames
    sizes = SEED_SIZES if frame_bytes is None else (frame_bytes,)
    with shared_host() as host:  # the page's experiments share one capture-card process
        runs = [run_pipeline(PipelineConfig(design=design, frame_bytes=n, period_s=period_s, frames=frames,
                                            buffers=buffers, progress=True, host=host)).to_dict()
                for n in sizes]
    return {"runs": runs, "frames": frames}


DESIGN_TITLES = {
    "pageable": "Radar pipeline: cudaMemcpy from the unpinned ring, 4 MB and 16 MB per 8 ms",
    "staged": "Radar pipeline: memcpy to pinned staging then DMA, 4 MB and 16 MB per 8 ms",
    "registered": "Radar pipeline: cudaHostRegister'ed ring, DMA from it, 4 MB and 16 MB per 8 ms",
    "pipelined": "Radar pipeline: registered ring, 3 streams overlapping copy and compute",
}


def _register_design(design: str) -> None:
    """Register experiment radar.<design>: the pipeline of that design at the seed's rates."""

    def record(quick: bool, frames: int = RECORDED_FRAMES, frame_bytes: int | None = None,
               period_s: float = SEED_PERIOD_S, buffers: int | None = None) -> dict:
        return record_design(design, quick, frames, frame_bytes, period_s, buffers)

    record.__name__ = record.__qualname__ = f"record_{design}"
    experiment(f"radar.{design}", chapter=9, needs=(GPU,), params=RUN_PARAMS, title=DESIGN_TITLES[design])(record)


for _design in DESIGNS:
    _register_design(_design)


# -- a timeline of the pipeline, from CUDA event timestamps (a Gantt chart) ---------------------
TIMELINE_POINT = (16 << 20, 4e-3)  # 16 MiB every 4 ms: 4 GB/s, twice the source's full system
TIMELINE_DESIGNS = ("registered", "pipelined")


@experiment("radar.timeline", chapter=9, needs=(GPU,),
            title="Radar pipeline timeline: every frame's copy and kernels from CUDA events (registered, pipelined)")
def timeline_experiment(quick: bool, code=process_frame) -> dict:
    frame_bytes, period_s = TIMELINE_POINT
    frames = 12 if quick else 40
    with shared_host() as host:  # the page's experiments share one capture-card process
        runs = [run_pipeline(PipelineConfig(design=design, frame_bytes=frame_bytes, period_s=period_s, frames=frames,
                                            check_every=0, step=code, timeline=True, host=host)).to_dict()
                for design in TIMELINE_DESIGNS]
    return {"runs": runs, "frames": frames}


# -- breaking points: raise rate and frame size until the designs separate ---------------------
def _slim(r: RunResult) -> dict:
    return _slim_dict(r.to_dict())


def _slim_dict(d: dict) -> dict:
    d = dict(d)
    for k in ("seq", "gpu", "checked", "max_error"):
        d.pop(k, None)
    return d


def _climb(run, ladder, repeats: int, budget_s: float, t0: float) -> tuple[list, list]:
    """Every design up the ladder, `repeats` runs a point (one when its first run is clear), until it
    breaks or the time budget is spent: (the sweep's slim runs, the points the budget cut)."""
    sweep, truncated = [], []
    for design in DESIGNS:
        for n, period in ladder:
            if time.monotonic() - t0 > budget_s:
                truncated.append(f"{design} {n >> 20} MiB / {period * 1e3:g} ms")
                break
            runs = [run(design, n, period).to_dict()]
            if not bp.clear(runs[0]):
                runs += [run(design, n, period).to_dict() for _ in range(repeats - 1)]
            sweep += [_slim_dict(r) for r in runs]
            if bp.point_broke(runs):
                break
    return sweep, truncated


@experiment("radar.breaking_point", chapter=9, needs=(GPU,), params={"repeats": validate.count(2, bp.REPEATS)},
            title="Radar pipeline: each design's breaking point (repeated runs), and spin/poll/blocking waits "
                  "and SCHED_FIFO + CPU pinning")
def breaking_point_experiment(quick: bool, repeats: int = bp.REPEATS, code=wait_done) -> dict:
    """First RT_CONFIGS on 'registered' at RT_POINT (short, so the real-time measures are never cut),
    then climb LADDER with every design, `repeats` runs a point (one when its first run is `clear`;
    the recorder's REPEATS, fewer where a page runs it live), until the design breaks (then stop
    climbing it). The whole run is bounded by a time budget; what was cut is said (`truncated`)."""
    ladder, repeats = (bp.QUICK_LADDER, min(repeats, bp.QUICK_REPEATS)) if quick else (bp.LADDER, repeats)
    budget = bp.QUICK_BUDGET_S if quick else bp.SWEEP_BUDGET_S
    t0 = time.monotonic()
    rt = []
    warmed = []  # the frame size of the last run: its FFT plans and kernels are made, and CuPy keeps them
    with shared_host() as host:  # one capture-card process for every run (their rings differ)
        def run(design, n, period, **kw):
            cfg = PipelineConfig(design=design, frame_bytes=n, period_s=period, frames=bp.frames_for(period, quick),
                                 check_every=0, host=host, warm_up=warmed[-1:] != [n], **kw)
            warmed.append(n)
            return run_pipeline(cfg)

        for sync, realtime in bp.RT_CONFIGS:
            for _ in range(1 if quick else bp.RT_REPEATS):
                rt.append(_slim(run("registered", *bp.RT_POINT, sync=sync, waiter=code, realtime=realtime)))
        sweep, truncated = _climb(run, ladder, repeats, budget, t0)
    return {"ladder": [list(x) for x in ladder], "repeats": repeats, "clear_margin": bp.CLEAR_MARGIN,
            "rt_repeats": 1 if quick else bp.RT_REPEATS, "miss_limit": bp.MISS_LIMIT, "rule": bp.MISS_RULE,
            "sweep": sweep, "realtime": rt, "truncated": truncated, "seconds": time.monotonic() - t0}
