"""The recorder: `python -m helpers.record --out data/reference/<machine>`.

Runs the registered experiments live on this machine's GPU, shows progress, and writes one file
per experiment into the machine's folder (helpers.recording.store), each with its own provenance
and checksum. It refuses to run without a usable GPU (or under COURSE_MODE=replay): reference data
is measured, never made up. `--split OLD.json` moves a whole-machine file of recorder 0.1 into
that layout without measuring (helpers.recording.split).
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import sys
import time
from pathlib import Path

from helpers.core import config, experiments, gpu, mode, reference, validate
from helpers.core.errors import InputError, ReferenceDataError, SkipExperiment
from helpers.recording import live, split, store

__all__ = ["SkipExperiment", "main"]

# Exit status when the files were written but a registered recording check (the course-vs-C
# cross-check: experiments.recording_check) says the run is not the machine's: record again.
EXIT_CROSSCHECK_FAILED = 3
EXIT_REFUSED = 2

EPILOG = """\
--out FOLDER is the machine's folder (data/reference/<machine>): its manifest.json names the GPU
(name and PCI id), link and host; each experiment is one file, <id>.json, with its own provenance
(driver, CUDA, packages, date, git commit, who) and checksum, written atomically. Without --only
every experiment is recorded; with --only just those files are added or replaced, whatever driver
or CUDA the others were recorded with. A GPU other than the manifest's is refused (exit 2): record
into another folder. An experiment that cannot run here is written as skipped, with the reason,
unless the folder already has data for it (kept).
Exit status: 0 written; 2 refused (no GPU, nothing matches, another machine's folder, a bad --split);
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
    ap.add_argument("--out", type=Path, help="the machine's folder, data/reference/<machine> (required unless "
                                             "--list; with --split, default: OLD without .json)")
    ap.add_argument("--only", action="append", default=[], metavar="GLOB",
                    help="record only experiments whose id matches (repeatable); the other files are kept")
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    ap.add_argument("--by", metavar="WHO", help="who records (default: this account's name)")
    ap.add_argument("--list", action="store_true",
                    help="list the registered experiments (where, needs, parameters, machine) and exit")
    ap.add_argument("--split", type=Path, metavar="OLD.json",
                    help="move a whole-machine file of recorder 0.1 into --out, one file per experiment, "
                         "without measuring; checksums verified before and after; OLD.json is removed")
    return ap.parse_args(argv)


def describe(e: experiments.Experiment) -> str:
    """The lines `--list` prints for one experiment: id, title, where, needs, parameters, file."""
    defaults = {n: p.default for n, p in inspect.signature(e.run).parameters.items()}
    params = "; ".join(f"{n}={defaults.get(n, inspect.Parameter.empty)!r} ({validate.describe(rule)})"
                       for n, rule in e.params.items()) or "none"
    optional = f" (optional there: {', '.join(e.optional_on)})" if e.optional_on else ""
    return (f"{e.id}  [ch{e.chapter}] {e.title}\n"
            f"    where:     {e.where}\n"
            f"    needs:     {', '.join(e.needs) or 'nothing'}\n"
            f"    params:    {params}\n"
            f"    reference: {e.reference} ({reference_file(e)}){optional}"
            + (f"\n    recorded:  inside {e.recorded_in}'s recording (not run on its own)"
               if e.recorded_in is not None else ""))


def reference_file(e: experiments.Experiment) -> str:
    """The file an experiment's recording is replayed from, as configured here."""
    if e.reference == experiments.KERNEL_LAB_REFERENCE:
        return f"data/kernel_lab/{e.id}.json, by `python -m helpers.measure.kernel_vm record`"
    machine = (config.p2p_reference_name() if e.reference == experiments.P2P_REFERENCE
               else reference.default_reference_name() or config.DEFAULT_REFERENCE)
    return f"{machine}/{e.recorded_in or e.id}.json"


def recordable(registry: dict[str, experiments.Experiment], only: list[str]) -> list[experiments.Experiment]:
    """The experiments a run records: those matching `only` (all without it), less those whose
    recording is another's (recorded_in) and the kernel lab's (recorded in a VM by
    `python -m helpers.measure.kernel_vm record`)."""
    return [e for e in registry.values() if e.recorded_in is None and e.reference != experiments.KERNEL_LAB_REFERENCE
            and (not only or any(fnmatch.fnmatch(e.id, g) for g in only))]


def run_one(e: experiments.Experiment, quick: bool) -> dict:
    """Run one experiment live: the entry its file holds (data, or skipped with the reason)."""
    t0 = time.monotonic()
    try:
        data = e.run(quick)
    except SkipExperiment as exc:
        print(f"    skipped: {exc}", flush=True)
        return {"title": e.title, "chapter": e.chapter, "duration_s": 0.0, "quick": bool(quick), "skipped": str(exc)}
    finally:
        gpu.release_pools()
    dt = time.monotonic() - t0
    print(f"    done in {dt:.1f} s", flush=True)
    return {"title": e.title, "chapter": e.chapter, "duration_s": round(dt, 3), "quick": bool(quick), "data": data}


def record(chosen: list[experiments.Experiment], ref: reference.Reference, prov: dict, quick: bool) -> dict:
    """Run and store each chosen experiment: {id: data} of those recorded now (skips left out)."""
    recorded = {}
    for i, e in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {e.id}: {e.title}", flush=True)
        entry = run_one(e, quick)
        if "skipped" in entry and has_data(ref, e.id):
            print(f"    kept the recording {ref.name}/{e.id}.json has (a skip never replaces data)", flush=True)
            continue
        store.write(ref, store.recording_doc(ref, e.id, entry, prov))
        if "data" in entry:
            recorded[e.id] = entry["data"]
    return recorded


def has_data(ref: reference.Reference, experiment_id: str) -> bool:
    """Whether the machine holds a valid recording with data of the experiment (a damaged file: no)."""
    try:
        return ref.has(experiment_id)
    except ReferenceDataError:
        return False


def check_problems(recorded: dict) -> list[str]:
    """Every registered recording check's complaints about what this run recorded ({id: data})."""
    return [p for check in experiments.recording_checks() for p in check(recorded)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    registry = experiments.discover()
    if args.list:
        for e in registry.values():
            print(describe(e))
        return 0
    if args.split is not None:
        return split.main(args.split, args.out, ["python", "-m", "helpers.record", *(argv or sys.argv[1:])])
    if args.out is None:
        print("record: --out is required (e.g. --out data/reference/my-gpu)", file=sys.stderr)
        return EXIT_REFUSED
    info = mode.detect()
    if info.mode is not mode.Mode.LIVE:
        print(f"record: refusing to record without a live GPU — {info.reason}", file=sys.stderr)
        return EXIT_REFUSED
    chosen = recordable(registry, args.only)
    if not chosen:
        print(f"record: no experiment matches {args.only}", file=sys.stderr)
        return EXIT_REFUSED
    prov = live.live_provenance(["python", "-m", "helpers.record", *(argv or sys.argv[1:])], args.by)
    try:
        ref = store.machine(args.out, prov)
    except (InputError, ReferenceDataError) as exc:
        print(f"record: refusing: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"recording {len(chosen)} experiment(s) on {info.probe.name} -> {ref.path}", flush=True)
    print("warming up (pinned copies both ways, discarded)", flush=True)
    warm_up()
    gpu.release_pools()
    try:
        recorded = record(chosen, ref, prov, args.quick)
    except ReferenceDataError as exc:  # a file read back unlike what was written: say so, write nothing more
        print(f"record: stopped: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"wrote {len(chosen)} file(s) into {ref.path} ({len(recorded)} with data)")
    problems = check_problems(recorded)
    if problems:
        print("record: THIS RUN FAILED ITS OWN CROSS-CHECK; do not commit these files, record again:\n  "
              + "\n  ".join(problems), file=sys.stderr)
        return EXIT_CROSSCHECK_FAILED
    return 0
