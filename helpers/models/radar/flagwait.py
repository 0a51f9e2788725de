"""The flag design (LIVE): the GPU waits on a flag in pinned host memory, so no frame needs a CPU launch.

Two 32-bit words of pinned host memory mapped for the GPU (cuMemHostAlloc DEVICEMAP, through
helpers.measure.driver_api): READY, which the capture side sets to k + 1 once frame k (counted in the
order the card wrote them, so it lies in ring slot k % slots) is in the ring, and DONE, which the GPU sets
to k + 1 once frame k's map is complete. A launcher thread keeps at most `depth` frames queued ahead of
DONE on one stream, each as `queue_frame`: wait until READY >= k + 1 (cuStreamWaitValue32, GEQ), copy the
slot and process it (`process_frame`, as the other designs do), write DONE = k + 1 (cuStreamWriteValue32).
The capture side's work per frame is one store; it learns that a frame is done by reading DONE.

Every kernel the queued work uses runs once (the launcher's warm-up) before any wait is queued: on the
H100 a probe hung with one frame queued, because the frame's kernel had never run and its first launch, a
lazy module load, waited for the context, i.e. for the stream held by the unwritten flag (CUDA Programming
Guide, Lazy Loading). The queue ahead is bounded (launches block once the channel's queue is full, and
nothing drains it while every queued frame waits on a flag), every host-side wait has a deadline, and teardown sets READY past every queued frame, so a frame that never comes (dropped by the
card, or a run stopped early) releases its wait instead of holding the stream forever.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from helpers.core import validate
from helpers.core.errors import DeviceTimeoutError, InputError, SkipExperiment
from helpers.models.radar import card, dsp
from helpers.models.radar.designs import (
    FLAG_DESIGN,
    MAX_DEPTH,
    check_frame_bytes,
    check_period,
    check_ring_memory,
)
from helpers.models.radar.dsp import map_error, reference_cached
from helpers.models.radar.metrics import RunResult
from helpers.models.radar.pipeline import FrameLog, _Device, _warm_up, process_frame, record_frame
from helpers.models.radar.ring import CaptureCard, CardHost

READY, DONE = 0, 1  # the two flag words (queue_frame: READY at the flags' address, DONE 4 bytes on)


class DriverMemOps:
    """Stream memory operations on the real driver (helpers.measure.driver_api); tests pass a stand-in."""

    def support_problem(self) -> str | None:
        from helpers.measure import driver_api

        return driver_api.memop_unsupported(driver_api.memop_support())

    def words(self, count: int):
        from helpers.measure import driver_api

        return driver_api.mapped_words(count)

    def context(self):
        from helpers.measure import driver_api

        return driver_api.primary_context()

    def wait_geq(self, stream_ptr: int, addr: int, value: int) -> None:
        from helpers.measure import driver_api

        driver_api.wait_value_geq(stream_ptr, addr, value)

    def write(self, stream_ptr: int, addr: int, value: int) -> None:
        from helpers.measure import driver_api

        driver_api.write_value(stream_ptr, addr, value)

    def idle(self, stream_ptr: int) -> bool:
        from helpers.measure import driver_api

        return driver_api.stream_idle(stream_ptr)


def queue_frame(ops, xp, stream, flags_addr: int, k: int, src_ptr: int, dst, mf, process, step=process_frame):
    """Queue frame k's work on `stream` ahead of time. flags_addr is the GPU's address of the READY word;
    DONE is the next word. No CPU call happens when the frame arrives: the capture side only stores k + 1."""
    ops.wait_geq(stream.ptr, flags_addr, k + 1)  # the GPU waits here until READY >= k + 1
    out, events = step(xp, src_ptr, dst, mf, stream, process)  # copy from the ring slot, then the kernels
    ops.write(stream.ptr, flags_addr + 4, k + 1)  # after them: DONE = k + 1, for the capture side to read
    return out, events


@dataclass(kw_only=True)
class FlagConfig:
    """One live acquisition of the flag design; checked when made (bad input raises InputError here).

    depth: frames queued ahead of the last completed one (1 … MAX_DEPTH); code: the per-frame queueing
    function (the page shows `queue_frame`); memops: the stream memory operations (None: the driver's).
    The other fields mean what they mean in pipeline.PipelineConfig."""

    frame_bytes: int = 4 << 20
    period_s: float = 8e-3
    frames: int = 500
    depth: int = 3
    slots: int = 4
    check_every: int = 101
    seed: int = 9
    timeout_s: float = 5.0
    progress: bool = False
    process: Callable | None = None
    code: Callable = queue_frame
    memops: object = None
    host: CardHost | None = None

    def __post_init__(self) -> None:
        self.frame_bytes, self.period_s = check_frame_bytes(self.frame_bytes), check_period(self.period_s)
        self.frames = validate.whole_number(self.frames, "frames", 1, 1_000_000)
        self.depth = validate.whole_number(self.depth, "queue depth", 1, MAX_DEPTH)
        self.slots = validate.whole_number(self.slots, "ring slots", 1, card.MAX_SLOTS)
        self.check_every = validate.whole_number(self.check_every, "check_every", 0)
        self.timeout_s = validate.seconds(self.timeout_s, "timeout")
        if not callable(self.code):
            raise InputError(f"code must be a function like queue_frame, not {type(self.code).__name__}")
        self.process = self.process or dsp.doppler_map
        self.memops = self.memops if self.memops is not None else DriverMemOps()

    @property
    def variants(self) -> int:
        return 4 if self.check_every else 1


class _Launcher(threading.Thread):
    """Keeps at most cfg.depth frames queued ahead of the last frame the capture side saw done."""

    def __init__(self, cp, c: CaptureCard, dev: _Device, cfg: FlagConfig, *, flags_addr: int) -> None:
        super().__init__(name="flag-launcher", daemon=True)
        self.cp, self.c, self.dev, self.cfg, self.flags_addr = cp, c, dev, cfg, flags_addr
        self.queued = 0       # frames queued so far (frame k waits for READY >= k + 1)
        self.done_seen = 0    # set by the capture side: frames it has seen done
        self.outs: dict = {}  # frame -> (map, events), until the capture side takes it
        self.stop, self.ready = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.cpu_s = 0.0

    def run(self) -> None:
        cfg, dev, cpu0 = self.cfg, self.dev, time.thread_time()
        try:
            with cfg.memops.context():
                _warm_up(self.cp, cfg)  # this thread's own FFT plans (CuPy keeps a plan cache per thread)
                cpu0 = time.thread_time()
                self.ready.set()
                while not self.stop.is_set():
                    if self.queued < min(cfg.frames, self.done_seen + cfg.depth):
                        k = self.queued
                        src = self.c.data[k % self.c.slots].ctypes.data
                        self.outs[k] = cfg.code(cfg.memops, self.cp, dev.streams[0], self.flags_addr, k, src,
                                                dev.inp[0], dev.mf, cfg.process)
                        self.queued = k + 1
                    else:
                        time.sleep(5e-5)
        except BaseException as exc:  # noqa: BLE001 - handed to the capture side, which raises it
            self.error = exc
        finally:
            self.cpu_s = time.thread_time() - cpu0
            self.ready.set()  # also when it failed: the capture side then raises its error


@dataclass(kw_only=True)
class _Taken(FrameLog):
    """What the capture side collects: its FrameLog and the frames it has flagged and not yet seen done."""

    pending: deque = field(default_factory=deque)


def _finish(t: _Taken, launcher: _Launcher, c: CaptureCard, cp, cfg: FlagConfig, done: int) -> bool:
    """Every pending frame the DONE word has passed: its latency, its events, its map if kept; its slot back."""
    busy = False
    while t.pending and done >= t.pending[0][0] + 1 and t.pending[0][0] in launcher.outs:
        k, q, stamp = t.pending.popleft()  # (the GPU may finish a frame before its launcher has filed it)
        latency_ns = time.monotonic_ns() - stamp
        out, events = launcher.outs.pop(k)
        record_frame(t, cp, q, latency_ns, events, out, cfg.check_every)
        c.release()
        launcher.done_seen = k + 1
        busy = True
    return busy


def _capture(t: _Taken, launcher: _Launcher, c: CaptureCard, flags, cp, cfg: FlagConfig, bar) -> float:
    """The capture side: one store per frame, then read DONE; returns its own CPU seconds. No progress for
    cfg.timeout_s raises DeviceTimeoutError; a launcher failure is raised here."""
    cpu0, last = time.thread_time(), time.monotonic()
    while True:
        busy = False
        while c.available():
            _, q, stamp = c.take()
            flags[READY] = c.read  # frame c.read - 1 is in the ring: the one per-frame store
            t.pending.append((c.read - 1, q, stamp))
            busy = True
        n = len(t.lat)
        busy = _finish(t, launcher, c, cp, cfg, int(flags[DONE])) or busy
        if bar:
            for _ in range(len(t.lat) - n):
                bar.step()
        if launcher.error is not None:
            raise launcher.error
        if not t.pending and c.finished:
            return time.thread_time() - cpu0
        if busy:
            last = time.monotonic()
            continue
        c.check_alive()
        if time.monotonic() - last > cfg.timeout_s:
            raise DeviceTimeoutError(f"the flag design made no progress for {cfg.timeout_s:.1f} s ({len(t.lat)} of "
                                     f"{cfg.frames} frames done, {launcher.queued} queued)")
        time.sleep(5e-5)


WARM_UP_S = 60.0  # the launcher's first FFT plans, before the card starts


def _await_ready(launcher: _Launcher, timeout_s: float) -> None:
    """Wait until the launcher has warmed up (its frames may already be queued behind READY)."""
    if not launcher.ready.wait(timeout_s) and launcher.error is None:
        raise DeviceTimeoutError(f"the launcher did not warm up within {timeout_s:.0f} s")
    if launcher.error is not None:
        raise launcher.error


def _release_and_drain(launcher: _Launcher | None, flags, dev: _Device | None, cfg: FlagConfig) -> None:
    """Set READY past every queued frame (a frame that never came releases its wait), stop the launcher,
    then wait, with a deadline, until the stream is empty. A stream that does not drain raises
    DeviceTimeoutError and its buffers are left (freeing them under running work could crash)."""
    if launcher is not None:
        launcher.stop.set()
        flags[READY] = max(int(flags[READY]), launcher.queued + 1)  # + 1: the frame it may be queueing now
        launcher.join(cfg.timeout_s)
        flags[READY] = max(int(flags[READY]), launcher.queued)  # what it queued while stopping
        if launcher.is_alive():
            raise DeviceTimeoutError(f"the launcher thread did not stop within {cfg.timeout_s:.1f} s")
    if dev is None:
        return
    deadline = time.monotonic() + cfg.timeout_s
    while not cfg.memops.idle(dev.streams[0].ptr):
        if time.monotonic() > deadline:
            raise DeviceTimeoutError(f"the flag design's stream did not drain within {cfg.timeout_s:.1f} s "
                                     "after its waits were released")
        time.sleep(1e-4)
    dev.close()


def run_flag_pipeline(cfg: FlagConfig) -> RunResult:
    """Run the flag design live; the same latency (card's stamp to the host seeing DONE) as run_pipeline.

    cpu_s is the process's CPU time (capture side and launcher); extra has each thread's own. Unsupported
    stream memory operations raise SkipExperiment with the reason. Everything is freed whatever stops it."""
    from helpers.core import gpu
    from helpers.core.progress import Progress

    if not isinstance(cfg, FlagConfig):
        raise InputError(f"run_flag_pipeline takes a FlagConfig, not {type(cfg).__name__}")
    cp = gpu.cupy()
    problem = cfg.memops.support_problem()
    if problem:
        raise SkipExperiment(f"the GPU cannot wait on a flag here: {problem}")
    check_ring_memory(cfg.slots, cfg.frame_bytes, cfg.variants)
    refs = {v: reference_cached(cfg.frame_bytes, cfg.seed, v)
            for v in ({q % 4 for q in range(0, cfg.frames, cfg.check_every)} if cfg.check_every else ())}
    bar = Progress(cfg.frames, f"flag {cfg.frame_bytes >> 20} MiB/{cfg.period_s * 1e3:g} ms") if cfg.progress else None
    c = CaptureCard(frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=cfg.slots, frames=cfg.frames,
                    seed=cfg.seed, variants=cfg.variants, host=cfg.host)
    t, dev, launcher = _Taken(), None, None
    with contextlib.ExitStack() as stack:
        stack.callback(_free_pools, cp)
        stack.callback(c.close)
        flags, flags_addr = stack.enter_context(cfg.memops.words(2))
        try:
            dev = _Device(cp, c, "registered", 1)  # registers the ring before the card starts writing into it
            launcher = _Launcher(cp, c, dev, cfg, flags_addr=flags_addr)
            launcher.start()
            _await_ready(launcher, max(cfg.timeout_s, WARM_UP_S))
            c.start()
            cpu0, t0 = time.process_time(), time.monotonic()
            capture_s = _capture(t, launcher, c, flags, cp, cfg, bar)
            counts = {"cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - t0,
                      "dropped": c.dropped, "producer_late": c.counter(card.CTL_LATE)}
        finally:
            _release_and_drain(launcher, flags, dev, cfg)
        errors = [map_error(cp.asnumpy(m), refs[q % 4]) for q, m in t.kept]
        t.kept.clear()
    extra = {"depth": cfg.depth, "sync": "flag (poll DONE)", "capture_cpu_s": capture_s,
             "launcher_cpu_s": launcher.cpu_s, "queued": launcher.queued}
    return RunResult(design=FLAG_DESIGN, frame_bytes=cfg.frame_bytes, period_s=cfg.period_s, slots=cfg.slots,
                     buffers=1, frames=cfg.frames, latency_us=[int(x) for x in t.lat], seq=t.seqs,
                     copy_us_p50=_median(t.copy_t), kernel_us_p50=_median(t.kern_t), checked=len(errors),
                     max_error=max(errors) if errors else None, gpu=gpu.probe().name, extra=extra, **counts)


def _free_pools(cp) -> None:
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def _median(v: list) -> float | None:
    import numpy as np

    return float(np.median(v)) if v else None
