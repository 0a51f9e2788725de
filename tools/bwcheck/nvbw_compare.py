"""The course's figures against NVIDIA's nvbandwidth, measured in the same run on the same GPU.

    python tools/bwcheck/nvbw_compare.py RECORDING.json NVBW.json [NVBW2.json ...] [--out table.md]

RECORDING.json is what `python -m helpers.record --out ...` wrote; each NVBW*.json is the output
of `nvbandwidth -j` (built from github.com/NVIDIA/nvbandwidth); give several runs and each testcase's
value is the median of its runs (nvbandwidth's own latency runs spread by a few percent). For every figure both measure
(copy-engine copies each way and both ways at once, SM copies each way, the GPU's read latency of
host memory) it prints course, nvbandwidth and their relative difference, and whether that is
within the 2% the course holds itself to. Exit status 1 if any shared figure is further apart.
Run on the GPU machine right after the recorder; nothing here is a recording.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

BAR = 0.02
BIDIR = "bidirectional_memcpy_ce (h2d + d2h shares)"

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
    ("GPU read of host memory (ns)", "host_device_latency_sm", lambda e: e["mmio.gpu_read_latency"]["host_median_ns"]),
)


def _sm(exps: dict, direction: str) -> float:
    for r in exps["copy_engines.kernel_copies"]["rows"]:
        if r["direction"] == direction and r["nbytes"] == 256 << 20:
            return r["gbps"]
    raise KeyError(f"copy_engines.kernel_copies has no 256 MiB {direction} row")


def nvbw_runs(docs: list[dict]) -> dict[str, list[float]]:
    """testcase name -> its value in every nvbandwidth -j output given (the single GPU's entry: the matrix 'sum')."""
    runs: dict[str, list[float]] = {}
    for doc in docs:
        for tc in doc.get("nvbandwidth", doc).get("testcases", []):
            if str(tc.get("status", "")).lower() in ("passed", "pass") and "sum" in tc:
                runs.setdefault(tc["name"], []).append(float(tc["sum"]))
    return runs


def nvbw_values(docs: list[dict]) -> dict[str, float]:
    """testcase name -> the median of its runs (nvbandwidth run several times: its latency runs spread by a
    few percent), plus the bidirectional aggregate."""
    out = {name: statistics.median(v) for name, v in nvbw_runs(docs).items()}
    shares = ("host_to_device_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce")
    if all(k in out for k in shares):
        out[BIDIR] = sum(out[k] for k in shares)
    return out


def rows(recording: dict, nvbw: dict[str, float]) -> list[tuple]:
    """(figure, course, nvbandwidth, difference, within bar) for every figure both have."""
    exps = {k: v["data"] for k, v in recording["experiments"].items()}
    out = []
    for name, tc, get in FIGURES:
        try:
            course = float(get(exps))
        except (KeyError, TypeError):
            continue
        if tc not in nvbw:
            continue
        diff = (course - nvbw[tc]) / nvbw[tc]
        out.append((name, course, nvbw[tc], diff, abs(diff) <= BAR))
    return out


def table(found: list[tuple]) -> str:
    lines = ["| figure | course | nvbandwidth | difference | within 2% |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {c:,.2f} | {v:,.2f} | {d:+.1%} | {'yes' if ok else 'NO'} |" for n, c, v, d, ok in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording", type=Path)
    ap.add_argument("nvbw", type=Path, nargs="+")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    found = rows(json.loads(args.recording.read_text()), nvbw_values([json.loads(p.read_text()) for p in args.nvbw]))
    text = table(found)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if found and all(ok for *_, ok in found) else 1


if __name__ == "__main__":
    sys.exit(main())
