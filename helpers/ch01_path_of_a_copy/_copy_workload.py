"""Child-process workloads for Chapter 1, run as a script (never imported by the notebooks).

    python _copy_workload.py census N NBYTES FILE NAME   # warm-up, then NAME(N, NBYTES): the copy loop
    python _copy_workload.py writes N                    # N write(2) calls to /dev/null: the contrast
    python _copy_workload.py maps NBYTES                 # /dev/nvidia* lines of /proc/self/maps, by stage
    python _copy_workload.py cputime NBYTES REPS SCHED FILE NAME   # NAME(host, dev, direction, REPS) per copy

FILE holds the text of the function the page shows (helpers.ch01_path_of_a_copy.loops, or the
learner's changed version), written by loops.code_file; the child defines it with `np`, `cp`,
`cupyx`, `resource` and `time` in scope.

Each prints one JSON object on its last stdout line. The script imports only the standard
library, NumPy and CuPy (not `helpers`), so a syscall census counts what a small CUDA program
does, not what the course's own package costs to import. The parent always runs it with a
timeout (helpers.ch01_path_of_a_copy.syscalls.run_child).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import time

NVIDIA_PREFIX = "/dev/nvidia"
CU_CTX_SCHED_BLOCKING_SYNC = 0x04  # cuda.h: the calling thread sleeps in the kernel while it waits


def _emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def _load(path: str, name: str):
    """The function `name` that the file at `path` defines (the page's measuring function),
    imported as a module whose globals already hold np, cp, cupyx, resource and time."""
    import importlib.util

    import cupy as cp
    import cupyx
    import numpy as np

    spec = importlib.util.spec_from_file_location("course_page_code", path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(np=np, cp=cp, cupyx=cupyx, resource=resource, time=time)
    spec.loader.exec_module(module)  # the course's or the learner's own function, as written on the page
    return getattr(module, name)


def census(n: int, nbytes: int, path: str, name: str) -> dict:
    """One warm-up round trip (lazy set-up lands in it), then the copy loop with n round trips."""
    loop = _load(path, name)
    loop(1, nbytes)  # warm-up: context, module load, staging buffers
    os.getppid()  # marker for helpers.ch01_path_of_a_copy.ioctls: the loop starts
    t0 = time.perf_counter()
    ok = loop(n, nbytes)
    wall = time.perf_counter() - t0
    os.getppid()  # marker: the loop has ended
    return {"rounds": n, "nbytes": nbytes, "wall_s": wall, "data_ok": bool(ok)}


def writes(n: int) -> dict:
    """The world of hypothesis 1: one write(2) per transaction."""
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        for _ in range(n):
            os.write(fd, b"x")
    finally:
        os.close(fd)
    return {"rounds": n}


def _nvidia_lines() -> list[str]:
    with open("/proc/self/maps") as f:
        return [line.rstrip("\n") for line in f if NVIDIA_PREFIX in line]


def _address_space() -> dict:
    """Total mapped bytes and bytes reserved with no access (---p), from /proc/self/maps."""
    total = reserved = 0
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            total += hi - lo
            if parts[1].startswith("---") and len(parts) < 6:
                reserved += hi - lo
    return {"mapped_bytes": total, "reserved_noaccess_bytes": reserved}


def maps(nbytes: int) -> dict:
    """The driver's mappings at four stages of a CUDA program's life."""
    stages = []

    def snap(name: str) -> None:
        stages.append({"stage": name, "lines": _nvidia_lines(), **_address_space()})

    import cupy as cp

    snap("after import cupy (no CUDA call yet)")
    dev = cp.empty(nbytes, dtype=cp.uint8)
    dev.fill(1)
    cp.cuda.runtime.deviceSynchronize()
    snap("after CUDA initialisation (context, one allocation, one kernel)")
    pinned = cp.cuda.alloc_pinned_memory(nbytes)
    snap(f"after cudaHostAlloc of {nbytes} bytes (pinned host memory)")
    managed = cp.cuda.malloc_managed(nbytes)
    snap(f"after cudaMallocManaged of {nbytes} bytes (unified memory)")
    del pinned, managed, dev
    return {"nbytes": nbytes, "stages": stages, "pid": os.getpid()}


def _set_blocking_sync() -> int:
    """Ask for the primary context to sleep (not spin) while waiting; before any CUDA call."""
    lib = ctypes.CDLL("libcuda.so.1")
    if lib.cuInit(0) != 0:
        return -1
    dev = ctypes.c_int()
    lib.cuDeviceGet(ctypes.byref(dev), 0)
    fn = getattr(lib, "cuDevicePrimaryCtxSetFlags_v2", None) or lib.cuDevicePrimaryCtxSetFlags
    return int(fn(dev, CU_CTX_SCHED_BLOCKING_SYNC))


def cputime(nbytes: int, reps: int, sched: str, path: str, name: str) -> dict:
    """CPU time (user, system) spent by this process while it makes synchronous large copies,
    measured by the page's function for each host kind and direction."""
    rc = _set_blocking_sync() if sched == "blocking" else 0
    import cupy as cp
    import numpy as np

    measure = _load(path, name)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    pageable = np.full(nbytes, 3, dtype=np.uint8)
    pin_mem = cp.cuda.alloc_pinned_memory(nbytes)
    pinned = np.frombuffer(pin_mem, dtype=np.uint8, count=nbytes)
    pinned.fill(3)
    out = []
    for kind, host in (("pageable", pageable), ("pinned", pinned)):
        for direction in ("h2d", "d2h"):
            got = measure(host, dev, direction, reps)
            out.append({"host_kind": kind, "direction": direction, "nbytes": nbytes, "reps": reps,
                        **{k: float(got[k]) for k in ("wall", "user", "sys")}})
    del pinned, pin_mem, dev
    return {"sched": sched, "set_flags_rc": rc, "runs": out}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    what, args = argv[0], [int(a) if a.lstrip("-").isdigit() else a for a in argv[1:]]
    if what == "census":
        _emit(census(*args))
    elif what == "writes":
        _emit(writes(*args))
    elif what == "maps":
        _emit(maps(*args))
    elif what == "cputime":
        _emit(cputime(*args))
    else:
        print(f"unknown workload {what!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
