"""Lab 6's graded parts for the course's grader (tools/grader), outside the learner's process.

The learner's driver cannot run in the grader's worker (it needs a PCI device, an IOMMU and
root to bind the device): the worker only hands over the driver's code (``lab6_code``, defined
by the lab's setup cell: helpers.labs.lab6.code_of of the learner's namespace, as data), and the
grader runs it where it can observe the device — in the kernel lab's VM, each part in its own
unprivileged process with the reference for the other parts (instructor.labs.lab6.grade). All
seven parts are checked in one boot, with hidden inputs drawn from the seed of the first part
graded (printed, so `--seed` reruns it).
"""

from __future__ import annotations

import json

from helpers.labs import lab6 as published
from instructor.labs import lab6 as ref
from tools.grader.api import Part

POINTS = {"open": 4, "identify": 3, "factorial": 3, "map": 4, "dma": 5, "refuse": 3, "faults": 3}
_RUNS: dict[str, dict] = {}


def _results(student, seed: int) -> dict:
    code = student.lab6_code()
    if not isinstance(code, dict):
        raise ValueError(f"lab6_code returned {type(code).__name__}, not the driver's code")
    key = json.dumps([code, seed], sort_keys=True)
    if key not in _RUNS:
        _RUNS[key] = ref.grade(code, seed)["parts"]
    return _RUNS[key]


def _part(name: str):
    def run(c, student, seed: int) -> None:
        published.judge(c, _results(student, seed), name)
    return run


GRADED = tuple(Part(f"check_{p}", POINTS[p], published.PART_FUNCTIONS[p], _part(p)) for p in published.PARTS)
