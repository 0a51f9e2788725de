"""The first and last call of every notebook: say which mode runs, and clean up after.

    from helpers import course
    ctx = course.start("Chapter 0 — your machine")
    ...
    course.finish()
"""

from __future__ import annotations

from dataclasses import dataclass

from . import gpu, host_memory, mode, reference
from .mode import Mode


@dataclass(frozen=True)
class Context:
    """What a notebook needs to choose its path: the mode and the replay reference."""

    mode: Mode
    reason: str
    gpu_name: str | None
    reference_name: str | None

    @property
    def live(self) -> bool:
        return self.mode is Mode.LIVE

    def reference(self) -> reference.Reference:
        """The reference machine's validated data (raises a clear error if none exists)."""
        return reference.load(self.reference_name)


def start(chapter: str | None = None, *, quiet: bool = False) -> Context:
    """Print the mode banner and return the notebook's Context."""
    text = mode.banner(chapter)
    if not quiet:
        print(text)
    info = mode.detect()
    return Context(info.mode, info.reason, info.probe.name if info.probe.usable else None,
                   reference.default_reference_name())


def finish(*, quiet: bool = False) -> dict:
    """Hand CuPy's cached device and pinned blocks back and report what this process still holds.

    Returns {'device_used_bytes', 'locked_host_bytes'} so tests and learners can check that
    a notebook leaves nothing behind.
    """
    gpu.release_pools()
    out = {"device_used_bytes": None, "locked_host_bytes": host_memory.pinned_bytes_of_process()}
    if gpu.probe().usable:
        cp = gpu.cupy()
        out["device_used_bytes"] = int(cp.get_default_memory_pool().used_bytes())
    if not quiet:
        print(f"cleaned up: CuPy pool holds {out['device_used_bytes']} device bytes, "
              f"process has {out['locked_host_bytes']} locked host bytes")
    return out
