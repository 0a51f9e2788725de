"""Reference data: results recorded on real GPUs by the course's recorder, read for replay.

Files live in data/reference/<name>.json. Each one carries its provenance (GPU, driver,
CUDA, packages, PCIe link, date, command line), the recording machine's system report, the
data of every registered experiment, and a sha256 checksum over all of it. The loader
validates the schema and the checksum, so a hand-edited file is refused: reference numbers
come from the recorder on real hardware, never from a keyboard.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from helpers.core import config
from helpers.core.errors import ReferenceDataError
from helpers.core.provenance import label as _label

SCHEMA_VERSION = 1


def data_dir() -> Path:
    """data/reference of this checkout (COURSE_DATA_DIR overrides, e.g. for tests)."""
    return config.data_dir()


def schema() -> dict:
    """The JSON schema every reference file must satisfy."""
    text = resources.files("helpers.core").joinpath(f"schema/reference-v{SCHEMA_VERSION}.json").read_text()
    return json.loads(text)


def checksum(doc: dict) -> str:
    """sha256 over the canonical JSON of everything but the checksum field itself."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def validate(doc: dict, source: str = "reference data") -> None:
    """Raise ReferenceDataError naming `source` if doc breaks the schema or its checksum."""
    # Imported here, not with the module: every notebook imports this module, few validate a file
    # live, and where Jupyter is installed jsonschema brings rfc3987_syntax, whose import builds
    # a parser (0.9 s on the course's 2-core CI machine) for an "iri" format no schema here uses.
    import jsonschema

    try:
        jsonschema.validate(doc, schema(), format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ReferenceDataError(f"{source}: schema violation at {where}: {exc.message}") from None
    if doc["checksum"] != checksum(doc):
        raise ReferenceDataError(f"{source}: checksum mismatch — the file was changed after the "
                                 "recorder wrote it; re-record it with `python -m helpers.record`")


@dataclass(frozen=True)
class Reference:
    """One validated reference file."""

    path: Path
    doc: dict

    @property
    def name(self) -> str:
        return self.doc["name"]

    @property
    def provenance(self) -> dict:
        return self.doc["provenance"]

    @property
    def label(self) -> str:
        """GPU · driver · CUDA · link · date, for figure captions."""
        return _label(self.provenance)

    def has(self, experiment_id: str) -> bool:
        return experiment_id in self.doc["experiments"]

    def experiment(self, experiment_id: str) -> dict:
        """The recorded data of one experiment; a clear error if this file lacks it."""
        try:
            return self.doc["experiments"][experiment_id]["data"]
        except KeyError:
            have = ", ".join(sorted(self.doc["experiments"])) or "none"
            raise ReferenceDataError(
                f"{self.path.name}: no recording of experiment {experiment_id!r} (it has: {have}); "
                "re-record on a GPU with `python -m helpers.record`") from None


def recorded_list(data, experiment_id: str, key: str, what: str | None = None) -> list:
    """`data[key]` of a recorded experiment, which must be a non-empty list.

    Otherwise a ReferenceDataError naming the experiment, what is missing (`what`, by default
    "'<key>' list") and the command that records it again.
    """
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ReferenceDataError(f"experiment {experiment_id}: the data has no {what or repr(key) + ' list'}; "
                                 f"re-record it with `python -m helpers.record --only {experiment_id}` "
                                 "(data/reference/<machine>.json)")
    return items


def load(name_or_path: str | os.PathLike | None = None) -> Reference:
    """Load and validate a reference file by name (data/reference/<name>.json) or path."""
    path = _resolve(name_or_path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        have = ", ".join(list_names()) or "none"
        raise ReferenceDataError(f"{path}: no such reference file (available: {have})") from None
    except (OSError, UnicodeDecodeError) as exc:  # a directory, unreadable, or not text at all
        raise ReferenceDataError(f"{path.name}: cannot be read as a reference file "
                                 f"({type(exc).__name__}: {exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReferenceDataError(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno}); "
                                 "the file may be truncated") from None
    if not isinstance(doc, dict):
        raise ReferenceDataError(f"{path.name}: top level must be an object, got {type(doc).__name__}")
    validate(doc, path.name)
    return Reference(path, doc)


def _resolve(name_or_path) -> Path:
    if name_or_path is None:
        name_or_path = default_reference_name()
        if name_or_path is None:
            raise ReferenceDataError(f"{data_dir()}: no reference files; record one on a GPU "
                                     "with `python -m helpers.record --out data/reference/NAME.json`")
    p = Path(name_or_path)
    if p.suffix == ".json" or os.sep in str(name_or_path):
        return p
    return data_dir() / f"{name_or_path}.json"


def list_names() -> list[str]:
    """Names of the reference files present."""
    d = data_dir()
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def default_reference_name() -> str | None:
    """COURSE_REFERENCE, else the course's primary machine, else the first file present."""
    names = list_names()
    want = config.reference_name()
    if want:
        return want
    if config.DEFAULT_REFERENCE in names:
        return config.DEFAULT_REFERENCE
    return names[0] if names else None
