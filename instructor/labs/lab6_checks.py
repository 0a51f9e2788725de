"""Lab 6's graded parts for the course's grader (tools/grader), outside the learner's process.

The learner's driver cannot run in the grader's worker (it needs a PCI device, an IOMMU and
root to bind the device): the worker only hands over the driver's code (``lab6_code``, defined
by the lab's setup cell: helpers.labs.lab6.code_of of the learner's namespace, as data), and the
grader runs it where it can observe the device — in the kernel lab's VM, each part in its own
unprivileged process given only that part's learner functions and the reference of the other
parts (instructor.labs.lab6.grade, helpers/measure/kernel_vm/guest/lab6_harness.py). A part whose functions
the learner did not define fails here, "not defined", without a boot. All seven parts are
checked in ONE boot per student, with hidden inputs drawn from the student's lab seed
(`Student.lab_seed`, printed, so `--seed` reruns it), within what is left of the lab's time.
"""

from __future__ import annotations

import json
import time

from helpers.labs import lab6 as published
from instructor.labs import lab6 as ref
from tools.grader.api import Part, PartTimeout

POINTS = {"open": 4, "identify": 3, "factorial": 3, "map": 4, "dma": 5, "refuse": 3, "faults": 3}
_RUNS: dict[str, dict] = {}
MIN_BOOT_S = 30.0  # a boot given less than this would only time out


def _results(student, seed: int) -> dict:
    code = student.lab6_code()
    if not isinstance(code, dict):
        raise ValueError(f"lab6_code returned {type(code).__name__}, not the driver's code")
    seed = student.lab_seed if student.lab_seed is not None else seed
    key = json.dumps([code, seed], sort_keys=True)
    if key not in _RUNS:
        left = published.TIMEOUT_S if student.lab_deadline is None else student.lab_deadline - time.monotonic()
        if left < MIN_BOOT_S:
            raise PartTimeout(f"this lab's time was spent before the VM could boot ({left:.0f} s left)")
        _RUNS.clear()  # one student's run at a time: the class's memory stays flat
        _RUNS[key] = ref.grade(code, seed, timeout_s=min(published.TIMEOUT_S, left))["parts"]
    return _RUNS[key]


def _part(name: str):
    def run(c, student, seed: int) -> None:
        code = student.lab6_code()
        missing = [f for f in published.PART_FUNCTIONS[name] if not isinstance(code, dict) or f not in code]
        c.require(not missing, f"{', '.join(missing)} not defined: your notebook does not define "
                               f"{'it' if len(missing) == 1 else 'them'} (this part grades only your code)")
        published.judge(c, _results(student, seed), name)
    return run


GRADED = tuple(Part(f"check_{p}", POINTS[p], published.PART_FUNCTIONS[p], _part(p)) for p in published.PARTS)
