"""The capture-card stand-in: a separate process that writes radar frames into a shared ring.

Started as ``python -m helpers.models.radar.card PARENT_PID`` by
`helpers.models.radar.ring.CardHost`, through the course's portable device-process
plumbing (helpers.models.device_process: shared memory, a stdin lifeline); it imports only
numpy and that module and never touches CUDA. Each line on its stdin names one acquisition's
shared ring: it fills that ring, lets go of it (CTL_DETACHED) and waits for the next line, the
way a driver re-arms a card between acquisitions instead of reloading it. A run of fifty short
acquisitions (Chapter 9's breaking-point ladder) so pays for one process start, not fifty
(0.5 s each on the course's H100 machine, more than the acquisitions themselves).

Like a real acquisition card with a fixed set of DMA descriptors, it has `slots` buffers in
host memory. Every `period` it completes a frame: if the consumer has released a slot, the
frame is written there, stamped with CLOCK_MONOTONIC and published; if every slot is still
held, the frame is lost and counted, because a card cannot wait for software.

The shared memory starts with one control page of int64 words (see the CTL_* indices), then
per-slot sequence numbers and timestamps, then the page-aligned slot data, then the frame
variants the card sends in turn. The variants are `synth_frame(pulses, seed, v)`, written there by
the consumer's side at setup (it keeps them cached between runs, and needs them anyway to warm up
and check), so starting a card costs a process start, not the synthesis of up to 128 MiB of echoes.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from helpers.models.device_process import Lifeline, SharedBlock, quiet_interrupts

PAGE = 4096
MAGIC = 0x52414441  # "RADA"
# control words (int64) in the first page
CTL_MAGIC, CTL_SLOTS, CTL_FRAME_BYTES, CTL_PERIOD_NS, CTL_FRAMES = 0, 1, 2, 3, 4
CTL_WRITTEN, CTL_RELEASED, CTL_DROPPED, CTL_TICKS, CTL_STOP = 5, 6, 7, 8, 9
CTL_READY, CTL_DONE, CTL_LATE, CTL_CPU_NS, CTL_SEED, CTL_VARIANTS = 10, 11, 12, 13, 14, 15
CTL_ATTACHED, CTL_DETACHED = 16, 17  # the card has mapped the ring / has unmapped it for good
CTL_WORDS = 32
META_OFFSET = CTL_WORDS * 8  # seq[slots] then stamp_ns[slots]
MAX_SLOTS = 64
N_SAMPLES = 1024  # range samples per pulse (complex64)
CHIRP_LEN = 128


def layout_bytes(slots: int, frame_bytes: int, variants: int = 1) -> int:
    """Total shared-memory size: the control page, `slots` frames, then `variants` frames."""
    return PAGE + (slots + variants) * frame_bytes


def frames_view(buf, slots: int, frame_bytes: int, variants: int):
    """(slot frames, variant frames) as complex64 arrays on the shared block `buf`."""
    every = np.ndarray((slots + variants, frame_bytes // 8), np.complex64, buf, PAGE)
    return every[:slots], every[slots:]


def chirp(n: int = CHIRP_LEN) -> np.ndarray:
    """The transmitted pulse: a linear FM chirp of n complex samples."""
    t = np.arange(n) / n
    return np.exp(1j * np.pi * 0.8 * n * (t - 0.5) ** 2).astype(np.complex64)


def synth_frame(pulses: int, seed: int, variant: int) -> np.ndarray:
    """One frame of echoes (pulses x N_SAMPLES complex64): a few moving targets in noise.

    Deterministic in (seed, variant), so the consumer can recompute the frame it expects.
    """
    rng = np.random.default_rng([seed, variant])
    x = (rng.standard_normal((pulses, N_SAMPLES)) + 1j * rng.standard_normal((pulses, N_SAMPLES))) * 0.5
    c = chirp()
    p = np.arange(pulses)[:, None]
    for _ in range(3):
        rbin = int(rng.integers(50, N_SAMPLES - CHIRP_LEN - 1))
        dop = float(rng.uniform(-0.4, 0.4))  # cycles per pulse
        amp = float(rng.uniform(2, 6))
        x[:, rbin:rbin + CHIRP_LEN] += amp * c[None, :] * np.exp(2j * np.pi * dop * p)
    return x.astype(np.complex64)


def run(parent_pid: int) -> int:
    """Serve acquisitions until the parent lets go: each stdin line names a ring to fill (`_serve`).

    The process ends when its lifeline closes (the host was closed, or the parent died)."""
    quiet_interrupts()
    line = Lifeline(parent_pid)
    pending = b""
    while not line.gone():
        chunk = line.get(0.5)
        if chunk is None:
            return 0
        pending += chunk
        while b"\n" in pending:
            name, pending = pending.split(b"\n", 1)
            rc = _serve(name.decode(errors="replace"), line)
            if rc:
                return rc
    return 0


def _serve(shm_name: str, line: Lifeline) -> int:
    """One acquisition: attach the ring, produce into it, mark it detached and unmap it. If the
    parent died meanwhile, unlink the ring on the way out, since nobody else can. A ring already
    gone (its card was closed before the card got to it) is skipped."""
    try:
        block = SharedBlock.attach(shm_name)
    except (FileNotFoundError, ValueError, OSError):
        return 0
    try:
        _flag(block.buf, CTL_ATTACHED)
        return _produce(block.buf, line)
    finally:
        if line.gone():
            block.unlink()
        else:
            _flag(block.buf, CTL_DETACHED)
        block.close()


def _flag(buf, which: int) -> None:
    ctl = np.ndarray((CTL_WORDS,), np.int64, buf, 0)
    ctl[which] = 1
    del ctl


def _produce(buf, line: Lifeline) -> int:
    ctl = np.ndarray((CTL_WORDS,), np.int64, buf, 0)
    if ctl[CTL_MAGIC] != MAGIC:
        return 4
    slots, fbytes, period = int(ctl[CTL_SLOTS]), int(ctl[CTL_FRAME_BYTES]), int(ctl[CTL_PERIOD_NS])
    frames, nvar = int(ctl[CTL_FRAMES]), int(ctl[CTL_VARIANTS])
    seq = np.ndarray((slots,), np.int64, buf, META_OFFSET)
    stamp = np.ndarray((slots,), np.int64, buf, META_OFFSET + 8 * slots)
    data, variants = frames_view(buf, slots, fbytes, nvar)
    if ctl[CTL_STOP]:
        return 0
    data[:] = variants[0]  # touch every page once, as a driver would at setup
    cpu0 = time.process_time_ns()
    ctl[CTL_READY] = 1
    t0 = time.monotonic_ns() + 20 * period // 10 + 2_000_000  # first frame after the consumer is set up
    k = 0
    while k < frames and not ctl[CTL_STOP]:
        target = t0 + (k + 1) * period
        while True:  # sleep most of the wait, spin the last 0.3 ms for a precise tick
            left = target - time.monotonic_ns()
            if left <= 0:
                break
            if left > 400_000:
                time.sleep((left - 300_000) / 1e9)
            if ctl[CTL_STOP] or line.gone():
                return 0
        if time.monotonic_ns() - target > period:
            ctl[CTL_LATE] += 1  # this process itself ran late (an overloaded machine)
        w, r = int(ctl[CTL_WRITTEN]), int(ctl[CTL_RELEASED])
        if w - r >= slots:
            ctl[CTL_DROPPED] += 1  # every slot still held by the consumer: the frame is lost
        else:
            s = w % slots
            np.copyto(data[s], variants[k % nvar])
            seq[s] = k
            stamp[s] = time.monotonic_ns()  # "DMA complete": the frame is in host memory
            ctl[CTL_WRITTEN] = w + 1  # publish last (x86 stores are not reordered)
        k += 1
        ctl[CTL_TICKS] = k
        ctl[CTL_CPU_NS] = time.process_time_ns() - cpu0
    ctl[CTL_DONE] = 1
    return 0


if __name__ == "__main__":
    sys.exit(run(int(sys.argv[1])))
