"""Child-process workloads for Chapter 1, run as a script (never imported by the notebooks).

    python _copy_workload.py census N NBYTES      # warm-up, then N x (copy in, kernel, copy out)
    python _copy_workload.py writes N             # N write(2) calls to /dev/null: the contrast
    python _copy_workload.py maps                 # /dev/nvidia* lines of /proc/self/maps, by stage
    python _copy_workload.py cputime NBYTES REPS SCHED   # user/sys CPU time of large copies

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


def census(n: int, nbytes: int) -> dict:
    """One warm-up round trip (lazy set-up lands in it), then n round trips of pageable copies."""
    import cupy as cp
    import numpy as np

    host = np.full(nbytes, 7, dtype=np.uint8)
    back = np.empty_like(host)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    bump = cp.ElementwiseKernel("uint8 x", "uint8 y", "y = x + 1", "course_bump")
    rt = cp.cuda.runtime

    def round_trip() -> None:
        rt.memcpy(dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice)
        bump(dev, dev)
        rt.memcpy(back.ctypes.data, dev.data.ptr, nbytes, rt.memcpyDeviceToHost)

    round_trip()  # warm-up: context, module load, staging buffers
    os.getppid()  # marker for helpers.ch01_path_of_a_copy.ioctls: the loop starts
    t0 = time.perf_counter()
    for _ in range(n):
        round_trip()
    wall = time.perf_counter() - t0
    os.getppid()  # marker: the loop has ended
    ok = bool(back[0] == 8 and back[-1] == 8)  # the kernel ran on the data that came back
    return {"rounds": n, "nbytes": nbytes, "wall_s": wall, "data_ok": ok}


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


def _usage() -> dict:
    me = resource.getrusage(resource.RUSAGE_SELF)
    th = resource.getrusage(resource.RUSAGE_THREAD)
    return {"wall": time.perf_counter(), "user": me.ru_utime, "sys": me.ru_stime,
            "thread_user": th.ru_utime, "thread_sys": th.ru_stime}


def cputime(nbytes: int, reps: int, sched: str) -> dict:
    """CPU time (user, system) spent by this process while it makes synchronous large copies."""
    rc = _set_blocking_sync() if sched == "blocking" else 0
    import cupy as cp
    import numpy as np

    rt = cp.cuda.runtime
    dev = cp.empty(nbytes, dtype=cp.uint8)
    pageable = np.full(nbytes, 3, dtype=np.uint8)
    pin_mem = cp.cuda.alloc_pinned_memory(nbytes)
    pinned = np.frombuffer(pin_mem, dtype=np.uint8, count=nbytes)
    pinned.fill(3)
    out = []
    for kind, host in (("pageable", pageable), ("pinned", pinned)):
        for direction in ("h2d", "d2h"):
            args = ((dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice)
                    if direction == "h2d" else
                    (host.ctypes.data, dev.data.ptr, nbytes, rt.memcpyDeviceToHost))
            rt.memcpy(*args)  # warm-up
            a = _usage()
            for _ in range(reps):
                rt.memcpy(*args)
            b = _usage()
            out.append({"host_kind": kind, "direction": direction, "nbytes": nbytes, "reps": reps,
                        **{k: b[k] - a[k] for k in ("wall", "user", "sys", "thread_user", "thread_sys")}})
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
