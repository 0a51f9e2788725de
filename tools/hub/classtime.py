"""Time the grading of a class: 30 students, correct ones and one hostile per trick (issue 39).

    python -m tools.hub.classtime [--students 30] [--out build/classtime] [--labs lab2 lab3 ...]

Writes a class of generated submissions (each student hands in one lab, round-robin over the
labs: the worked solution, or one trick of the red team — tests/labs/redteam.py and
tests/labs/tricks39.py — played in every solution cell, or a hostile file: a symlink to the
instructor's lab, a student folder linked to another's, a FIFO, an oversized file, a worker that
holds more memory than the cap in several processes), grades it with the real grader (sandboxed,
default limits), and prints the wall time, each student's score and whether each trick earned 0
and each correct student full marks. labs/README.md states the measured time. Not part of
`make test` (minutes); `make class-time` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.labs import redteam, tricks39
from tools.grader import labgrade

ROOT = Path(__file__).resolve().parents[2]


MEMORY_HOG = '''
import os, time
for _ in range(4):
    if os.fork() == 0:
        b = bytearray(1700 << 20)   # 1.7 GiB each: within one process's limit, 6.8 GiB together
        for i in range(0, len(b), 4096):
            b[i] = 1
        time.sleep(600)
        os._exit(0)
time.sleep(600)
'''


def build(folder: Path, students: int, labs: list[str]) -> dict[str, str]:
    """Write the class; {student: what they handed in} ("correct" or the trick)."""
    marker = folder.parent / "classtime-outside-marker"
    plan: dict[str, str] = {}
    hostile = [("data", t) for t in redteam.DATA_TRICKS] + [("process", t) for pair in redteam.PROCESS_TRICKS
                                                             for t in pair]
    hostile += [("own", t) for t in tricks39.OWN_WORK] + [("file", t) for t in ("symlink_to_instructor",
                                                                                 "folder_symlink", "fifo",
                                                                                 "oversized")]
    hostile += [("memory", "memory_hog")]
    k = 0
    for i in range(students):
        name = f"s{i:02d}"
        lab = labs[i % len(labs)]
        kind, trick = hostile[k] if i % 3 != 0 and k < len(hostile) else ("correct", "correct")
        if kind != "correct":
            k += 1
        if kind in ("data", "process"):
            cells = redteam.trick_cells(lab, trick, marker)
            redteam.write(folder, name, lab, redteam.notebook(lab, cells))
        elif kind == "own":
            lab, cells = tricks39.OWN_WORK[trick]
            redteam.write(folder, name, lab, redteam.notebook(lab, cells))
        elif kind == "memory":
            cells = {gid: "\n\n".join(redteam._function(n, kd, MEMORY_HOG) for n, kd in funcs)
                     for gid, funcs in redteam.FUNCTIONS[lab].items()}
            redteam.write(folder, name, lab, redteam.notebook(lab, cells))
        elif trick == "symlink_to_instructor":
            (folder / name).mkdir()
            (folder / name / redteam.source(lab).name).symlink_to(redteam.source(lab))
        elif trick == "folder_symlink":
            (folder / name).symlink_to(folder / "s00")
        elif trick == "fifo":
            (folder / name).mkdir()
            os.mkfifo(folder / name / redteam.source(lab).name)
        elif trick == "oversized":
            (folder / name).mkdir()
            with open(folder / name / redteam.source(lab).name, "wb") as f:
                f.truncate(64 << 20)
        else:
            redteam.write(folder, name, lab, json.loads(redteam.source(lab).read_text()))
        plan[name] = trick if kind != "correct" else "correct"
    return plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "classtime")
    ap.add_argument("--labs", nargs="*", default=["lab1", "lab2", "lab3", "lab4", "lab5"])
    a = ap.parse_args(argv)
    if a.out.exists():
        raise SystemExit(f"{a.out} exists: give another --out")
    folder = a.out / "class"
    folder.mkdir(parents=True)
    plan = build(folder, a.students, a.labs)
    t0 = time.monotonic()
    report = labgrade.grade(folder)
    took = time.monotonic() - t0
    bad = []
    for student, trick in sorted(plan.items()):
        got, full = sum(r.score for r in report[student]), sum(r.max_score for r in report[student])
        ok = got == full if trick == "correct" else (got < full or (full == 0 and got == 0))
        print(f"{student} {trick:24s} {got:g}/{full:g} {'ok' if ok else 'UNEXPECTED'}")
        if not ok:
            bad.append(student)
    print(f"class of {len(plan)} students ({sum(t == 'correct' for t in plan.values())} correct, "
          f"{sum(t != 'correct' for t in plan.values())} hostile) graded in {took:.0f} s wall "
          f"({os.cpu_count()} CPUs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
