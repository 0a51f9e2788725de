"""Run `make` targets and say what each cost: wall time and CPU (user + sys).

    python -m tools.env.timesteps [--make make] STEP ... [// STEP ... [// STEP ...]]

Without `//` the steps run one after another (`make test` on one lane). With it, the steps before
the first `//` run first, in order; then every group after a `//` is a lane, and the lanes run at
the same time, each in order: CI's machine has two cores and its steps spend much of their wall
time waiting (QEMU booting, a kernel starting, a browser loading), so two lanes finish sooner than
one. The first lane writes to this terminal as it goes; every other lane writes to a log under
build/test-logs/ that is printed when the lane ends. The first failing step stops the run: the
other lanes are stopped (their process groups terminated) and the exit status is that step's.

CPU is the step's own process tree as the kernel accounts it (os.wait4's rusage: the step and
every descendant it waited for; a daemon that escaped to init is not counted). On a machine
shared with other work the wall time grows while the CPU time stays, so the two together say
whether a slow step computed or waited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LOGS = Path("build") / "test-logs"
SEPARATOR = "//"


@dataclass(kw_only=True)
class Lane:
    """Steps run in order, and what each cost."""

    steps: list[str]
    log: Path | None = None  # None: write to this terminal
    rows: list[str] = field(default_factory=list)
    status: int = 0
    current: subprocess.Popen | None = None
    stopped: bool = False


def run_step(make: str, step: str, lane: Lane) -> tuple[int, float, float, float]:
    """(exit status, wall s, user s, sys s) of `make <step>`, in its own process group."""
    out = open(lane.log, "a") if lane.log else None
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen([make, "--no-print-directory", step], stdout=out, stderr=subprocess.STDOUT if out else None,
                                start_new_session=True)
        lane.current = proc
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, time.monotonic() - t0, usage.ru_utime, usage.ru_stime
    finally:
        lane.current = None
        if out:
            out.close()


def run_lane(make: str, lane: Lane, failed: threading.Event) -> None:
    """Run the lane's steps until one fails or another lane has failed."""
    for step in lane.steps:
        if failed.is_set():
            lane.stopped = True
            return
        status, wall, user, system = run_step(make, step, lane)
        if status and lane.stopped:  # terminated because another lane failed: not this step's failure
            return
        lane.rows.append(f"  {step:<28} {wall:7.1f} s wall {user:7.1f} s user {system:6.1f} s sys")
        line = f"make test: {step} took {wall:.1f} s ({user:.1f} s user, {system:.1f} s sys CPU)"
        if lane.log:
            with open(lane.log, "a") as f:
                f.write(line + "\n")
        print(line, flush=True)
        if status:
            lane.status = status
            failed.set()
            return


def stop(lanes: list[Lane]) -> None:
    """Terminate the process group of every lane's running step."""
    for lane in lanes:
        proc = lane.current
        if proc is not None and proc.returncode is None:
            lane.stopped = True
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def run_lanes(make: str, lanes: list[Lane]) -> None:
    """The lanes at the same time; the first failure stops the others."""
    failed = threading.Event()
    threads = [threading.Thread(target=run_lane, args=(make, lane, failed), daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if failed.wait(0.5):
            stop(lanes)
        for t in threads:
            t.join(0.01)
    for lane in lanes:
        if lane.log and lane.log.exists():
            print(f"make test: ---- output of the lane {' '.join(lane.steps)} ({lane.log}) ----", flush=True)
            print(lane.log.read_text(errors="replace"), flush=True)


def parse(argv: list[str]) -> tuple[str, list[str], list[list[str]]]:
    """(make, the steps run first, the lanes run after them side by side)."""
    make = "make"
    if argv[:1] == ["--make"]:
        make, argv = argv[1], argv[2:]
    groups: list[list[str]] = [[]]
    for token in argv:
        if token == SEPARATOR:
            groups.append([])
        else:
            groups[-1].append(token)
    return make, groups[0], [g for g in groups[1:] if g]


def main(argv: list[str]) -> int:
    make, first, parallel = parse(argv)
    head = Lane(steps=first)
    run_lanes(make, [head])
    lanes = [head]
    if not head.status and parallel:
        LOGS.mkdir(parents=True, exist_ok=True)
        side = [Lane(steps=steps, log=None if i == 0 else LOGS / f"lane-{i}.log") for i, steps in enumerate(parallel)]
        for lane in side:
            if lane.log:
                lane.log.write_text("")
        run_lanes(make, side)
        lanes += side
    rows = [row for lane in lanes for row in lane.rows]
    status = next((lane.status for lane in lanes if lane.status), 0)
    if status:
        stopped = [s for lane in lanes if not lane.status for s in lane.steps[len(lane.rows):]]
        print("make test: steps so far\n" + "\n".join(rows)
              + (f"\nmake test: stopped before the end: {' '.join(stopped)}" if stopped else ""))
        return status
    print("make test: every step passed\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
