"""Run `make` targets one after another and say what each cost: wall time and CPU (user + sys).

    python -m tools.env.timesteps [--make make] test-lint test-unit ...    # `make test` runs its steps this way

The first failing step stops the run with its exit status. CPU is the step's process tree as the
kernel accounts it to this process (getrusage RUSAGE_CHILDREN: every descendant that was waited
for; a daemon that escaped to init is not counted). On a machine shared with other work the wall
time grows while the CPU time stays, so the two together say whether a slow step computed or waited.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time


def run_step(make: str, step: str) -> tuple[int, float, float, float]:
    """(exit status, wall s, user s, sys s) of `make <step>`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    status = subprocess.call([make, "--no-print-directory", step])
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return status, wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main(argv: list[str]) -> int:
    make = "make"
    if argv[:1] == ["--make"]:
        make, argv = argv[1], argv[2:]
    rows = []
    steps = argv
    for step in steps:
        status, wall, user, system = run_step(make, step)
        rows.append(f"  {step:<28} {wall:7.1f} s wall {user:7.1f} s user {system:6.1f} s sys")
        print(f"make test: {step} took {wall:.1f} s ({user:.1f} s user, {system:.1f} s sys CPU)", flush=True)
        if status:
            print("make test: steps so far\n" + "\n".join(rows))
            return status
    print("make test: every step passed\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
