"""A tiny progress line for long work, in notebooks and on the command line alike."""

from __future__ import annotations

import sys
import time

from helpers.core import validate


class Progress:
    """Prints `label: i/total (elapsed)` at most every `every_s` seconds, and a final line.

    Works without a terminal or widgets, so it shows in nbval logs and book pages too.
    """

    def __init__(self, total: int, label: str, every_s: float = 2.0, stream=None) -> None:
        self.total = validate.whole_number(total, "progress total", 0)
        self.every_s = validate.seconds(every_s, "progress every_s", allow_zero=True)
        self.label = label
        self.stream = stream or sys.stdout
        self.done = 0
        self.t0 = self._last = time.monotonic()

    def step(self, note: str = "") -> None:
        self.done += 1
        now = time.monotonic()
        if now - self._last >= self.every_s or self.done == self.total:
            self._last = now
            extra = f" — {note}" if note else ""
            print(f"{self.label}: {self.done}/{self.total} ({now - self.t0:.1f} s){extra}",
                  file=self.stream, flush=True)
