"""Chapter 7 — command submission on the toy GPU: rings, doorbells, fences, indirect buffers.

Every number here is SIMULATED: counts of real bus transactions the toy driver made, and
times from the toy's link model (helpers/toygpu/link.py), never measurements of a GPU.

Real drivers doing the same (linux repository): drivers/gpu/drm/amd/amdgpu/amdgpu_ring.c
(amdgpu_ring_commit: the write pointer and the doorbell; amdgpu_ring_init reserves the
read-pointer write-back slot, ring->rptr_offs), amdgpu_ib.c (amdgpu_ib_schedule: indirect
buffers), amdgpu_fence.c (amdgpu_fence_emit, amdgpu_fence_wait_polling); NVIDIA's channel
control area (USERD) carries GPGet, the read pointer the GPU writes back
(open-gpu-kernel-modules, src/common/sdk/nvidia/inc/class/clc86f.h, Nvc86fControl).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from helpers.core import figures, validate
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode
from helpers.models.toygpu import ToyGPU
from helpers.models.toygpu import commands as C


def _check_gpu(gpu) -> None:
    if not isinstance(gpu, ToyGPU):
        raise InputTypeError(f"expected a ToyGPU, got {type(gpu).__name__}")


def batching(gpu: ToyGPU, n_commands: int, batch: int) -> dict:
    """Submit `n_commands` small FILLs in batches of `batch`: one doorbell and one fence per
    batch, waiting for each batch's fence by polling system memory (no interrupts).

    Waiting per batch keeps the count of bus transactions independent of process scheduling,
    so the result is deterministic under the device's seed. Returns the driver's bus traffic,
    its modelled CPU time, and the device's modelled time: {'batch', 'doorbells',
    'mmio_reads', 'mmio_writes', 'cpu_model_us', 'device_model_us', 'cpu_us_per_command'}.
    """
    _check_gpu(gpu)
    n_commands = validate.whole_number(n_commands, "n_commands", 1)
    batch = validate.whole_number(batch, "batch (at most the ring size - 1)", 1, gpu.ring_entries - 1)
    dva = gpu.alloc_vram(4096)
    before, dev0 = gpu.counters.copy(), gpu.device_counters()["MODEL_TIME_NS"]
    for start in range(0, n_commands, batch):
        k = min(batch, n_commands - start)
        last = gpu.submit([C.fill(dva, 64, start + i) for i in range(k)], interrupt=False)
        gpu.wait(last, how="poll")
    d = gpu.counters - before
    dev_us = (gpu.device_counters()["MODEL_TIME_NS"] - dev0) / 1e3
    gpu.unmap(dva, 4096)
    return {"batch": batch, "doorbells": d.doorbells, "mmio_reads": d.mmio_reads,
            "mmio_writes": d.mmio_writes, "cpu_model_us": d.cpu_model_ns / 1e3,
            "device_model_us": dev_us, "cpu_us_per_command": d.cpu_model_ns / 1e3 / n_commands}


def batching_rows(results: list[dict]) -> list[tuple[str, ...]]:
    """Rows for a table of batching() results."""
    return [(str(r["batch"]), str(r["doorbells"]), str(r["mmio_writes"]), str(r["mmio_reads"]),
             f"{r['cpu_model_us']:.1f}", f"{r['cpu_us_per_command']:.3f}") for r in results]


def batching_figure(results: list[dict], seed: int) -> figures.CourseFigure:
    """Modelled CPU submission cost per command vs batch size (SIMULATED)."""
    if not results:
        raise InputError("batching_figure needs results from batching()")
    fig = go.Figure()
    fig.add_scatter(x=[r["batch"] for r in results], y=[r["cpu_us_per_command"] for r in results],
                    mode="lines+markers", name="CPU bus time per command")
    fig.update_layout(title="One doorbell per command vs batching — modelled CPU cost",
                      xaxis={"type": "log", "title": "commands per doorbell"},
                      yaxis={"type": "log", "title": "modelled µs of MMIO per command (log)"})
    return figures.CourseFigure(fig, [(Mode.SIMULATED, f"toy GPU link model, seed {seed}")])


def indirect_demo(gpu: ToyGPU, n: int = 200) -> dict:
    """Run `n` FILLs from one indirect buffer: one ring entry, one doorbell.

    Returns {'commands', 'ring_entries_used', 'doorbells', 'ok'} where ok says the VRAM
    really holds what the n commands wrote.
    """
    _check_gpu(gpu)
    n = validate.whole_number(n, "n", 1, C.MAX_IB_ENTRIES)
    dva = gpu.alloc_vram(n * 8)
    ib = gpu.alloc_sys(n * C.ENTRY_BYTES, align=C.ENTRY_BYTES)
    count = gpu.write_commands(ib, [C.fill(dva + 8 * i, 8, i) for i in range(n)])
    before, w0 = gpu.counters.copy(), gpu.wptr
    gpu.run([C.indirect(ib.addr, count)])
    used, d = gpu.wptr - w0, gpu.counters - before
    got = gpu.download(dva, -(-n * 8 // 8) * 8).view("<u4")[::2]
    gpu.free_sys(ib)
    gpu.unmap(dva, n * 8)
    return {"commands": count, "ring_entries_used": used, "doorbells": d.doorbells,
            "ok": bool(np.array_equal(got, np.arange(n, dtype=np.uint32)))}


def read_pointer_costs(gpu: ToyGPU, n_commands: int = 64, batch: int = 4) -> list[dict]:
    """The same submissions twice: the driver learning the device's progress from RING_HEAD
    (an MMIO read on every submit), then from the read pointer the device writes back to
    system memory (NVIDIA's USERD GPGet, amdgpu's rptr write-back): a cheap load, no bus
    transaction. Returns batching()'s dict for each, with 'read_pointer' ('mmio' or 'memory')."""
    _check_gpu(gpu)
    saved, out = gpu.read_pointer, []
    try:
        for how in ("mmio", "memory"):
            gpu.read_pointer = how
            out.append({"read_pointer": how, **batching(gpu, n_commands, batch)})
    finally:
        gpu.read_pointer = saved
    return out


def read_pointer_rows(results: list[dict]) -> list[tuple[str, ...]]:
    """Rows for a table of read_pointer_costs() results."""
    where = {"mmio": "RING_HEAD, an MMIO read", "memory": "write-back in system memory"}
    return [(where[r["read_pointer"]], str(r["doorbells"]), str(r["mmio_reads"]), f"{r['cpu_model_us']:.1f}")
            for r in results]


def ring_rows(gpu: ToyGPU, last: int = 8) -> list[tuple[str, ...]]:
    """The last `last` ring entries the driver wrote: slot, decoded command, consumed or pending
    (by the read pointer the device wrote back to memory)."""
    _check_gpu(gpu)
    head = gpu.head()
    rows = []
    for ptr in range(max(0, gpu.wptr - last), gpu.wptr):
        slot = ptr % gpu.ring_entries
        words = gpu.ring.view[slot * C.ENTRY_BYTES:(slot + 1) * C.ENTRY_BYTES].view("<u8")
        rows.append((str(ptr), str(slot), C.describe(words), "consumed" if ptr < head else "pending"))
    return rows
