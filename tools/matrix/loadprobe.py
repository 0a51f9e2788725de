"""One course kernel's view of a shared GPU, for `python -m tools.matrix.runner load`.

    python -m tools.matrix.loadprobe OUT.json [--repeats 5]

Takes the course's own live evidence the way a chapter does (ctx.get of Chapter 0's copy
sweep at 64 MiB, pinned and pageable, both directions), several times, while other course
kernels run beside it; writes each repeat's pinned host->device bandwidth and the Evidence's
source, which says "contended: N other processes" when the GPU is shared. Exit 0 with the
numbers, 3 when no GPU is usable (nothing to measure: the load row needs a GPU).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from helpers import course

SIZE = 64 << 20


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 5
    ctx = course.start("load probe", quiet=True)
    if not ctx.live:
        out.write_text(json.dumps({"error": f"no usable GPU: {ctx.reason}"}))
        return 3
    runs = []
    for _ in range(repeats):
        ev = ctx.get("transfers.pinned_vs_pageable", lo=SIZE, hi=SIZE)
        s = next(x for x in ev.data["series"] if x["host_kind"] == "pinned" and x["direction"] == "h2d")
        runs.append({"pinned_h2d_gbps": SIZE / s["median_s"][0] / 1e9, "source": ev.source,
                     "other_processes": ev.provenance.get("other_processes"), "t": time.time()})
    course.finish(quiet=True)
    out.write_text(json.dumps({"runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
