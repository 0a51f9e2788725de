"""Every course diagram on one HTML page, for checking their layout in a browser without building the site.

    python -m tools.site.diagramgallery OUT.html

The diagrams are made by the chapter packages' own functions (Chapter 0's and Chapter 1's with
the reference recordings, as the notebooks show them in replay). tests/site/test_browser.py
loads the page in Chromium at a phone, a laptop and a wide width and runs tools/site/sitecheck.py's
layout check on it, so a diagram that clips or overprints fails without a site build.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Callable
from pathlib import Path


def course_diagrams() -> list[tuple[str, Callable]]:
    """(name, function making the Diagram) for every diagram the chapters show."""
    from helpers import course
    from helpers.ch00_your_machine import diagrams as ch00_diagrams
    from helpers.ch00_your_machine import system_report
    from helpers.ch01_path_of_a_copy import diagrams
    from helpers.ch02_mmio_and_bars import diagrams as ch2
    from helpers.ch03_dma_and_copy_engines import diagrams as ch3
    from helpers.ch04_pinned_memory import diagrams as ch4
    from helpers.ch05_unified_memory import diagrams as ch5
    from helpers.ch06_gem_ttm_dmabuf import diagrams as ch6
    from helpers.ch07_command_submission import diagrams as ch7
    from helpers.ch08_peer_to_peer import diagrams as ch08_diagrams
    from helpers.ch09_radar_pipeline import diagrams as ch9
    from helpers.measure import sysinfo

    ctx = course.start("diagram gallery", quiet=True)

    def machine():
        theirs = ctx.get("system.report", recorded=True)
        report = sysinfo.from_dict(theirs.data)
        return ch00_diagrams.machine_diagram(report, theirs.provenance["gpu"]["memory_bytes"],
                                           vm=system_report.recorded_vm(report),
                                           title=f"The reference machine ({theirs.source.split(' · ')[0]})")

    def path():
        return diagrams.path_diagram(ctx.get("path.syscall_census"), ctx.get("path.driver_maps", nbytes=64 << 20))

    listed = [("ch00 machine map", machine), ("ch01 path of a copy", path),
              ("ch02 BARs", ch2.bars_diagram), ("ch02 transactions", ch2.transactions_diagram),
              ("ch03 copy path", ch3.copy_path_diagram), ("ch03b PCIe reads and writes", ch3.pcie_reads_writes_diagram),
              ("ch04 pinning paths", ch4.pinning_paths_diagram), ("ch04 GDRCopy", ch4.gdrcopy_diagram),
              ("ch05 fault and migration", ch5.fault_migration_diagram),
              ("ch06 sharing", ch6.sharing_diagram), ("ch06 TTM", ch6.ttm_diagram),
              ("ch07 ring", ch7.ring_diagram), ("ch07 GPFIFO", ch7.gpfifo_diagram),
              ("ch08 three ways", ch08_diagrams.p2p_paths_diagram), ("ch09 pipeline", ch9.pipeline_diagram)]
    known = {getattr(f, "__qualname__", "") for _, f in listed} | {"machine_diagram", "path_diagram"}
    return listed + [(f"{f.__module__}.{f.__name__}", f) for f in _other_diagrams() if f.__qualname__ not in known]


def _other_diagrams() -> list[Callable]:
    """Every other `*_diagram` function of the chapter packages that needs no argument (one a
    chapter added without listing it here), from the modules that build a Diagram."""
    import importlib
    import inspect

    root = Path(__file__).resolve().parents[2] / "helpers"
    found = []
    for src in sorted(root.glob("ch*/*.py")):
        if "Diagram(" not in src.read_text(encoding="utf-8"):
            continue
        mod = importlib.import_module(".".join(src.relative_to(root.parent).with_suffix("").parts))
        for name, f in inspect.getmembers(mod, inspect.isfunction):
            if (name.endswith("diagram") and f.__module__ == mod.__name__
                    and all(p.default is not p.empty for p in inspect.signature(f).parameters.values())):
                found.append(f)
    return found


def page(diagrams: list[tuple[str, object]]) -> str:
    """An HTML page with each diagram's figure (its text/html, as Jupyter and the site show it) in a
    column like the site's."""
    body = "".join(f"<section><h2>{html.escape(name)}</h2>{d._repr_mimebundle_()['text/html']}</section>"
                   for name, d in diagrams)
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Course diagrams</title>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            "<style>body{margin:0;font-family:sans-serif} article{max-width:900px;margin:0 auto;padding:0 12px}"
            "figure{margin:0 0 24px}</style></head><body><main><article><h1>Course diagrams</h1>"
            f"{body}</article></main></body></html>")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    made = [(name, make()) for name, make in course_diagrams()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page(made))
    print(f"diagramgallery: {len(made)} diagrams in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
