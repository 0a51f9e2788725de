"""What a notebook's kernel holds: measured inside the kernel by cells tools/matrix/runner.py injects.

The matrix runner adds two cells to a copy of each notebook:

- after the first code cell (which calls `course.start`, so a live kernel already has its CUDA
  context): `baseline(path)` writes what the kernel holds then;
- after the last cell: `final(path, ...)` drops the notebook's namespace (`%reset -f`), collects
  garbage, calls `helpers.course.finish()`, measures again and raises AssertionError, which
  fails the notebook under nbval, when pinned host memory (VmLck+VmPin, and the shared anonymous
  mappings where cudaHostAlloc'd memory lives) or device memory stayed above the baseline
  or the kernel still has child processes.

What the notebook still holds in variables at its end is recorded too ('held'), but is not a
leak: only what survives the namespace is. Everything is read from /proc and from CUDA's own
counters (cudaMemGetInfo), not from the notebook's bookkeeping. Loaded with runpy.run_path,
so it needs nothing on sys.path but the course itself.
"""

from __future__ import annotations

import gc
import json
import os
import sys

from helpers.measure.host_memory import pinned_bytes_of_process as locked_bytes  # VmLck + VmPin

MiB = 1 << 20
# The CUDA driver keeps a few small pinned staging buffers of its own once pageable copies ran;
# a leaked buffer a notebook allocated is larger than this.
PINNED_MAPPED_TOLERANCE = 32 * MiB


def pinned_mapped_bytes(pid: int | str = "self") -> int:
    """Bytes of the process's shared anonymous mappings (`rw-s ... /dev/zero (deleted)` in maps).

    cudaHostAlloc'd (pinned) memory is not in VmLck or VmPin: the NVIDIA driver neither mlocks
    it nor accounts it as pinned (the H100 reference records locked_by_hostAlloc = 0). It does
    show in /proc/<pid>/maps as a shared mapping of the deleted /dev/zero (Chapter 5's recorded
    pointer-attribute table: pinned, mapped and cuMemHostAlloc'd buffers all sit in one), so the
    total of those mappings grows and shrinks with it. Memory a program maps MAP_SHARED |
    MAP_ANONYMOUS itself counts too, and would be a leak just the same.
    """
    total = 0
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 7 and parts[5] == "/dev/zero" and parts[6] == "(deleted)" and "s" in parts[1]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                total += hi - lo
    return total


def children(pid: int | None = None) -> list[dict]:
    """Live (non-zombie) processes whose parent is `pid` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()  # state ppid ...
        if int(rest[1]) == pid and rest[0] != "Z":
            out.append({"pid": int(entry), "cmd": cmd[:200]})
    return out


def _live() -> bool:
    """True when the course runs live in this kernel; a replay kernel on a GPU machine must not
    be given a CUDA context by the leak check."""
    try:
        from helpers.core import mode

        return mode.is_live()
    except Exception:  # noqa: BLE001
        return False


def _device_used() -> int | None:
    """Bytes in use on the current device (total − free, cudaMemGetInfo), None without CuPy/GPU.

    Only asked when the kernel already imported CuPy: a replay kernel never touches CUDA here.
    """
    cp = sys.modules.get("cupy")
    if cp is None:
        return None
    if not _live():
        return None
    try:
        free, total = cp.cuda.runtime.memGetInfo()
    except Exception:  # noqa: BLE001 - no GPU: nothing to measure
        return None
    return int(total - free)


def snapshot() -> dict:
    """Locked host bytes, device bytes in use, CuPy pool bytes in use, child processes."""
    pool = None
    cp = sys.modules.get("cupy")
    if cp is not None:
        try:
            pool = int(cp.get_default_memory_pool().used_bytes())
        except Exception:  # noqa: BLE001
            pool = None
    return {"pid": os.getpid(), "locked_host_bytes": locked_bytes(), "pinned_mapped_bytes": pinned_mapped_bytes(),
            "device_used_bytes": _device_used(),
            "cupy_pool_used_bytes": pool, "children": children()}


def baseline(path: str) -> dict:
    """Record the kernel's state right after the notebook's first cell."""
    snap = snapshot()
    with open(path, "w") as f:
        json.dump({"baseline": snap}, f)
    return snap


def _release() -> None:
    """Drop the notebook's namespace and caches the way the end of a notebook should."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            ip.run_line_magic("reset", "-f")
    except ImportError:
        pass
    gc.collect()
    try:
        from helpers import course

        course.finish(quiet=True)
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        print(f"leakprobe: helpers.course.finish() failed: {type(exc).__name__}: {exc}")
    cp = sys.modules.get("cupy")
    if cp is not None and _live():
        try:
            cp.fft.config.get_plan_cache().clear()
            cp.get_default_memory_pool().free_all_blocks()
            cp.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001
            pass
    nb = sys.modules.get("numba.cuda")
    if nb is not None and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        try:  # Numba frees device arrays lazily: flush what is already garbage
            if nb.is_available():
                nb.current_context().deallocations.clear()
        except Exception:  # noqa: BLE001
            pass
    gc.collect()


def leaks(base: dict, end: dict, *, pinned_tolerance: int, device_tolerance: int) -> list[str]:
    """The leaks `end` shows against `base`, each in words (empty: none)."""
    out = []
    grew = end["locked_host_bytes"] - base["locked_host_bytes"]
    if grew > pinned_tolerance:
        out.append(f"pinned host memory: {grew} bytes more locked (VmLck+VmPin) than after the first cell")
    grew = end.get("pinned_mapped_bytes", 0) - base.get("pinned_mapped_bytes", 0)
    if grew > PINNED_MAPPED_TOLERANCE:
        out.append(f"pinned host memory: {grew / MiB:.1f} MiB more in shared anonymous mappings (where "
                   "cudaHostAlloc'd memory lives; not counted in VmLck/VmPin) than after the first cell")
    if base.get("device_used_bytes") is not None and end.get("device_used_bytes") is not None:
        grew = end["device_used_bytes"] - base["device_used_bytes"]
        if grew > device_tolerance:
            out.append(f"device memory: {grew / MiB:.1f} MiB more in use (cudaMemGetInfo) than after the first cell")
    if end.get("cupy_pool_used_bytes"):
        out.append(f"device memory: CuPy's pool still has {end['cupy_pool_used_bytes']} bytes in use "
                   "after the namespace was dropped")
    known = {c["pid"] for c in base["children"]}
    for c in end["children"]:
        if c["pid"] not in known:
            out.append(f"child process {c['pid']} still running: {c['cmd']}")
    return out


def final(path: str, *, pinned_tolerance: int = MiB, device_tolerance: int = 64 * MiB) -> dict:
    """Measure what the notebook holds, drop it, measure what leaked; fail if anything did."""
    with open(path) as f:
        report = json.load(f)
    report["held"] = snapshot()
    _release()
    report["final"] = end = snapshot()
    report["leaks"] = found = leaks(report["baseline"], end, pinned_tolerance=pinned_tolerance,
                                    device_tolerance=device_tolerance)
    with open(path, "w") as f:
        json.dump(report, f)
    if found:
        raise AssertionError("the notebook leaked:\n  " + "\n  ".join(found))
    print("leak check: nothing left behind")
    return report
