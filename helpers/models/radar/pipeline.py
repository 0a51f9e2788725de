"""The live radar pipeline: the consumer that takes the capture card's frames and processes them on the GPU
in one of four designs, measuring each frame's end-to-end latency (LIVE; it needs CuPy and a GPU).

`run_pipeline(PipelineConfig(design=..., frame_bytes=..., period_s=..., frames=...))` runs one
acquisition; `run_cpu_consumer` is a consumer without a GPU (it shows drops on any machine).
`process_frame` (one frame's copy and kernels, with CUDA events) and `wait_done` (how the host
waits for them) are the steps Chapter 9's page shows; `realtime_on` asks for SCHED_FIFO and one CPU.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from helpers.core import validate
from helpers.core.errors import DeviceTimeoutError
from helpers.models.radar import card, dsp
from helpers.models.radar.designs import (
    MAX_BUFFERS,
    RadarInputError,
    check_design,
    check_frame_bytes,
    check_period,
    check_ring_memory,
)
from helpers.models.radar.dsp import (
    frame_shape,
    map_error,
    matched_filter,
    reference_cached,
    synth_cached,
)
from helpers.models.radar.metrics import RunResult
from helpers.models.radar.ring import CaptureCard, CardHost

MAX_KEPT = 64  # processed maps kept on the GPU for the correctness check after a run


def run_cpu_consumer(frame_bytes: int, period_s: float, frames: int, *, slots: int = 4,
                     work_s: float = 0.0, hold: int = 1, timeout_s: float = 5.0) -> RunResult:
    """A CPU-only consumer (no GPU): take each frame, 'process' it for work_s, release it.

    Used by the tests of the ring and by the book without a GPU to show drops: a consumer
    slower than the card loses frames, exactly as the model predicts. `hold` frames are kept
    before the oldest is released (a consumer that never releases loses everything after
    `slots` frames).
    """
    held: deque = deque()
    lat, seqs = [], []
    cpu0, t0 = time.process_time(), time.monotonic()
    with CaptureCard(frame_bytes=frame_bytes, period_s=period_s, slots=slots, frames=frames, variants=1) as c:
        while c.wait_frame(timeout_s):
            s, q, stamp = c.take()
            checksum = float(c.data[s][:: max(1, frame_bytes // 8 // 64)].real.sum())  # touch the data
            if work_s:
                end = time.monotonic() + work_s
                while time.monotonic() < end:
                    pass
            lat.append((time.monotonic_ns() - stamp) // 1000)
            seqs.append(q)
            held.append(checksum)
            while len(held) >= hold and held:
                held.popleft()
                c.release()
        dropped, late = c.dropped, c.counter(card.CTL_LATE)
    return RunResult(design="cpu", frame_bytes=frame_bytes, period_s=period_s, slots=slots, buffers=1, frames=frames,
                     latency_us=[int(x) for x in lat], seq=seqs, dropped=dropped, cpu_s=time.process_time() - cpu0,
                     wall_s=time.monotonic() - t0, producer_late=late)


class _Device:
    """The GPU side of one run: device buffers, streams, events, the registered ring."""

    def __init__(self, cp, c: CaptureCard, design: str, buffers: int) -> None:
        self.cp, self.design, self.buffers = cp, design, buffers
        pulses, ns = frame_shape(c.frame_bytes)
        self.inp = [cp.empty((pulses, ns), cp.complex64) for _ in range(buffers)]
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(buffers)]
        self.mf = matched_filter(cp)
        self.out: list = [None] * buffers
        self.staging = None
        self.registered = 0
        if design == "staged":
            from helpers.measure.host_memory import host_array

            self.staging = [cp.cuda.alloc_pinned_memory(c.frame_bytes) for _ in range(buffers)]
            self.staging_np = [host_array(m.ptr, c.frame_bytes).view(np.complex64) for m in self.staging]
        if design in ("registered", "pipelined"):
            base = c.data.ctypes.data
            cp.cuda.runtime.hostRegister(base, c.data.nbytes, 0)
            self.registered = base

    def close(self) -> None:
        cp = self.cp
        for s in self.streams:
            s.synchronize()
        if self.registered:
            cp.cuda.runtime.hostUnregister(self.registered)
            self.registered = 0
        self.inp = self.out = self.staging = self.staging_np = self.streams = None


def process_frame(xp, src_ptr: int, dst, mf, stream, process):
    """One frame's GPU work on `stream`: copy it from host memory (src_ptr) into the device array
    dst, then process it; three CUDA events mark the copy's start, its end (the kernels queue
    behind it) and the kernels' end. xp is cupy. Returns (map, events)."""
    start, copied, done = xp.cuda.Event(), xp.cuda.Event(), xp.cuda.Event(block=True)
    start.record(stream)
    xp.cuda.runtime.memcpyAsync(dst.data.ptr, src_ptr, dst.nbytes, xp.cuda.runtime.memcpyHostToDevice,
                                stream.ptr)
    copied.record(stream)
    with stream:
        out = process(xp, dst, mf)
    done.record(stream)
    return out, (start, copied, done)


SYNC_MODES = ("poll", "spin", "blocking")


def wait_done(event, sync: str, timeout_s: float) -> None:
    """Wait until the GPU has passed `event`. 'spin': ask again at once (one CPU core busy, the
    fastest wake-up); 'poll': sleep 50 µs between asks; 'blocking': sleep in the driver until
    the GPU's interrupt (the event was made with block=True, cudaEventBlockingSync)."""
    if sync == "blocking":
        event.synchronize()  # bounded: one frame's copy and kernels are all that is queued
        return
    deadline = time.monotonic() + timeout_s
    while not event.done:
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"a frame's kernels did not finish within {timeout_s:.1f} s")
        if sync == "poll":
            time.sleep(50e-6)


def realtime_on() -> tuple[dict, tuple]:
    """Pin this thread to one CPU and ask for SCHED_FIFO (priority 10), where permitted. Returns what
    was granted (a refusal is recorded as 'not permitted (EPERM)', never raised) and what to restore.
    Called after the card has started, so its process keeps the normal scheduler and every CPU."""
    granted: dict = {}
    saved_cpus = os.sched_getaffinity(0)
    saved_policy = os.sched_getscheduler(0), os.sched_getparam(0)
    cpu = max(saved_cpus)
    try:
        os.sched_setaffinity(0, {cpu})
        granted["cpu_affinity"] = f"pinned to CPU {cpu}"
    except OSError as exc:
        granted["cpu_affinity"] = f"not permitted ({exc.strerror or exc})"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
        granted["sched_fifo"] = "SCHED_FIFO priority 10"
    except PermissionError:
        granted["sched_fifo"] = "not permitted (EPERM)"
    except OSError as exc:
        granted["sched_fifo"] = f"not permitted ({exc.strerror or exc})"
    return granted, (saved_cpus, saved_policy)


def realtime_off(saved: tuple) -> None:
    """Undo realtime_on: the scheduler policy first, then the CPU set."""
    cpus, (policy, param) = saved
    try:
        os.sched_setscheduler(0, policy, param)
    except OSError:
        pass
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        pass


@dataclass(kw_only=True)
class PipelineConfig:
    """One live acquisition: what `run_pipeline` runs, checked when it is made (bad input raises here).

    design: pageable | staged | registered | pipelined (designs.DESIGN_TEXT); buffers: device
    buffers/streams in flight (None: 3 for pipelined, else 1). process(xp, frame, mf) -> map replaces
    `doppler_map` (Lab 3 passes the learner's). Every `check_every`-th frame's map is kept on the GPU
    (at most MAX_KEPT) and compared with the NumPy reference after the run, since a comparison inside
    the loop would stall it (101 is prime to 4, so the checks cycle through the card's four frame
    variants); 0 checks nothing. step(xp, src_ptr, dst, mf, stream, process) issues one frame (the page
    shows `process_frame`). sync None: the loop polls, sleeping 50 µs when idle; 'poll' / 'spin' /
    'blocking': when every device buffer is busy it waits for the oldest frame with
    waiter(event, sync, timeout_s) (the page shows `wait_done`). realtime: one CPU and SCHED_FIFO
    (`realtime_on`; what was granted goes in extra['realtime']). timeline: every frame's CUDA event
    and host times on one clock in extra['timeline']. host: a CardHost whose process produces the
    frames (a series of runs shares one); None starts one. warm_up: make the FFT plans and kernels
    before the run (False only right after a run of the same frame size and process, whose plans
    CuPy's plan cache still holds: radar.breaking_point's runs of one size).
    """

    design: str = "registered"
    frame_bytes: int = 4 << 20
    period_s: float = 8e-3
    frames: int = 500
    slots: int = 4
    buffers: int | None = None
    process: Callable | None = None
    check_every: int = 101
    seed: int = 9
    timeout_s: float = 5.0
    progress: bool = False
    step: Callable = process_frame
    sync: str | None = None
    waiter: Callable = wait_done
    realtime: bool = False
    timeline: bool = False
    host: CardHost | None = None
    warm_up: bool = True

    def __post_init__(self) -> None:
        if check_design(self.design) == "cpu":
            raise RadarInputError("design 'cpu' runs through run_cpu_consumer")
        self.frame_bytes, self.period_s = check_frame_bytes(self.frame_bytes), check_period(self.period_s)
        self.frames = validate.whole_number(self.frames, "frames", 1, 1_000_000)
        if self.buffers is None:
            self.buffers = 3 if self.design == "pipelined" else 1
        self.buffers = validate.whole_number(self.buffers, "buffers", 1, MAX_BUFFERS)
        self.slots = validate.whole_number(self.slots, "ring slots", 1, card.MAX_SLOTS)
        self.check_every = validate.whole_number(self.check_every, "check_every", 0)
        if self.sync is not None:
            validate.choice(self.sync, "sync", SYNC_MODES)
        if self.process is None:
            self.process = dsp.doppler_map  # through its module, its one name (what Lab 3 forbids)

    @property
    def variants(self) -> int:
        """Frames the card cycles through: 4 when maps are checked (so the checks see several), else 1."""
        return 4 if self.check_every else 1


@dataclass(kw_only=True)
class FrameLog:
    """Every finished frame of a run (record_frame fills it): latency (µs), sequence number, copy and
    kernel times (µs), and the maps kept for the check after the run."""

    lat: list = field(default_factory=list)
    seqs: list = field(default_factory=list)
    copy_t: list = field(default_factory=list)
    kern_t: list = field(default_factory=list)
    kept: list = field(default_factory=list)


@dataclass(kw_only=True)
class _Run(FrameLog):
    """What one run of a CPU-launched design collects while it goes: its FrameLog, the CPU copies' times,
    and the queues of frames in flight (buffer, seq, stamp, three events) and of copied frames whose slot
    is not yet released (their copy events, in order; None for a staged frame, free once the CPU copy is done)."""

    free: deque
    memcpy_t: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    inflight: deque = field(default_factory=deque)
    unreleased: deque = field(default_factory=deque)


def _check_device_memory(cfg: PipelineConfig, gpu) -> None:
    """Refuse a run whose buffers and kept maps would not fit in the device's free memory."""
    kept = min(cfg.frames // cfg.check_every + 1, MAX_KEPT) * cfg.frame_bytes // 2 if cfg.check_every else 0
    need = 6 * cfg.buffers * cfg.frame_bytes + kept
    if gpu.free_device_bytes() < need:
        raise RadarInputError(f"{cfg.buffers} buffers of {cfg.frame_bytes / 2**20:.0f} MiB (and the maps kept for "
                              f"the check) need about {need / 2**30:.1f} GiB of free device memory")


def _warm_up(cp, cfg: PipelineConfig) -> None:
    """FFT plans and the kernels, made outside the timed run."""
    warm = cp.asarray(synth_cached(cfg.frame_bytes, cfg.seed, 0))
    for _ in range(2):
        cfg.process(cp, warm, matched_filter(cp))
    cp.cuda.runtime.deviceSynchronize()


def record_frame(log: FrameLog, cp, q: int, latency_ns: int, events: tuple, out, check_every: int) -> None:
    """One finished frame into a run's FrameLog: its
    latency in µs, its sequence number, its copy and kernel times (µs) from its three events, and its map
    when it is one of those kept for the check after the run (a check here would stall the loop). The
    CPU-launched designs and the flag design (flagwait) log their frames alike through this."""
    e0, e1, e2 = events
    log.lat.append(latency_ns // 1000)
    log.seqs.append(q)
    log.copy_t.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    log.kern_t.append(cp.cuda.get_elapsed_time(e1, e2) * 1e3)
    if check_every and q % check_every == 0 and len(log.kept) < MAX_KEPT:
        log.kept.append((q, out))


def _collect_done(run: _Run, cp, dev: _Device, cfg: PipelineConfig, clock: tuple, bar) -> bool:
    """Take every frame whose map is complete off the in-flight queue, with its latency and event times."""
    origin, host0 = clock
    busy = False
    while run.inflight and run.inflight[0][5].done:
        b, q, stamp, e0, e1, e2 = run.inflight.popleft()
        now = time.monotonic_ns()
        record_frame(run, cp, q, now - stamp, (e0, e1, e2), dev.out[b], cfg.check_every)
        if cfg.timeline:
            run.timeline.append({"seq": q, "buffer": b, "ready_ms": (stamp - host0) / 1e6,
                                 "copy_ms": [cp.cuda.get_elapsed_time(origin, e) for e in (e0, e1)],
                                 "kernels_ms": [cp.cuda.get_elapsed_time(origin, e) for e in (e1, e2)],
                                 "seen_ms": (now - host0) / 1e6})
        dev.out[b] = None
        run.free.append(b)
        busy = True
        if bar:
            bar.step()
    return busy


def _release_copied(run: _Run, c: CaptureCard) -> bool:
    """Hand back to the card every ring slot whose frame has left it (in order)."""
    busy = False
    while run.unreleased and (run.unreleased[0] is None or run.unreleased[0].done):
        run.unreleased.popleft()
        c.release()
        busy = True
    return busy


def _issue_next(run: _Run, cp, c: CaptureCard, dev: _Device, cfg: PipelineConfig) -> bool:
    """Issue the next written frame into a free device buffer (through a CPU copy when staged)."""
    if not (run.free and c.available()):
        return False
    s, q, stamp = c.take()
    b = run.free.popleft()
    if cfg.design == "staged":
        m0 = time.perf_counter()
        np.copyto(dev.staging_np[b], c.data[s])
        run.memcpy_t.append((time.perf_counter() - m0) * 1e6)
        run.unreleased.append(None)  # the ring slot is free as soon as the CPU copy is done
        src = dev.staging[b].ptr
    else:
        src = c.data[s].ctypes.data
    dev.out[b], (e0, e1, e2) = cfg.step(cp, src, dev.inp[b], dev.mf, dev.streams[b], cfg.process)
    if cfg.design != "staged":
        run.unreleased.append(e1)
    run.inflight.append((b, q, stamp, e0, e1, e2))
    return True


def _origin(cp) -> tuple:
    """(an event the GPU has passed, the host's clock then): the timeline's one clock, give or take a few µs."""
    origin = cp.cuda.Event()
    origin.record()
    origin.synchronize()
    return origin, time.monotonic_ns()


def _consume(run: _Run, cp, c: CaptureCard, dev: _Device, cfg: PipelineConfig, clock: tuple, bar) -> None:
    """The consumer's loop, until the card is done and no frame is in flight. Without work it waits for
    the oldest frame (cfg.sync) or sleeps 50 µs; no progress for cfg.timeout_s raises DeviceTimeoutError."""
    last_progress = time.monotonic()
    while True:
        busy = _collect_done(run, cp, dev, cfg, clock, bar)
        busy = _release_copied(run, c) or busy
        if _issue_next(run, cp, c, dev, cfg) or busy:
            last_progress = time.monotonic()
            continue
        if not run.inflight and c.finished:
            return
        if cfg.sync is not None and run.inflight and not run.free:  # every buffer busy: wait for the oldest
            cfg.waiter(run.inflight[0][5], cfg.sync, cfg.timeout_s)
            continue
        c.check_alive()
        if time.monotonic() - last_progress > cfg.timeout_s:
            raise DeviceTimeoutError(f"the pipeline made no progress for {cfg.timeout_s:.1f} s "
                                     f"({len(run.lat)} of {cfg.frames} frames done)")
        if cfg.sync != "spin":
            time.sleep(5e-5)


def _median(v: list) -> float | None:
    return float(np.median(v)) if v else None


def _result(cfg: PipelineConfig, run: _Run, counts: dict, gpu_name: str, granted: dict) -> RunResult:
    extra = {"sync": cfg.sync or "poll-loop"}
    if cfg.realtime:
        extra["realtime"] = granted
    if cfg.timeline:
        extra["timeline"] = run.timeline
    return RunResult(design=cfg.design, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=cfg.slots,
                     buffers=cfg.buffers, frames=cfg.frames, latency_us=[int(x) for x in run.lat], seq=run.seqs,
                     copy_us_p50=_median(run.copy_t), kernel_us_p50=_median(run.kern_t),
                     memcpy_us_p50=_median(run.memcpy_t), gpu=gpu_name, extra=extra, **counts)


def run_pipeline(cfg: PipelineConfig) -> RunResult:
    """Run the live pipeline: the card produces cfg.frames frames, the GPU processes them.

    Latency of a frame = the moment its map is complete on the GPU, seen by the host, minus the moment
    the card finished writing it. The kept maps are checked against the float64 NumPy reference after
    the timed loop (`checked`, `max_error`). Whatever stops the run, the card, the registered ring, the
    scheduler and the memory pools are given back.
    """
    from helpers.core import gpu
    from helpers.core.progress import Progress

    if not isinstance(cfg, PipelineConfig):
        raise RadarInputError(f"run_pipeline takes a PipelineConfig, not {type(cfg).__name__}")
    cp = gpu.cupy()
    check_ring_memory(cfg.slots, cfg.frame_bytes, cfg.variants)
    _check_device_memory(cfg, gpu)
    refs = {v: reference_cached(cfg.frame_bytes, cfg.seed, v)
            for v in ({q % 4 for q in range(0, cfg.frames, cfg.check_every)} if cfg.check_every else ())}
    if cfg.warm_up:
        _warm_up(cp, cfg)
    label = f"{cfg.design} {cfg.frame_bytes >> 20} MiB/{cfg.period_s * 1e3:g} ms"
    bar = Progress(cfg.frames, label) if cfg.progress else None
    c = CaptureCard(frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=cfg.slots, frames=cfg.frames,
                    seed=cfg.seed, variants=cfg.variants, host=cfg.host)
    run, dev, rt_saved, granted = _Run(free=deque(range(cfg.buffers))), None, None, {}
    try:
        c.start()
        dev = _Device(cp, c, cfg.design, cfg.buffers)
        if cfg.realtime:
            granted, rt_saved = realtime_on()
        clock = _origin(cp)
        cpu0, t0 = time.process_time(), time.monotonic()
        _consume(run, cp, c, dev, cfg, clock, bar)
        counts = {"cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - t0,
                  "dropped": c.dropped, "producer_late": c.counter(card.CTL_LATE)}
        errors = [map_error(cp.asnumpy(m), refs[q % 4]) for q, m in run.kept]
        counts.update(checked=len(errors), max_error=max(errors) if errors else None)
    finally:
        if rt_saved is not None:
            realtime_off(rt_saved)
        run.kept.clear()
        if dev is not None:
            dev.close()
        c.close()
        del dev
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    return _result(cfg, run, counts, gpu.probe().name, granted)
