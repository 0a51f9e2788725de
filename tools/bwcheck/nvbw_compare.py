"""The course's figures against NVIDIA's nvbandwidth, measured in the same run on the same GPU.

    python -m tools.bwcheck.nvbw_compare --recordings R1 [R2 ...] --nvbw N1.json [N2.json ...] [--out table.md]

Each R* is a machine folder that `python -m helpers.record --out R1` wrote (the whole recorder, or
`--only` the experiments below), read through the course's loader; each N*.json is the output of `nvbandwidth -j` (built from
github.com/NVIDIA/nvbandwidth). Run them interleaved in one session on the GPU machine (recording,
nvbandwidth, recording, ...): both sides' figures move with the machine's state (a run of
nvbandwidth's own latency test spread 1,189-1,211 ns in three runs on one H100), so each side's
figure is the median of its runs, and the table gives each side's range beside it. For every figure
both measure (copy-engine copies each way and both ways at once, SM copies each way, the GPU's read
latency of host memory) it prints course, nvbandwidth, their relative difference, and whether that
is within the bar the course holds itself to (1% for the GPU->host latency, 2% for the other
one-GPU figures). On a two-GPU machine it also compares nvbandwidth's peer
matrices entry by entry (tools/bwcheck/nvbw_peer.py: peer CE read and write one way and both ways at
once, local device copy, peer read latency) within 1%; a folder without the two-GPU experiments simply
has none of those rows. Exit status 1 if any shared figure is further apart than its bar.
Nothing here is a recording.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from tools.bwcheck import nvbw_peer

BAR = 0.02
LAT_FIGURE = "GPU read of host memory, nvbandwidth's chase (ns)"
LATENCY_BAR = 0.01  # issue 42: the GPU->host latency, nvbandwidth's statistic on both sides, within 1%
BIDIR = "bidirectional_memcpy_ce (h2d + d2h shares)"
SHARES = ("host_to_device_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce")  # BIDIR's two parts

# (figure, nvbandwidth testcase, how to read the course's value from the recording's experiments)
FIGURES = (
    ("CE copy h2d, 256 MiB (GB/s)", "host_to_device_memcpy_ce", lambda e: e["crosscheck.bwcheck"]["course_gbps"]["h2d"]),
    ("CE copy d2h, 256 MiB (GB/s)", "device_to_host_memcpy_ce", lambda e: e["crosscheck.bwcheck"]["course_gbps"]["d2h"]),
    # the page's figure is the aggregate of both directions at once; nvbandwidth reports each
    # direction's share of a bidirectional run, so their sum is its aggregate
    ("CE both ways at once, aggregate, 64 MiB (GB/s)", BIDIR,
     lambda e: e["copy_engines.bidirectional"]["both"]["median_gbps"]),
    ("SM copy h2d, 256 MiB (GB/s)", "host_to_device_memcpy_sm", lambda e: _sm(e, "h2d")),
    ("SM copy d2h, 256 MiB (GB/s)", "device_to_host_memcpy_sm", lambda e: _sm(e, "d2h")),
    # nvbandwidth's statistic as the course measures it (helpers.measure.nvbw_chase: its 2 MiB chain, 128-byte
    # steps, 1,000,000 reads, launches timed whole), not the course's own 128 MiB random chase
    (LAT_FIGURE, "host_device_latency_sm",
     lambda e: e["mmio.gpu_read_latency"]["nvbw"]["host_median_ns"]),
)


def _sm(exps: dict, direction: str) -> float:
    for r in exps["copy_engines.kernel_copies"]["rows"]:
        if r["direction"] == direction and r["nbytes"] == 256 << 20:
            return r["gbps"]
    raise KeyError(f"copy_engines.kernel_copies has no 256 MiB {direction} row")


def nvbw_runs(docs: list[dict]) -> dict[str, list[float]]:
    """testcase name -> GPU 0's value in every nvbandwidth -j output given (see _gpu0)."""
    runs: dict[str, list[float]] = {}
    for doc in docs:
        for tc in doc.get("nvbandwidth", doc).get("testcases", []):
            if str(tc.get("status", "")).lower() in ("passed", "pass") and "sum" in tc:
                runs.setdefault(tc["name"], []).append(_gpu0(tc))
    return runs


def _gpu0(tc: dict) -> float:
    """A host<->device testcase's value for GPU 0, the GPU the course measures: the first entry of its
    matrix (one CPU row, one column per GPU). Its 'sum' adds every GPU's column, so it is GPU 0's
    value only on a one-GPU machine (on two H200s host_device_latency_sm read 1195.81 and 1201.08 ns,
    'sum' 2396.9). With one GPU 'sum' is that entry at full precision (the matrix's strings are rounded to
    two decimals), so it is used whenever the matrix has one entry or cannot be read."""
    try:
        matrix = tc["bandwidth_matrix"]
        if sum(len(row) for row in matrix) > 1:
            return float(matrix[0][0])
    except (KeyError, IndexError, TypeError, ValueError):
        pass
    return float(tc["sum"])


def nvbw_values(docs: list[dict]) -> dict[str, float]:
    """testcase name -> the median of its runs (nvbandwidth run several times: its latency runs spread by a
    few percent), plus the bidirectional aggregate."""
    return _medians(nvbw_runs(docs))


def _medians(runs: dict[str, list[float]]) -> dict[str, float]:
    """Each testcase's median over its runs; the bidirectional aggregate is the sum of its two shares' medians."""
    out = {name: statistics.median(v) for name, v in runs.items()}
    if all(k in out for k in SHARES):
        out[BIDIR] = sum(out[k] for k in SHARES)
    return out


def course_runs(recordings: list[dict]) -> dict[str, list[float]]:
    """figure name -> its value in every recording that has it."""
    out: dict[str, list[float]] = {}
    for rec in recordings:
        exps = {k: v["data"] for k, v in rec["experiments"].items()}
        for name, _, get in FIGURES:
            try:
                out.setdefault(name, []).append(float(get(exps)))
            except (KeyError, TypeError):
                continue
    return {k: v for k, v in out.items() if v}


def rows(recordings: list[dict], nvbw_docs: list[dict]) -> list[tuple]:
    """(figure, course median, course range, nvbandwidth median, nvbandwidth range, difference, within bar)
    for every figure both sides have; a range is (min, max, runs)."""
    course, theirs = course_runs(recordings), nvbw_runs(nvbw_docs)
    medians = _medians(theirs)
    out = []
    for name, tc, _ in FIGURES:
        if name not in course or tc not in medians:
            continue
        c = statistics.median(course[name])
        v = medians[tc]
        runs = theirs.get(tc) or _bidir_runs(theirs)
        diff = (c - v) / v
        out.append((name, c, (min(course[name]), max(course[name]), len(course[name])), v,
                    (min(runs), max(runs), len(runs)), diff, abs(diff) <= bar(name)))
    return out + peer_rows(recordings, nvbw_docs)


def peer_rows(recordings: list[dict], nvbw_docs: list[dict]) -> list[tuple]:
    """rows()' tuples for the two-GPU figures (nvbw_peer), each side the median of its runs, bar 1%."""
    course = _collect(nvbw_peer.course_figures({k: v["data"] for k, v in rec["experiments"].items()})
                      for rec in recordings)
    theirs = _collect(nvbw_peer.nvbw_figures(doc) for doc in nvbw_docs)
    out = []
    for name in sorted(course.keys() & theirs.keys()):
        c, v = statistics.median(course[name]), statistics.median(theirs[name])
        diff = (c - v) / v
        out.append((name, c, (min(course[name]), max(course[name]), len(course[name])), v,
                    (min(theirs[name]), max(theirs[name]), len(theirs[name])), diff, abs(diff) <= nvbw_peer.PEER_BAR))
    return out


def _collect(dicts) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for d in dicts:
        for k, v in d.items():
            out.setdefault(k, []).append(v)
    return out


def bar(name: str) -> float:
    """The bar a figure is held to: 1% for the GPU->host latency and the two-GPU figures, 2% for the
    other one-GPU figures."""
    if name == LAT_FIGURE:
        return LATENCY_BAR
    return BAR if any(name == f[0] for f in FIGURES) else nvbw_peer.PEER_BAR


def _bidir_runs(runs: dict[str, list[float]]) -> list[float]:
    """The bidirectional aggregate of each nvbandwidth run (its two shares added, run by run)."""
    a, b = (runs.get(k, []) for k in SHARES)
    return [x + y for x, y in zip(a, b, strict=False)]


def table(found: list[tuple]) -> str:
    lines = ["| figure | course (median) | course runs | nvbandwidth (median) | nvbandwidth runs | difference | within bar |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {n} | {c:,.2f} | {_range(cr)} | {v:,.2f} | {_range(vr)} | {d:+.1%} | {'yes' if ok else 'NO'} ({bar(n):.0%}) |"
              for n, c, cr, v, vr, d, ok in found]
    return "\n".join(lines)


def _range(r: tuple) -> str:
    lo, hi, n = r
    return f"{n}: {lo:,.2f}" if n == 1 else f"{n}: {lo:,.2f}-{hi:,.2f}"


def recording_doc(folder: Path) -> dict:
    """{"experiments": {id: {"data": ...}}} of a machine folder the recorder wrote, each file validated."""
    from helpers.core import reference

    ref = reference.load(folder)
    return {"experiments": {i: {"data": ref.experiment(i)} for i in ref.ids() if ref.has(i)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recordings", type=Path, nargs="+", required=True)
    ap.add_argument("--nvbw", type=Path, nargs="+", required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from helpers.core.errors import CourseError

    try:
        found = rows([recording_doc(p) for p in args.recordings], [json.loads(p.read_text()) for p in args.nvbw])
    except (OSError, ValueError, CourseError) as exc:  # no such file, not JSON, not nvbandwidth's, no recording
        print(f"nvbw_compare: {exc}", file=sys.stderr)
        return 2
    text = table(found)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if found and all(ok for *_, ok in found) else 1


if __name__ == "__main__":
    sys.exit(main())
