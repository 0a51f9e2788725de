"""One GPU thread chasing pointers, once from every SM: the round-trip time of a read, from the GPU's side.

A read that must finish before the next one can start (its address is the value just read)
cannot overlap with anything, so the time per step of a long chase is the latency of one read:
over mapped pinned host memory, one PCIe round trip (request out, completion back) plus the
address translation on the way; over device memory, one trip to HBM. Chapter 2 shows
`chase_ns_per_read` on its page; the C cross-check (helpers/measure/bwcheck `--latency`) chases exactly
the same chains the same way with nvcc's code, and helpers.ch03_dma_and_copy_engines.crosscheck
compares the two. NVIDIA's nvbandwidth measures the host-memory figure too
(`host_device_latency_sm`) over another chain (2 MiB in 128-byte steps, launches timed whole);
helpers.measure.nvbw_chase measures that statistic, and only it is compared with nvbandwidth.

**Every SM, then the mean.** How far a read travels depends on where the SM sits on the die:
on an H100 (GPU-b5a99e5d, 2026-11-25) single SMs read host memory in 1,186-1,387 ns (each SM's
mean of 12 trials) and device memory mostly in 300-450 ns (single runs of one SM also gave 169
and 466 ns: one SM's figure rests on a few hundred reads, the mean over the SMs on tens of thousands). A one-block launch always lands on the same SM (SM 124 there, 20 launches
out of 20), so a one-block chase measures one SM, not the GPU. The chase therefore runs once
from each SM: a grid of one single-thread block per SM in which only block `sm` chases (the
block scheduler places one block on each SM, as nvbandwidth assumes), and a trial's figure is
the mean over the SMs (nvbandwidth too sums over every SM: its total time over its total reads).

What the device-memory number is, and why it is well defined:

- **No cache hit.** The chased buffer is at least L2_MULTIPLE times the GPU's L2 (read from the
  device; `device_chain_bytes`), a trial visits every slot at most once across all SMs, and
  before each trial FLUSH_MULTIPLE L2s of other memory are written (`flush_l2`), so the line a
  step needs is never already in the L2: every step is one L2 miss served by HBM. (A chain that
  fits the L2 mixes L2 hits with HBM reads in proportions that change from run to run; that is
  what this design removes.)
- **No prefetching.** Slots are SLOT_BYTES apart (two 128-byte lines, no shared line), visited
  in a pseudo-random order (`chain_order`: slots sorted by a 64-bit hash of their index), so
  there is no stride for a prefetcher to follow.
- **Translation.** Consecutive steps land on random pages all over the buffer (256 MiB on an
  H100: 128 pages if the driver maps it with 2 MiB pages, 65,536 with 4 KiB pages). Whatever
  level of the GPU's TLBs holds that many translations is part of every step; the recorder
  also chases a buffer four times larger (`mmio.gpu_read_latency`'s `device_tlb_check`), and
  the page shows both, so the reader sees whether more pages cost more.

And the host-memory number:

- **Every read a new line.** The host chain covers HOST_CHAIN_BYTES (128 MiB) of mapped pinned
  memory and, like the device chain, no slot is read twice in a trial, so every read crosses the
  link and is answered from host memory. nvbandwidth's 1,000,000 reads walk only the first ~1 MB
  of its buffer in 128-byte steps; the course tried that too: on GPU-07ff2fd4 (2026-11-25) a
  1 MiB window gave 1,138-1,176 ns from one allocation to the next (each allocation's trials
  within 0.7%), while 128 MiB gave 1,184-1,199 ns and nvbandwidth 1,182-1,188 ns in the same
  three processes. Spread over 32,768 pages, the chase does not depend on where one small
  buffer happens to land.

The order is defined by integer arithmetic alone (splitmix64), so the C program builds the
very same chains; each side reports the first slots of every trial (`order_head`) and the
cross-check refuses a comparison of two different chains. Indices are unsigned (uint64): a
signed index costs Numba a negative-index test on every dependent step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from helpers.core import gpu, validate
from helpers.core.errors import InputError
from helpers.core.gpu import cuda

TRIALS = 3  # chases per measurement, each on its own slots
SLOT_BYTES = 256  # two 128-byte cache lines per slot: a step never shares a line with another
ITEM = np.dtype(np.uint64)  # unsigned: no negative-index test in the chase's dependent path
L2_MULTIPLE = 4  # the device chain's buffer is at least this many L2s
FLUSH_MULTIPLE = 2  # before each trial this many L2s of other memory are written
MIN_DEVICE_BYTES = 64 << 20  # a GPU that reports a tiny (or no) L2 still gets this much
HOST_CHAIN_BYTES = 128 << 20  # 174,762 slots a trial: 132 SMs x 3 x 256 reads never read one twice
STEPS, QUICK_STEPS = 256, 64  # reads per timed run, per SM (runs of STEPS and 2 * STEPS)
HEAD = 4  # slots per trial reported as the chain's fingerprint (order_head)
_SEED_SHIFT = 40  # hash input = slot + (seed << 40): distinct for < 2**40 slots


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 (wrapping arithmetic): a bijection, so distinct inputs
    give distinct outputs (no ties when sorting by it). helpers/measure/bwcheck/chain.h is the C twin."""
    z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def chain_order(slots: np.ndarray, seed: int) -> np.ndarray:
    """`slots` (distinct slot indices) in the order a chain visits them: sorted by
    splitmix64(slot + seed << 40). Deterministic, vectorised here, a qsort in C."""
    seed = validate.whole_number(seed, "seed", 0, (1 << 20) - 1)
    slots = np.asarray(slots, dtype=np.int64)
    keys = splitmix64(slots.astype(np.uint64) + np.uint64(seed << _SEED_SHIFT))
    return slots[np.argsort(keys, kind="stable")]


def make_chain(nbytes: int, *, part: int = 0, parts: int = 1, seed: int = 0) -> tuple[np.ndarray, int]:
    """A pointer-chasing chain in an int64 array of `nbytes`: (array, index of the first slot).

    Slot k starts at element k * SLOT_BYTES / 8 and holds the element index of the next slot.
    Only slots with k % parts == part are used, visited in `chain_order(..., seed)` as one
    cycle, so `parts` chains built on one buffer never share a cache line."""
    order = _order(nbytes, part, parts, seed)
    per_slot = SLOT_BYTES // ITEM.itemsize
    chain = np.zeros(nbytes // ITEM.itemsize, dtype=ITEM)
    chain[order * per_slot] = np.roll(order, -1) * per_slot
    return chain, int(order[0] * per_slot)


def make_chains(nbytes: int, parts: int = TRIALS) -> tuple[np.ndarray, list[int]]:
    """All `parts` chains of `make_chain(nbytes, part=t, parts=parts, seed=t)` in one array (their
    slots are disjoint): (array, start of each). The chase loads `chain_plan` instead (load_chains)."""
    plan = chain_plan(nbytes, parts)
    chain = np.zeros(nbytes // ITEM.itemsize, dtype=ITEM)
    chain[plan.index] = plan.value
    return chain, plan.starts


@dataclass(frozen=True, kw_only=True)
class ChainPlan:
    """What `make_chains(nbytes, parts)` writes, as entries: element `index[i]` holds `value[i]`
    (the next slot's element); `starts` is where each chain begins."""

    nbytes: int
    parts: int
    index: np.ndarray
    value: np.ndarray
    starts: list[int]


def chain_plan(nbytes: int, parts: int = TRIALS) -> ChainPlan:
    """The entries of all `parts` chains over `nbytes` (see make_chains), built once per buffer size:
    sorting every slot by its hash is most of a second at 256 MiB."""
    per_slot = SLOT_BYTES // ITEM.itemsize
    orders = [_order(nbytes, t, parts, t) for t in range(parts)]
    return ChainPlan(nbytes=nbytes, parts=parts, index=np.concatenate([o * per_slot for o in orders]),
                     value=np.concatenate([np.roll(o, -1) * per_slot for o in orders]).astype(ITEM),
                     starts=[int(o[0] * per_slot) for o in orders])


def load_chains(plan: ChainPlan, where: str):
    """`plan`'s chains in a fresh buffer of mapped pinned host memory or device memory. Only the
    chains' entries are written (a chase reads nothing else), straight into the buffer (host) or by
    a scatter kernel (device): a full-size NumPy copy would fault in every page of a 1 GiB array
    first, seconds on the H100's host, for bytes no chase reads."""
    where = validate.choice(where, "where", ("host", "device"))
    n = plan.nbytes // ITEM.itemsize
    if where == "host":
        buf = cuda.mapped_array(n, dtype=ITEM)
        buf[plan.index] = plan.value
        return buf
    buf = cuda.device_array(n, dtype=ITEM)
    _scatter_kernel()[264, 256](buf, cuda.to_device(plan.index), cuda.to_device(plan.value))
    cuda.synchronize()
    return buf


@functools.lru_cache(maxsize=1)
def _scatter_kernel():
    """load_chains' kernel, compiled once per process: a[index[i]] = value[i], grid-stride."""
    @cuda.jit
    def scatter(a, index, value):
        i = cuda.grid(1)
        while i < index.size:
            a[index[i]] = value[i]
            i += cuda.gridsize(1)

    return scatter


def _order(nbytes: int, part: int, parts: int, seed: int) -> np.ndarray:
    return chain_order(_slots(nbytes, part, parts), seed)


def _slots(nbytes: int, part: int, parts: int) -> np.ndarray:
    nbytes = validate.whole_number(nbytes, "chain bytes", SLOT_BYTES * 4, 1 << 34)
    parts = validate.whole_number(parts, "parts", 1, 64)
    part = validate.whole_number(part, "part", 0, parts - 1)
    slots = np.arange(part, nbytes // SLOT_BYTES, parts, dtype=np.int64)
    if len(slots) < 2:
        raise InputError(f"{nbytes} bytes in {parts} parts leave fewer than two slots for a chain")
    return slots


def _head_of_order(nbytes: int, part: int, parts: int, seed: int, n: int) -> np.ndarray:
    """`_order(...)[:n]` without sorting every slot: the n smallest keys, then those n sorted (the
    keys are distinct, splitmix64 being a bijection, so this is the full sort's head)."""
    slots = _slots(nbytes, part, parts)
    keys = splitmix64(slots.astype(np.uint64) + np.uint64(validate.whole_number(seed, "seed", 0, (1 << 20) - 1)
                                                         << _SEED_SHIFT))
    n = min(n, len(slots))
    first = np.argpartition(keys, n - 1)[:n] if n < len(slots) else np.arange(len(slots))
    return slots[first[np.argsort(keys[first])]]


def order_head(nbytes: int, trials: int = TRIALS, n: int = HEAD) -> list[list[int]]:
    """The first `n` slot indices of each trial's chain over `nbytes`: the fingerprint both the
    course and helpers/measure/bwcheck report, so a comparison of two different chains is refused."""
    return [[int(s) for s in _head_of_order(nbytes, t, trials, t, n)] for t in range(trials)]


def chain_length(nbytes: int, parts: int = 1) -> int:
    """How many distinct steps one part of a chain over `nbytes` holds before it repeats."""
    return (nbytes // SLOT_BYTES) // parts


def device_chain_bytes(l2_bytes: int) -> int:
    """The device chain's buffer: the smallest power of two >= L2_MULTIPLE x the L2 (at least
    MIN_DEVICE_BYTES). 50 MiB of L2 (H100) -> 256 MiB; 60 MiB (H200) -> 256 MiB."""
    l2_bytes = validate.whole_number(l2_bytes, "L2 bytes", 0, 1 << 34)
    want = max(L2_MULTIPLE * l2_bytes, MIN_DEVICE_BYTES)
    return 1 << (want - 1).bit_length()


def l2_bytes() -> int:
    """The L2 size this GPU reports (cudaDeviceProp.l2CacheSize); 0 without a usable GPU (Numba's
    simulator has no cache, so there is nothing to defeat or flush)."""
    from helpers.core import gpu

    if not gpu.probe().usable:
        return 0
    return int(gpu.cupy().cuda.runtime.getDeviceProperties(0)["l2CacheSize"])


def flush_l2(nbytes: int, value: int = 0) -> None:
    """Write `nbytes` of freshly allocated device memory (a grid-stride int64 fill, as
    helpers/measure/bwcheck does) and wait: whatever the L2 held before is evicted. 0: nothing to do."""
    nbytes = validate.whole_number(nbytes, "flush bytes", 0, 1 << 36)
    if nbytes == 0:
        return
    scratch = cuda.device_array(nbytes // 8, dtype=np.int64)
    _fill_kernel()[264, 256](scratch, value)
    cuda.synchronize()
    del scratch


@functools.lru_cache(maxsize=1)
def _fill_kernel():
    """The flush's kernel, compiled once per process (Numba loads only when first asked)."""
    @cuda.jit
    def fill(a, v):
        i = cuda.grid(1)
        while i < a.size:
            a[i] = v
            i += cuda.gridsize(1)

    return fill


def sm_count() -> int:
    """How many SMs this GPU has (the chase runs once from each); 1 on Numba's simulator."""
    from helpers.core import config, gpu

    if config.numba_simulator_on() or not gpu.probe().usable:  # the simulator on a GPU machine too
        return 1
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def chase_ns_per_read(chain, start: int, steps: int) -> list[float]:
    """Nanoseconds per dependent read, once from every SM: one GPU thread follows `chain`.

    The grid has one single-thread block per SM and only block `sm` chases, so the chase runs
    from each SM in turn (nvbandwidth's host_device_latency_sm does the same). Per SM: runs of
    `steps` and 2*`steps` reads, each timed with CUDA events; their difference cancels the
    launch cost. Each run goes on where the last one stopped."""
    sms = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)  # 1 on Numba's simulator
    out = cuda.mapped_array(1, dtype=np.uint64)
    chase[sms, 1](chain, np.uint64(start), 1, out, 0)  # compiles (once per process); not timed
    cuda.synchronize()
    ns = []
    for sm in range(sms):
        times_ns = []
        for n in (steps, 2 * steps):
            begin, end = cuda.event(), cuda.event()
            begin.record()
            chase[sms, 1](chain, out[0], n, out, sm)
            end.record()
            end.synchronize()
            times_ns.append(begin.elapsed_time(end) * 1e6)  # ms -> ns
        ns.append((times_ns[1] - times_ns[0]) / steps)
    return ns


chase = gpu.KernelOnFirstUse("helpers.measure._chase_kernel", "chase")  # `chase[grid, block](...)` as the page writes it


def per_sm(result) -> list[float]:
    """A chase's result as one figure per SM: `chase_ns_per_read` gives a list; a chase that
    returns a single number (a one-block version, say) counts as one SM."""
    vals = [float(v) for v in np.atleast_1d(np.asarray(result, dtype=float))]
    if not vals or not all(np.isfinite(vals)):
        raise InputError(f"a chase returned {result!r}: expected ns per read, one finite number per SM")
    return vals


def reads_per_trial(steps: int, sms: int) -> int:
    """Distinct slots a trial reads: a 1-read warm-up, then runs of steps and 2*steps from each SM."""
    return 1 + 3 * steps * sms


def check_chain(nbytes: int, steps: int, trials: int = TRIALS, sms: int | None = None) -> None:
    """Refuse a chain too short for the design: no slot may be read twice in a trial, by any SM
    (the L2 keeps device memory between launches, and a re-read would be a hit)."""
    sms = sm_count() if sms is None else sms
    need = reads_per_trial(steps, sms)
    if need > chain_length(nbytes, trials):
        raise InputError(f"{steps} steps from {sms} SM(s) need a longer chain than {nbytes} bytes "
                         f"in {trials} parts ({need} slots, {chain_length(nbytes, trials)} there)")


def chase_trials(code, nbytes: int, steps: int, where: str, trials: int = TRIALS,
                 flush_bytes: int | None = None, plan: ChainPlan | None = None) -> list[list[float]]:
    """ns per read from every SM (`code`'s list) for `trials` chases over `nbytes` of host (mapped
    pinned) or device memory, each trial on its own slots of one buffer (so no trial reads what
    another cached), with `flush_bytes` of other memory written before each (default
    FLUSH_MULTIPLE x this GPU's L2). One list per trial; `trial_means` gives each trial's figure.
    `plan`: `chain_plan(nbytes, trials)` built once by a caller that chases the same chains in
    several rounds."""
    where = validate.choice(where, "where", ("host", "device"))
    steps = validate.whole_number(steps, "steps", 1, 1 << 24)
    check_chain(nbytes, steps, trials)
    flush = FLUSH_MULTIPLE * l2_bytes() if flush_bytes is None else flush_bytes
    plan = chain_plan(nbytes, trials) if plan is None else plan
    if (plan.nbytes, plan.parts) != (nbytes, trials):
        raise InputError(f"the plan given is not chain_plan({nbytes}, {trials})")
    buf = load_chains(plan, where)
    out = []
    for t, start in enumerate(plan.starts):
        flush_l2(flush, t)
        with gpu.deliberate_launch():  # one single-thread block per SM, on purpose: a latency chase
            out.append(per_sm(code(buf, start, steps)))
    del buf
    return out


def trial_means(per_trial: list[list[float]]) -> list[float]:
    """Each trial's figure: the mean over the SMs (nvbandwidth's statistic)."""
    return [float(np.mean(v)) for v in per_trial]


def sm_means(per_trial: list[list[float]]) -> list[float]:
    """Each SM's mean over the trials: where on the die a read starts, and what it costs."""
    return [float(v) for v in np.mean(np.asarray(per_trial, dtype=float), axis=0)]
