"""Files the course writes that must never be left half-written (reference recordings, kernel-lab
transcripts, the learner's predictions): one way to replace a file atomically."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def _flushed_temp(path: Path, text: str, mode: int | None) -> str:
    """`text` in a new temporary file beside `path` (unique, so two writers never share it), flushed
    to disk, with `mode` when given (else the temporary file's 0600); returns its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Replace `path` with `text` so that a reader or a crash sees the old file or the new one,
    never a part: a temporary file in the same folder, flushed to disk, renamed over `path`, and
    on POSIX the folder synced so the rename lasts. The file is private to its owner (0600, as the
    temporary file is made) unless `mode` says otherwise (a recording others read, e.g. a sandboxed
    grader's worker, is 0644)."""
    tmp = _flushed_temp(path, text, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if os.name == "posix":
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def create_exclusively(path: Path, text: str, mode: int | None = None) -> bool:
    """Write `path` whole unless it exists (then leave it: another writer made it first); True when
    this call created it. A hard link of a flushed temporary file is atomic and exclusive."""
    tmp = _flushed_temp(path, text, mode)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
