"""Chapter 6's exercises. Expected values are computed here, from the course's models and
recordings, never on the page; each check explains its answer."""

from __future__ import annotations

import contextlib
import numbers
import os
import random
import sys
import tempfile

from helpers.learning import checks
from helpers.learning.checks import Hint, factor_hint
from helpers.models import buddy, ttm

MiB = 1 << 20


def buddy_blocks(total_chunks: int, request_chunks: int, chunk: int = 4096) -> list[tuple[int, int]]:
    """(offset in chunks, order) of each block a fresh allocator gives for one request."""
    a = buddy.BuddyAllocator(total_chunks * chunk, chunk_size=chunk)
    return [(b.offset // chunk, b.order) for b in a.alloc(request_chunks * chunk)]


def _pairs(answer) -> list[tuple[int, int]]:
    """The learner's blocks as (offset, order) pairs of ints; [] when the answer is not a list of pairs."""
    try:
        pairs = [tuple(x) for x in answer]
    except TypeError:
        return []
    ok = pairs and all(len(p) == 2 and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in p)
                       for p in pairs)
    return [(int(a), int(b)) for a, b in pairs] if ok else []


def ex61_buddy(answer) -> bool | None:
    """6.1: a fresh 16-chunk allocator, a request for 3 chunks: which blocks, where?"""
    expected = buddy_blocks(16, 3)
    lowest = [(0, 1), (2, 0)]
    got = None if answer is None else _pairs(answer)
    if got == []:
        return checks.verdict("6.1 buddy blocks", False, f"expected a list of (offset, order) pairs, e.g. "
                                                          f"[(8, 3)] for one 8-chunk block at 8, got {answer!r}.")
    if got is not None and sorted(got) == sorted(expected) and got != expected:
        hint = "the right blocks, in the wrong order: the kernel allocates the largest power of two first."
    elif got == lowest:
        hint = ("that is the lowest-offset choice of a textbook buddy allocator. The kernel takes the *last* "
                "(highest-offset) free block of the smallest order that fits, and when it splits a block it goes "
                "on with the right half.")
    elif got is not None and [o for _, o in got] == [o for _, o in expected]:
        hint = "the orders are right (3 = 2 + 1 chunks); now follow the splits to find the offsets."
    else:
        hint = ("3 chunks are not a power of two: the kernel splits the request into 2 + 1 chunks, largest first, "
                "and takes each from the smallest free block that fits, splitting to the right.")
    return checks.equal("6.1 buddy blocks", got, expected, hint,
                        why="16 → split, keep the right half (8..15) → (12..15) → (14..15): the 2-chunk block. "
                            "The smallest free block left that fits 1 chunk is the 2-chunk block at 12; "
                            "split it and take its right half, 13.")


def eviction_victim(link=None) -> tuple[str, str]:
    """VRAM 8 MiB, GTT 8 MiB, BOs a, b, c of 4 MiB created in that order: the first eviction."""
    m = ttm.TTMModel(8 * MiB, 8 * MiB, link=link)
    for name in "abc":
        m.create(name, 4 * MiB)
    first = next(mv for mv in m.moves if mv.reason == "evict")
    return first.bo, first.dst.name


def ex62_eviction(evicted_bo, evicted_to, link=None) -> bool | None:
    """6.2: which BO does the model evict to make room for c, and where does it go?"""
    answer = None if evicted_bo is None else (evicted_bo, str(evicted_to).upper())
    expected = eviction_victim(link)
    hint = ("TTM walks the LRU list from its head (the least recently used BO) and moves a VRAM victim to "
            "GTT while GTT has room; only GTT victims go to SYSTEM.")
    if answer is not None and answer[0] == expected[0] and answer[1] != expected[1]:
        hint = "right victim; but GTT has room, and a VRAM eviction goes to GTT first."
    return checks.equal("6.2 eviction victim", answer, expected, hint,
                        why="a was used least recently (created first, never touched since), and GTT had 8 MiB free.")


def fragmentation_after(chunks: int = 16, chunk: int = MiB) -> float:
    """A fresh `chunks`-chunk allocator: alloc 4 chunks, alloc 1 chunk, free the 4: fragmentation."""
    a = buddy.BuddyAllocator(chunks * chunk, chunk_size=chunk)
    big = a.alloc(4 * chunk)
    a.alloc(1 * chunk)
    a.free(big)
    return a.fragmentation()


def ex63_fragmentation(answer) -> bool | None:
    """6.3: fragmentation = 1 − largest free block / free bytes, after alloc 4, alloc 1, free the 4."""
    expected = fragmentation_after()
    hints = [Hint(lambda a, e: abs(a - 0.5) < 0.01, "free bytes are 15 MiB, not 16: the 1 MiB block is still allocated."),
             Hint(lambda a, e: abs(a) < 0.01, "the freed 4 MiB cannot merge: its buddy (the 4 MiB block at 8 MiB) is "
                                              "split, because the 1 MiB allocation came out of it."),
             factor_hint(100, "a fraction between 0 and 1, not a percentage.")]
    return checks.close("6.3 fragmentation", answer, expected, rel_tol=0.02, hints=hints,
                        why="free blocks: 8 MiB at 0, 2 MiB at 8, 1 MiB at 10, 4 MiB at 12 — 15 MiB free, the largest "
                            "8 MiB, so 1 − 8/15 ≈ 0.47. A contiguous 12 MiB request fails with 15 MiB free.")


FD_OPTIONS = {
    "a": "a handle for other devices and drivers (a NIC, another GPU, a display) to attach to and reach the memory by DMA",
    "b": "a broken export: on a working system the CPU could read the GPU's memory through it",
    "c": "a GEM handle of nvidia-drm, which the DRM tour of section 3 could use",
    "d": "a copy of the buffer in system memory, made when the fd was created",
}
FD_WHY = {
    "a": "Right. The exporter (nv-dmabuf.c) gives importers bus addresses of the GPU memory; it refuses a CPU "
         "mapping on GPUs with their own memory, so mmap fails while the export itself works.",
    "b": "No: the refusal is deliberate. The export's fdinfo and size are right; nv_dma_buf_mmap returns ENOTSUPP "
         "unless the export allows CPU mapping, which the driver grants only on GPUs without dedicated memory.",
    "c": "No: a dma-buf is a file descriptor, usable in any process it is passed to, while a GEM handle is a small "
         "number private to one open DRM file. CUDA memory never was a GEM object.",
    "d": "No: nothing is copied. The fd names the same device memory the CUDA pointer names; its size is the "
         "range exported.",
}


def ex64_what_the_fd_is(answer) -> bool | None:
    """6.4: the export worked and mmap was refused with errno 524. What is the fd for?"""
    return checks.choice("6.4 what the fd is", answer, FD_OPTIONS, "a", FD_WHY)


def _sealed_memfd() -> int:
    """A memory file of a drawn size (whole pages), sealed so that nobody can change that size."""
    import fcntl  # Linux (the trial runs only there)

    fd = os.memfd_create("course-trial", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, random.SystemRandom().randrange(1, 64) * 4096)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def _temporary_file() -> int:
    """An fd of a deleted temporary file holding 12345 bytes: a regular file, not a memory file."""
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 12345)
        f.flush()
        return os.dup(f.fileno())


def _trial_fds():
    """The fds the trial hands out, each open only while its case runs."""
    for make in (_sealed_memfd, _sealed_memfd, _sealed_memfd, _temporary_file):
        fd = make()
        try:
            yield fd
        finally:
            with contextlib.suppress(OSError):  # the learner's function may have closed it (a problem judged)
                os.close(fd)


def _judge_description(fd: int, got) -> list[str]:
    try:
        size = os.fstat(fd).st_size
    except OSError:
        return ["your function closed the fd: it belongs to the caller."]
    if not isinstance(got, dict):
        return [f"describe_fd should return a dict, got {type(got).__name__}."]
    link = os.readlink(f"/proc/self/fd/{fd}")
    what = "memory file" if link.startswith("/memfd:") else "file"
    problems = [] if got.get("size") == size else [f"for a {size}-byte {what} your 'size' was {got.get('size')!r}."]
    if got.get("link") != link:
        problems.append(f"'link' should be what /proc/self/fd/N points to ({link!r}), got {got.get('link')!r}.")
    return problems


def _describe_trial(fn) -> list[str]:
    """Run the learner's describe_fd on file descriptors the check makes: memory files of drawn
    sizes, then a temporary file. It must give the size and the /proc link, and leave the fd open.
    The size must exist before the function runs (it builds the input), so no frame holds it: it
    is drawn in _sealed_memfd, and the judge reads size and link from the fd only after the
    function returned; the memory files are sealed (F_SEAL_GROW, F_SEAL_SHRINK), so the function
    cannot change the size it is asked for."""
    if not sys.platform.startswith("linux") or not hasattr(os, "memfd_create"):
        return []  # the trial needs Linux's memfd and /proc: it cannot check anything here
    return checks.learner_first(_trial_fds(), fn, _judge_description)


def ex65_describe_fd(fn) -> bool | None:
    """6.5 (coding): describe_fd(fd) -> {'size': bytes (lseek to the end), 'link': /proc/self/fd/N target}."""
    if not sys.platform.startswith("linux"):
        print("… 6.5 describe_fd: the check needs Linux (memfd and /proc); on this system it cannot run")
        return None
    return checks.code("6.5 describe_fd", fn, _describe_trial,
                       why="an fd is a reference to an open file; lseek to the end gives a dma-buf's size, and its "
                           "/proc link says '/dmabuf:' where a memory file says '/memfd:…'. Try it on a real export: "
                           "the cell that shows export_dmabuf calls look_at_fd, the course's version of this function.")


SYNC_OPTIONS = {
    "a": "the compositor's program polls a flag in the buffer until the game's program sets it",
    "b": "the game's job added its fence to the buffer's reservation object as a writer; the compositor's driver "
         "(or a poll() on the dma-buf) waits for the writers before the compositor's job reads",
    "c": "PRIME copies the buffer into the compositor's memory once the game's job has finished",
    "d": "nothing: a dma-buf carries no synchronisation, so the compositor must sleep long enough",
}
SYNC_WHY = {
    "a": "No: neither program knows when the GPU finishes (the game's submit returns at once), and a flag "
         "written by the CPU says nothing about the GPU's writes.",
    "b": "Right: implicit sync. The dma-buf shares the exporting BO's dma_resv (drm_gem_prime_export hands the "
         "object's resv to dma_buf_export), so the fence the game's submission added with usage WRITE is visible to "
         "every importer. The importing driver reads it when it submits, and poll() on the dma-buf fd waits for it.",
    "c": "No: PRIME shares the same pages (or VRAM) by reference; nothing is copied.",
    "d": "No: every dma-buf has a reservation object with fences; explicit sync (sync_file, syncobj) is the "
         "alternative where user space passes fences itself, not the absence of synchronisation.",
}


def ex66_implicit_sync(answer) -> bool | None:
    """6.6: a compositor reads a buffer a game renders into, shared as a dma-buf. Who makes it wait?"""
    return checks.choice("6.6 implicit sync", answer, SYNC_OPTIONS, "b", SYNC_WHY)
