"""Reference data: experiments recorded on real GPUs by the course's recorder, read for replay.

One folder per reference machine, one file per experiment:

    data/reference/h100-pcie/manifest.json              what identifies the machine (GPU, PCI id, link, host)
    data/reference/h100-pcie/copy_engines.bidirectional.json   one experiment's data and its own provenance

Each recording carries its own provenance (driver, CUDA, packages, date, git commit, command line,
who recorded it) and its own sha256 checksum; the manifest has one too. The loader validates the
schema and the checksum of every file it reads, checks a recording sits in its own machine's
folder under its own id and was made on the GPU the manifest names, so a file edited by hand, or
copied from another machine's folder, is refused: reference numbers come from the recorder on
real hardware, never from a keyboard. This module only reads; helpers.recording writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from helpers.core import config, provenance
from helpers.core.errors import ReferenceDataError

SCHEMA_VERSION = 2
MANIFEST = "manifest.json"
# The fields of a GPU that say which machine a recording belongs to: a recording made on another GPU
# model (or another board of it) goes to another machine folder.
IDENTITY = ("name", "pci_id")


def data_dir() -> Path:
    """data/reference of this checkout (COURSE_DATA_DIR overrides, e.g. for tests)."""
    return config.data_dir()


@lru_cache(maxsize=2)
def schema(kind: str) -> dict:
    """The JSON schema of a `kind` file: "machine" (a manifest) or "recording" (one experiment)."""
    text = resources.files("helpers.core").joinpath(f"schema/{kind}-v{SCHEMA_VERSION}.json").read_text()
    return json.loads(text)


def checksum(doc: dict) -> str:
    """sha256 over the canonical JSON of everything but the checksum field itself."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def validate(doc: dict, kind: str, source: str = "reference data") -> None:
    """Raise ReferenceDataError naming `source` if doc breaks the `kind` schema or its checksum."""
    # Imported here, not with the module: every notebook imports this module, few validate a file
    # live, and where Jupyter is installed jsonschema brings rfc3987_syntax, whose import builds
    # a parser (0.9 s on the course's 2-core CI machine) for an "iri" format no schema here uses.
    import jsonschema

    try:
        jsonschema.validate(doc, schema(kind), format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ReferenceDataError(f"{source}: schema violation at {where}: {exc.message}") from None
    if doc["checksum"] != checksum(doc):
        raise ReferenceDataError(f"{source}: checksum mismatch — the file was changed after the "
                                 "recorder wrote it; re-record it with `python -m helpers.record`")


def read_json(path: Path, what: str) -> dict:
    """The JSON object in `path`; ReferenceDataError naming the file when it is absent, unreadable,
    truncated or not an object."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ReferenceDataError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:  # a directory, unreadable, or not text at all
        raise ReferenceDataError(f"{path}: cannot be read as a {what} ({type(exc).__name__}: {exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReferenceDataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); "
                                 "the file may be truncated") from None
    if not isinstance(doc, dict):
        raise ReferenceDataError(f"{path}: top level must be an object, got {type(doc).__name__}")
    return doc


def identity(gpu: dict) -> dict:
    """The GPU fields that identify a machine (IDENTITY), from a manifest's or a provenance's `gpu`."""
    return {k: (gpu or {}).get(k) for k in IDENTITY}


def identity_differences(manifest_gpu: dict, other_gpu: dict) -> list[str]:
    """'gpu.name: machine X, recording Y' for each IDENTITY field where two GPUs differ."""
    a, b = identity(manifest_gpu), identity(other_gpu)
    return [f"gpu.{k}: machine {a[k]!r}, recording {b[k]!r}" for k in IDENTITY if a[k] != b[k]]


@dataclass(frozen=True)
class Recording:
    """One validated recording: one experiment on one machine, with its own provenance."""

    path: Path
    doc: dict

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def provenance(self) -> dict:
        return self.doc["provenance"]

    @property
    def label(self) -> str:
        """GPU · driver · CUDA · link · date of this recording, for figure captions."""
        return provenance.label(self.provenance)

    @property
    def skipped(self) -> str | None:
        """Why the recorder could not run this experiment on the machine (None: it has data)."""
        return self.doc.get("skipped")

    @property
    def data(self) -> dict:
        """The recorded data; ReferenceDataError with the recorder's reason when it was skipped."""
        if self.skipped is not None:
            raise ReferenceDataError(f"{self.doc['machine']}: {self.id} was not recorded there: {self.skipped}")
        return self.doc["data"]


@dataclass(frozen=True)
class Reference:
    """One reference machine: its validated manifest and the folder of its recordings."""

    path: Path  # the machine's folder
    manifest: dict

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def machine(self) -> dict:
        """What identifies the machine: gpu (name, PCI id, memory), pcie link, host."""
        return self.manifest["machine"]

    @property
    def label(self) -> str:
        """The machine alone (GPU, board, link): each recording's `label` adds its driver, CUDA and date."""
        return f"{provenance.gpu_label(self.machine['gpu'])} · {self.machine['pcie'].get('current') or 'PCIe ?'}"

    def file(self, experiment_id: str) -> Path:
        return self.path / f"{experiment_id}.json"

    def ids(self) -> list[str]:
        """The ids this machine has a recording file for (recorded or skipped)."""
        return sorted(p.stem for p in self.path.glob("*.json") if p.name != MANIFEST)

    def has(self, experiment_id: str) -> bool:
        """True when the machine has data for the experiment (a file that is not a skip)."""
        return self.file(experiment_id).exists() and self.recording(experiment_id).skipped is None

    def recording(self, experiment_id: str) -> Recording:
        """The validated recording of one experiment; a clear error if this machine lacks it."""
        path = self.file(experiment_id)
        if not path.exists():
            have = ", ".join(self.ids()) or "none"
            raise ReferenceDataError(
                f"{self.name}: no recording of experiment {experiment_id!r} (it has: {have}); record it on a GPU "
                f"with `python -m helpers.record --only {experiment_id} --out {self.path}`")
        return load_recording(path, self)

    def experiment(self, experiment_id: str) -> dict:
        """The recorded data of one experiment (see `recording` for its provenance)."""
        return self.recording(experiment_id).data


def load_recording(path: Path, machine: Reference) -> Recording:
    """Read and validate one recording of `machine`: schema, checksum, its id and machine, its GPU."""
    doc = read_json(path, "recording")
    source = f"{machine.name}/{path.name}"
    validate(doc, "recording", source)
    if doc["id"] != path.stem or doc["machine"] != machine.name:
        raise ReferenceDataError(f"{source}: holds {doc['id']!r} of machine {doc['machine']!r}; a recording "
                                 "lives in its machine's folder under its own id (moved or renamed by hand?)")
    diffs = identity_differences(machine.machine["gpu"], doc["provenance"]["gpu"])
    if diffs:
        raise ReferenceDataError(f"{source}: recorded on another GPU than the machine's manifest names "
                                 f"({'; '.join(diffs)})")
    return Recording(path, doc)


def recorded_list(data, experiment_id: str, key: str, what: str | None = None) -> list:
    """`data[key]` of a recorded experiment, which must be a non-empty list.

    Otherwise a ReferenceDataError naming the experiment, what is missing (`what`, by default
    "'<key>' list") and the command that records it again.
    """
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ReferenceDataError(f"experiment {experiment_id}: the data has no {what or repr(key) + ' list'}; "
                                 f"re-record it with `python -m helpers.record --only {experiment_id}` "
                                 "(data/reference/<machine>/)")
    return items


def load(name_or_path: str | os.PathLike | None = None) -> Reference:
    """Load and validate a reference machine by name (data/reference/<name>/) or by the path of
    its folder or manifest."""
    folder = _resolve(name_or_path)
    if not (folder / MANIFEST).exists():
        have = ", ".join(list_names()) or "none"
        raise ReferenceDataError(f"{folder}: no reference machine here (no {MANIFEST}; available: {have})")
    doc = read_json(folder / MANIFEST, "machine manifest")
    validate(doc, "machine", f"{folder.name}/{MANIFEST}")
    if doc["name"] != folder.name:
        raise ReferenceDataError(f"{folder}/{MANIFEST}: names machine {doc['name']!r}; a machine's folder "
                                 "is named for it (renamed by hand?)")
    return Reference(folder, doc)


def _resolve(name_or_path) -> Path:
    if name_or_path is None:
        name_or_path = default_reference_name()
        if name_or_path is None:
            raise ReferenceDataError(f"{data_dir()}: no reference machines; record one on a GPU "
                                     "with `python -m helpers.record --out data/reference/NAME`")
    p = Path(name_or_path)
    if p.name == MANIFEST:
        return p.parent
    if os.sep in str(name_or_path):
        return p
    return data_dir() / str(name_or_path)


def list_names() -> list[str]:
    """Names of the reference machines present (folders with a manifest)."""
    d = data_dir()
    return sorted(p.parent.name for p in d.glob(f"*/{MANIFEST}")) if d.is_dir() else []


def default_reference_name() -> str | None:
    """COURSE_REFERENCE, else the course's primary machine, else the first one present."""
    names = list_names()
    want = config.reference_name()
    if want:
        return want
    if config.DEFAULT_REFERENCE in names:
        return config.DEFAULT_REFERENCE
    return names[0] if names else None
