"""A submitted lab notebook, read as data: the learner's solution cells and nothing else.

The grader never runs a submitted notebook as a whole. It takes from it only the code of the
cells whose nbgrader grade_id names a solution cell of the instructor's source lab, and
pairs them with the lab's own setup cell(s), taken from the source (the import cell before
the first solution cell). Everything else a submission carries — check cells, their
outputs, edited metadata, nbgrader checksums, cells the learner added — is ignored, so no
edit of it changes a grade or stops the class's run; a file that is not a notebook at all is
that student's 0 with the reason (`SubmissionError`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from helpers.core.errors import CourseError

LAB_NAME = re.compile(r"^(lab\d+)_[a-z0-9_]+\.ipynb$")
MAX_BYTES = 20 << 20          # one notebook
MAX_STUDENT_BYTES = 64 << 20  # every notebook of one student together
NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NOFOLLOW_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO cannot hang the read


class SubmissionError(CourseError):
    """A submission that cannot be read as the lab's notebook (the student's 0, with this reason)."""


@dataclass(frozen=True, kw_only=True)
class LabSource:
    """What the grader takes from the instructor's source lab."""

    lab: str
    name: str
    setup: tuple[str, ...]          # the lab's setup cell(s), run before the learner's cells
    solution_ids: tuple[str, ...]   # grade_ids of the solution cells, in order
    points: dict                    # grade_id -> points of the graded cells


def _cells(nb: dict) -> list[dict]:
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise SubmissionError("not a Jupyter notebook (no list of cells)")
    return [c for c in cells if isinstance(c, dict)]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _meta(cell: dict) -> dict:
    m = cell.get("metadata")
    m = m.get("nbgrader") if isinstance(m, dict) else None
    return m if isinstance(m, dict) else {}


def lab_source(path: Path) -> LabSource:
    """The setup cells, solution ids and points of the instructor's source lab at `path`."""
    m = LAB_NAME.match(path.name)
    if not m:
        raise SubmissionError(f"{path.name}: a lab is named labN_topic.ipynb")
    cells = [c for c in _cells(json.loads(path.read_text())) if c.get("cell_type") == "code"]
    setup, sol, points = [], [], {}
    for c in cells:
        meta = _meta(c)
        if meta.get("solution"):
            sol.append(meta["grade_id"])
        elif meta.get("grade"):
            points[meta["grade_id"]] = float(meta.get("points", 0))
        elif not sol:
            setup.append(_source(c))
    return LabSource(lab=m.group(1), name=path.name, setup=tuple(setup), solution_ids=tuple(sol), points=points)


def solution_cells(data: bytes | Path, source: LabSource) -> dict[str, str]:
    """{grade_id: code} of the learner's solution cells in a submitted notebook (its bytes, as
    `read_class` read them; a Path is read through the same no-follow reader)."""
    if isinstance(data, Path):
        data = read_one(data)
    if len(data) > MAX_BYTES:
        raise SubmissionError(f"the notebook is {len(data) >> 20} MiB, more than {MAX_BYTES >> 20} MiB")
    try:
        nb = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SubmissionError(f"not a readable notebook (invalid JSON: {type(exc).__name__}: {exc})"[:300]) from None
    out: dict[str, str] = {}
    for c in _cells(nb):
        gid = _meta(c).get("grade_id")
        if c.get("cell_type") == "code" and gid in source.solution_ids:
            out[gid] = out.get(gid, "") + _source(c) + "\n"
    if not out:
        raise SubmissionError("none of the lab's solution cells is in it (their nbgrader grade_ids are missing)")
    return {gid: out[gid] for gid in source.solution_ids if gid in out}


# ----------------------------------------------------------------------------- reading a class
@dataclass(frozen=True)
class Submitted:
    """One notebook of one student, read once: its bytes, or why it was refused."""

    name: str
    data: bytes | None
    refused: str | None = None


def _kind(st: os.stat_result) -> str:
    m = st.st_mode
    return ("a symbolic link" if stat.S_ISLNK(m) else "a device" if stat.S_ISCHR(m) or stat.S_ISBLK(m)
            else "a FIFO" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m) else "a folder" if stat.S_ISDIR(m)
            else "not a plain file")


def _read_at(dir_fd: int, name: str, cap: int) -> bytes:
    """The bytes of the plain file `name` in the folder `dir_fd`, never following a link; refused
    (SubmissionError, the reason) when it is a symlink, a device, a FIFO, a socket, a hard link
    (a file with another name, possibly outside the submission) or larger than `cap`."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError(f"{name} is {_kind(st)}, not a plain file: refused (submissions are read, never followed)")
    try:
        fd = os.open(name, NOFOLLOW_FILE, dir_fd=dir_fd)
    except OSError as exc:
        raise SubmissionError(f"{name} could not be opened as a plain file ({exc.strerror}): refused") from None
    try:
        st2 = os.fstat(fd)
        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(st2.st_mode):
            raise SubmissionError(f"{name} changed while it was read: refused")
        if st2.st_nlink > 1:
            raise SubmissionError(f"{name} is a hard link ({st2.st_nlink} names for one file, maybe outside the "
                                  "submission): refused; submit a copy")
        if st2.st_size > cap:
            raise SubmissionError(f"{name} is {st2.st_size >> 20} MiB, more than {cap >> 20} MiB: refused")
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise SubmissionError(f"{name} is more than {cap >> 20} MiB: refused")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_one(path: Path) -> bytes:
    """One notebook file, read through a no-follow handle (refused as `_read_at` says)."""
    fd = os.open(path.parent, NOFOLLOW_DIR & ~os.O_NOFOLLOW)  # the folder the caller named may be a link
    try:
        return _read_at(fd, path.name, MAX_BYTES)
    finally:
        os.close(fd)


def _entries(dir_fd: int) -> list[tuple[str, os.stat_result]]:
    with os.scandir(dir_fd) as it:
        names = sorted(e.name for e in it)
    return [(n, os.stat(n, dir_fd=dir_fd, follow_symlinks=False)) for n in names]


def _student(dir_fd: int, depth: int = 0, budget: list | None = None) -> list[Submitted]:
    """The notebooks of one student's folder (directly inside, or one folder deeper as nbgrader's
    <student>/<lab>/), each read once; a notebook that is not a plain file is listed as refused."""
    budget = [MAX_STUDENT_BYTES] if budget is None else budget
    out: list[Submitted] = []
    for name, st in _entries(dir_fd):
        if name.startswith(".") or name == ".ipynb_checkpoints":
            continue
        if stat.S_ISDIR(st.st_mode) and depth == 0:
            fd = os.open(name, NOFOLLOW_DIR, dir_fd=dir_fd)
            try:
                out += _student(fd, 1, budget)
            finally:
                os.close(fd)
        elif name.endswith(".ipynb"):
            try:
                data = _read_at(dir_fd, name, min(MAX_BYTES, budget[0]))
                budget[0] -= len(data)
                out.append(Submitted(name, data))
            except (SubmissionError, OSError) as exc:
                out.append(Submitted(name, None, str(exc)))
        elif stat.S_ISLNK(st.st_mode) and depth == 0:
            out.append(Submitted(name, None, f"{name} is a symbolic link: refused (submissions are read, never followed)"))
    return out


def read_class(folder: Path) -> dict[str, list[Submitted] | str]:
    """{student: [Submitted] or the reason the student's folder is refused} of a folder of
    notebooks (one student, "submission") or of per-student folders. Every folder below `folder`
    is opened without following links (O_NOFOLLOW, walked by descriptor), so a student folder
    that is a symlink to another's, or a notebook that is a symlink to the instructor's file,
    is refused with the reason; each student's folder is read once, capped in size."""
    top = os.open(folder, NOFOLLOW_DIR & ~os.O_NOFOLLOW)  # the folder the instructor named
    try:
        entries = _entries(top)
        if any(LAB_NAME.match(n) and not stat.S_ISDIR(st.st_mode) for n, st in entries):
            return {"submission": [s for s in _student(top, 1) if LAB_NAME.match(s.name)]}
        out: dict[str, list[Submitted] | str] = {}
        for name, st in entries:
            if name.startswith("."):
                continue
            if stat.S_ISLNK(st.st_mode):
                out[name] = "the student's folder is a symbolic link: refused (submissions are read, never followed)"
            elif stat.S_ISDIR(st.st_mode):
                try:
                    fd = os.open(name, NOFOLLOW_DIR, dir_fd=top)
                except OSError as exc:
                    out[name] = f"the student's folder could not be opened ({exc.strerror}): refused"
                    continue
                try:
                    out[name] = _student(fd)
                finally:
                    os.close(fd)
        return out
    finally:
        os.close(top)
