"""Which ioctls a CUDA program makes, on which node, and whether any happen during the copies.

`strace -f -y -e trace=ioctl,getppid` prints every ioctl with the path of its file
descriptor (`-y`); the census workload calls getppid() just before and just after its loop,
so the ioctls between the two markers are the ones the copies themselves cost.

Request numbers are named from NVIDIA's open kernel modules (checked at tag 580.95.05):
- /dev/nvidiactl and /dev/nvidiaN: _IOC(dir, 'F' = NV_IOCTL_MAGIC, nr, size); nr is an
  NV_ESC_RM_* escape (src/nvidia/arch/nvalloc/unix/include/nv_escape.h) or an NV_ESC_*
  number from kernel-open/common/inc/nv-ioctl-numbers.h (NV_IOCTL_BASE = 200).
- /dev/nvidia-uvm: the command is the bare number UVM_IOCTL_BASE(i) = i
  (kernel-open/nvidia-uvm/uvm_ioctl.h), or UVM_INITIALIZE = 0x30000001
  (kernel-open/nvidia-uvm/uvm_linux_ioctl.h).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

from helpers.core import validate
from helpers.core.experiments import GPU, STRACE, experiment

NV_IOCTL_MAGIC = 0x46  # 'F', kernel-open/common/inc/nv-ioctl-numbers.h

NV_ESC = {
    0x27: "NV_ESC_RM_ALLOC_MEMORY", 0x28: "NV_ESC_RM_ALLOC_OBJECT", 0x29: "NV_ESC_RM_FREE",
    0x2A: "NV_ESC_RM_CONTROL", 0x2B: "NV_ESC_RM_ALLOC", 0x32: "NV_ESC_RM_CONFIG_GET",
    0x33: "NV_ESC_RM_CONFIG_SET", 0x34: "NV_ESC_RM_DUP_OBJECT", 0x35: "NV_ESC_RM_SHARE",
    0x37: "NV_ESC_RM_CONFIG_GET_EX", 0x38: "NV_ESC_RM_CONFIG_SET_EX", 0x39: "NV_ESC_RM_I2C_ACCESS",
    0x41: "NV_ESC_RM_IDLE_CHANNELS", 0x4A: "NV_ESC_RM_VID_HEAP_CONTROL",
    0x4D: "NV_ESC_RM_ACCESS_REGISTRY", 0x4E: "NV_ESC_RM_MAP_MEMORY", 0x4F: "NV_ESC_RM_UNMAP_MEMORY",
    0x52: "NV_ESC_RM_GET_EVENT_DATA", 0x54: "NV_ESC_RM_ALLOC_CONTEXT_DMA2",
    0x56: "NV_ESC_RM_ADD_VBLANK_CALLBACK", 0x57: "NV_ESC_RM_MAP_MEMORY_DMA",
    0x58: "NV_ESC_RM_UNMAP_MEMORY_DMA", 0x59: "NV_ESC_RM_BIND_CONTEXT_DMA",
    0x5C: "NV_ESC_RM_EXPORT_OBJECT_TO_FD", 0x5D: "NV_ESC_RM_IMPORT_OBJECT_FROM_FD",
    0x5E: "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO", 0x5F: "NV_ESC_RM_LOCKLESS_DIAGNOSTIC",
    200: "NV_ESC_CARD_INFO", 201: "NV_ESC_REGISTER_FD", 206: "NV_ESC_ALLOC_OS_EVENT",
    207: "NV_ESC_FREE_OS_EVENT", 209: "NV_ESC_STATUS_CODE", 210: "NV_ESC_CHECK_VERSION_STR",
    211: "NV_ESC_IOCTL_XFER_CMD", 212: "NV_ESC_ATTACH_GPUS_TO_FD", 213: "NV_ESC_QUERY_DEVICE_INTR",
    214: "NV_ESC_SYS_PARAMS", 217: "NV_ESC_EXPORT_TO_DMABUF_FD", 218: "NV_ESC_WAIT_OPEN_COMPLETE",
}

UVM = {
    1: "UVM_RESERVE_VA", 2: "UVM_RELEASE_VA", 20: "UVM_GET_GPU_UUID_TABLE",
    23: "UVM_CREATE_RANGE_GROUP", 24: "UVM_DESTROY_RANGE_GROUP", 25: "UVM_REGISTER_GPU_VASPACE",
    26: "UVM_UNREGISTER_GPU_VASPACE", 27: "UVM_REGISTER_CHANNEL", 28: "UVM_UNREGISTER_CHANNEL",
    29: "UVM_ENABLE_PEER_ACCESS", 30: "UVM_DISABLE_PEER_ACCESS", 31: "UVM_SET_RANGE_GROUP",
    33: "UVM_MAP_EXTERNAL_ALLOCATION", 34: "UVM_FREE", 35: "UVM_MEM_MAP", 37: "UVM_REGISTER_GPU",
    38: "UVM_UNREGISTER_GPU", 39: "UVM_PAGEABLE_MEM_ACCESS", 51: "UVM_MIGRATE",
    65: "UVM_MAP_DYNAMIC_PARALLELISM_REGION", 66: "UVM_UNMAP_EXTERNAL", 68: "UVM_ALLOC_SEMAPHORE_POOL",
    69: "UVM_CLEAN_UP_ZOMBIE_RESOURCES", 70: "UVM_PAGEABLE_MEM_ACCESS_ON_GPU",
    71: "UVM_POPULATE_PAGEABLE", 72: "UVM_VALIDATE_VA_RANGE", 73: "UVM_CREATE_EXTERNAL_RANGE",
    74: "UVM_MAP_EXTERNAL_SPARSE", 75: "UVM_MM_INITIALIZE", 78: "UVM_ALLOC_DEVICE_P2P",
    79: "UVM_CLEAR_ALL_ACCESS_COUNTERS", 80: "UVM_DISCARD", 0x30000001: "UVM_INITIALIZE",
    0x30000002: "UVM_DEINITIALIZE",
}

_IOCTL = re.compile(r"\bioctl\((?P<fd>\d+)(?:<(?P<path>[^>]*)>)?,\s*(?P<req>_IOC\([^)]*\)|[^,)]+)")
_IOC = re.compile(r"_IOC\((?P<dir>[^,]+),\s*(?P<type>0x[0-9a-fA-F]+|\d+),\s*(?P<nr>0x[0-9a-fA-F]+|\d+),"
                  r"\s*(?P<size>0x[0-9a-fA-F]+|\d+)\)")
_MARK = re.compile(r"\bgetppid\(\)")
_PID = re.compile(r"^(?:\[pid\s+)?(?P<pid>\d+)\]?\s")


def request_name(path: str, req: str) -> str:
    """A readable name for one ioctl request as strace printed it."""
    m = _IOC.match(req.strip())
    node = path.split(" ")[0] if path else ""
    if m:
        typ, nr = int(m["type"], 0), int(m["nr"], 0)
        if typ == NV_IOCTL_MAGIC and node.startswith("/dev/nvidia") and "uvm" not in node:
            return NV_ESC.get(nr, f"NV escape {nr:#x}")
        if typ == 0 and node == "/dev/nvidia-uvm":
            return UVM.get(nr, f"UVM ioctl {nr}")
        return f"type {typ:#x} nr {nr:#x}"
    try:
        num = int(req.strip(), 0)
    except ValueError:
        return req.strip()  # strace decoded it by name (e.g. TCGETS)
    if node == "/dev/nvidia-uvm":
        return UVM.get(num, f"UVM ioctl {num:#x}")
    return f"{num:#x}"


def parse_trace(text: str) -> dict:
    """Count ioctls per (node, request) before, between and after the two getppid markers.

    Only the traced program's own markers count: with -f every line starts with a pid, and
    the first line's pid is the program itself (a helper process it spawns, such as the
    shell behind ctypes.util.find_library, may call getppid too). Returns
    {'phases': {phase: [[node, name, count], ...]}, 'markers': k}; with fewer than two
    markers every ioctl counts as 'start-up'.
    """
    phase_names = ("start-up", "during the loop", "after the loop")
    counts = {p: Counter() for p in phase_names}
    marks = 0
    main_pid = None
    for line in text.splitlines():
        pid_m = _PID.match(line)
        pid = pid_m["pid"] if pid_m else None
        if main_pid is None and line.strip():
            main_pid = pid
        if _MARK.search(line) and "ioctl(" not in line:
            if pid == main_pid:
                marks += 1
            continue
        m = _IOCTL.search(line)
        if not m or "resumed>" in line:
            continue
        node = (m["path"] or "(no path)").split(" ")[0]
        if not node.startswith("/dev"):
            node = "other files"
        counts[phase_names[min(marks, 2)]][(node, request_name(m["path"] or "", m["req"]))] += 1
    return {"markers": marks,
            "phases": {p: [[n, r, c] for (n, r), c in c_.most_common()] for p, c_ in counts.items()}}


def phase_total(data: dict, phase: str) -> int:
    return sum(c for _, _, c in data["phases"].get(phase, []))


def rows(data: dict, phase: str = "start-up", top: int = 12) -> list[tuple]:
    """Rows: node, request, count — the most frequent first."""
    return [tuple(r) for r in data["phases"].get(phase, [])[:top]]


def trace_census(n: int = 10, timeout_s: float = 120.0) -> dict:
    """Run the census workload (the page's copy_loop) once under `strace -f -y -e trace=ioctl,getppid`
    and parse it."""
    from helpers.ch01_path_of_a_copy.loops import copy_loop
    from helpers.ch01_path_of_a_copy.syscalls import (
        COPY_BYTES,
        WORKLOAD,
        StraceFailedError,
        check_rounds,
        find_strace,
        run_child,
        workload_args,
    )

    n = check_rounds(n)
    strace = find_strace()
    with tempfile.TemporaryDirectory(prefix="course-ioctl-") as tmp:
        out = Path(tmp) / "trace.txt"
        cmd = [strace, "-f", "-y", "-e", "trace=ioctl,getppid", "-o", str(out), sys.executable,
               str(WORKLOAD), "census", *workload_args("census", n, COPY_BYTES, copy_loop, tmp)]
        proc = run_child(cmd, timeout_s, f"ioctl trace with N={n}")
        text = out.read_text() if out.exists() else ""
    if proc.returncode != 0:
        raise StraceFailedError(f"ioctl trace exited {proc.returncode}: {(proc.stderr or '').strip()[-300:]}")
    data = parse_trace(text)
    data["rounds"] = n
    data["raw"] = "\n".join(ln for ln in text.splitlines() if "ioctl(" in ln or "getppid(" in ln)
    return data


def from_data(data: dict) -> dict:
    """Recorded or live trace data, re-parsed from its raw lines when it carries them.

    Recordings keep the raw ioctl and marker lines, so a replay always reflects the current
    parser and a learner can read the lines themselves.
    """
    if data.get("raw"):
        parsed = parse_trace(data["raw"])
        return dict(data, **parsed)
    return data


TRACE_ROUNDS = 100  # round trips in the traced loop (the recorder's smoke test: 10)


@experiment("path.ioctl_trace", chapter=1, needs=(GPU, STRACE),
            title="Every ioctl of a CUDA program by node and request, at start-up vs during N round trips",
            params={"rounds": validate.count(0, 100_000)})
def record_ioctl_trace(quick: bool, rounds: int = TRACE_ROUNDS) -> dict:
    """One strace -f -y of the census workload with `rounds` round trips, parsed by phase."""
    from helpers.ch01_path_of_a_copy.syscalls import strace_or_skip

    strace_or_skip()
    return trace_census(min(rounds, 10) if quick else rounds)


def loop_summary(data: dict) -> str:
    """One computed sentence: how many ioctls reached the driver's nodes during the copy loop."""
    if data.get("markers", 0) < 2:
        return "the loop markers were not found, so start-up and loop cannot be told apart in this trace"
    loop = [r for r in data["phases"].get("during the loop", []) if r[0].startswith("/dev/nvidia")]
    n = sum(r[2] for r in loop)
    rounds = data.get("rounds", "?")
    if n == 0:
        return f"during {rounds} round trips the driver's nodes received no ioctl at all"
    what = ", ".join(f"{r[1]} x{r[2]}" for r in loop[:5])
    return f"during {rounds} round trips the driver's nodes received {n} ioctl calls ({what})"
