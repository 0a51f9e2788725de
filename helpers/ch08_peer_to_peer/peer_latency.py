"""Chapter 8 — how long one GPU waits for a read of its peer's memory over NVLink.

The pointer chase is Chapter 2's (helpers.measure.gpu_chase: `chase_ns_per_read`, one thread
from every SM, runs of `steps` and 2 x `steps` dependent reads whose difference cancels the
launch); only the memory it chases changes. GPU `reader` chases a chain that lives in GPU
`memory`'s HBM, with peer access enabled from reader to memory, so every read is a load that
crosses NVLink (or PCIe) to the other GPU and waits for the answer. The same chase over the
reader's own memory, in the same run, is the local read the peer hop is compared with.

**The chain is nvbandwidth's**, so the course's figure and nvbandwidth's
`device_to_device_latency_sm` (v0.8, testcases_sm.cpp `DeviceToDeviceLatencySM::run`) measure
one statistic: a 2 MiB buffer of 8-byte entries where entry i points to entry i + 16 (128
bytes on: the next cache line, `strideLen` in common.h), wrapping at the end
(testcase.cpp `Testcase::latencyHelper`); one thread per SM, every SM in turn
(kernels.cu `latencyPtrChaseKernel`); the figure is the total time over the total reads, which
with the same number of reads per SM is the mean over the SMs. nvbandwidth spends its
1,000,000 reads (`latencyMemAccessCnt`) as 1,000,000 / SMs per SM; the course reads
3 x `steps` per SM with `steps` = 1,000,000 / SMs / 3. A 2 MiB chain is far smaller than an
H100's 50 MiB L2, so after the first lap the lines are cached in the L2 of the GPU that owns
the memory: the figure is a round trip to the other GPU's L2, not to its HBM (Chapter 2's
chase, which defeats the L2, measures HBM). nvbandwidth times each SM's whole launch, launch
cost included (a few µs in several ms of reads, well under 1%); the course's difference of
two runs leaves it out.
"""

from __future__ import annotations

import statistics

import numpy as np

from helpers.ch08_peer_to_peer import p2p
from helpers.core import gpu, validate
from helpers.core.experiments import P2P_REFERENCE, TWO_GPUS, experiment
from helpers.core.gpu import cuda
from helpers.measure.gpu_chase import ITEM, chase_ns_per_read, per_sm, trial_means

NVBW_BYTES = 2 << 20  # nvbandwidth's fixed buffer for its latency tests (nvbandwidth.cpp)
NVBW_STRIDE = 16  # entries (8 bytes each): 128 bytes, one cache line (common.h strideLen)
NVBW_READS = 1_000_000  # nvbandwidth's total reads over all SMs (common.h latencyMemAccessCnt)
ROUNDS, QUICK_ROUNDS = 5, 2  # chases from every SM per pair, each one figure
MAX_GPUS = 4
STATISTIC = ("each round: the mean over every SM of one thread's ns per read of a 2 MiB chain in 128-byte steps "
             "(nvbandwidth's device_to_device_latency_sm); the figure: the median round")


def nvbw_chain(nbytes: int = NVBW_BYTES, stride: int = NVBW_STRIDE) -> tuple[np.ndarray, int]:
    """nvbandwidth's latency chain as element indices: entry i holds (i + stride) mod n, start 0.

    Filled everywhere, as nvbandwidth fills every node; the chase from entry 0 visits every
    `stride`-th entry, n / stride of them, then starts the lap again."""
    nbytes = validate.whole_number(nbytes, "chain bytes", 2 * stride * ITEM.itemsize, 1 << 34)
    stride = validate.whole_number(stride, "stride", 1, 1 << 20)
    n = nbytes // ITEM.itemsize
    return ((np.arange(n, dtype=ITEM) + ITEM.type(stride)) % ITEM.type(n)).astype(ITEM), 0


def steps_for(sms: int) -> int:
    """Reads per timed run per SM such that the 3 x steps a SM reads match nvbandwidth's share."""
    sms = validate.whole_number(sms, "SM count", 1, 1 << 16)
    return max(1, NVBW_READS // sms // 3)


def chase_rounds(reader: int, memory: int, rounds: int, code) -> list[float]:
    """Each round's ns per read (the mean over the reader's SMs) of `reader` chasing nvbandwidth's
    chain in `memory`'s device memory (the same GPU: a local read). `code` is Chapter 2's chase,
    `chase_ns_per_read`: one thread on each SM in turn, runs of `steps` and 2 x `steps` reads. The
    chain is copied into `memory`'s HBM; the chase runs on `reader`, whose loads of a peer's
    addresses cross the link (peer access is enabled by the caller)."""
    chain, start = nvbw_chain()
    with cuda.gpus[memory]:
        buf = cuda.to_device(chain)
    out = []
    with cuda.gpus[reader]:
        sms = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", 1)  # 1 on Numba's simulator
        steps = steps_for(sms)
        for _ in range(rounds):
            with gpu.deliberate_launch():  # one single-thread block per SM, on purpose: a latency chase
                out.append(per_sm(code(buf, start, steps)))
    del buf
    return trial_means(out)


def measure(devices: list[int], rounds: int, code=chase_ns_per_read) -> dict:
    """Peer reads for every ordered pair of `devices` (peer access on) and each one's local read."""
    peer, local = [], []
    p2p._set_peer(devices, True)
    try:
        for r in devices:
            for m in devices:
                if r != m and gpu.cupy().cuda.runtime.deviceCanAccessPeer(r, m):
                    ns = chase_rounds(r, m, rounds, code)
                    peer.append({"reader": r, "memory": m, "ns": ns, "median_ns": statistics.median(ns)})
    finally:
        p2p._set_peer(devices, False)
    for d in devices:
        ns = chase_rounds(d, d, rounds, code)
        local.append({"reader": d, "memory": d, "ns": ns, "median_ns": statistics.median(ns)})
    return {"nbytes": NVBW_BYTES, "stride_bytes": NVBW_STRIDE * ITEM.itemsize, "reads": NVBW_READS,
            "rounds": rounds, "statistic": STATISTIC, "devices": [p2p.device_names()[d] for d in devices],
            "peer": peer, "local": local}


@experiment("p2p.peer_read_latency", chapter=8, needs=(TWO_GPUS,), reference=P2P_REFERENCE,
            title="One GPU thread per SM chasing pointers in the peer GPU's memory: ns per read, and the local read")
def peer_latency_experiment(quick: bool, code=chase_ns_per_read) -> dict:
    p2p._need_two()
    devs = list(range(min(p2p.device_count(), MAX_GPUS)))
    return measure(devs, QUICK_ROUNDS if quick else ROUNDS, code)


def pair_rows(data: dict) -> list[dict]:
    """One row per peer pair: reader, memory, its median, its rounds' spread, the reader's local
    median, and what the peer hop adds (peer minus local, and peer / local)."""
    local = {r["reader"]: r for r in data["local"]}
    rows = []
    for p in data["peer"]:
        loc = local[p["reader"]]["median_ns"]
        rows.append({"pair": f"GPU {p['reader']} reads GPU {p['memory']}", "reader": p["reader"],
                     "memory": p["memory"], "peer_ns": p["median_ns"], "peer_min": min(p["ns"]),
                     "peer_max": max(p["ns"]), "local_ns": loc, "added_ns": p["median_ns"] - loc,
                     "ratio": p["median_ns"] / loc})
    return rows


def spread(values: list[float]) -> float:
    """(max - min) / median of a pair's rounds: how far one round may sit from another."""
    return (max(values) - min(values)) / statistics.median(values)
