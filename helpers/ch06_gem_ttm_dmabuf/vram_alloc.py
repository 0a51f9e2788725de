"""How much device memory does cudaMalloc really take? The allocator's granularity, measured.

TTM drivers hand out VRAM from a buddy allocator in power-of-two blocks of at least a chunk
(amdgpu's VRAM manager over drivers/gpu/buddy.c). NVIDIA's resource manager has its own
allocator, whose rules are not documented; what a program can see is the free-memory count
the driver reports (cudaMemGetInfo) before and after allocations, and the addresses it gets.
`vram_taken` is the measuring code the page shows; the experiment runs it for a range of sizes.
"""

from __future__ import annotations

from helpers.core import gpu
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp

SIZES = (1, 4096, 65536, 1 << 20, 2 << 20, (2 << 20) + 4096, 3 << 20, 64 << 20)
COUNT = 8


def vram_taken(nbytes: int, count: int) -> dict:
    """Free device memory before and after `count` cudaMalloc(nbytes) calls, and the addresses."""
    rt = cp.cuda.runtime
    rt.deviceSynchronize()
    free_before = rt.memGetInfo()[0]
    ptrs = []
    try:
        for _ in range(count):
            ptrs.append(rt.malloc(nbytes))       # straight to the driver: no CuPy pool
        free_after = rt.memGetInfo()[0]
    finally:
        for p in ptrs:
            rt.free(p)
    return {"nbytes": nbytes, "count": count, "taken_bytes": free_before - free_after, "ptrs": ptrs}


def measure(quick: bool = False, code=vram_taken) -> dict:
    """`code` for every size in SIZES, `COUNT` allocations each (3 repeats, or 1 when quick)."""
    gpu.cupy()  # NoGPUError, saying why, without a usable GPU
    gpu.release_pools()
    runs = []
    for nbytes in SIZES:
        for _ in range(1 if quick else 3):
            r = code(nbytes, COUNT)
            runs.append({"nbytes": int(r["nbytes"]), "count": int(r["count"]),
                         "taken_bytes": int(r["taken_bytes"]), "ptrs": [int(p) for p in r["ptrs"]]})
    return {"runs": runs}


@experiment("vram.alloc_granularity", chapter=6, needs=(GPU,),
            title="Device memory taken by cudaMalloc of 1 B to 64 MiB (free-memory drop and addresses)")
def record_granularity(quick: bool, code=vram_taken) -> dict:
    return measure(quick, code)


def summary(data: dict) -> list[dict]:
    """Per size: the median drop in free memory per allocation over the repeats (another process
    allocating or freeing meanwhile shifts one repeat, so the spread is given too), and the
    smallest gap between two of the addresses returned."""
    by_size: dict[int, list[dict]] = {}
    for r in data["runs"]:
        by_size.setdefault(r["nbytes"], []).append(r)
    out = []
    for nbytes, runs in sorted(by_size.items()):
        per = sorted(r["taken_bytes"] / r["count"] for r in runs)
        gaps = [b - a for r in runs for a, b in zip(sorted(r["ptrs"]), sorted(r["ptrs"])[1:], strict=False)]
        out.append({"nbytes": nbytes, "taken_per_alloc": per[len(per) // 2], "spread": per[-1] - per[0],
                    "min_gap": min(gaps) if gaps else None, "repeats": len(runs)})
    return out


def _size(n: float | None) -> str:
    if n is None:
        return "—"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def rows(ev) -> list[tuple[str, ...]]:
    """Table rows: size asked, device memory taken per allocation (median), spread, smallest gap."""
    if not ev.ok:
        return []
    return [(_size(s["nbytes"]), _size(s["taken_per_alloc"]), _size(s["spread"]), _size(s["min_gap"]))
            for s in summary(ev.data)]
