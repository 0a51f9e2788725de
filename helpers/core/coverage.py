"""Which registered experiments lack a recording on their reference machine.

Every experiment replays from the machine its registration names (`reference`: the course's main
machine, or the two-GPU one), so each must have a file with data there,
data/reference/<machine>/<id>.json, unless its registration declares, once, that it is optional on
that machine (`optional_on`). tests/core/test_recording_coverage.py holds the committed data to
this; a page never decides it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from helpers.core import config, experiments, reference
from helpers.core.errors import ReferenceDataError

# The committed reference machines, by the role an experiment's registration names.
MACHINES = {experiments.DEFAULT_REFERENCE: config.DEFAULT_REFERENCE,
            experiments.P2P_REFERENCE: config.DEFAULT_P2P_REFERENCE}


def gaps(registry: Mapping[str, experiments.Experiment],
         machine: Callable[[str], reference.Reference]) -> list[str]:
    """One line per experiment of `registry` without data on `machine(role)` and not optional there
    (kernel-lab transcripts are data/kernel_lab's, not a GPU machine's)."""
    out = []
    for e in registry.values():
        if e.reference == experiments.KERNEL_LAB_REFERENCE or e.reference in e.optional_on:
            continue
        own = e.recorded_in or e.id
        try:
            ref = machine(e.reference)
            rec = ref.recording(own)
        except ReferenceDataError as exc:
            out.append(f"{e.id}: {exc} — or declare optional_on=({e.reference!r},) in its registration")
            continue
        if rec.skipped is not None:
            out.append(f"{e.id}: {ref.name}/{own}.json is a skip ({rec.skipped}); record it on a machine that can run "
                       f"it, or declare optional_on=({e.reference!r},)")
    return out


def strays(registry: Mapping[str, experiments.Experiment], refs: list[reference.Reference]) -> list[str]:
    """Recording files whose id no experiment is registered under (renamed or removed experiments)."""
    return [f"{ref.name}/{i}.json" for ref in refs for i in ref.ids() if i not in registry]


def committed(role: str) -> reference.Reference:
    """The committed machine of a role, from data/reference (COURSE_DATA_DIR), whatever COURSE_REFERENCE says."""
    return reference.load(MACHINES[role])
