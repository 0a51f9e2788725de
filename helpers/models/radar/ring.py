"""The capture card seen from the consumer: its process (`CardHost`) and one acquisition's ring (`CaptureCard`).

The card itself runs in a process of its own (helpers.models.radar.card) and writes frames into a
shared-memory ring at the real rate, dropping (and counting) a frame when no slot is free; a
`CardHost` keeps that process between acquisitions (a ladder of short runs pays for one start).
"""

from __future__ import annotations

import atexit
import os
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from helpers.core import validate
from helpers.core.errors import DeviceTimeoutError, InputError
from helpers.core.resources import Closing
from helpers.models.device_process import DeviceProcess, SharedBlock
from helpers.models.radar import card
from helpers.models.radar.designs import (
    CaptureCardError,
    check_frame_bytes,
    check_period,
    check_ring_memory,
)
from helpers.models.radar.dsp import synth_cached

_LIVE_CARDS: weakref.WeakSet = weakref.WeakSet()
_LIVE_HOSTS: weakref.WeakSet = weakref.WeakSet()


class CardHost(Closing):
    """The capture card's process, kept between acquisitions: each `CaptureCard(host=...)` hands
    it a new ring instead of starting a process of its own (about 0.5 s on the course's H100
    machine: a Python interpreter and NumPy). Use it as a context manager around a series of
    runs; closing it stops the process (2 s grace, then kill). The process also dies with its
    parent."""

    def __init__(self) -> None:
        self.proc: DeviceProcess | None = DeviceProcess(card.__name__, [str(os.getpid())])
        _LIVE_HOSTS.add(self)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def serve(self, shm_name: str) -> None:
        """Ask the card to fill the ring `shm_name` next."""
        if not self.alive():
            raise CaptureCardError(f"the capture-card process is not running{self._exit_text()}")
        try:
            self.proc.send(shm_name.encode() + b"\n")
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise CaptureCardError(f"the capture-card process took no new ring ({exc}){self._exit_text()}") from None

    def _exit_text(self) -> str:
        if self.proc is None:
            return " (its host was closed)"
        rc = self.proc.proc.poll()
        return "" if rc is None else f" (it exited with {rc}: {self.proc.stderr_text(500)})"

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.proc.poll() not in (None, 0):
            raise CaptureCardError(f"the capture-card process died with exit status {self.proc.proc.returncode}")

    def close(self) -> None:
        p, self.proc = self.proc, None
        if p is not None:
            p.stop(grace_s=2.0)


class CaptureCard(Closing):
    """The acquisition card stand-in: start it, read frames in order, release them, close it.

    Use it as a context manager; closing stops the producer (its own process, waiting at most
    2 s, then killing it; or, given a `host`, that host's work on this ring) and unlinks the
    shared memory. The producer also dies with its parent.
    """

    DETACH_TIMEOUT_S = 2.0  # a host that has not let go of a closed card's ring by then is stopped

    def __init__(self, *, frame_bytes: int, period_s: float, slots: int = 4, frames: int = 2000,
                 seed: int = 9, variants: int = 4, start_timeout_s: float = 20.0,
                 host: CardHost | None = None) -> None:
        self.frame_bytes = check_frame_bytes(frame_bytes)
        self.period_s = check_period(period_s)
        self.slots = validate.whole_number(slots, "ring slots", 1, card.MAX_SLOTS)
        self.frames = validate.whole_number(frames, "frames", 1, 1_000_000)
        self.variants = validate.whole_number(variants, "frame variants", 1, 16)
        self.seed = int(seed)
        if host is not None and not isinstance(host, CardHost):
            raise InputError(f"host must be a CardHost or None, not {type(host).__name__}")
        check_ring_memory(self.slots, self.frame_bytes, self.variants)
        self.host, self._own_host = host, host is None
        self.shm = SharedBlock.create("course-radar", card.layout_bytes(self.slots, self.frame_bytes, self.variants))
        buf = self.shm.buf
        self.ctl = np.ndarray((card.CTL_WORDS,), np.int64, buf, 0)
        self.ctl[:] = 0
        self.seq = np.ndarray((self.slots,), np.int64, buf, card.META_OFFSET)
        self.stamp = np.ndarray((self.slots,), np.int64, buf, card.META_OFFSET + 8 * self.slots)
        self.data, patterns = card.frames_view(buf, self.slots, self.frame_bytes, self.variants)
        for v in range(self.variants):  # what the card sends; cached here, so not synthesised per run
            patterns[v] = synth_cached(self.frame_bytes, self.seed, v).ravel()
        del patterns
        for k, v in ((card.CTL_SLOTS, self.slots), (card.CTL_FRAME_BYTES, self.frame_bytes),
                     (card.CTL_PERIOD_NS, round(self.period_s * 1e9)), (card.CTL_FRAMES, self.frames),
                     (card.CTL_SEED, self.seed), (card.CTL_VARIANTS, self.variants),
                     (card.CTL_MAGIC, card.MAGIC)):
            self.ctl[k] = v
        self.read = 0  # frames taken by the consumer
        self.start_timeout_s = start_timeout_s

    # -- lifetime
    def start(self) -> CaptureCard:
        """Start the producer (a process of its own, or the given host) and wait until it is
        ready. Whatever stops the wait (the card failing, the timeout, an interrupted cell) closes
        the card first: `with` never reached its body, so its exit would not run."""
        _LIVE_CARDS.add(self)
        deadline = time.monotonic() + self.start_timeout_s
        try:
            if self.host is None:
                self.host = CardHost()
            self.host.serve(self.shm.name)
            while not self.ctl[card.CTL_READY]:
                if not self.host.alive():
                    raise CaptureCardError(f"the capture-card process stopped{self.host._exit_text()}")
                if time.monotonic() > deadline:
                    raise CaptureCardError(f"the capture-card process was not ready within {self.start_timeout_s:.0f} s")
                time.sleep(0.002)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the producer and free the shared memory: a card's own process is stopped (2 s
        grace, then killed); a shared host is asked to stop and given DETACH_TIMEOUT_S to let go
        of this ring (a host that does not is stopped, so it can never write into a later one)."""
        if getattr(self, "ctl", None) is not None:
            self.ctl[card.CTL_STOP] = 1
        host, self.host = getattr(self, "host", None), None
        if host is not None:
            if self._own_host:
                host.close()
            elif self.ctl is not None and self.ctl[card.CTL_ATTACHED]:
                deadline = time.monotonic() + self.DETACH_TIMEOUT_S
                while not self.ctl[card.CTL_DETACHED] and host.alive():
                    if time.monotonic() > deadline:
                        host.close()
                        break
                    time.sleep(0.001)
        if getattr(self, "shm", None) is not None:
            self.ctl = self.seq = self.stamp = self.data = None
            shm, self.shm = self.shm, None
            shm.unlink()
            shm.close()  # False while a view is still exported (e.g. a registered pointer): unmapped when it goes

    def __enter__(self) -> CaptureCard:  # `with` starts the card; Closing closes it on the way out
        return self.start()

    @property
    def pid(self) -> int | None:
        """The producer's process id (the host's, when the card shares one)."""
        return self.host.pid if self.host else None

    # -- the consumer side
    def counter(self, which: int) -> int:
        return int(self.ctl[which])

    @property
    def dropped(self) -> int:
        return self.counter(card.CTL_DROPPED)

    @property
    def finished(self) -> bool:
        """The producer has produced its last frame and the consumer has taken every written one."""
        return bool(self.ctl[card.CTL_DONE]) and self.read >= self.counter(card.CTL_WRITTEN)

    def available(self) -> bool:
        return self.counter(card.CTL_WRITTEN) > self.read

    def take(self) -> tuple[int, int, int]:
        """The next written frame, in order: (slot, seq, stamp_ns). Call only when available()."""
        s = self.read % self.slots
        self.read += 1
        return s, int(self.seq[s]), int(self.stamp[s])

    def release(self) -> None:
        """Hand the oldest taken slot back to the card."""
        if self.counter(card.CTL_RELEASED) >= self.read:
            raise CaptureCardError("release() without a taken frame")
        self.ctl[card.CTL_RELEASED] += 1

    def check_alive(self) -> None:
        if self.host is not None:
            self.host.check_alive()

    def wait_frame(self, timeout_s: float) -> bool:
        """Wait (sleeping 50 µs between looks) until a frame is available; False if the card is done."""
        deadline = time.monotonic() + timeout_s
        while not self.available():
            if self.ctl[card.CTL_DONE]:
                return False
            self.check_alive()
            if time.monotonic() > deadline:
                raise DeviceTimeoutError(f"no frame from the capture card within {timeout_s:.1f} s")
            time.sleep(5e-5)
        return True


_SHARED: list[CardHost] = []  # the process's shared host (shared_host), at most one


@contextmanager
def shared_host() -> Iterator[CardHost]:
    """The process's capture-card host, for one experiment's series of runs: started by the first
    experiment that needs it and kept for the next (a page that runs six radar experiments pays
    for one process start, not six: ~0.14 s each on the CI machine, 0.5 s on the H100). A host
    found stopped is replaced. If the series fails, the host is stopped (a failure may have left it
    writing). stop_shared_host() (course.finish calls it) stops it; so does the process's exit."""
    if not (_SHARED and _SHARED[0].alive()):
        stop_shared_host()
        _SHARED.append(CardHost())
    host = _SHARED[0]
    try:
        yield host
    except BaseException:
        stop_shared_host()
        raise


def stop_shared_host() -> None:
    """Stop the process's shared capture-card host, if there is one (no child process is left)."""
    while _SHARED:
        _SHARED.pop().close()


@atexit.register
def _close_all_cards() -> None:
    for c in list(_LIVE_CARDS):
        c.close()
    for h in list(_LIVE_HOSTS):
        h.close()

