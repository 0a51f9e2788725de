"""The grader's command line: student versions, grading, and the lab format's lint.

    python -m tools.grader student [--out build/student] [labs/lab2_*.ipynb ...]
    python -m tools.grader grade SUBMISSIONS [--expect pass|fail] [--keep DIR]
    python -m tools.grader run-student build/student
    python -m tools.grader lint [labs/labN_topic.ipynb ...]

`student` runs `nbgrader generate_assignment` (ClearSolutions, ClearOutput, LockCells,
ClearHiddenTests, ClearMarkScheme, checksums) on every lab in a temporary course directory and
copies the released notebooks out. `grade` runs `nbgrader autograde` on a folder of submitted
notebooks (restoring locked and check cells from the source first) and prints an xv6-style
report, one line per check. `run-student` executes student versions the way a learner would
(no nbgrader): they must reach the end, and every graded check must report a clean FAIL.

Labs are `labs/labN_topic.ipynb`; the nbgrader assignment id is `labN`.
Exit status of `grade`: 0 when every check earned its points (or, with --expect, when the
expectation holds), 1 otherwise; a submission that cannot be graded at all stops with a message.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import nbformat

from tools.grader import classrun, memcap, sandbox

ROOT = Path(__file__).resolve().parents[2]  # the course checkout: labs/, helpers/, instructor/

LAB_NAME = re.compile(r"^(lab\d+)_[a-z0-9_]+\.ipynb$")
FAIL_LINE = "✘ {gid}: FAIL"
TIMEOUT_S = 600


def lab_id(path: Path) -> str:
    """'lab2' for labs/lab2_bandwidth_test.ipynb; a clear error for other names."""
    m = LAB_NAME.match(path.name)
    if not m:
        raise SystemExit(f"{path}: a lab must be named labN_topic.ipynb")
    return m.group(1)


def lint(path: Path) -> list[str]:
    """Problems with a source lab's format (see labs/README.md); empty when it conforms."""
    try:
        lab_id(path)
    except SystemExit as exc:
        return [str(exc)]
    nb = nbformat.read(path, as_version=4)
    out, ids, checks = [], set(), 0
    for i, c in enumerate(nb.cells):
        meta = c.metadata.get("nbgrader")
        where = f"{path.name} cell {i}"
        if meta is None:
            out.append(f"{where}: no nbgrader metadata (mark it read-only, solution or graded)")
            continue
        gid = meta.get("grade_id")
        if not gid or gid in ids:
            out.append(f"{where}: grade_id {gid!r} is missing or not unique")
        ids.add(gid)
        lines = c.source.splitlines()
        begins = [ln for ln in lines if "BEGIN SOLUTION" in ln]
        if begins and not meta.get("solution"):
            out.append(f"{where}: has a solution region but is not a solution cell")
        if c.cell_type == "code" and meta.get("solution"):
            if not begins:
                out.append(f"{where}: solution cell without a BEGIN SOLUTION region")
            if any(not ln.startswith((" ", "\t")) for ln in begins):
                out.append(f"{where}: solution region at top level; put it inside a function body "
                           "so the student version still runs")
        if c.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            checks += 1
            if not meta.get("locked"):
                out.append(f"{where}: graded check {gid} must be locked (read-only)")
            if c.source.count(f'grading.check("{gid}")') != 1:
                out.append(f'{where}: graded cell {gid} must contain exactly one grading.check("{gid}")')
            if _ends_with_value(c.source):
                out.append(f"{where}: graded cell ends with an expression; nbgrader would read "
                           "its value as partial credit")
    if not checks:
        out.append(f"{path.name}: no graded check cells")
    return out


def _ends_with_value(source: str) -> bool:
    """True when a cell's last statement is an expression whose value Jupyter would display."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    if not body or not isinstance(body[-1], ast.Expr) or source.rstrip().endswith(";"):
        return False
    v = body[-1].value
    return not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "print")


def source_labs(paths: list[str] | None = None) -> list[Path]:
    labs = [Path(p) for p in paths] if paths else sorted((ROOT / "labs").glob("lab*.ipynb"))
    if not labs:
        raise SystemExit("no labs found (labs/labN_topic.ipynb)")
    return labs


def _course_env() -> None:
    """Kernels that nbgrader starts must import this checkout's helpers, and no GPU is assumed."""
    parts = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    # nbgrader runs the `alembic` command of its own environment (gradebook migrations): look
    # beside this interpreter and in the bin/ of every sys.path entry (pip install --target).
    bins = [str(Path(sys.executable).parent)] + os.environ.get("PATH", "").split(os.pathsep)
    bins += [str(Path(p) / "bin") for p in sys.path if p and (Path(p) / "bin" / "alembic").exists()]
    os.environ["PATH"] = os.pathsep.join(dict.fromkeys(bins))


def _api(root: Path):
    """An NbGraderAPI over a private course directory (own gradebook, long cell timeout)."""
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy session chatter
    warnings.filterwarnings("ignore", message=".*not in session.*")
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    cfg = Config()
    cfg.CourseDirectory.root = str(root)
    cfg.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    cfg.Execute.timeout = TIMEOUT_S
    cfg.Execute.kernel_name = "python3"
    return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)


def _generate(api, root: Path, labs: list[Path]) -> dict[str, Path]:
    """Put each lab into source/labN/ and run generate_assignment; returns labN -> release dir."""
    out = {}
    for lab in labs:
        aid = lab_id(lab)
        src = root / "source" / aid
        src.mkdir(parents=True, exist_ok=True)
        shutil.copy(lab, src / lab.name)
        res = api.generate_assignment(aid, force=True, create=True)
        if not res["success"]:
            raise SystemExit(f"nbgrader generate_assignment {aid} failed:\n{res['log']}\n{res['error']}")
        out[aid] = root / "release" / aid
    return out


def make_student(labs: list[Path], out: Path) -> list[Path]:
    """Student versions of `labs` into `out`, made by nbgrader generate_assignment."""
    _course_env()
    bad = [p for lab in labs for p in lint(lab)]
    if bad:
        raise SystemExit("labs that break the lab format (labs/README.md):\n" + "\n".join(bad))
    out.mkdir(parents=True, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory(prefix="labs-course-") as tmp:
        for aid, rel in _generate(_api(Path(tmp)), Path(tmp), labs).items():
            for nb in sorted(rel.glob("*.ipynb")):
                shutil.copy(nb, out / nb.name)
                made.append(out / nb.name)
                print(f"{aid}: student version {out / nb.name}")
    return made


# --------------------------------------------------------------------------- grading
CheckResult = classrun.CheckResult


def grade(folder: Path, labs: list[Path] | None = None, *, seed: int | None = None, sandboxed: bool = True,
          limits: sandbox.Limits = sandbox.DEFAULT_LIMITS) -> dict[str, list[CheckResult]]:
    """Grade every submission in `folder` out of process (tools/grader); {student: [CheckResult]}.

    Each student's lab runs in its own sandboxed worker; the checks, their hidden cases and
    expected values stay in this process. Nothing a submission does ends the run: a bad one
    is that student's 0, with the reason, and every student is listed.
    """
    if not folder.is_dir():
        raise SystemExit(f"{folder}: no such folder of submissions")
    if sandboxed and (why := sandbox.available()):
        raise SystemExit(f"cannot sandbox the submissions here: {why}.\nGrading runs learner code; "
                         "without a sandbox it could read and change this checkout (instructor/ included). "
                         "Grade on Linux with bubblewrap, or pass --no-sandbox to run unconfined (labs/README.md).")
    sources = {lab_id(p): p for p in source_labs([str(x) for x in labs] if labs else None)}
    print(f"memory: {memcap.describe(limits.memory_bytes)}", flush=True)
    return classrun.grade_class(ROOT, folder, sources, seed=seed, sandboxed=sandboxed, limits=limits,
                                progress=lambda m: print(m, flush=True))


def write_gradebook(report: dict[str, list[CheckResult]], path: Path) -> None:
    """One CSV row per student and check (student, lab, check, score, max, status, feedback, seed)."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "lab", "check", "score", "max_score", "status", "feedback", "seed"])
        for student, checks in report.items():
            for c in checks:
                w.writerow([student, c.lab, c.grade_id, f"{c.score:g}", f"{c.max_score:g}", c.status,
                            c.feedback.splitlines()[0][:500] if c.feedback else "", c.seed])


def print_report(report: dict[str, list[CheckResult]]) -> None:
    """xv6 `make grade` style: one line per check, then per-lab and total scores."""
    for student, checks in report.items():
        print(f"== {student} ==")
        for c in checks:
            name = f"{c.lab}: {c.grade_id} "
            print(f"{name:.<44} {c.status} ({c.score:g}/{c.max_score:g})")
            if c.feedback:
                print(f"    {c.feedback}")
        for lab in sorted({c.lab for c in checks}):
            got = sum(c.score for c in checks if c.lab == lab)
            tot = sum(c.max_score for c in checks if c.lab == lab)
            print(f"{lab}: {got:g}/{tot:g}")
        got, tot = sum(c.score for c in checks), sum(c.max_score for c in checks)
        print(f"Score: {got:g}/{tot:g}")


def meets(report: dict[str, list[CheckResult]], expect: str) -> list[str]:
    """Problems with the expectation: 'pass' = all OK; 'fail' = all clean FAIL with 0 points."""
    bad = []
    for student, checks in report.items():
        if not checks:
            bad.append(f"{student}: no graded checks found")
        for c in checks:
            if expect == "pass" and c.status != "OK":
                bad.append(f"{student} {c.lab}: {c.grade_id} is {c.status}, expected OK")
            if expect == "fail" and (c.status != "FAIL" or c.score != 0):
                bad.append(f"{student} {c.lab}: {c.grade_id} is {c.status} ({c.score:g}), "
                           "expected a clean FAIL with 0 points")
    return bad


# --------------------------------------------------------------------------- student run
def run_student(folder: Path) -> list[str]:
    """Execute student versions as a learner would; list every problem found."""
    from nbclient import NotebookClient

    _course_env()
    env_backup = os.environ.pop("NBGRADER_EXECUTION", None)
    problems = []
    try:
        nbs = sorted(folder.glob("lab*.ipynb"))
        if not nbs:
            return [f"{folder}: no student notebooks (run `make student` first)"]
        for path in nbs:
            print(f"executing student version {path} ...", flush=True)
            nb = nbformat.read(path, as_version=4)
            NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            problems += student_problems(path.name, nb)
    finally:
        if env_backup is not None:
            os.environ["NBGRADER_EXECUTION"] = env_backup
    return problems


def student_problems(name: str, nb) -> list[str]:
    """What is wrong with an executed student version: a cell that raised, a check cell without a clean FAIL."""
    out = []
    checks = 0
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            if o.output_type == "error":
                out.append(f"{name} cell {i}: raised {o.ename}: {o.evalue} (a student version must run to the end)")
        meta = c.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            checks += 1
            text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
            if FAIL_LINE.format(gid=meta["grade_id"]) not in text:
                out.append(f"{name}: check {meta['grade_id']} did not report a clean FAIL "
                           f"on the unsolved version (output: {text.strip()[:200]!r})")
    if not checks:
        out.append(f"{name}: no graded check cells")
    if not out:
        print(f"{name}: ran to the end; all {checks} checks reported FAIL cleanly")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("student", help="generate student versions with nbgrader")
    s.add_argument("labs", nargs="*")
    s.add_argument("--out", default=str(ROOT / "build" / "student"))
    g = sub.add_parser("grade", help="autograde a folder of submissions")
    g.add_argument("submissions")
    g.add_argument("--expect", choices=("pass", "fail"), default=None,
                   help="CI: require every check to pass, or every check to fail cleanly")
    g.add_argument("--seed", type=int, help="the hidden cases' seed (to rerun a disputed grade exactly)")
    g.add_argument("--gradebook", help="also write every student's scores to this CSV file")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run learner code WITHOUT bubblewrap (it can then read and write this checkout)")
    li = sub.add_parser("lint", help="check source labs against the lab format")
    li.add_argument("labs", nargs="*")
    r = sub.add_parser("run-student", help="execute student versions without nbgrader")
    r.add_argument("folder", nargs="?", default=str(ROOT / "build" / "student"))
    a = ap.parse_args(argv)
    if a.cmd == "lint":
        bad = [p for lab in source_labs(a.labs or None) for p in lint(lab)]
        print("\n".join(bad) if bad else "labs follow the lab format")
        return 1 if bad else 0
    if a.cmd == "student":
        make_student(source_labs(a.labs or None), Path(a.out))
        return 0
    if a.cmd == "grade":
        if a.no_sandbox:
            print("WARNING: --no-sandbox: learner code runs unconfined, as you, next to instructor/", flush=True)
        report = grade(Path(a.submissions), seed=a.seed, sandboxed=not a.no_sandbox)
        print_report(report)
        if a.gradebook:
            write_gradebook(report, Path(a.gradebook))
        if a.expect is None:  # instructor use: xv6 style, exit 1 when any check lost points
            lost = [c for cs in report.values() for c in cs if c.status != "OK"]
            print(f"{len(report)} submission(s); {len(lost)} check(s) without full points")
            return 1 if lost else 0
        bad = meets(report, a.expect)
        if bad:
            print(f"expected every check to {'pass' if a.expect == 'pass' else 'fail cleanly'}:")
            print("\n".join("  " + b for b in bad))
        return 1 if bad else 0
    problems = run_student(Path(a.folder))
    print("\n".join(problems) if problems else "student versions: all ran to the end, all checks failed cleanly")
    return 1 if problems else 0

