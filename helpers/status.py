"""The book's status page: which machine built the site, in which mode, with which packages."""

from __future__ import annotations

import platform

from . import mode, provenance, reference
from .figures import Table


def build_table() -> Table:
    """Build machine, mode, GPU, reference and package versions as one table."""
    info = mode.detect()
    rows = [
        ("mode", f"{info.mode.value} — {info.reason}"),
        ("GPU", info.probe.name if info.probe.usable else "none usable"),
        ("replay reference", reference.default_reference_name() or "none"),
        ("host", f"{platform.machine()} · Linux {platform.release()} · Python {platform.python_version()}"),
    ]
    if info.probe.usable:
        rows.append(("CUDA", f"runtime {info.probe.cuda_runtime}, driver API {info.probe.cuda_driver}"))
    rows += [(f"package {k}", v) for k, v in provenance.package_versions().items()]
    return Table(rows, ("item", "value"), caption="How this copy of the site was built")


def reference_table() -> Table:
    """Every reference file: machine label and the experiments it holds."""
    rows = []
    for name in reference.list_names():
        ref = reference.load(name)
        rows.append((name, ref.label, ", ".join(sorted(ref.doc["experiments"]))))
    return Table(rows, ("file", "recorded on", "experiments"), caption="Reference data in data/reference")
