"""Transcripts: the kernel lab's recordings, replayed where QEMU is absent.

A transcript is what one experiment returned when it ran in the VM, written by the recorder
(``python -m helpers.measure.kernel_vm record``) to ``data/kernel_lab/<experiment id>.json``
with its provenance (kernel, QEMU, accelerator, device, host, date, command line) and a sha256
checksum over all of it (the reference files' own, helpers.core.reference.checksum): a
hand-edited transcript is refused. These are not GPU recordings and never go into
data/reference/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.core import config, files, reference
from helpers.core.errors import ReferenceDataError

if TYPE_CHECKING:
    from helpers.core.evidence import Evidence

FORMAT = 1
RECORD_COMMAND = "python -m helpers.measure.kernel_vm record"


def folder() -> Path:
    """data/kernel_lab of this checkout."""
    return config.REPO_ROOT / "data" / "kernel_lab"


def path_of(experiment_id: str) -> Path:
    return folder() / f"{experiment_id}.json"


@dataclass(frozen=True)
class Transcript:
    """One validated transcript."""

    path: Path
    doc: dict

    @property
    def data(self) -> dict:
        return self.doc["data"]

    @property
    def provenance(self) -> dict:
        return self.doc["provenance"]

    @property
    def label(self) -> str:
        """'Linux 6.1.0-56-amd64 under QEMU 7.2.22 (TCG), bochs-display · 2026-11-23'."""
        return label(self.provenance)


def label(vm: dict) -> str:
    """One line naming the kernel, QEMU, the accelerator, the device and the date of a VM run."""
    qemu = str(vm.get("qemu", "?")).split(" ")[0]
    return (f"Linux {vm.get('kernel_release', '?')} under QEMU {qemu} ({vm.get('accel', '?')}), "
            f"{vm.get('device', '?')} · {str(vm.get('date', ''))[:10]}")


def source_line(ev: Evidence) -> str:
    """Where a kernel-lab result came from, for captions: 'this machine — Linux … under QEMU …' for a
    live run, else the Evidence's own source (the transcript it replays)."""
    return f"this machine — {label(ev.data['vm'])}" if ev.live else ev.source


def write(experiment_id: str, title: str, data: dict, vm: dict, command_line: list[str]) -> Path:
    """Checksum and write a transcript atomically; returns its path."""
    doc = {"format": FORMAT, "experiment": experiment_id, "title": title,
           "provenance": {**vm, "command_line": command_line}, "data": data}
    doc = json.loads(json.dumps(doc))
    doc["checksum"] = reference.checksum(doc)
    out = path_of(experiment_id)
    files.write_atomically(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return out


def load(experiment_id: str, path: Path | None = None) -> Transcript:
    """The transcript of `experiment_id`, checked (format, experiment, checksum); else
    ReferenceDataError naming the file and the command that records it."""
    p = path or path_of(experiment_id)
    fix = f"record it with `{RECORD_COMMAND} --only {experiment_id}` (needs QEMU)"
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise ReferenceDataError(f"{p}: no kernel-lab transcript of {experiment_id!r}; {fix}") from None
    except (OSError, ValueError) as exc:
        raise ReferenceDataError(f"{p}: not a readable transcript ({type(exc).__name__}: {exc}); {fix}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("experiment") != experiment_id \
            or not isinstance(doc.get("data"), dict) or not isinstance(doc.get("provenance"), dict):
        raise ReferenceDataError(f"{p}: not a format-{FORMAT} transcript of {experiment_id!r}; {fix}")
    if doc.get("checksum") != reference.checksum(doc):
        raise ReferenceDataError(f"{p}: checksum mismatch — the transcript was changed after the recorder "
                                 f"wrote it; {fix}")
    return Transcript(p, doc)
