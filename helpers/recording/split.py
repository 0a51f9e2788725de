"""`python -m helpers.record --split data/reference/h100-pcie.json`: one file per experiment, measured never again.

Recorder 0.1 wrote one file per machine (schema 1): every experiment's data, the provenance of the
first full run, a list of later `--only` runs merged into it ("merged": date, command line,
packages and the ids each recorded) and one checksum. The split verifies that checksum first,
then writes the machine's manifest and one recording per experiment with the provenance of the run
that recorded it (the latest merge naming it, else the full run), the system report as the
recording of `system.report`, and each skip with its reason; every new file is read back through
the loader and its data compared with the old file's, value for value. Any failure refuses
(exit 2) before the old file is removed; success removes it, since the folder now holds all of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.core import experiments, reference
from helpers.core.errors import InputError, ReferenceDataError
from helpers.recording import live, store

EXIT_REFUSED = 2
OLD_KEYS = {"schema_version", "name", "provenance", "system", "experiments", "checksum"}
SYSTEM_REPORT = "system.report"


def read_old(path: Path) -> dict:
    """The old whole-machine file, its structure and checksum verified (ReferenceDataError otherwise)."""
    doc = reference.read_json(path, "whole-machine reference file")
    if set(doc) != OLD_KEYS or doc.get("schema_version") != 1 or not isinstance(doc.get("experiments"), dict):
        raise ReferenceDataError(f"{path}: not a schema-1 whole-machine file (keys {sorted(doc)})")
    if doc["checksum"] != reference.checksum(doc):
        raise ReferenceDataError(f"{path}: checksum mismatch — changed after the recorder wrote it; not split")
    return doc


def provenance_of(old: dict, experiment_id: str, origin: dict) -> dict:
    """The provenance of the run that recorded `experiment_id`: the full run's, with date, command
    line, packages and recorder version of the latest merge that names it; where it came from in `origin`."""
    base = {k: v for k, v in old["provenance"].items() if k != "merged"}
    for merge in old["provenance"].get("merged", []):
        if experiment_id in merge["experiments"] or experiment_id in merge.get("skipped", {}):
            base.update({k: merge[k] for k in ("date", "command_line", "packages", "recorder_version") if k in merge})
    base.setdefault("cuda_driver_api", None)
    return {**base, "git_commit": None, "recorded_by": None, "split_from": origin}


def entries(old: dict) -> dict[str, dict]:
    """{id: entry} for every recording the old file holds: its experiments, its system report, its skips."""
    registry = experiments.discover()
    out = {eid: dict(entry) for eid, entry in old["experiments"].items()}
    system = {k: v for k, v in old["system"].items() if k != "skipped_experiments"}
    report = registry[SYSTEM_REPORT]
    out[SYSTEM_REPORT] = {"title": report.title, "chapter": report.chapter, "duration_s": 0.0, "quick": False,
                          "data": system}
    for eid, why in old["system"].get("skipped_experiments", {}).items():
        e = registry.get(eid)
        out.setdefault(eid, {"title": e.title if e else eid, "chapter": e.chapter if e else 0, "duration_s": 0.0,
                             "quick": False, "skipped": why})
    return out


def split(old_path: Path, folder: Path, command_line: list[str]) -> list[Path]:
    """Write `folder` (manifest and one recording per experiment) from `old_path`; the paths written.
    Refuses (InputError, ReferenceDataError) a bad old file or a folder that already holds recordings."""
    old = read_old(old_path)
    if folder.exists() and any(folder.iterdir()):
        raise InputError(f"{folder} already holds files; the split writes a machine folder once")
    origin = {"file": old_path.name, "checksum": old["checksum"], "split_at_commit": live.git_commit()}
    ref = store.machine(folder, {**old["provenance"], "command_line": command_line})
    written = []
    for eid, entry in sorted(entries(old).items()):
        back = store.write(ref, store.recording_doc(ref, eid, entry, provenance_of(old, eid, origin)))
        same = back.doc.get("data") == entry.get("data") and back.doc.get("skipped") == entry.get("skipped")
        if not same or reference.checksum(back.doc) != back.doc["checksum"]:
            raise ReferenceDataError(f"{back.path}: read back, it differs from {old_path.name}'s {eid}")
        written.append(back.path)
    if read_old(old_path)["checksum"] != old["checksum"]:
        raise ReferenceDataError(f"{old_path} changed while it was being split; split it again")
    return written


def main(old_path: Path, folder: Path | None, command_line: list[str]) -> int:
    """The `--split` command: split, report, remove the old file; exit 2 with the reason on any refusal."""
    folder = folder or old_path.with_suffix("")
    try:
        written = split(old_path, folder, command_line)
    except (InputError, ReferenceDataError) as exc:
        print(f"record --split: refusing: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    old_path.unlink()
    print(f"split {old_path} into {folder}: manifest and {len(written)} recordings, each read back and "
          f"compared; {old_path.name} removed")
    print(json.dumps(sorted(p.name for p in written)))
    return 0
