"""Where the CPU time of a copy goes: user vs system time for large pageable and pinned copies.

Source question 000 observed with time(1) that copy cost shows up as *user* time, not system time. Two
things can make a synchronous cudaMemcpy burn user time:

1. a real CPU copy: a pageable buffer is copied by the driver, in user space, into pinned
   staging buffers that the copy engine can DMA from;
2. waiting: by default the CUDA driver spins (or yields) while it waits for the GPU, so the
   waiting thread is busy in user space even when the CPU copies nothing.

A child process measures getrusage(RUSAGE_SELF) (all threads) around repeated synchronous
copies (loops.cpu_seconds, the function the page shows; recordings made before it also kept
RUSAGE_THREAD, which no view uses), once with the default scheduling and once with
CU_CTX_SCHED_BLOCKING_SYNC (the thread sleeps in the kernel while it waits). What remains
under blocking sync is the CPU's own copying.
"""

from __future__ import annotations

import json
import sys
import tempfile

from helpers.ch01_path_of_a_copy.loops import code_file, cpu_seconds
from helpers.core import validate
from helpers.core.errors import CourseError, InputError
from helpers.core.experiments import experiment

SCHEDS = ("auto", "blocking")
WAIT_LABEL = {"auto": "default (spins)", "blocking": "blocking (sleeps)"}
NBYTES = 256 << 20
QUICK_NBYTES = 64 << 20
REPS = 5


def measure(nbytes: int = NBYTES, reps: int = REPS, sched: str = "auto", timeout_s: float = 120.0,
            code=cpu_seconds) -> dict:
    """Run the cputime workload, measuring each copy with `code` (the page's cpu_seconds), in a
    fresh child process, and return its JSON."""
    from helpers.ch01_path_of_a_copy.syscalls import WORKLOAD, run_child

    validate.choice(sched, "sched", SCHEDS)
    validate.byte_size(nbytes, "copy size", 1 << 20, 1 << 30)
    validate.whole_number(reps, "reps", 1, 100)
    with tempfile.TemporaryDirectory(prefix="course-cputime-") as tmp:
        path, name = code_file(code, tmp)
        proc = run_child([sys.executable, str(WORKLOAD), "cputime", str(nbytes), str(reps), sched, str(path), name],
                         timeout_s, f"cputime workload ({sched})")
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
        raise CourseError(f"cputime workload exited {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def per_gb(run: dict) -> dict:
    """CPU seconds per GB moved (1 GB = 1e9 B), bandwidth, and CPU busy share of wall time."""
    gb = run["nbytes"] * run["reps"] / 1e9
    if gb <= 0 or run["wall"] <= 0:
        raise InputError(f"a run must move bytes in positive time, got {run!r}")
    return {"user_s_per_gb": run["user"] / gb, "sys_s_per_gb": run["sys"] / gb,
            "gbps": gb / run["wall"], "cpu_share": (run["user"] + run["sys"]) / run["wall"]}


def rows(data: dict) -> list[tuple]:
    """Table rows: waiting mode, host kind, direction, GB/s, user and sys s/GB, CPU busy."""
    out = []
    for block in data["scheds"]:
        for r in block["runs"]:
            g = per_gb(r)
            out.append((WAIT_LABEL.get(block["sched"], block["sched"]), r["host_kind"], r["direction"], f"{g['gbps']:.1f}",
                        f"{g['user_s_per_gb'] * 1e3:.1f}", f"{g['sys_s_per_gb'] * 1e3:.1f}",
                        f"{g['cpu_share']:.0%}"))
    return out


HEADERS = ("waiting", "host memory", "direction", "GB/s", "user ms per GB", "sys ms per GB",
           "CPU busy (of wall time)")


def lookup(data: dict, sched: str, kind: str, direction: str) -> dict:
    """per_gb() of one configuration."""
    for block in data["scheds"]:
        if block["sched"] != sched:
            continue
        for r in block["runs"]:
            if r["host_kind"] == kind and r["direction"] == direction:
                return per_gb(r)
    raise KeyError(f"no run for {sched}/{kind}/{direction}")


def figure(ev):
    """Stacked bars of user and sys CPU ms per GB for every configuration (ev: the Evidence)."""
    import plotly.graph_objects as go

    from helpers.presentation.figures import CourseFigure

    data = ev.require()
    cats, user, sys_ = [], [], []
    for block in data["scheds"]:
        for r in block["runs"]:
            g = per_gb(r)
            cats.append(f"{WAIT_LABEL.get(block['sched'], block['sched'])}<br>{r['host_kind']} {r['direction']}")
            user.append(g["user_s_per_gb"] * 1e3)
            sys_.append(g["sys_s_per_gb"] * 1e3)
    fig = go.Figure()
    fig.add_bar(x=cats, y=user, name="user time")
    fig.add_bar(x=cats, y=sys_, name="system (kernel) time")
    fig.update_layout(barmode="stack", title=f"CPU time per GB copied ({data['nbytes'] >> 20} MiB copies)",
                      yaxis_title="CPU ms per GB moved (all threads)", xaxis_title="waiting mode / copy")
    return CourseFigure(fig, ev.parts)


def record(quick: bool = False, code=cpu_seconds) -> dict:
    n, reps = (QUICK_NBYTES, 2) if quick else (NBYTES, REPS)
    return {"nbytes": n, "reps": reps, "scheds": [measure(n, reps, s, code=code) for s in SCHEDS]}


@experiment("path.cpu_time", chapter=1,
            title="User vs system CPU time of 256 MiB pageable and pinned copies, spinning vs blocking wait")
def record_cpu_time(quick: bool, code=cpu_seconds) -> dict:
    """Each configuration measured by `code` (the page's cpu_seconds) in a fresh child process."""
    return record(quick, code)
