"""The recorder: `python -m helpers.record --out data/reference/<name>.json`.

Runs the registered experiments live on this machine's GPU, shows progress, and writes one
reference file with provenance, the system report and a checksum. It refuses to run without
a usable GPU (or under COURSE_MODE=replay): reference data is measured, never made up.

With `--only GLOB` and an `--out` file that exists, the new recordings are merged into that
file, but only when it was recorded on this machine's GPU (name and PCI id), driver and CUDA
(runtime and driver API); the file's provenance then lists the merge. Without `--only`, an
existing `--out` file is replaced.
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import json
import sys
import time
from pathlib import Path

from helpers.core import config, experiments, files, gpu, mode, provenance, reference, validate
from helpers.core.errors import ReferenceDataError, SkipExperiment
from helpers.measure import sysinfo

__all__ = ["SkipExperiment", "main"]

# Exit status when the file was written but a registered recording check (the course-vs-C
# cross-check: experiments.recording_check) says the run is not the machine's: record again.
EXIT_CROSSCHECK_FAILED = 3
EXIT_REFUSED = 2

# The provenance fields that must match for a merge: a file holds one machine's numbers.
SAME_MACHINE = (("gpu", "name"), ("gpu", "pci_id"), ("driver",), ("cuda_runtime",), ("cuda_driver_api",))

EPILOG = """\
--out FILE is written atomically. Without --only it is replaced by a recording of every
experiment. With --only and an existing FILE, the chosen experiments are recorded and MERGED
into it (the others are kept, the merge is listed in its provenance), provided FILE was
recorded on this GPU (name and PCI id), driver and CUDA (runtime and driver API); otherwise
the recorder names the differing fields and exits 2 without touching FILE.
Exit status: 0 written; 2 refused (no GPU, nothing matches, a different machine);
3 written, but a recording check (the C cross-check) failed: do not commit it, record again."""


def warm_up() -> None:
    """A few seconds of pinned copies both ways before the first measurement, discarded.

    The first minute of a freshly started GPU machine once measured 5-10% low (H100, 21:13 UTC
    on 2026-11-21) while the C cross-check right after did not: the link and clocks settle first.
    """
    from helpers.measure.transfers import DIRECTIONS, measure_copy

    for d in DIRECTIONS:
        measure_copy(64 << 20, d, "pinned", reps=20, warmup=3)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m helpers.record", description=__doc__.splitlines()[0],
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="the reference JSON to write, or to merge into with --only "
                                             "(required unless --list)")
    ap.add_argument("--name", help="reference name (default: the existing file's name, else the file's stem)")
    ap.add_argument("--only", action="append", default=[], metavar="GLOB",
                    help="record only experiments whose id matches (repeatable); merges into an existing --out")
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    ap.add_argument("--list", action="store_true",
                    help="list the registered experiments (where, needs, parameters, reference file) and exit")
    return ap.parse_args(argv)


def describe(e: experiments.Experiment) -> str:
    """The lines `--list` prints for one experiment: id, title, where, needs, parameters, file."""
    defaults = {n: p.default for n, p in inspect.signature(e.run).parameters.items()}
    params = "; ".join(f"{n}={defaults.get(n, inspect.Parameter.empty)!r} ({validate.describe(rule)})"
                       for n, rule in e.params.items()) or "none"
    return (f"{e.id}  [ch{e.chapter}] {e.title}\n"
            f"    where:     {e.where}\n"
            f"    needs:     {', '.join(e.needs) or 'nothing'}\n"
            f"    params:    {params}\n"
            f"    reference: {e.reference} ({reference_file(e.reference)})"
            + (f"\n    recorded:  inside the file by {e.recorded_in.__name__} (not run on its own)"
               if e.recorded_in is not None else ""))


def reference_file(which: str) -> str:
    """The file an experiment's recording is replayed from, as configured here."""
    if which == experiments.P2P_REFERENCE:
        return f"{config.p2p_reference_name()}.json"
    if which == experiments.KERNEL_LAB_REFERENCE:
        return "data/kernel_lab/<id>.json, by `python -m helpers.measure.kernel_vm record`"
    return f"{reference.default_reference_name() or config.DEFAULT_REFERENCE}.json"


def machine_differences(recorded: dict, live: dict) -> list[str]:
    """'field: file X, here Y' for each SAME_MACHINE field where two provenances differ."""
    out = []
    for path in SAME_MACHINE:
        a, b = recorded, live
        for key in path:
            a = a.get(key) if isinstance(a, dict) else None
            b = b.get(key) if isinstance(b, dict) else None
        if a != b:
            out.append(f"{'.'.join(path)}: file {a!r}, here {b!r}")
    return out


def existing_for_merge(path: Path, live_prov: dict) -> tuple[dict | None, str | None]:
    """(the file's document to merge into, None) or (None, why the merge is refused)."""
    try:
        doc = reference.load(path).doc
    except ReferenceDataError as exc:
        return None, f"cannot merge into {path}: {exc}"
    diffs = machine_differences(doc["provenance"], live_prov)
    if diffs:
        return None, (f"refusing to merge into {path}: it was recorded on another machine or software stack "
                      f"({'; '.join(diffs)}). Record the whole file again without --only, or choose "
                      "another --out.")
    return doc, None


def run_experiments(chosen: list[experiments.Experiment], quick: bool) -> tuple[dict, dict]:
    """Run each chosen experiment live: ({id: entry for the file}, {id: why it was skipped})."""
    recorded, skipped = {}, {}
    for i, e in enumerate(chosen, 1):
        t0 = time.monotonic()
        print(f"[{i}/{len(chosen)}] {e.id}: {e.title}", flush=True)
        try:
            data = e.run(quick)
        except SkipExperiment as exc:
            skipped[e.id] = str(exc)
            print(f"    skipped: {exc}", flush=True)
            continue
        finally:
            gpu.release_pools()
        dt = time.monotonic() - t0
        recorded[e.id] = {"title": e.title, "chapter": e.chapter, "duration_s": round(dt, 3),
                          "quick": bool(quick), "data": data}
        print(f"    done in {dt:.1f} s", flush=True)
    return recorded, skipped


def merged(doc: dict, recorded: dict, skipped: dict, live_prov: dict, name: str | None) -> dict:
    """`doc` with `recorded` put in (others kept) and the merge listed in its provenance."""
    doc = json.loads(json.dumps(doc))
    doc.pop("checksum", None)
    doc["experiments"].update(recorded)
    if name:
        doc["name"] = name
    was_skipped = doc["system"].get("skipped_experiments", {})
    for eid in recorded:
        was_skipped.pop(eid, None)
    if "skipped_experiments" in doc["system"] and not was_skipped:
        del doc["system"]["skipped_experiments"]
    entry = {"date": live_prov["date"], "command_line": live_prov["command_line"],
             "experiments": sorted(recorded), "recorder_version": live_prov["recorder_version"],
             "packages": live_prov["packages"]}
    if skipped:
        entry["skipped"] = skipped
    doc["provenance"].setdefault("merged", []).append(entry)
    return doc


def write(doc: dict, out: Path) -> dict:
    """Checksum, validate and atomically write `doc` to `out`; returns what was written."""
    doc = json.loads(json.dumps(doc))  # plain JSON types only, as the file will hold
    doc["checksum"] = reference.checksum(doc)
    reference.validate(doc, str(out))
    files.write_atomically(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def check_problems(recorded: dict) -> list[str]:
    """Every registered recording check's complaints about what this run recorded."""
    data = {eid: entry["data"] for eid, entry in recorded.items()}
    return [p for check in experiments.recording_checks() for p in check(data)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    registry = experiments.discover()
    if args.list:
        for e in registry.values():
            print(describe(e))
        return 0
    if args.out is None:
        print("record: --out is required (e.g. --out data/reference/my-gpu.json)", file=sys.stderr)
        return EXIT_REFUSED
    info = mode.detect()
    if info.mode is not mode.Mode.LIVE:
        print(f"record: refusing to record without a live GPU — {info.reason}", file=sys.stderr)
        return EXIT_REFUSED
    # an experiment whose recording lives elsewhere in the file (recorded_in) is not run on its own
    # kernel-lab experiments are recorded in a VM by `python -m helpers.measure.kernel_vm record`
    chosen = [e for e in registry.values() if e.recorded_in is None and e.reference != experiments.KERNEL_LAB_REFERENCE
              and (not args.only or any(fnmatch.fnmatch(e.id, g) for g in args.only))]
    if not chosen:
        print(f"record: no experiment matches {args.only}", file=sys.stderr)
        return EXIT_REFUSED
    live_prov = provenance.live_provenance(["python", "-m", "helpers.record", *(argv or sys.argv[1:])])
    base = None
    if args.only and args.out.exists():
        base, refusal = existing_for_merge(args.out, live_prov)
        if refusal:
            print(f"record: {refusal}", file=sys.stderr)
            return EXIT_REFUSED
    verb = "merging into" if base else "->"
    print(f"recording {len(chosen)} experiment(s) on {info.probe.name} {verb} {args.out}", flush=True)
    print("warming up (pinned copies both ways, discarded)", flush=True)
    warm_up()
    gpu.release_pools()
    recorded, skipped = run_experiments(chosen, args.quick)
    if base is not None:
        doc = merged(base, recorded, skipped, live_prov, args.name)
    else:
        doc = {"schema_version": reference.SCHEMA_VERSION, "name": args.name or args.out.stem,
               "provenance": live_prov, "system": sysinfo.collect().as_dict(), "experiments": recorded}
        if skipped:
            doc["system"]["skipped_experiments"] = skipped
    doc = write(doc, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(doc['experiments'])} experiments"
          + (f", {len(recorded)} of them recorded now" if base is not None else "") + ")")
    problems = check_problems(recorded)
    if problems:
        print("record: THIS RUN FAILED ITS OWN CROSS-CHECK; do not commit the file, record again:\n  "
              + "\n  ".join(problems), file=sys.stderr)
        return EXIT_CROSSCHECK_FAILED
    return 0

