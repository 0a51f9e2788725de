"""Chapter 0's exercises: the expected values come from the chapter's Evidence here, never from
the page (helpers.learning.checks explains the kinds)."""

from __future__ import annotations

import warnings

import numpy as np

from helpers.ch00_your_machine import first_copy
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import Hint, factor_hint
from helpers.measure import sysinfo


def _ref_link(ref_report: sysinfo.SystemReport) -> str | None:
    return ref_report.gpus[0].link_current if ref_report.gpus else None


def link_ceiling(answer, ref_report: sysinfo.SystemReport) -> bool | None:
    """0.1: the reference link's one-direction ceiling in GB/s."""
    expected = sysinfo.link_gbps(_ref_link(ref_report))
    if expected is None:
        print("… 0.1: the reference report has no link speed to compute from")
        return None
    return checks.close(
        "0.1 link ceiling", answer, expected, rel_tol=0.01,
        hint="rate (GT/s) x lanes gives gigabits per second on the wire; then the line code, then bytes.",
        hints=[factor_hint(8, "That is gigabits, not gigabytes: divide by 8 bits per byte."),
               factor_hint(2, "A link carries this much in EACH direction at once; the question asks for one."),
               factor_hint(130 / 128, "Close: you left out the line code. From Gen3 on, 130 bits on the wire "
                                      "carry 128 bits of data.", rel_tol=0.003),
               factor_hint(0.8 * 130 / 128, "You used 8b/10b coding, which Gen1 and Gen2 use; "
                                                "this link is Gen5 (128b/130b).", rel_tol=0.01)],
        why=f"{_ref_link(ref_report)}: rate x lanes is the wire's gigabits per second, x 128/130 for the line "
            f"code, / 8 bits per byte = {expected:.1f} GB/s in each direction.")


def link_fraction(answer, recorded: Evidence, ref_report: sysinfo.SystemReport, nbytes: int) -> bool | None:
    """0.2: the fraction of that ceiling the reference machine's pinned host->device copy reaches."""
    ceiling = sysinfo.link_gbps(_ref_link(ref_report))
    bw = first_copy.bandwidths(recorded, nbytes)[1][("pinned", "h2d")]
    return checks.close(
        "0.2 fraction of the link", answer, bw / ceiling, rel_tol=0.05,
        hint="Divide the reference machine's pinned host→device GB/s (table above) by your ceiling from 0.1.",
        hints=[Hint(lambda a, e: a > 1, "A fraction of the ceiling is below 1: GB/s measured / GB/s possible."),
               factor_hint(100, "Give a fraction (0.8), not a percentage (80).")],
        why="the rest goes to each packet's header and framing (about 20-30 bytes per packet of at most a few "
            "hundred bytes of data), flow-control and acknowledgement packets, and the reads' round trips.")


BAR1_OPTIONS = {
    "a": "Every byte of the 80 GB has a bus address at all times, because the BAR is larger than the memory.",
    "b": "BAR1 is an aperture: a VRAM page has a bus address only while the driver maps it into BAR1's page tables.",
    "c": "The size shows the firmware negotiated Resizable BAR at boot.",
    "d": "The CPU should copy bulk data through BAR1, because it can address all of the memory.",
}
BAR1_WHY = {
    "a": "No: the GPU translates BAR1 offsets through its own page tables, so what appears in the window is "
         "whatever the driver has mapped there, not a fixed image of memory. A large BAR1 makes room for more "
         "mappings; it does not map anything by itself.",
    "b": "Yes: NVIDIA's BAR1 is a virtual aperture. Offsets in it are translated by BAR1 page tables the driver "
         "writes, so a page of device memory is reachable from the bus only while it is mapped there.",
    "c": "Not from this data: the report records the BAR's size, not how it came to be that size. Resizable "
         "BAR is one way a BAR gets large; a device can also simply ask for a large BAR. The course cannot "
         "tell which happened here, so it does not claim it.",
    "d": "No: CPU reads through a BAR are uncached and cross the link one small request at a time "
         "(Chapter 2 measures it). Bulk data moves by DMA, with the copy engines.",
}


def bar1_question(answer) -> bool | None:
    """0.3: what a BAR1 larger than the memory does and does not mean."""
    return checks.choice("0.3 what a large BAR1 means", answer, BAR1_OPTIONS, "b", BAR1_WHY)


IOMMU_MODEL = ("The recording machine is a VM with the GPU passed through, so the GPU's DMA addresses are "
               "guest-physical addresses. The guest sees no IOMMU, but the host's IOMMU translates every DMA "
               "from guest-physical to host-physical (and confines the GPU to the VM's memory). So the recorded "
               "bandwidths include that translation; on bare metal with the IOMMU off there is none.")
IOMMU_POINTS = [("the machine is a VM with the GPU passed through", ("vm", "virtual", "guest", "passthrough",
                                                                     "passed through", "hypervisor")),
                ("the host's IOMMU still translates the GPU's DMA", ("host", "translat")),
                ("the reference numbers include that translation", ("include", "numbers", "bandwidth", "measure"))]


def iommu_question(answer) -> bool | None:
    """0.4: what 'no IOMMU visible' means on the reference machine."""
    return checks.explain("0.4 the invisible IOMMU", answer, IOMMU_MODEL, IOMMU_POINTS)


# --- 0.5: a round trip of your own (Numba) --------------------------------------------

ROUND_TRIP_SIZES = (1, 300, 1000)


def _round_trip_problems(fn) -> list[str]:
    """Run the learner's round_trip(host) on arrays the check makes; each result is judged after the
    function returned, against (input + 1) computed then (checks.learner_first)."""
    def arrays():
        for n in ROUND_TRIP_SIZES:
            host = (np.arange(n) % 256).astype(np.uint8)
            yield host, host.copy()

    def run(case):
        with np.errstate(over="ignore"), warnings.catch_warnings():  # 255 + 1 wraps in uint8: intended
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(case[0])

    return checks.learner_first(arrays(), run, _judge_round_trip)


def _judge_round_trip(case: tuple[np.ndarray, np.ndarray], out) -> list[str]:
    host, before = case
    n = host.size
    if not isinstance(out, np.ndarray):
        return [f"round_trip of {n} bytes returned {type(out).__name__}, not a NumPy array "
                "(use .copy_to_host() on the device array)."]
    want = (before + 1).astype(np.uint8)  # uint8 wraps: 255 + 1 = 0
    if out.shape != want.shape:
        return [f"round_trip of {n} bytes gave {out.shape[0] if out.ndim else 0} elements: launch "
                "enough threads to cover every element, and bound-check i < a.size."]
    bad = np.flatnonzero(out != want)
    if bad.size:
        i = int(bad[0])
        return [f"with {n} bytes, element {i} came back {int(out[i])}, expected {int(want[i])} "
                f"({bad.size} wrong). Is every element covered by a thread (blocks = ceil(n / threads))?"]
    if not np.array_equal(host, before):
        return ["your function changed the caller's host array; a round trip copies to the device "
                "and back, leaving the input as it was."]
    return []


def round_trip_exercise(fn) -> bool | None:
    """0.5: the learner's Numba round trip (to the device, add 1 in a kernel, back), checked on
    sizes the check picks; without a GPU Numba runs it on its CUDA simulator."""
    return checks.code("0.5 a round trip of your own", fn, _round_trip_problems,
                       why="cuda.to_device and copy_to_host are the two copies Chapter 1 follows through the "
                           "driver; the kernel between them is the work the GPU does.")
