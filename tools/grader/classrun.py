"""Grade a class: every student's every lab, each in its own sandboxed worker; nobody is skipped.

For one lab of one student: the solution cells are read from the notebook (submission.py),
a worker starts in a fresh scratch copy (session.py, sandbox.py), runs the lab's setup cell
and the learner's cells, and each graded part of the lab (`GRADED` of `instructor.labs.labN_checks`) runs
here, calling the learner's functions in the worker on hidden cases drawn here. Whatever
happens to one submission — a notebook that is not one, edited metadata, a crash, an endless
loop, an output flood, a killed worker — is that student's 0 on the parts it touched, with the
reason; the run goes on to the next part (in a new worker) and the next student.
"""

from __future__ import annotations

import hashlib
import importlib
import secrets
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from helpers.labs import grading
from helpers.labs.grading import CheckFailed, wire
from tools.grader import ownwork, sandbox
from tools.grader.api import Part, PartTimeout, Student, StudentRaised
from tools.grader.session import Session, WorkerGone
from tools.grader.submission import (
    LAB_NAME,
    LabSource,
    SubmissionError,
    Submitted,
    lab_source,
    read_class,
    read_one,
    solution_cells,
)

MAX_WORKERS = 3  # workers one lab of one student may use (a new one after each that died)


@dataclass(kw_only=True)
class CheckResult:
    """One graded part of one student's lab."""

    lab: str
    grade_id: str
    score: float
    max_score: float
    status: str  # OK; FAIL (the part is wrong); ERROR (the submission could not be graded); CRASH (grader bug)
    feedback: str
    seed: int | None = None


def printable(text: str, limit: int = 2000) -> str:
    """Feedback on one line, control characters shown escaped: text that came from a learner
    (an exception's message) cannot forge lines of the report or move the terminal's cursor."""
    text = text.replace("\r\n", "\n").replace("\n", " | ")
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)[:limit]


#: what the grader loads of a lab (labs/README.md, "Adding a lab to the grader", documents these
#: names; tests/labs/test_authoring_api.py holds the two to each other)
CHECKS_MODULE = "instructor.labs.{lab}_checks"
PARTS_NAME = "GRADED"          # a tuple of api.Part, in the notebook's order
WIRE_TYPES_NAME = "WIRE_TYPES"  # optional: the course dataclasses the lab's calls pass (helpers.labs.grading.wire)


def lab_checks(lab: str):
    """The instructor-only module of `lab`'s graded parts (instructor.labs.<lab>_checks)."""
    return importlib.import_module(CHECKS_MODULE.format(lab=lab))


def lab_parts(lab: str) -> tuple[Part, ...]:
    """The graded parts of `lab`: its checks module's GRADED."""
    return tuple(getattr(lab_checks(lab), PARTS_NAME))


def lab_wire_types(lab: str) -> tuple[type, ...]:
    """The course dataclasses that may cross in `lab`'s calls: its checks module's WIRE_TYPES (or none)."""
    return tuple(getattr(lab_checks(lab), WIRE_TYPES_NAME, ()))


def part_seed(base: int, grade_id: str) -> int:
    """The hidden-case seed of one part, derived from the submission's seed (reproducible)."""
    return int.from_bytes(hashlib.sha256(f"{base}:{grade_id}".encode()).digest()[:4], "big") >> 1


class LabRun:
    """One lab of one student: a worker (restarted after it dies) and the parts, in order."""

    def __init__(self, root: Path, source: LabSource, cells: dict[str, str], notebook: bytes, *,
                 sandboxed: bool, limits: sandbox.Limits, seed: int | None = None,
                 deadline: float | None = None) -> None:
        self.root, self.source, self.cells, self.notebook = root, source, cells, notebook
        self.seed = seed
        self.deadline = time.monotonic() + limits.submission_s if deadline is None else deadline
        self.sandboxed, self.limits = sandboxed, limits
        self.sessions: dict[tuple, Session] = {}  # one worker per kind: plain, or with modules redacted
        self.session: Session | None = None       # the one the current part uses
        self.started = self.restarts = 0
        self.load_errors: dict[str, str] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix=f"grade-{source.lab}-"))

    def worker(self, own_work: tuple = ()) -> Session:
        """The live worker for a part (own_work: the modules redacted in it, tools/grader/ownwork.py),
        started (and the learner's cells loaded) when needed."""
        old = self.sessions.get(own_work)
        if old is not None and old.alive:
            self.session = old
            return old
        if old is not None:
            self.restarts += 1
        if self.restarts >= MAX_WORKERS:
            raise WorkerGone(f"{MAX_WORKERS} workers died on this submission; its remaining parts are not run")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerGone(f"this lab took more than {self.limits.submission_s:.0f} s")
        self.started += 1
        scratch = self.tmp / f"scratch{self.started}"
        scratch.mkdir()
        (scratch / self.source.name).write_bytes(self.notebook)  # the learner's scratch copy, from the bytes read once
        redacted = None
        if own_work:
            folder = self.tmp / f"redacted{self.started}"
            folder.mkdir()
            folder.chmod(0o755)
            redacted = ownwork.overlay(self.root, dict(own_work), folder)
        self.session = session = Session(self.root, scratch, sandboxed=self.sandboxed, limits=self.limits,
                                         redacted=redacted)
        self.sessions[own_work] = session
        reply = session.request({"op": "load", "setup": list(self.source.setup), "cells": self.cells,
                                 "types": wire.allowed_names()}, min(self.limits.load_s, left))
        errors = reply.get("errors") if reply.get("op") == "loaded" else None
        if not isinstance(errors, dict):
            session.close()
            raise WorkerGone("the worker did not load the cells (protocol broken)")
        setup = {k: v for k, v in errors.items() if str(k).startswith("setup")}
        if setup:
            session.close()
            raise WorkerGone(f"the lab's own setup cell failed in the sandbox: {setup}")
        self.load_errors = {str(k): v for k, v in errors.items()}
        return session

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def grade(self, part: Part, seed: int, deadline: float | None = None) -> CheckResult:
        """Run one part; its result, whatever the learner's code did."""
        def result(score: float, status: str, feedback: str = "") -> CheckResult:
            return CheckResult(lab=self.source.lab, grade_id=part.grade_id, score=score,
                               max_score=part.points, status=status, feedback=printable(feedback), seed=seed)

        if time.monotonic() > self.deadline:
            return result(0, "ERROR", f"not run: this lab took more than {self.limits.submission_s:.0f} s")
        try:
            student = Student(self.worker(part.own_work), self.limits.call_s, time.monotonic() + self.limits.part_s,
                              lab_seed=self.seed, lab_deadline=self.deadline)
            part.run(grading.check(part.grade_id), student, seed)
            return result(part.points, "OK")
        except CheckFailed as exc:
            return result(0, "FAIL", str(exc) + self._cell_note())
        except AssertionError as exc:  # a property test's assertion
            return result(0, "FAIL", (str(exc) or "an assertion about your code failed") + self._cell_note())
        except StudentRaised as exc:
            return result(0, "FAIL", exc.feedback() + self._cell_note())
        except PartTimeout as exc:
            return result(0, "FAIL", f"{exc} (more than {self.limits.part_s:.0f} s)")
        except wire.WireError as exc:
            return result(0, "FAIL", f"your code returned something that is not plain data: {exc}")
        except WorkerGone as exc:
            tail = self.session.output(300).strip() if self.session is not None else ""
            return result(0, "ERROR", f"your code's process stopped: {exc}"
                          + (f"; its last output: {tail[-300:]!r}" if tail else ""))
        except Exception as exc:  # noqa: BLE001 - a bug of the grader's: never the class's end
            return result(0, "CRASH", f"the grader itself failed on this part ({type(exc).__name__}: {exc}); "
                          "tell the course maintainers\n" + traceback.format_exc(limit=3))

    def _cell_note(self) -> str:
        bad = {k: v for k, v in self.load_errors.items() if not k.startswith("setup")}
        if not bad:
            return ""
        gid, e = next(iter(bad.items()))
        return f" (note: your cell {gid} did not run: {e.get('name')}: {e.get('message')})"


def grade_lab(root: Path, notebook: bytes | Path, source_path: Path, *, seed: int | None = None,
              sandboxed: bool = True, limits: sandbox.Limits = sandbox.DEFAULT_LIMITS) -> list[CheckResult]:
    """The results of every graded part of one submitted lab notebook (its bytes, read once by
    `read_class`; a Path is read through the same no-follow reader). The whole lab, every part
    and every worker together, ends by `limits.submission_s` after it starts."""
    source = lab_source(source_path)
    parts = lab_parts(source.lab)
    wire.allow(lab_wire_types(source.lab))  # this lab's dataclasses, and no other lab's
    base = secrets.randbelow(2**31) if seed is None else int(seed)
    deadline = time.monotonic() + limits.submission_s
    try:
        data = read_one(notebook) if isinstance(notebook, Path) else notebook
        cells = solution_cells(data, source)
    except (SubmissionError, OSError) as exc:
        return [CheckResult(lab=source.lab, grade_id=p.grade_id, score=0, max_score=p.points, status="ERROR",
                            feedback=f"submission refused: {exc}", seed=base)
                for p in parts]
    run = LabRun(root, source, cells, data, sandboxed=sandboxed, limits=limits, seed=base, deadline=deadline)
    try:
        return [run.grade(p, part_seed(base, p.grade_id)) for p in parts]
    finally:
        run.close()


def submissions(folder: Path) -> dict[str, list[Submitted] | str]:
    """{student: their notebooks, read once without following links (submission.read_class), or
    why their folder is refused} from a folder of notebooks (one student) or of per-student folders
    (their notebooks directly inside, or one folder deeper, as nbgrader's submitted/<student>/<lab>/)."""
    return read_class(folder)


def grade_class(root: Path, folder: Path, sources: dict[str, Path], *, seed: int | None = None,
                sandboxed: bool = True, limits: sandbox.Limits = sandbox.DEFAULT_LIMITS,
                progress=print) -> dict[str, list[CheckResult]]:
    """{student: results} for every student in `folder`; a student without a gradable lab is
    listed with a line saying why. Each student's labs take at most `limits.submission_s` each:
    a class takes at most students x labs x submission_s (plus seconds per worker to stop it)."""
    report: dict[str, list[CheckResult]] = {}
    for student, notebooks in submissions(folder).items():
        results: list[CheckResult] = []
        if isinstance(notebooks, str):
            report[student] = [CheckResult(lab="-", grade_id="(submission)", score=0, max_score=0,
                                           status="ERROR", feedback=printable(notebooks))]
            continue
        for nb in notebooks:
            m = LAB_NAME.match(nb.name)
            if nb.data is None:  # refused as read (a link, a FIFO, a device, a hard link, too large)
                lab = m.group(1) if m and m.group(1) in sources else None
                results += [CheckResult(lab=lab, grade_id=p.grade_id, score=0, max_score=p.points, status="ERROR",
                                        feedback=printable(f"submission refused: {nb.refused}"))
                            for p in lab_parts(lab)] if lab else [
                    CheckResult(lab="-", grade_id="(notebook)", score=0, max_score=0, status="ERROR",
                                feedback=printable(f"submission refused: {nb.refused}"))]
                continue
            if not m or m.group(1) not in sources:
                results.append(CheckResult(
                    lab=Path(nb.name).stem[:20], grade_id="(notebook)", score=0, max_score=0, status="ERROR",
                    feedback=f"{nb.name} is not a lab of this course ({', '.join(sorted(sources))})"))
                continue
            if nb.name != sources[m.group(1)].name:
                results.append(CheckResult(
                    lab=m.group(1), grade_id="(notebook)", score=0, max_score=0, status="ERROR",
                    feedback=f"{nb.name}: {m.group(1)} is submitted as {sources[m.group(1)].name}"))
                continue
            progress(f"grading {student} {m.group(1)} (sandboxed worker{'' if sandboxed else ': NO SANDBOX'})...")
            try:
                results += grade_lab(root, nb.data, sources[m.group(1)], seed=seed, sandboxed=sandboxed, limits=limits)
            except Exception as exc:  # noqa: BLE001 - never the end of the class's run
                results.append(CheckResult(
                    lab=m.group(1), grade_id="(notebook)", score=0, max_score=0, status="CRASH", feedback=printable(
                    f"the grader could not grade this notebook ({type(exc).__name__}: {exc}); tell the course "
                    "maintainers")))
        if not results:
            results.append(CheckResult(lab="-", grade_id="(submission)", score=0, max_score=0, status="ERROR",
                                       feedback="no lab notebook (labN_topic.ipynb) found"))
        report[student] = results
    return report
