"""Plant a demonstration prediction record: a made-up learner's guesses, each compared with the
value the chapter's own compare cell computes from the course's reference recordings.

    COURSE_STATE_DIR=/tmp/demo-state python -m tools.site.predictions_demo
    COURSE_STATE_DIR=/tmp/demo-state jupyter nbconvert --execute --to html notebooks/my_predictions.ipynb

The guesses are invented (a learner's, for the demonstration); every value they are compared
with is computed here, in replay, by the same expression as the chapter's `ctx.compare` cell
(named beside each), so the page shows real recorded numbers. It refuses to write into a
state folder that already holds predictions (a learner's record is never touched).
"""

from __future__ import annotations

import os
import sys

# guesses of a made-up learner: (question, guess, unit, kind)
GUESSES = [
    ("ch00.largest_bar_gib", 16, "GiB", "size"),
    ("ch00.pinned_speedup_h2d", 2, "x", "ratio"),
    ("ch01.pinned_maps_nvidiactl", "no", "", "outcome"),
    ("ch02.largest_bar_gib", 0.25, "GiB", "size"),
    ("ch03.n_half_bytes", 4096, "B", "size"),
    ("ch03.small_copy_device_us", 5, "µs", "time"),
    ("ch03.bidirectional_ratio", 2.0, "x", "ratio"),
    ("ch04.register_1gib_ms", 2, "ms", "time"),
    ("ch04.wc_read_slowdown", 3, "x", "ratio"),
    ("ch05.example2_outcome", "b", "", "outcome"),
    ("ch05.fault_over_prefetch", 1.5, "x", "ratio"),
    ("ch08.peer_gbps", 50, "GB/s", "bandwidth"),
]


def measured(ctx) -> dict[str, tuple[float, str, object]]:
    """question -> (value, unit, Evidence), each as the chapter's compare cell computes it."""
    from helpers.ch00_your_machine import first_copy
    from helpers.ch02_mmio_and_bars import mmio
    from helpers.ch04_pinned_memory import pinning, write_combined
    from helpers.ch05_unified_memory import managed
    from helpers.ch08_peer_to_peer import views
    from helpers.measure import sysinfo
    from helpers.models import copy_cost

    out = {}
    theirs = ctx.get("system.report", recorded=True)  # 00_your_machine / 02_mmio_and_bars
    ref_report = sysinfo.from_dict(theirs.data)
    out["ch00.largest_bar_gib"] = (max(b.size for b in ref_report.gpus[0].bars) / 2**30, "GiB", theirs)
    out["ch02.largest_bar_gib"] = (mmio.largest_bar(ref_report) / 2**30, "GiB", theirs)
    recorded = ctx.get("transfers.pinned_vs_pageable", recorded=True)  # 00_your_machine, SIZE = 64 MiB
    _, bw = first_copy.bandwidths(recorded, 64 << 20)
    out["ch00.pinned_speedup_h2d"] = (bw[("pinned", "h2d")] / bw[("pageable", "h2d")], "x", recorded)
    sweep = ctx.get("transfers.pinned_vs_pageable")  # 03_dma_and_copy_engines
    out["ch03.n_half_bytes"] = (copy_cost.fit_all(sweep.data)[("pinned", "h2d")].n_half, "B", sweep)
    gated = ctx.get("copy_engines.gated_small_copies")  # 03b_copy_engines_and_the_link
    r4 = {(r["direction"], r["nbytes"]): r for r in gated.data["runs"]}[("h2d", 4)]
    out["ch03.small_copy_device_us"] = (r4["device_median_s"] * 1e6, "µs", gated)
    bidir = ctx.get("copy_engines.bidirectional")
    d = bidir.data
    out["ch03.bidirectional_ratio"] = (d["both"]["median_gbps"] / max(d["h2d"]["median_gbps"], d["d2h"]["median_gbps"]),
                                       "x", bidir)
    cost = ctx.get("pinning.cost_vs_size")  # 04_pinned_memory
    out["ch04.register_1gib_ms"] = (pinning.row_at(cost.data, 1 << 30)["register"] * 1e3, "ms", cost)
    wc = ctx.get("pinning.write_combined")
    out["ch04.wc_read_slowdown"] = (1 / write_combined.ratios(wc.data)["cpu_read_gbps"], "x", wc)
    ev_mig = ctx.get("um.migration")  # 05_unified_memory
    gib = {r["mode"]: managed.rates(r) for r in ev_mig.data["runs"] if r["nbytes"] == 1 << 30}
    out["ch05.fault_over_prefetch"] = (gib["prefetch"]["to_gpu_gbps"] / gib["fault"]["to_gpu_gbps"], "x", ev_mig)
    mats = ctx.get("p2p.matrices")  # 08_peer_to_peer
    peer = [x for row in views.gbps_matrix(mats.data, "peer") for x in row if x is not None]
    out["ch08.peer_gbps"] = (sum(peer) / len(peer), "GB/s", mats)
    return out


def main() -> int:
    os.environ["COURSE_MODE"] = "replay"  # the reference recordings, whatever this machine has
    from helpers import course
    from helpers.learning import predictions

    if predictions.read_record().predictions:
        print(f"{predictions.store()} already holds predictions: plant the demonstration in an empty "
              "COURSE_STATE_DIR", file=sys.stderr)
        return 1
    ctx = course.start("prediction record demonstration", quiet=True)
    for q, guess, unit, kind in GUESSES:
        ctx.predict(q, guess, unit=unit, kind=kind)
    for q, (value, unit, ev) in measured(ctx).items():
        ctx.compare(q, value, unit=unit, source=ev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
