"""The exercises of Chapter 6, part 2 (the real kernel): expected values come from the recorded
transcripts, never from the page."""

from __future__ import annotations

from helpers.ch06_gem_ttm_dmabuf import real_drm, real_ttm
from helpers.core import checks
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence


def _vgem(gem: Evidence) -> dict:
    return real_drm.facts(gem.require()["devices"][0])


def first_handle(answer, gem: Evidence) -> bool | None:
    """The first GEM handle a fresh DRM file hands out."""
    return checks.equal("first handle", answer, _vgem(gem)["handles"][0],
                        "handles index a per-file table; the kernel never hands out 0",
                        why="a handle is an index into this open file's table (an idr starting at 1)")


def second_close(answer, gem: Evidence) -> bool | None:
    """What a second GEM_CLOSE of the same handle returns."""
    return checks.equal("second GEM_CLOSE", answer, _vgem(gem)["second_close"],
                        "the first close removed the handle from the file's table; what does the second find?",
                        why="the object may live on (the dma-buf holds a reference), but the handle is gone")


def victim_at_flip7(answer, evict: Evidence) -> bool | None:
    """The buffer the kernel evicted when flip 7 showed fb6."""
    kernel = real_ttm.timeline(evict.require()["runs"][0])
    victim = kernel[7]["evicted"][0] if kernel[7]["evicted"] else None
    return checks.equal("victim at flip 7", answer, victim,
                        "among the unpinned buffers in VRAM, which one was unpinned longest ago? fb1 was shown "
                        "again at flip 6", why="TTM evicts from the head of its LRU list: the least recently unpinned")


def kernel_victims(policy, evict: Evidence) -> bool | None:
    """Coding: a policy that picks the kernel's victim from the buffers' own fields, candidates shuffled."""
    def trial(fn) -> list[str]:
        try:
            diffs = real_ttm.check_policy(fn, run=evict.require()["runs"][0], relabel_seed=11, shuffle_seed=4)
        except InputError as exc:
            if "None" in str(exc):
                raise NotImplementedError from exc  # the stub: not answered yet
            return [str(exc)]
        return [f"{len(diffs)} flips differ from the kernel's choice, first: {diffs[0]}"] if diffs else []

    return checks.code("kernel's victims", policy, trial,
                       why="the kernel's LRU order is the order of last use: the smallest last_use among the "
                           "unpinned candidates")


def buffers_with_fbdev(answer, evict: Evidence) -> bool | None:
    """Derivation: how many of the probe's buffers fit in VRAM when fbdev pins one framebuffer too."""
    run = evict.require()["runs"][0]
    vram, buf = real_ttm.vram_bytes(run), real_ttm.buffer_bytes(run)
    expected = (vram - buf) // buf  # the console's framebuffer is the same 1024x768x4 size
    return checks.close("with fbdev", answer, expected, rel_tol=0,
                        hint="one 3 MiB console framebuffer stays pinned: what is left of the VRAM for 3 MiB buffers?",
                        hints=[checks.Hint(lambda a, e: a == e + 1, "that is how many fit without the console's "
                                                                    "framebuffer: it takes one buffer's room")])
