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

from helpers.core import validate
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode
from helpers.models.toygpu import ToyGPU
from helpers.models.toygpu import commands as C
from helpers.models.toygpu.link import LinkParams
from helpers.presentation import figures


def _check_gpu(gpu) -> None:
    if not isinstance(gpu, ToyGPU):
        raise InputTypeError(f"expected a ToyGPU, got {type(gpu).__name__}")


def batching(gpu: ToyGPU, n_commands: int, batch: int) -> dict:
    """Submit `n_commands` small FILLs in batches of `batch`: one doorbell and one fence per
    batch, waiting for each batch's fence by polling system memory (no interrupts).

    Waiting per batch keeps the count of bus transactions independent of process scheduling,
    so the result is deterministic under the device's seed. Returns the driver's bus traffic,
    its modelled CPU time, and the device's modelled time: {'batch', 'commands', 'doorbells',
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
    return {"batch": batch, "commands": n_commands, "doorbells": d.doorbells, "mmio_reads": d.mmio_reads,
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


def doorbell_us() -> float:
    """What one doorbell (a posted uncached store) costs the CPU in the toy's link model, µs."""
    return LinkParams().uc_write_ns / 1e3


def register_read_us() -> float:
    """What one MMIO register read (a non-posted round trip) costs the CPU in the toy's model, µs."""
    return LinkParams().mmio_read_rtt_ns / 1e3


def submit_then_wait(gpu: ToyGPU, cmds: list, how: str = "poll") -> dict:
    """submit(cmds) and wait for its fence, counting the bus transactions of each step apart.

    Returns {'fence', 'submit': {...}, 'wait': {...}} with doorbells, MMIO writes and MMIO reads
    per step, so a page can say which step paid for what.
    """
    _check_gpu(gpu)
    c0 = gpu.counters.copy()
    fence = gpu.submit(cmds, interrupt=(how == "irq"))
    c1 = gpu.counters.copy()
    gpu.wait(fence, how=how, timeout=5.0)
    c2 = gpu.counters.copy()

    def step(d) -> dict:
        return {"doorbells": d.doorbells, "mmio_writes": d.mmio_writes, "mmio_reads": d.mmio_reads}
    return {"fence": fence, "submit": step(c1 - c0), "wait": step(c2 - c1)}


def counts_text(r: dict) -> str:
    """Two lines: what the submit and the wait each cost in bus transactions."""
    s, w = r["submit"], r["wait"]
    return (f"submit: {s['doorbells']} doorbell, {s['mmio_writes']} MMIO write(s), {s['mmio_reads']} MMIO read(s)"
            + (" (the driver re-read RING_HEAD to check ring space)" if s["mmio_reads"] else "")
            + f"\nwait:   {w['mmio_writes']} MMIO write(s), {w['mmio_reads']} MMIO read(s)"
            + (" (the fence was polled in system memory)" if not w["mmio_reads"] else
               " (a polled wait reads registers only to service an interrupt left pending by earlier work)"))


def _reads_follow_doorbells(rows: list[dict]) -> bool:
    """True when the register reads are in proportion to the submissions (the same few per doorbell at every
    batch size), so batching amortises them with the doorbell."""
    k = sum(r["mmio_reads"] for r in rows) / max(sum(r["doorbells"] for r in rows), 1)
    return all(abs(r["mmio_reads"] - k * r["doorbells"]) <= max(1.0, 0.25 * k * r["doorbells"]) for r in rows)


def batching_verdict(results: list[dict]) -> str:
    """What the batching table shows, decided from it (the model gives every number): where the per-command
    cost bottoms out, whether it keeps falling, how much of it is doorbells and how much register reads,
    whether those reads amortise with the doorbell or are what is left, and what the device's side does."""
    if not results:
        raise InputError("batching_verdict needs results from batching()")
    rows = sorted(results, key=lambda r: r["batch"])
    costs = [r["cpu_us_per_command"] for r in rows]
    best = min(rows, key=lambda r: r["cpu_us_per_command"])
    falls = all(b <= a for a, b in zip(costs, costs[1:], strict=False))
    first, last = rows[0], rows[-1]
    lines = [f"The model gives {first['cpu_us_per_command'] * 1e3:.0f} ns of CPU bus time per command at one command "
             f"per doorbell; the lowest in this table is {best['cpu_us_per_command'] * 1e3:.0f} ns, at {best['batch']} "
             "per doorbell" + (", and it keeps falling with the batch size." if falls else
                               ", but it does not keep falling: larger batches cost more in some rows.")]
    for r in {id(r): r for r in (first, best, last)}.values():
        bell = r["doorbells"] * doorbell_us()
        reads = r["mmio_reads"] * register_read_us()
        lines.append(f"  batch {r['batch']:>2}: {r['doorbells']:>3} doorbells ≈ {bell:.1f} µs, {r['mmio_reads']} RING_HEAD "
                     f"reads ≈ {reads:.1f} µs (of {r['cpu_model_us']:.1f} µs)")
    lines.append(what_is_left(rows))
    n = first.get("commands")
    if n:
        d1, dn = first["device_model_us"] / n, last["device_model_us"] / n
        lines.append(f"On the device's side the model gives {d1:.2f} µs per command at batch {first['batch']} and "
                     f"{dn:.2f} µs at batch {last['batch']}: each batch's fetch and fence amortise, each command's own "
                     "work does not." if dn < d1 else
                     f"On the device's side the model gives {d1:.2f} µs per command at batch {first['batch']} and "
                     f"{dn:.2f} µs at batch {last['batch']}: batching did not lighten the device's work here.")
    return "\n".join(lines)


def what_is_left(rows: list[dict]) -> str:
    """Once the doorbell is amortised, what the driver still spends on the bus, decided from the counts."""
    if not any(r["mmio_reads"] for r in rows):
        return ("No register reads at all: this driver learns the read pointer from the copy the device writes back "
                "to system memory, so the doorbell is its whole bus cost and batching amortises all of it.")
    first, last = rows[0], rows[-1]
    ratio = register_read_us() / doorbell_us()

    def share(r: dict) -> float:
        return r["mmio_reads"] * register_read_us() / r["cpu_model_us"] if r["cpu_model_us"] else 0.0

    if _reads_follow_doorbells(rows):
        per = sum(r["mmio_reads"] for r in rows) / max(sum(r["doorbells"] for r in rows), 1)
        return (f"This driver reads RING_HEAD about {per:.1f} times per submission, so those round trips amortise "
                f"with the doorbell, as 1/batch; one costs {ratio:.0f}x a doorbell, so they are at least "
                f"{min(share(r) for r in rows):.0%} of the bus cost at every batch size. Batching does not remove "
                "them; reading the written-back read pointer does.")
    return ("RING_HEAD reads do not fall with the doorbells: the driver reads the register whenever its cached read "
            "pointer says the ring is too full for the next batch, which depends on how batches pack into the ring"
            + (". Their share of the cost grows with the batch: once doorbells are amortised, those round trips are "
               "what is left." if share(last) > share(first) else
               f"; their share of the cost does not grow with the batch here (one costs {ratio:.0f}x a doorbell)."))


def read_pointer_verdict(results: list[dict]) -> str:
    """read_pointer_costs() in words: what reading RING_HEAD costs against the written-back copy (the model gives)."""
    by = {r["read_pointer"]: r for r in results}
    if set(by) != {"mmio", "memory"}:
        raise InputError("read_pointer_verdict needs read_pointer_costs() results (one 'mmio', one 'memory')")
    m, w = by["mmio"], by["memory"]
    if m["cpu_model_us"] <= w["cpu_model_us"]:
        return (f"The model gives no saving here: {m['cpu_model_us']:.1f} µs reading RING_HEAD against "
                f"{w['cpu_model_us']:.1f} µs with the written-back copy.")
    return (f"The model gives {m['cpu_model_us']:.1f} µs of CPU bus time when the driver reads RING_HEAD "
            f"({m['mmio_reads']} round trips) and {w['cpu_model_us']:.1f} µs when it reads the copy the device writes "
            f"back ({w['mmio_reads']} reads): {m['cpu_model_us'] / max(w['cpu_model_us'], 1e-9):.0f}x, for the same "
            f"{m['doorbells']} doorbells. That round trip is why real drivers read a written-back read pointer.")


def batching_key_point(results: list[dict], read_pointer: list[dict]) -> str:
    """The key point about batching, from the two toy runs the page shows (the model gives every number)."""
    rows = sorted(results, key=lambda r: r["batch"])
    by = {r["read_pointer"]: r for r in read_pointer}
    falls = all(b["cpu_us_per_command"] <= a["cpu_us_per_command"] for a, b in zip(rows, rows[1:], strict=False))
    reads = any(r["mmio_reads"] for r in rows)
    head = ("On the toy GPU (the model) batching amortises the doorbell, which is cheap"
            + (", and with a written-back read pointer nothing else is left on the CPU's bus: the cost per command "
               "keeps falling with the batch." if falls and not reads else
               "; the register reads its driver makes are what stays costly." if reads else
               ", though the cost per command does not keep falling with the batch."))
    if by.get("mmio") and by.get("memory") and by["memory"]["cpu_model_us"]:
        head += (f" A driver that reads the read-pointer register instead pays "
                 f"{by['mmio']['cpu_model_us'] / by['memory']['cpu_model_us']:.0f}x as much for the same submissions.")
    return head
