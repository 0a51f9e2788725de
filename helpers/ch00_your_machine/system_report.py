"""The machine as the kernel sees it (GPUs on the PCI bus, links, BARs, /dev/dri), as evidence.

`ctx.get("system.report")` reads this machine's sysfs now: it needs no GPU, so it runs live on
a laptop too (a forced replay replays it). `ctx.get("system.report", recorded=True)` is the
reference machine's report, which the recorder records like any other experiment
(data/reference/<machine>/system.report.json).
"""

from __future__ import annotations

from helpers.core.experiments import experiment
from helpers.measure import sysinfo


@experiment("system.report", chapter=0, needs=(),
            title="The machine as the kernel sees it: GPUs, PCIe links, BARs, /dev/dri (sysfs, /proc, /dev)")
def system_report(quick: bool) -> dict:
    return sysinfo.collect().as_dict()


def recorded_vm(report: sysinfo.SystemReport) -> bool | None:
    """Whether a recorded report's machine was a VM: the report's own `vm` when it has one;
    else True, because the course's reference recordings made before the report carried the
    field were all made in KVM guests with the GPU passed through (PCI address 0000:00:06.0 on
    the guest's root bus; the hypervisor's generic CPU name 'Intel(R) Xeon(R) Processor')."""
    return report.vm if report.vm is not None else True
