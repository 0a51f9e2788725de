"""nvbandwidth's GPU->host read latency, measured the way nvbandwidth measures it.

NVIDIA's nvbandwidth v0.8 (github.com/NVIDIA/nvbandwidth) reports `host_device_latency_sm` as
follows (read from its source: common.h, nvbandwidth.cpp, testcase.cpp `latencyHelper`,
kernels.cu `latencyPtrChaseKernel` and `ptrChasingKernel`):

- a fixed 2 MiB pinned host buffer (`cuMemHostAlloc`), allocated afresh for each run;
- 8-byte nodes, node i pointing at node (i + strideLen) mod n with strideLen = 16: one step
  is 128 bytes, in address order, so the chase walks the buffer's lines one after the other;
- latencyMemAccessCnt = 1,000,000 reads in all, split evenly (integer division) over the SMs;
- one launch per SM of a grid of one single-thread block per SM in which only that block
  chases, every launch starting at the buffer's first node;
- each launch timed with CUDA events (the launch itself included), and the figure the sum
  of the SMs' times divided by 1,000,000. nvbandwidth launches from C (a few microseconds
  between its start event and its kernel); a Numba launch from Python takes tens of
  microseconds more (about 95 µs event to event for an empty launch, measured on the H100 on
  2026-11-28, about 1% of one SM's 9 ms chase), so here a short `gate` kernel runs ahead of
  each start event and the chase is already queued when the gate ends: the timed window holds
  the GPU's side of the launch, not the interpreter's;
- once per run: HostDeviceLatencySM::run ignores its loop count, and `-i` (testSamples, the
  median or mean over samples of the bandwidth tests) does not reach the latency test, so
  nvbandwidth's runs are the rounds to compare with the course's rounds.

The course's own chase (helpers.measure.gpu_chase) differs on purpose: a 128 MiB buffer read in
a hash order (random pages), no slot read twice, launch cost cancelled by runs of N and 2N reads.
Both are kept: this module gives the figure that may be compared with nvbandwidth's, the other
the course's picture of a read that always lands on a new line and page. The kernel is the
course's `chase` (`j = nxt[j]` over element indices): the same dependent read, one index
multiply-add per step more than nvbandwidth's `p = p->next`.
"""

from __future__ import annotations

import statistics

import numpy as np

from helpers.core import config, gpu, validate
from helpers.core.errors import InputError, SystemInfoError
from helpers.core.gpu import cuda
from helpers.measure import gpu_chase

BUFFER_BYTES = 2 << 20  # nvbandwidth.cpp: the latency tests run at a fixed 2 * _MiB
NODE_BYTES = 8  # sizeof(struct LatencyNode): one pointer
STRIDE_NODES = 16  # common.h strideLen: 16 nodes = one 128-byte line per step
ACCESSES = 1_000_000  # common.h latencyMemAccessCnt: reads in all, over every SM
ROUNDS = 3  # fresh buffer each, as each nvbandwidth run allocates its own
STATISTIC = ("nvbandwidth's: per round a fresh 2 MiB pinned buffer, 128-byte steps in address order from its "
             "start, 1,000,000 reads split over the SMs, one event-timed launch per SM (launch included, queued "
             "behind a gate kernel so Python's launch cost is not timed), "
             "sum of the SMs' times / 1,000,000; the figure: the median round")


def chain(nbytes: int = BUFFER_BYTES, stride: int = STRIDE_NODES) -> np.ndarray:
    """nvbandwidth's chain as element indices: node i holds (i + stride) mod n, n = nbytes / 8."""
    nbytes = validate.whole_number(nbytes, "chain bytes", 2 * NODE_BYTES, 1 << 34)
    n = nbytes // NODE_BYTES
    stride = validate.whole_number(stride, "stride", 1, n - 1)
    return ((np.arange(n, dtype=np.uint64) + np.uint64(stride)) % np.uint64(n)).astype(gpu_chase.ITEM)


def reads_per_sm(sms: int, accesses: int = ACCESSES) -> int:
    """Each SM's share of the reads: nvbandwidth's `latencyMemAccessCnt / smCount` (integer division)."""
    sms = validate.whole_number(sms, "SMs", 1, 1 << 16)
    accesses = validate.whole_number(accesses, "accesses", 1, 1 << 40)
    if accesses < sms:
        raise InputError(f"{accesses} reads cannot be split over {sms} SMs")
    return accesses // sms


def ns_per_read(elapsed_ms: list[float], accesses: int = ACCESSES) -> float:
    """nvbandwidth's figure from each SM's launch time (ms): their sum in ns over `accesses`.
    It divides by the nominal count, not by SMs x share (1,000,000 vs 999,900 on 132 SMs: 0.01%)."""
    ms = [float(v) for v in elapsed_ms]
    if not ms or not all(np.isfinite(ms)) or min(ms) < 0:
        raise InputError(f"launch times must be finite and >= 0 ms, got {elapsed_ms!r}")
    accesses = validate.whole_number(accesses, "accesses", 1, 1 << 40)
    return sum(ms) * 1e6 / accesses


def end_node(per: int, nbytes: int = BUFFER_BYTES, stride: int = STRIDE_NODES) -> int:
    """The node a chase of `per` reads from node 0 ends on: (per x stride) mod n."""
    return (per * stride) % (nbytes // NODE_BYTES)


def timed_launches(buf, accesses: int = ACCESSES) -> list[float]:
    """Each SM's launch time in ms: one thread from block `sm` reads `reads_per_sm` nodes of `buf`
    from node 0, timed with events around the launch, as nvbandwidth's latencyPtrChaseKernel does.
    Each launch must end on `end_node` (else it did not walk the chain: SystemInfoError)."""
    sms = gpu_chase.sm_count()
    per = reads_per_sm(sms, accesses)
    out = cuda.mapped_array(1, dtype=np.uint64)
    gpu_chase.chase[sms, 1](buf, np.uint64(0), 1, out, 0)  # compiles (once per process); not timed
    _gate()
    cuda.synchronize()
    ms = []
    for sm in range(sms):
        begin, end = cuda.event(), cuda.event()
        _gate()
        begin.record()
        gpu_chase.chase[sms, 1](buf, np.uint64(0), per, out, sm)
        end.record()
        end.synchronize()
        if int(out[0]) != end_node(per, buf.size * NODE_BYTES):
            raise SystemInfoError(f"the chase from SM {sm} ended on node {int(out[0])}, not {end_node(per)}")
        ms.append(float(begin.elapsed_time(end)))
    return ms


GATE_NS = 500_000  # longer than a Python launch, so the chase is queued before the gate ends
_gate_kernel = gpu.KernelOnFirstUse("helpers.measure._chase_kernel", "gate")


def _gate() -> None:
    """Queue GATE_NS of GPU sleep ahead of the next start event (see the module docstring). Numba's
    simulator has no nanosleep and no launch queue to get ahead of: nothing to gate there."""
    if not config.numba_simulator_on():
        _gate_kernel[1, 1](GATE_NS)


def empty_launch_ms(buf) -> float:
    """One event-timed launch of the same grid that reads nothing, queued behind the gate: what
    each timed launch adds besides its reads on the GPU's side (the course's own chase cancels it)."""
    sms = gpu_chase.sm_count()
    out = cuda.mapped_array(1, dtype=np.uint64)
    begin, end = cuda.event(), cuda.event()
    _gate()
    begin.record()
    gpu_chase.chase[sms, 1](buf, np.uint64(0), 0, out, 0)
    end.record()
    end.synchronize()
    return float(begin.elapsed_time(end))


def rounds(n: int = ROUNDS, accesses: int = ACCESSES) -> dict:
    """`n` rounds of nvbandwidth's measurement, each on a freshly allocated and filled 2 MiB mapped
    pinned buffer: each round's figure, their median, and each SM's ns per read (mean over rounds),
    which says how much the SM a read starts from matters."""
    n = validate.whole_number(n, "rounds", 1, 20)
    figures, per_sm, empty = [], [], []
    for _ in range(n):
        buf = cuda.mapped_array(BUFFER_BYTES // NODE_BYTES, dtype=gpu_chase.ITEM)
        buf[:] = chain()
        with gpu.deliberate_launch():  # one single-thread block per SM, on purpose: a latency chase
            ms = timed_launches(buf, accesses)
            empty.append(empty_launch_ms(buf))
        del buf
        per = reads_per_sm(len(ms), accesses)
        figures.append(ns_per_read(ms, accesses))
        per_sm.append([v * 1e6 / per for v in ms])
    return {"nbytes": BUFFER_BYTES, "stride_bytes": STRIDE_NODES * NODE_BYTES, "accesses": accesses,
            "reads_per_sm": reads_per_sm(len(per_sm[0]), accesses), "rounds": n, "statistic": STATISTIC,
            "host_ns": figures, "host_median_ns": statistics.median(figures),
            "host_sm_ns": gpu_chase.sm_means(per_sm), "empty_launch_us": statistics.median(empty) * 1e3}


def spread(values: list[float]) -> float:
    """(max - min) / median of a side's rounds: the figure the 1% goal is about."""
    vals = [float(v) for v in values]
    if not vals or not all(np.isfinite(vals)) or statistics.median(vals) <= 0:
        raise InputError(f"rounds must be finite positive numbers, got {values!r}")
    return (max(vals) - min(vals)) / statistics.median(vals)
