"""A pipeline run's numbers and their summaries: `RunResult`, latency percentiles, deadline misses and
drops, the rows of the tables Chapter 9 and Lab 3 show, and the runs inside radar.* Evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.models.radar.designs import DESIGNS, SEED_RATES


@dataclass(kw_only=True)
class RunResult:
    """One pipeline run: per-frame latency and what it cost."""

    design: str
    frame_bytes: int
    period_s: float
    slots: int
    buffers: int
    frames: int
    latency_us: list[int]            # end-to-end latency of each processed frame, in order
    seq: list[int]                   # the card's sequence number of each processed frame
    dropped: int                     # frames the card lost for want of a free slot
    cpu_s: float                     # consumer process CPU time over the run
    wall_s: float
    producer_late: int = 0
    copy_us_p50: float | None = None
    kernel_us_p50: float | None = None
    memcpy_us_p50: float | None = None
    checked: int = 0                 # frames whose map was compared with the NumPy reference
    max_error: float | None = None
    gpu: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(latency_us, period_s: float, dropped: int = 0, frames: int | None = None) -> dict:
    """p50/p99/p99.9/max latency (ms), deadline misses (latency > period) and drops."""
    lat = np.asarray(latency_us, dtype=float) / 1e3
    if lat.size == 0:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None,
                "misses": 0, "dropped": int(dropped), "frames": frames}
    q = np.percentile(lat, [50, 99, 99.9])
    return {"n": int(lat.size), "p50_ms": float(q[0]), "p99_ms": float(q[1]), "p999_ms": float(q[2]),
            "max_ms": float(lat.max()), "misses": int(np.sum(lat > period_s * 1e3)),
            "dropped": int(dropped), "frames": frames}


def result_summary(r: dict) -> dict:
    s = summarize(r["latency_us"], r["period_s"], r["dropped"], r["frames"])
    s.update(design=r["design"], frame_bytes=r["frame_bytes"], period_s=r["period_s"],
             buffers=r["buffers"], cpu_pct=100 * r["cpu_s"] / max(r["wall_s"], 1e-9),
             gbps=r["frame_bytes"] / r["period_s"] / 1e9)
    return s


def runs_of(evidence: Sequence[Evidence], frame_bytes: int | None = None) -> list[dict]:
    """The pipeline runs in the Evidence of radar.* experiments, in order (only frames of
    `frame_bytes` if given); a missing recording raises ReferenceDataError saying why."""
    runs = [r for ev in evidence for r in ev.require()["runs"]]
    return runs if frame_bytes is None else [r for r in runs if r["frame_bytes"] == frame_bytes]


def parts_of(evidence: Sequence[Evidence]) -> list[tuple[Mode, str]]:
    """Provenance parts of several Evidence for a CourseFigure, each machine once."""
    return list(dict.fromkeys(part for ev in evidence for part in ev.parts))


def caption_of(evidence: Sequence[Evidence], what: str) -> str:
    """A caption naming the mode, the machine and the frames per run of the radar Evidence."""
    frames = sorted({ev.data["frames"] for ev in evidence if ev.ok})
    per = f", {' / '.join(f'{f:,}' for f in frames)} frames per run" if frames else ""
    return "; ".join(dict.fromkeys(ev.caption(what + per) for ev in evidence))


def summary_rows(runs: list[dict]) -> list[tuple]:
    rows = []
    for r in runs:
        s = result_summary(r)
        rows.append((s["design"], f"{s['frame_bytes'] >> 20} MiB / {s['period_s'] * 1e3:g} ms",
                     f"{s['gbps']:.2f}", s["n"], f"{s['p50_ms']:.3f}" if s["n"] else "—",
                     f"{s['p99_ms']:.3f}" if s["n"] else "—", f"{s['p999_ms']:.3f}" if s["n"] else "—",
                     f"{s['max_ms']:.3f}" if s["n"] else "—", s["misses"], s["dropped"], f"{s['cpu_pct']:.1f}"))
    return rows


SUMMARY_HEADERS = ("design", "frame / period", "GB/s", "frames", "p50 ms", "p99 ms", "p99.9 ms", "max ms",
                   "misses", "dropped", "CPU %")


def closing_rows(runs: list[dict]) -> list[tuple]:
    """design, then p99.9 / misses / drops at 4 MB and at 16 MB per 8 ms."""
    by = {(r["design"], r["frame_bytes"]): result_summary(r) for r in runs}
    rows = []
    for d in DESIGNS:
        row = [d]
        for n, _ in SEED_RATES:
            s = by.get((d, n))
            row += ([f"{s['p999_ms']:.2f}", s["misses"], s["dropped"]] if s and s["n"] else ["—", "—", "—"])
        rows.append(tuple(row))
    return rows


CLOSING_HEADERS = ("design", "4 MB p99.9 ms", "4 MB misses", "4 MB dropped",
                   "2 GB/s p99.9 ms", "2 GB/s misses", "2 GB/s dropped")
