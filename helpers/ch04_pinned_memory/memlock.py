"""RLIMIT_MEMLOCK and pinning: does the NVIDIA driver charge the pages it pins to the limit?

`memlock_probe` lowers the limit in a child process (dropping to user 'nobody' first when run as
root, since CAP_IPC_LOCK lets mlock ignore the limit) and tries to lock the same request three
ways: mlock(2), cudaHostAlloc and cudaHostRegister, reading what the kernel then counts as
locked (VmLck + VmPin). The driver pins through its OS-descriptor path (see pinning's docstring),
not mlock(2), which is why the answer has to be measured. Experiment ``pinning.memlock`` (its id
keeps the module it was first recorded from).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers.ch04_pinned_memory.pinning import PAGE, PinningError, PinRequestError
from helpers.core import experiments, validate
from helpers.core.experiments import GPU
from helpers.measure.host_memory import check_nbytes
from helpers.measure.sysinfo import fmt_bytes

_MEMLOCK_CHILD = r"""
import ctypes, json, mmap, os, resource, sys
limit, request, drop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
out = {"limit": limit, "request": request}
try:  # import (no CUDA context yet) while the files are still readable to us
    import cupy
    import cupy.cuda.runtime as rt
except Exception as e:
    cupy = None
    out["cuda"] = "unavailable: %s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:160])
resource.setrlimit(resource.RLIMIT_MEMLOCK, (limit, limit))
if drop:
    os.environ["HOME"] = "/tmp"
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
out["euid"] = os.geteuid()
cap = [l for l in open("/proc/self/status") if l.startswith("CapEff:")][0].split()[1]
out["cap_ipc_lock"] = bool(int(cap, 16) >> 14 & 1)
def locked():
    v = 0
    for l in open("/proc/self/status"):
        if l.startswith(("VmLck:", "VmPin:")):
            v += int(l.split()[1]) * 1024
    return v
libc = ctypes.CDLL(None, use_errno=True)
libc.mlock.argtypes = libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
m = mmap.mmap(-1, request, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
ctypes.memset(addr, 1, request)
if libc.mlock(addr, request) == 0:
    out["mlock"] = "ok"; out["locked_by_mlock"] = locked(); libc.munlock(addr, request)
else:
    out["mlock"] = os.strerror(ctypes.get_errno())
try:
    if cupy is None:
        raise ImportError(out["cuda"])
    rt.getDeviceCount(); rt.free(rt.malloc(256))
except Exception as e:
    out["cuda"] = out.get("cuda") or "unavailable: %s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:160])
else:
    out["cuda"] = "ok"
    try:
        p = rt.hostAlloc(request, 0)
        out["hostAlloc"] = "ok"; out["locked_by_hostAlloc"] = locked(); rt.freeHost(p)
    except rt.CUDARuntimeError as e:
        out["hostAlloc"] = str(e).split(":")[0]
    try:
        rt.hostRegister(addr, request, 0)
        out["hostRegister"] = "ok"; out["locked_by_hostRegister"] = locked(); rt.hostUnregister(addr)
    except rt.CUDARuntimeError as e:
        out["hostRegister"] = str(e).split(":")[0]
print("RESULT " + json.dumps(out), flush=True)
"""


def run_child(code: str, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """Run Python `code` in a fresh interpreter with a hard timeout (PinningError when it expires)."""
    timeout_s = validate.seconds(timeout_s, "timeout_s", 0, 600)
    try:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              timeout=timeout_s, env=dict(os.environ), cwd="/")
    except subprocess.TimeoutExpired:
        raise PinningError(f"the child process did not finish within {timeout_s:g} s and was killed") from None


def memlock_probe(limit: int, request: int, *, drop_privileges: bool = False,
                  timeout_s: float = 90.0) -> dict:
    """In a child process with RLIMIT_MEMLOCK = `limit`, try to lock `request` bytes three ways.

    mlock(2), cudaHostAlloc and cudaHostRegister; the child reports each outcome and what the
    kernel then counts as locked (VmLck + VmPin). With drop_privileges (only as root) the
    child becomes user 'nobody' first: root's CAP_IPC_LOCK lets mlock ignore the limit, so
    only an unprivileged child shows whether a limit is enforced at all.
    """
    limit = validate.byte_size(limit, "memlock probe: limit")
    request = check_nbytes(request, "memlock probe: request")
    if drop_privileges and os.geteuid() != 0:
        raise PinRequestError("memlock probe: dropping privileges needs root; run it without drop_privileges")
    proc = run_child(_MEMLOCK_CHILD, [str(int(limit)), str(int(request)), "1" if drop_privileges else "0"],
                     timeout_s)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise PinningError(f"memlock probe child failed (exit {proc.returncode}): {' | '.join(tail)}")
    out = json.loads(line[len("RESULT "):])
    out["dropped_privileges"] = bool(drop_privileges)
    return out


def process_memlock() -> dict:
    """This process's RLIMIT_MEMLOCK (bytes, None = unlimited), euid and CAP_IPC_LOCK."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    inf = resource.RLIM_INFINITY
    cap = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                cap = int(line.split()[1], 16)
    return {"soft": None if soft == inf else soft, "hard": None if hard == inf else hard,
            "euid": os.geteuid(), "cap_ipc_lock": bool(cap >> 14 & 1)}


def memlock_text(d: dict) -> str:
    """process_memlock()'s answer as a sentence with units ('unlimited', not None)."""
    return (f"RLIMIT_MEMLOCK soft {fmt_bytes(d['soft'])}, hard {fmt_bytes(d['hard'])}; effective uid {d['euid']}"
            f"{' (root)' if d['euid'] == 0 else ''}; CAP_IPC_LOCK {'yes' if d['cap_ipc_lock'] else 'no'}")


MEMLOCK_LIMIT, MEMLOCK_REQUEST = 64 << 20, 512 << 20


@experiments.experiment("pinning.memlock", chapter=4, needs=(GPU,),
                        title="RLIMIT_MEMLOCK lowered in a child: mlock vs cudaHostAlloc vs cudaHostRegister",
                        params={"limit": validate.size(PAGE, 1 << 40), "request": validate.size(PAGE, 1 << 40)})
def record_memlock(quick: bool, limit: int = MEMLOCK_LIMIT, request: int = MEMLOCK_REQUEST) -> dict:
    """The parent's own limit, then the probe as this user (and, as root, as user 'nobody')."""
    request = min(request, 128 << 20) if quick else request
    probes = [memlock_probe(limit, request)]
    if os.geteuid() == 0:
        probes.append(memlock_probe(limit, request, drop_privileges=True))
    return {"parent": process_memlock(), "probes": probes}


def memlock_rows(data: dict) -> list[tuple]:
    """(who, limit, request, mlock, cudaHostAlloc, cudaHostRegister, kernel-counted locked bytes)."""
    rows = []
    for p in data["probes"]:
        who = f"uid {p['euid']}" + (" (CAP_IPC_LOCK)" if p["cap_ipc_lock"] else " (no CAP_IPC_LOCK)")
        counted = ", ".join(f"{k.split('_by_')[1]}: {fmt_bytes(v)}" for k, v in p.items() if k.startswith("locked_by_"))
        rows.append((who, fmt_bytes(p["limit"]), fmt_bytes(p["request"]), p["mlock"],
                     p.get("hostAlloc", p.get("cuda", "—")), p.get("hostRegister", p.get("cuda", "—")), counted or "—"))
    return rows


def memlock_verdict(data: dict) -> str:
    """Does the NVIDIA driver honour RLIMIT_MEMLOCK? Decided from the unprivileged probe."""
    plain = [p for p in data["probes"] if not p["cap_ipc_lock"]]
    if not plain:
        return ("undecided: every probe ran with CAP_IPC_LOCK, which lets mlock ignore the limit; "
                "run the probe as an unprivileged user to decide")
    p = plain[0]
    if "hostAlloc" not in p:
        return f"undecided: CUDA was not usable in the unprivileged child ({p.get('cuda')})"
    over = f"{fmt_bytes(p['request'])} against a limit of {fmt_bytes(p['limit'])}"
    mlock_enforced = p["mlock"] != "ok"
    cuda_ok = [k for k in ("hostAlloc", "hostRegister") if p.get(k) == "ok"]
    if mlock_enforced and cuda_ok:
        return (f"not honoured: as an unprivileged user, mlock of {over} failed ({p['mlock']}), yet "
                f"{' and '.join('cuda' + k[0].upper() + k[1:] for k in cuda_ok)} succeeded — "
                "the NVIDIA driver pins pages without charging RLIMIT_MEMLOCK")
    if mlock_enforced:
        return f"honoured: mlock and the CUDA calls all refused {over}"
    return f"undecided: mlock itself was allowed to lock {over}, so the limit did not bite"
