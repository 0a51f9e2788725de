"""The instructor's nbgrader course folder, laid out from the repository's labs.

    make nbgrader-course DEST=~/gpu-course [EXCHANGE=/srv/nbgrader/exchange]
    python -m tools.hub.nbgradercourse layout DEST [--exchange DIR] [labs/labN_topic.ipynb ...]
    python -m tools.hub.nbgradercourse grade DEST labN        # after `nbgrader collect labN` in DEST

nbgrader works in a *course directory*: `nbgrader_config.py` at its top and each assignment's
instructor version in `source/<assignment>/`. `layout` writes that folder from labs/: one
assignment per lab, named `labN` (tools/grader/labgrade.py's ids, as book/jupyterhub.md uses them), with
the lab's instructor version (solutions included: DEST is the instructor's folder, never handed
out), and a config naming the course id the hub's exchange uses (`gpu-datamove`), the folder
itself as the course root, its own gradebook and, given `--exchange`, the exchange (on the hub
`/etc/jupyter/nbgrader_config.py` already names it). Run it again after changing a lab: it
refreshes `source/` and the config and leaves everything nbgrader made (release/, submitted/,
feedback/, gradebook.db) as it is.

`grade` is the grading step of the workflow. The labs are graded by the course's sandboxed
grader (tools/grader, the path `make grade` takes), not by `nbgrader autograde`, which would run
each submission in the instructor's own kernel beside the hidden cases (labs/README.md says why
that cannot be trusted). It grades DEST/submitted/ (what `nbgrader collect` gathered) against the
repository's lab, writes each student's feedback page to DEST/feedback/<student>/labN/, where
`nbgrader release_feedback` finds it, and the scores to DEST/grades.csv.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
from pathlib import Path

from tools.grader import labgrade

ROOT = Path(__file__).resolve().parents[2]

COURSE = "gpu-datamove"  # the course id on the hub (deploy/z2jh/values.yaml's nbgrader config)


def nbgrader_config(exchange: Path | None = None, course_root: Path | None = None, student: str | None = None,
                    gradebook: Path | None = None) -> str:
    """The text of an nbgrader_config.py: the course id, and what else is given."""
    lines = ["c = get_config()  # noqa", f"c.CourseDirectory.course_id = {COURSE!r}"]
    if exchange is not None:
        lines.append(f"c.Exchange.root = {str(exchange)!r}")
    if student is not None:
        # nbgrader names a submission after the OS user (or JUPYTERHUB_USER for jovyan, as in the
        # Kubernetes image); where every server runs as one OS user, each home says who it is
        lines.append(f"c.CourseDirectory.student_id = {student!r}")
    if course_root is not None:
        lines.append(f"c.CourseDirectory.root = {str(course_root)!r}")
    if gradebook is not None:
        lines.append(f"c.CourseDirectory.db_url = {'sqlite:///' + str(gradebook)!r}")
    return "\n".join(lines) + "\n"


def layout(dest: Path, labs: list[Path], exchange: Path | None = None) -> list[Path]:
    """Write DEST/nbgrader_config.py and DEST/source/labN/<lab> for each lab; returns the copies.
    A lab that breaks the lab format (labs/README.md) is refused before anything is written."""
    bad = [p for lab in labs for p in labgrade.lint(lab)]
    if bad:
        raise SystemExit("labs that break the lab format (labs/README.md):\n" + "\n".join(bad))
    dest = dest.resolve()
    if dest == ROOT or ROOT in dest.parents and dest.parts[len(ROOT.parts)] != "build":
        raise SystemExit(f"{dest}: a course folder inside the repository would be committed with its "
                         "solutions and submissions; put it outside (or under build/)")
    written = []
    for lab in labs:
        folder = dest / "source" / labgrade.lab_id(lab)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.ipynb"):  # a renamed lab leaves no stale copy behind
            if old.name != lab.name:
                old.unlink()
        shutil.copy(lab, folder / lab.name)
        written.append(folder / lab.name)
    (dest / "nbgrader_config.py").write_text(nbgrader_config(exchange, dest, gradebook=dest / "gradebook.db"))
    return written


def repository_lab(dest: Path, lab_id: str) -> Path:
    """The repository's lab for assignment `lab_id`, checked to be the one DEST released."""
    found = [p for p in labgrade.source_labs() if labgrade.lab_id(p) == lab_id]
    if not found:
        raise SystemExit(f"no lab {lab_id} in {ROOT / 'labs'}")
    lab = found[0]
    copy = dest / "source" / lab_id / lab.name
    if not copy.is_file() or not filecmp.cmp(copy, lab, shallow=False):
        raise SystemExit(f"{copy} is not the repository's {lab.relative_to(ROOT)}: the grader grades against "
                         "the repository's lab. Change the lab in labs/ and run `make nbgrader-course` again")
    return lab


def grade_collected(course: Path, lab: Path, transcript: list[str] | None = None) -> dict:
    """Grade what `nbgrader collect` gathered (course/submitted/<student>/<lab>/) with the course's
    sandboxed grader (tools/grader, the path `make grade` takes), and put each student's feedback
    page where `nbgrader release_feedback` looks for it. Returns the grader's report."""
    from tools.grader import feedback

    lab_id = labgrade.lab_id(lab)
    report = labgrade.grade(course / "submitted", [lab])
    for student, results in report.items():
        sub = course / "submitted" / student / lab_id
        dest = course / "feedback" / student / lab_id
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("timestamp.txt", "submission_secret.txt"):  # what release_feedback keys the page by
            if (sub / name).exists():
                shutil.copy(sub / name, dest / name)
        (dest / f"{lab.stem}.html").write_text(feedback.page(student, lab_id, [r for r in results if r.lab == lab_id]))
        if transcript is not None:
            got = sum(r.score for r in results)
            transcript.append(f"grader: {student} {lab_id} graded in a sandboxed worker: {got:g} points")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lay = sub.add_parser("layout", help="write DEST/nbgrader_config.py and DEST/source/labN/ from labs/")
    lay.add_argument("dest", type=Path)
    lay.add_argument("labs", nargs="*", help="default: every labs/labN_topic.ipynb")
    lay.add_argument("--exchange", type=Path, help="nbgrader's exchange (default: the one the system config names)")
    gr = sub.add_parser("grade", help="grade DEST/submitted/*/labN with the course's sandboxed grader")
    gr.add_argument("dest", type=Path)
    gr.add_argument("lab_id", help="labN")
    a = ap.parse_args(argv)
    if a.cmd == "layout":
        made = layout(a.dest.expanduser(), labgrade.source_labs(a.labs or None),
                      a.exchange.expanduser() if a.exchange else None)
        for p in made:
            print(f"{p.parent.name}: {p}")
        print(f"course folder {a.dest.expanduser().resolve()}: cd there and run `nbgrader generate_assignment {made[0].parent.name}`"
              if made else "no labs")
        return 0
    dest = a.dest.expanduser().resolve()
    report = grade_collected(dest, repository_lab(dest, a.lab_id))
    labgrade.print_report(report)
    labgrade.write_gradebook(report, dest / "grades.csv")
    print(f"{len(report)} submission(s) of {a.lab_id}; feedback in {dest / 'feedback'}, scores in {dest / 'grades.csv'}; "
          f"now `nbgrader release_feedback {a.lab_id}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
