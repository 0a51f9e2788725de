"""One GPU thread chasing pointers: the round-trip time of a read, from the GPU's side.

A read that must finish before the next one can start (its address is the value just read)
cannot overlap with anything, so the time per step of a long chase is the latency of one read:
over mapped pinned host memory, one PCIe round trip (request out, completion back) plus the
address translation on the way; over device memory, one trip to HBM. Chapter 2 shows
`chase_ns_per_read` on its page; the C cross-check (tools/bwcheck `--latency`) builds the same
kind of chain and chases it with nvcc's code, and helpers.ch03_dma_and_copy_engines.crosscheck
compares the two. NVIDIA's nvbandwidth measures the same quantity (`host_device_latency_sm`).

The chain visits slots `stride` bytes apart in a random order, so no two steps touch the same
cache line and a prefetcher cannot guess the next address; `make_chain(..., part, parts)` gives
each of several trials its own set of slots, so no trial reads a line an earlier one cached.
"""

from __future__ import annotations

import numpy as np

from helpers.core import validate
from helpers.core.errors import InputError
from helpers.core.gpu import cuda

TRIALS = 3  # chases per measurement, each on its own slots
SLOT_BYTES = 256  # two 128-byte cache lines per slot: a step never shares a line with another
ITEM = np.dtype(np.int64)


def make_chain(nbytes: int, *, part: int = 0, parts: int = 1, seed: int = 0) -> tuple[np.ndarray, int]:
    """A pointer-chasing chain in an int64 array of `nbytes`: (array, index of the first slot).

    Slot k starts at element k * SLOT_BYTES / 8 and holds the element index of the next slot.
    Only slots with k % parts == part are used, visited in a random cycle (seeded), so `parts`
    chains built on one buffer never share a cache line."""
    nbytes = validate.whole_number(nbytes, "chain bytes", SLOT_BYTES * 4, 1 << 34)
    parts = validate.whole_number(parts, "parts", 1, 64)
    part = validate.whole_number(part, "part", 0, parts - 1)
    per_slot = SLOT_BYTES // ITEM.itemsize
    slots = np.arange(part, nbytes // SLOT_BYTES, parts, dtype=np.int64)
    if len(slots) < 2:
        raise InputError(f"{nbytes} bytes in {parts} parts leave fewer than two slots for a chain")
    order = np.random.default_rng(seed).permutation(slots)
    chain = np.zeros(nbytes // ITEM.itemsize, dtype=np.int64)
    chain[order * per_slot] = np.roll(order, -1) * per_slot
    return chain, int(order[0] * per_slot)


def chain_length(nbytes: int, parts: int = 1) -> int:
    """How many distinct steps one part of a chain over `nbytes` holds before it repeats."""
    return (nbytes // SLOT_BYTES) // parts


def chase_ns_per_read(chain, start: int, steps: int) -> float:
    """Nanoseconds per dependent read: one GPU thread follows `chain` from `start`.

    Runs of 1 (warm-up, compiles), `steps` and 2*`steps` reads, each timed with CUDA events;
    the difference of the last two cancels the launch cost. Each run goes on where the last one
    stopped, so no address is read twice."""
    @cuda.jit
    def chase(nxt, j, n, out):
        for _ in range(n):
            j = nxt[j]  # the next address is the value just read: nothing can overlap
        out[0] = j

    out = cuda.mapped_array(1, dtype=np.int64)
    times_ns = []
    for n in (1, steps, 2 * steps):
        begin, end = cuda.event(), cuda.event()
        begin.record()
        chase[1, 1](chain, start, n, out)
        end.record()
        end.synchronize()
        times_ns.append(begin.elapsed_time(end) * 1e6)  # ms -> ns
        start = int(out[0])
    return (times_ns[2] - times_ns[1]) / steps


def chase_trials(code, nbytes: int, steps: int, where: str, trials: int = TRIALS) -> list[float]:
    """ns per read of `trials` chases over `nbytes` of host (mapped pinned) or device memory,
    each trial on its own slots of one buffer (so no trial reads what another cached)."""
    if 1 + 3 * steps > chain_length(nbytes, trials):
        raise InputError(f"{steps} steps need a longer chain than {nbytes} bytes in {trials} parts")
    where = validate.choice(where, "where", ("host", "device"))
    out = []
    host = cuda.mapped_array(nbytes // 8, dtype=np.int64) if where == "host" else None
    for t in range(trials):
        chain, start = make_chain(nbytes, part=t, parts=trials, seed=t)
        if host is not None:
            host[:] = chain
            out.append(float(code(host, start, steps)))
        else:
            dev = cuda.to_device(chain)
            out.append(float(code(dev, start, steps)))
            del dev
    del host
    return out
