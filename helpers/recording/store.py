"""Writing data/reference: a folder per machine with its manifest, one file per experiment.

Every file is checksummed, validated against its schema, written atomically (a reader or a second
recorder sees the old file or the new one, never a part) and read back through the loader
(helpers.core.reference) before it counts. A recording goes only into the folder of the machine
it was made on: the GPU's name and PCI id must match the manifest's (reference.IDENTITY), else an
InputError names the fields; its driver, CUDA and packages are its own, so recording one experiment
after a driver update replaces that one file, with the new driver in its provenance.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers.core import files, reference
from helpers.core.errors import InputError, ReferenceDataError

MACHINE_GPU_FIELDS = ("name", "pci_id", "memory_bytes", "compute_capability", "copy_engines")
READABLE = 0o644  # recordings are read by everyone who replays them (a grader's sandboxed worker too)


def as_text(doc: dict) -> str:
    """The file's text: sorted keys, one space indent, a final newline (small diffs between recordings)."""
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def sealed(doc: dict, kind: str, source: str) -> dict:
    """`doc` as plain JSON with its checksum, validated as a `kind` file ("machine" or "recording")."""
    doc = json.loads(json.dumps(doc))
    doc.pop("checksum", None)
    doc["checksum"] = reference.checksum(doc)
    reference.validate(doc, kind, source)
    return doc


def manifest_for(name: str, prov: dict) -> dict:
    """The manifest of machine `name` from a live provenance: GPU, link and host, nothing that a
    driver or package update changes."""
    gpu = {k: prov["gpu"][k] for k in MACHINE_GPU_FIELDS if k in prov["gpu"]}
    host = {"cpu": prov.get("host", {}).get("cpu"), "machine": prov.get("host", {}).get("machine")}
    return sealed({"schema_version": reference.SCHEMA_VERSION, "name": name,
                   "machine": {"gpu": gpu, "pcie": prov.get("pcie", {}), "host": host}},
                  "machine", f"{name}/{reference.MANIFEST}")


def machine(folder: Path, prov: dict) -> reference.Reference:
    """The machine in `folder` for recordings with provenance `prov`: its manifest is written if the
    folder has none (exclusively: of two recorders starting at once, one writes it and the other
    reads it); InputError when the manifest names another GPU, or the folder's name is not a machine name."""
    folder = Path(folder)
    doc = manifest_for(folder.name, prov) if _is_name(folder.name) else None
    if doc is None:
        raise InputError(f"{folder}: a machine folder is named in lower-case letters, digits, '-' and '_' "
                         "(e.g. data/reference/h100-pcie)")
    path = folder / reference.MANIFEST
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        files.create_exclusively(path, as_text(doc), mode=READABLE)
    ref = reference.load(folder)
    diffs = reference.identity_differences(ref.machine["gpu"], prov["gpu"])
    if diffs:
        raise InputError(f"{folder} is the machine {ref.label}; this GPU is another ({'; '.join(diffs)}). "
                         f"Record into another machine folder, e.g. --out {folder.parent}/<this-machine>")
    return ref


def _is_name(name: str) -> bool:
    import re

    return re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name) is not None


def recording_doc(ref: reference.Reference, experiment_id: str, entry: dict, prov: dict) -> dict:
    """A recording file's document: `entry` (title, chapter, duration_s, quick, and data or skipped)
    of `experiment_id` on machine `ref`, with provenance `prov`."""
    body = {k: entry[k] for k in ("title", "chapter", "duration_s", "quick", "data", "skipped") if k in entry}
    return {"schema_version": reference.SCHEMA_VERSION, "id": experiment_id, "machine": ref.name,
            "provenance": prov, **body}


def write(ref: reference.Reference, doc: dict) -> reference.Recording:
    """Seal and atomically write one recording into its machine's folder, then read it back through
    the loader and compare: ReferenceDataError when what is there is not what was meant."""
    path = ref.file(doc["id"])
    doc = sealed(doc, "recording", f"{ref.name}/{path.name}")
    files.write_atomically(path, as_text(doc), mode=READABLE)
    back = reference.load_recording(path, ref)
    if back.doc != doc:
        raise ReferenceDataError(f"{path}: what was read back differs from what was written "
                                 "(another recorder wrote it at the same moment?); record it again")
    return back
