"""The recorder: `python -m helpers.record --out data/reference/<name>.json`.

Runs every registered experiment live on this machine's GPU, shows progress, and writes one
reference file with provenance, the system report and a checksum. It refuses to run without
a usable GPU (or under COURSE_MODE=replay): reference data is measured, never made up.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from pathlib import Path

from helpers.ch03_dma_and_copy_engines import crosscheck
from helpers.core import experiments, gpu, mode, provenance, reference
from helpers.core.errors import SkipExperiment
from helpers.measure import sysinfo

__all__ = ["SkipExperiment", "main"]

# Exit status when the file was written but its own cross-check says the run is not the
# machine's (see crosscheck.disagreements): re-record before committing it.
EXIT_CROSSCHECK_FAILED = 3


def warm_up() -> None:
    """A few seconds of pinned copies both ways before the first measurement, discarded.

    The first minute of a freshly started GPU machine once measured 5-10% low (H100, 21:13 UTC
    on 2026-11-21) while the C cross-check right after did not: the link and clocks settle first.
    """
    from helpers.measure.transfers import DIRECTIONS, measure_copy

    for d in DIRECTIONS:
        measure_copy(64 << 20, d, "pinned", reps=20, warmup=3)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m helpers.record", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="where to write the reference JSON (required unless --list)")
    ap.add_argument("--name", help="reference name (default: the file's stem)")
    ap.add_argument("--only", action="append", default=[], metavar="GLOB",
                    help="record only experiments whose id matches (repeatable)")
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    ap.add_argument("--list", action="store_true", help="list registered experiments and exit")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    registry = experiments.discover()
    if args.list:
        for e in registry.values():
            print(f"ch{e.chapter:<2} {e.id:40s} {e.title}")
        return 0
    if args.out is None:
        print("record: --out is required (e.g. --out data/reference/my-gpu.json)", file=sys.stderr)
        return 2
    info = mode.detect()
    if info.mode is not mode.Mode.LIVE:
        print(f"record: refusing to record without a live GPU — {info.reason}", file=sys.stderr)
        return 2
    chosen = [e for e in registry.values()
              if not args.only or any(fnmatch.fnmatch(e.id, g) for g in args.only)]
    if not chosen:
        print(f"record: no experiment matches {args.only}", file=sys.stderr)
        return 2
    name = args.name or args.out.stem
    doc = {"schema_version": reference.SCHEMA_VERSION, "name": name,
           "provenance": provenance.live_provenance(["python", "-m", "helpers.record", *(argv or sys.argv[1:])]),
           "system": sysinfo.collect().as_dict(), "experiments": {}}
    skipped = {}
    print(f"recording {len(chosen)} experiment(s) on {info.probe.name} -> {args.out}", flush=True)
    print("warming up (pinned copies both ways, discarded)", flush=True)
    warm_up()
    gpu.release_pools()
    for i, e in enumerate(chosen, 1):
        t0 = time.monotonic()
        print(f"[{i}/{len(chosen)}] {e.id}: {e.title}", flush=True)
        try:
            data = e.run(args.quick)
        except SkipExperiment as exc:
            skipped[e.id] = str(exc)
            print(f"    skipped: {exc}", flush=True)
            continue
        finally:
            gpu.release_pools()
        dt = time.monotonic() - t0
        doc["experiments"][e.id] = {"title": e.title, "chapter": e.chapter, "duration_s": round(dt, 3),
                                    "quick": bool(args.quick), "data": data}
        print(f"    done in {dt:.1f} s", flush=True)
    if skipped:
        doc["system"]["skipped_experiments"] = skipped
    doc = json.loads(json.dumps(doc))  # plain JSON types only, as the file will hold
    doc["checksum"] = reference.checksum(doc)
    reference.validate(doc, str(args.out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(doc['experiments'])} experiments)")
    problems = crosscheck.disagreements({k: v["data"] for k, v in doc["experiments"].items()})
    if problems:
        print("record: THIS RUN FAILED ITS OWN CROSS-CHECK; do not commit the file, record again:\n  "
              + "\n  ".join(problems), file=sys.stderr)
        return EXIT_CROSSCHECK_FAILED
    return 0

