"""A headline figure measured now, set beside the reference recording's, and a difference named.

In live mode every headline figure of a chapter stands beside the reference machine's value
(Chapter 0's table is the model). This module writes the sentence: both values with their
spreads, the ratio, whether they differ by more than the spreads, and, when they do, the likely
cause for that kind of figure, with the facts of both machines that bear on it (CPU model,
kernel, whether a VM, driver and link). In replay there is no second value: the sentence names
the recording the value comes from.

    beside.sentence("pageable h2d, 64 MiB", "GB/s", here, Value(5.39, 0.2), ref, Value(11.61, 0.3), "host")

The verb of each value comes from its Evidence (evidence.said), never from the caller.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from helpers.core.errors import InputError
from helpers.core.evidence import Evidence

# A spread the data do not give (one run, no repeats) is taken as this fraction of the value, so
# that two single readings are not called different for noise any timing has.
FLOOR = 0.05

# What each kind of figure depends on: the likely cause a difference is named by.
CAUSES = {
    "host": ("host-side work: a pageable copy is the CPU's memcpy into the driver's staging buffers, and an "
             "enqueue or launch is CPU time in the CUDA library, so both follow the host CPU, its memory "
             "bandwidth, its caches, what else it runs, and in a virtual machine the guest's vCPUs and the host "
             "under them"),
    "driver": ("kernel-driver work on the host CPU (pinning pages, servicing GPU page faults, updating page "
               "tables): the host CPU and its load, the kernel and driver versions, and in a virtual machine the "
               "guest's vCPUs and the hypervisor's handling of its page tables"),
    "link": ("the path to host memory: PCIe generation and width, the root complex and host memory, the IOMMU, "
             "and whether something else shares the link"),
    "device": ("the GPU itself: its clocks (power and thermal state, application clocks), its model and memory, "
               "and other processes using it"),
}


@dataclass(frozen=True)
class Value:
    """One figure and its spread (half-width of its uncertainty, same unit; 0 when the data hold none)."""

    value: float
    spread: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.value, int | float) and math.isfinite(self.value)) or self.spread < 0:
            raise InputError(f"a figure needs a finite value and a spread >= 0, got {self.value!r} ± {self.spread!r}")

    @property
    def width(self) -> float:
        return max(self.spread, FLOOR * abs(self.value))


def differ(mine: Value, theirs: Value) -> bool:
    """True when the two values are further apart than their spreads together."""
    return abs(mine.value - theirs.value) > mine.width + theirs.width


@functools.lru_cache(maxsize=1)
def _this_machine() -> dict:
    """This machine's facts that bear on a difference (CPU model, kernel, VM, driver, link)."""
    from helpers.core import provenance
    from helpers.measure import sysinfo
    from helpers.recording import live

    try:
        p = live.live_provenance([])
    except Exception:  # no GPU: the host facts alone
        import platform

        p = {"host": {"cpu": provenance.cpu_model(), "kernel": platform.release()}}
    return {"CPU": p.get("host", {}).get("cpu"), "kernel": p.get("host", {}).get("kernel"),
            "VM": sysinfo.in_vm(), "driver": p.get("driver"), "link": (p.get("pcie") or {}).get("current")}


def _recorded_facts(ev: Evidence) -> dict:
    p = ev.provenance or {}
    return {"CPU": p.get("host", {}).get("cpu"), "kernel": p.get("host", {}).get("kernel"),
            "VM": p.get("vm"), "driver": p.get("driver"), "link": (p.get("pcie") or {}).get("current")}


def facts_line(here: dict, there: dict) -> str:
    """'same CPU model (X), kernel, driver; differs: link (A here, B there)'; facts either side lacks are left out."""
    same, other = [], []
    for k in here:
        a, b = here.get(k), there.get(k)
        if a is None or b is None:
            continue
        (same if a == b else other).append(k if a == b else f"{k} ({a} here, {b} in the reference)")
    parts = []
    if same:
        parts.append("same " + ", ".join(same))
    if other:
        parts.append("differs: " + "; ".join(other))
    if not other:
        parts.append("so the cause lies in what neither report holds (core count and clocks, memory speed, load, "
                     "the host under a VM)")
    return "; ".join(parts)


def sentence(what: str, unit: str, here: Evidence, mine: Value, ref: Evidence, theirs: Value, kind: str,
             *, digits: int = 3) -> str:
    """One headline figure in words: in replay the recorded value and its machine; live, both values,
    their ratio, and (beyond the spreads) the difference named with its likely cause."""
    if kind not in CAUSES:
        raise InputError(f"kind must be one of {sorted(CAUSES)}, got {kind!r}")

    def fmt(v: Value) -> str:
        return f"{v.value:.{digits}g} {unit}" + (f" ± {v.spread:.2g}" if v.spread else "")

    if not here.live:
        return f"{what}: {fmt(theirs)}, {ref.said}."
    ratio = mine.value / theirs.value if theirs.value else math.inf
    head = f"{what}: {fmt(mine)}, {here.said}; reference ({ref.source}): {fmt(theirs)}, {ratio:.2f}x"
    if not differ(mine, theirs):
        return head + ": within their spreads, this machine agrees with the reference."
    facts = facts_line(_this_machine(), _recorded_facts(ref))
    return (f"{head}: different by more than their spreads. The likely cause is {CAUSES[kind]}. "
            f"What the two reports hold: {facts}.")
