"""The exercises of Chapter 6, part 2 (the real kernel): expected values come from the recorded
transcripts, never from the page."""

from __future__ import annotations

import random
from collections.abc import Callable

from helpers.ch06_gem_ttm_dmabuf import real_drm, real_fences, real_ttm
from helpers.core.errors import InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.learning import checks


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


# --------------------------------------------------------------------------------------------
# Fences (real_fences.implicit_sync)
# --------------------------------------------------------------------------------------------
def reader_with_writer_pending(answer, fences: Evidence) -> bool | None:
    """Predict: poll(POLLIN) on a dma-buf whose buffer carries an unsignalled writer's fence."""
    f = real_fences.facts(fences.require())
    correct = "b" if f["write_fence_blocks_readers"] else "a"
    return checks.choice(
        "reader vs pending writer", answer,
        {"a": "poll returns at once: the buffer is readable", "b": "poll waits, and gives up at its timeout",
         "c": "poll fails with an error (EBUSY)"}, correct,
        {"a": "the memory is there, but a writer's fence is pending: the data may still change, so POLLIN is "
              "not reported until that fence signals",
         "b": f"a reader waits for the writers' fences (dma_resv_usage_rw(false) is DMA_RESV_USAGE_WRITE): "
              f"the kernel's poll timed out after {f['poll_timeout_ms']} ms",
         "c": "poll never fails for a pending fence; EBUSY is what vgem's own attach ioctl answered when a "
              "second, conflicting fence was added"})


def never_signalled_seconds(answer, fences: Evidence) -> bool | None:
    """Derivation: how long poll waits on a vgem fence nobody signals (the probe allowed 20 s)."""
    never = real_fences.facts(fences.require()).get("never")
    if never is None:
        print("… this run did not wait out an unsignalled fence (never_signalled=False); run the default")
        return None
    return checks.close("never-signalled fence", answer, never["waited_s"], rel_tol=0.1,
                        hint="read vgem_fence_create in drivers/gpu/drm/vgem/vgem_fence.c: what does mod_timer arm?",
                        hints=[checks.Hint(lambda a, e: abs(a - never["poll_limit_s"]) < 0.5,
                                           "that is poll's own limit; something in vgem signals the fence earlier")],
                        why="vgem arms a timer of VGEM_FENCE_TIMEOUT (10*HZ) on every fence it creates, so a "
                            "forgotten fence cannot hang its waiters; a real GPU driver has a job timeout instead")


def check_rule(rule: Callable[[list[tuple[str, bool]], str], bool], data: dict, *, shuffled_seed: int = 0) -> list[str]:
    """Where `rule(fences, access) -> must wait?` disagrees with the kernel: the recorded cases,
    then the same cases with extra signalled fences and the fence list in a seeded random order
    (a rule that learnt the recorded answers by heart fails those). Empty: it agrees.

    Each question is put to the rule before the kernel's answer to it is looked up
    (checks.learner_first), so no frame the rule can reach holds that answer; the recording
    (`data`) is reachable, but it is the learner's anyway (the notebook hands it to the check)."""
    def judge(question: tuple[int, list[tuple[str, bool]], str], got) -> list[str]:
        case, fs, access = question
        if not isinstance(got, bool):
            raise InputTypeError(f"the rule must return True or False, got {got!r}")
        waited = real_fences.observed_cases(data)[case][2]
        return [] if got == waited else [f"fences {fs}, {access}: you say {'wait' if got else 'go'}, the kernel "
                                         f"{'waited' if waited else 'did not wait'}"]

    return checks.learner_first(_questions(data, shuffled_seed), lambda q: rule(list(q[1]), q[2]), judge,
                                first_only=False)


def _questions(data: dict, shuffled_seed: int) -> list[tuple[int, list[tuple[str, bool]], str]]:
    """(recorded case, fences, access): each recorded poll as it was, then with 1-3 extra signalled
    fences, shuffled; the kernel's answers left out."""
    rng = random.Random(f"fences:{shuffled_seed}")
    out = []
    for case, (fences, access, _) in enumerate(real_fences.observed_cases(data)):
        extra = fences + [(rng.choice(("read", "write")), True) for _ in range(rng.randrange(1, 4))]
        rng.shuffle(extra)
        out += [(case, fences, access), (case, extra, access)]
    return out


def who_waits(rule, fences: Evidence) -> bool | None:
    """Coding: rule(fences, access) -> must wait?, checked against every poll the kernel answered
    and against the same cases with extra signalled fences in a shuffled order."""
    def trial(fn) -> list[str]:
        probe = fn([], "read")
        if probe is None:
            raise NotImplementedError  # the stub: not answered yet
        problems = check_rule(fn, fences.require(), shuffled_seed=5)
        return [f"{len(problems)} cases differ from the kernel, first: {problems[0]}"] if problems else []

    return checks.code("who waits for whom", rule, trial,
                       why="a reader waits only for unsignalled writers' fences, a writer for every unsignalled "
                           "fence; signalled fences never hold anyone (dma_resv_usage_rw)")
