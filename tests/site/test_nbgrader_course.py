"""Issue 39, item 8: the instructor's nbgrader workflow works as book/jupyterhub.md writes it.

The page's commands (its `bash` blocks under "Assignments through the exchange") are run as they
stand, in order, in a shell whose HOME is a scratch folder: `make nbgrader-course` lays out the
course folder, `nbgrader generate_assignment` / `release_assignment` put lab2 into an exchange, a
student fetches it, answers it and submits it with nbgrader's own commands, then `nbgrader
collect`, the grading step and `nbgrader release_feedback`; the student fetches the feedback.
Meanwhile nbgrader's formgrader (a Jupyter server extension) is started in the course folder and
its page and API are read over localhost. The only things the test supplies are what a hub
supplies: the exchange's location (in the users' Jupyter config, as /etc/jupyter/nbgrader_config.py
does on the hub), the repository's path for the page's COURSE_REPO placeholder, and the student.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "jupyterhub.md"
LAB = ROOT / "labs" / "lab2_bandwidth_test.ipynb"
VENV = Path(sys.executable).parents[1]
PLACEHOLDER = "COURSE_REPO=~/gpu-datamove"


def documented_blocks() -> list[str]:
    """The bash blocks of the page's section on assignments, in order."""
    text = PAGE.read_text()
    section = text[text.index("## Assignments through the exchange"):]
    section = section[:section.index("\n## ", 5)]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def _shell(script: str, env: dict, cwd: Path, timeout: int = 240) -> str:
    # the course's make targets use the environment that runs this test (never building another)
    shim = f'make() {{ command make VENV="{VENV}" -o "{VENV}/.course-test" "$@"; }}\n'
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", shim + script], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert run.returncode == 0, f"$ {script}\n{(run.stdout + run.stderr)[-4000:]}"
    return run.stdout + run.stderr


def _user(home: Path, exchange: Path, student: str | None = None) -> dict:
    cfg = home / ".jupyter"
    cfg.mkdir(parents=True, exist_ok=True)
    lines = ["c = get_config()  # noqa", f"c.Exchange.root = {str(exchange)!r}"]
    if student:
        lines.append(f"c.CourseDirectory.student_id = {student!r}")
    (cfg / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    user = student or "instructor"
    return dict(os.environ, HOME=str(home), USER=user, LOGNAME=user, JUPYTER_CONFIG_DIR=str(cfg),
                PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", COURSE_MODE="replay")


def _get(url: str, token: str) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read().decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_documented_nbgrader_workflow_runs_end_to_end_formgrader_included(tmp_path):
    blocks = documented_blocks()
    assert len(blocks) == 3, blocks
    layout, release, grade = blocks
    assert PLACEHOLDER in layout and "make -C \"$COURSE_REPO\" nbgrader-course DEST=~/gpu-course" in layout
    assert "nbgrader generate_assignment lab2" in release and "nbgrader autograde" not in "".join(blocks)
    session = f"COURSE_REPO={ROOT}\n"  # the page's clone of the repository is this one
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o1777)
    home, student_home = tmp_path / "instructor", tmp_path / "student1"
    teacher, student = _user(home, exchange), _user(student_home, exchange, "student1")
    course = home / "gpu-course"

    _shell(layout.replace(PLACEHOLDER, session.strip()), teacher, home)
    assert (course / "nbgrader_config.py").is_file()
    assert sorted(p.relative_to(course).as_posix() for p in (course / "source").rglob("*.ipynb")) == \
        sorted(f"source/{p.name.split('_')[0]}/{p.name}" for p in (ROOT / "labs").glob("lab*.ipynb"))

    port, token = _free_port(), secrets.token_hex(16)
    server = subprocess.Popen([str(VENV / "bin" / "jupyter"), "server", "--no-browser", "--ip=127.0.0.1",
                               f"--port={port}", f"--IdentityProvider.token={token}", "--ServerApp.allow_root=True"],
                              cwd=course, env=teacher, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        _shell(session + release, teacher, home)
        released = exchange / "gpu-datamove" / "outbound" / "lab2" / LAB.name
        assert released.is_file() and "BEGIN SOLUTION" not in released.read_text()

        # the student: fetch, answer every part (the instructor's solutions), submit
        from tools.hub import hubclass

        answer = student_home / "answer.json"
        answer.write_text(json.dumps(hubclass.answered(json.loads(released.read_text()), json.loads(LAB.read_text()),
                                                       None)))
        _shell(f"nbgrader fetch_assignment lab2 --course gpu-datamove\ncp {answer} lab2/{LAB.name}\n"
               "nbgrader submit lab2 --course gpu-datamove", student, student_home)

        out = _shell(session + "cd ~/gpu-course\n" + grade, teacher, home)
        rows = [r for r in csv.DictReader((course / "grades.csv").open()) if r["student"] == "student1"]
        full = sum(float(r["max_score"]) for r in rows)
        assert rows and sum(float(r["score"]) for r in rows) == full > 0, out[-3000:]  # solved: every point

        _shell("nbgrader fetch_feedback lab2 --course gpu-datamove", student, student_home)
        (page,) = (student_home / "lab2" / "feedback").rglob(f"{LAB.stem}.html")
        assert "student1" in page.read_text() and f"{full:g} / " in page.read_text()

        # the formgrader, served from the course folder
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 90
        while True:
            try:
                status, text = _get(f"{base}/formgrader", token)  # redirects to manage_assignments
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the formgrader's server did not answer"
                time.sleep(0.5)
        assert status == 200 and "Manage Assignments" in text and "nbgrader formgrade" in text
        status, text = _get(f"{base}/formgrader/api/assignments", token)
        by_name = {a["name"]: a for a in json.loads(text)}
        assert set(by_name) == {f"lab{i}" for i in range(1, 7)}
        assert by_name["lab2"]["num_submissions"] == 1 and by_name["lab2"]["status"] == "released"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=10)


def test_the_course_folder_is_refused_inside_the_repository_and_a_changed_lab_is_not_graded(tmp_path):
    from tools.hub import nbgradercourse

    with pytest.raises(SystemExit, match="inside the repository"):
        nbgradercourse.layout(ROOT / "course", [LAB])
    nbgradercourse.layout(tmp_path / "c", [LAB])
    assert nbgradercourse.repository_lab(tmp_path / "c", "lab2") == LAB
    copy = tmp_path / "c" / "source" / "lab2" / LAB.name
    copy.write_text(copy.read_text() + "\n")  # changed in the course folder, not in labs/
    with pytest.raises(SystemExit, match="not the repository's labs/lab2_bandwidth_test.ipynb"):
        nbgradercourse.repository_lab(tmp_path / "c", "lab2")
