"""A class on a real JupyterHub, on this machine: the hub, nbgrader's exchange, a whole assignment cycle.

    python -m tools.hub.hubclass serve [--port 8000]              # a hub for trying it by hand
    python -m tools.hub.hubclass cycle --lab labs/lab4_buddy_eviction.ipynb --out build/hub/run

`serve` starts JupyterHub (with its proxy, configurable-http-proxy as package-lock.json pins it,
installed by `npm ci` into node_modules/ when missing, tools/env/npm.py) on 127.0.0.1 with an instructor and three students
(password `course`), each single-user server configured for nbgrader's exchange.

`cycle` runs one lab through the exchange end to end, as a class would:
release (instructor) → fetch → submit (three students: one solved, one partly, one empty) →
collect → grade (the course's sandboxed grader, as `make grade`) → release feedback → fetch
feedback → the gradebook as CSV. Students 2 and 3 use the nbgrader command line in their own homes; student 1 does it
all through the hub's web pages in headless Chromium (log in, start the server, fetch, save
the notebook, submit, fetch feedback through the server's nbgrader and contents APIs). The
result (scores per student, CSV path, transcript) is written as JSON beside a screenshot.

Every process it starts is stopped at the end (the hub, the proxy, the servers), on failure too;
every wait has a timeout. The students are hub users, not system users: the hub runs their
servers as this user (JupyterHub's SimpleLocalProcessSpawner) with USER and HOME set per
student, which is what nbgrader's exchange uses to tell them apart.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tools.env import npm
from tools.grader import labgrade  # the course's grader (tools/grader/labgrade.py, tools/grader/)
from tools.hub.nbgradercourse import (  # the course folder
    COURSE,
    grade_collected,
    layout,
    nbgrader_config,
)

ROOT = Path(__file__).resolve().parents[2]


STUDENTS = ("student1", "student2", "student3")
INSTRUCTOR = "instructor"
PASSWORD = "course"
HUB_DIR = ROOT / "build" / "hub"


class HubError(RuntimeError):
    """The hub or a step of the cycle failed; the message names the step and its output."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_command() -> Path:
    """configurable-http-proxy as package-lock.json pins it (`npm ci` into node_modules/ when it is not there)."""
    try:
        modules = npm.npm_ci([Path(p) for p in os.environ.get("WHEELHOUSE", "").split() if p])
    except npm.NpmError as exc:
        raise HubError(f"JupyterHub's proxy comes from npm: {exc}") from None
    return modules / ".bin" / "configurable-http-proxy"


def hub_config(work: Path, port: int, exchange: Path) -> Path:
    """jupyterhub_config.py for the class; homes under work/homes, each with its nbgrader config."""
    homes = work / "homes"
    for user in (INSTRUCTOR, *STUDENTS):
        cfg = homes / user / ".jupyter"
        cfg.mkdir(parents=True, exist_ok=True)
        (cfg / "nbgrader_config.py").write_text(nbgrader_config(exchange, student=None if user == INSTRUCTOR else user))
    env = {"COURSE_MODE": "replay", "PYTHONPATH": str(ROOT), "JUPYTER_CONFIG_DIR": "{home}/.jupyter",
           "USER": "{user}", "LOGNAME": "{user}", "HOME": "{home}"}  # nbgrader's student id is USER
    text = f"""
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {_free_port()}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{_free_port()}"
c.ConfigurableHTTPProxy.command = [{str(proxy_command())!r}]
c.JupyterHub.db_url = "sqlite:///{work / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(work / 'cookie_secret')!r}
c.JupyterHub.pid_file = {str(work / 'hub.pid')!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users = {set(STUDENTS)!r}
c.Authenticator.admin_users = {{{INSTRUCTOR!r}}}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(homes) + '/{username}'!r}
c.Spawner.cmd = [{str(Path(sys.executable).with_name('jupyterhub-singleuser'))!r}]
c.Spawner.args = ["--ServerApp.allow_root=True"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {{k: (lambda v: lambda s: v.replace("{{home}}", {str(homes)!r} + "/" + s.user.name)
                                                  .replace("{{user}}", s.user.name))(v)
                          for k, v in {env!r}.items()}}
c.JupyterHub.cleanup_servers = True
"""
    path = work / "jupyterhub_config.py"
    path.write_text(text)
    return path


class Hub:
    """A running JupyterHub for the class; a context manager that always stops it and its children."""

    def __init__(self, work: Path, exchange: Path, port: int | None = None):
        self.work, self.port = work, port or _free_port()
        self.config = hub_config(work, self.port, exchange)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = work / "jupyterhub.log"

    def __enter__(self) -> Hub:
        hub = Path(sys.executable).with_name("jupyterhub")
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([str(hub), "-f", str(self.config)], cwd=self.work, env=env,
                                     stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HubError(f"JupyterHub exited at start (code {self.proc.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise HubError(f"JupyterHub did not answer within 90 s:\n{self.tail()}")

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text()[-n:] if self.log.exists() else ""

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the hub, its proxy and the servers it spawned
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for pat in ("jupyterhub-singleuser", "configurable-http-proxy"):  # servers started in their own sessions
            subprocess.run(["pkill", "-f", f"{pat}.*{self.work}" if pat.startswith("jupyterhub") else pat + ".*"
                            + str(self.port)], check=False, timeout=10)


# --- nbgrader, as the instructor and as a student on the command line --------------------------

def nbgrader(args: list[str], cwd: Path, user: str, home: Path, transcript: list[str]) -> str:
    env = dict(os.environ, USER=user, LOGNAME=user, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
               PYTHONPATH=str(ROOT), COURSE_MODE="replay",  # nbgrader runs its environment's `alembic`:
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    transcript.append(f"$ [{user}] nbgrader {' '.join(args)}  -> {proc.returncode}")
    if proc.returncode != 0:
        raise HubError(f"nbgrader {' '.join(args)} as {user} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout + proc.stderr


def solution_cells(instructor_nb: dict) -> list[tuple[str, str]]:
    """(grade_id, source) of every solution cell of the instructor's version, in order."""
    return [(c["metadata"]["nbgrader"]["grade_id"], c["source"]) for c in instructor_nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


def answered(released: dict, instructor_nb: dict, how_many: int | None) -> dict:
    """The released notebook with the first `how_many` solution cells filled in (None: all)."""
    nb = copy.deepcopy(released)
    sols = dict(solution_cells(instructor_nb)[:how_many] if how_many is not None else solution_cells(instructor_nb))
    for c in nb["cells"]:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in sols:
            c["source"] = sols[gid]
    return nb


# --- the browser student -----------------------------------------------------------------------

LOGIN_JS = """(() => { const f = document.querySelector('form'); if (!f) return false;
  document.querySelector('#username_input').value = %(user)s;
  document.querySelector('#password_input').value = %(password)s; f.submit(); return true; })()"""

API_JS = """(async () => {
  const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
  const r = await fetch(%(url)s, {method: %(method)s, credentials: 'same-origin',
      headers: {'X-XSRFToken': decodeURIComponent(xsrf), 'Content-Type': 'application/json'},
      body: %(body)s});
  return {status: r.status, text: (await r.text()).slice(0, 4000)}; })()"""


def browser_student(hub: Hub, user: str, notebook: dict, lab_id: str, nb_name: str, shot: Path,
                    transcript: list[str]) -> None:
    """Log in, start the server, fetch, save the answered notebook, submit: through the hub's pages."""
    from tools.site.cdp import Chromium

    def api(page, path: str, method: str, body=None) -> dict:
        js = API_JS % {"url": json.dumps(f"/user/{user}/{path}"), "method": json.dumps(method),
                       "body": "undefined" if body is None else json.dumps(json.dumps(body))}
        r = page.evaluate(js, timeout=180)
        transcript.append(f"browser [{user}] {method} /user/{user}/{path} -> {r['status']}")
        if r["status"] >= 400:
            raise HubError(f"{method} {path} as {user} in the browser: HTTP {r['status']}: {r['text']}")
        return r

    with Chromium() as browser:
        page = browser.new_page(allow=[hub.url])
        page.goto(f"{hub.url}/hub/login")
        page.wait_for("document.querySelector('#username_input') !== null", timeout=30)
        page.evaluate(LOGIN_JS % {"user": json.dumps(user), "password": json.dumps(PASSWORD)})
        transcript.append(f"browser [{user}] logged in at /hub/login")
        # the hub starts the server and redirects to JupyterLab
        if not page.wait_for(f"location.pathname.startsWith('/user/{user}/lab') && "
                             "document.querySelector('#jp-main-dock-panel') !== null", timeout=180):
            raise HubError(f"{user}'s JupyterLab did not open within 180 s:\n{hub.tail()}")
        transcript.append(f"browser [{user}] JupyterLab open at /user/{user}/lab")
        api(page, "assignments/fetch", "POST", {"course_id": COURSE, "assignment_id": lab_id})
        path = f"api/contents/{lab_id}/{nb_name}"
        api(page, path, "GET")
        api(page, path, "PUT", {"type": "notebook", "format": "json", "content": notebook})
        api(page, "assignments/submit", "POST", {"course_id": COURSE, "assignment_id": lab_id})
        page.screenshot(shot)
        page.close()


def fetch_feedback_in_browser(hub: Hub, user: str, lab_id: str, transcript: list[str]) -> dict:
    from tools.site.cdp import Chromium

    with Chromium() as browser:
        page = browser.new_page(allow=[hub.url])
        page.goto(f"{hub.url}/hub/login")
        page.wait_for("document.querySelector('#username_input') !== null", timeout=30)
        page.evaluate(LOGIN_JS % {"user": json.dumps(user), "password": json.dumps(PASSWORD)})
        page.wait_for(f"location.pathname.startsWith('/user/{user}/')", timeout=180)
        js = API_JS % {"url": json.dumps(f"/user/{user}/assignments/fetch_feedback"), "method": json.dumps("POST"),
                       "body": json.dumps(json.dumps({"course_id": COURSE, "assignment_id": lab_id}))}
        r = page.evaluate(js, timeout=120)
        transcript.append(f"browser [{user}] POST /user/{user}/assignments/fetch_feedback -> {r['status']}")
        page.close()
        return r


# --- the cycle -----------------------------------------------------------------------------------

def scores_of(grades: Path, lab_id: str) -> dict[str, dict[str, float]]:
    """Each student's total score and maximum for `lab_id`, summed over the parts in the gradebook CSV."""
    scores: dict[str, dict[str, float]] = {}
    with grades.open() as f:
        for r in csv.DictReader(f):
            if r["lab"] == lab_id:
                sc = scores.setdefault(r["student"], {"score": 0.0, "max_score": 0.0})
                sc["score"] += float(r["score"])
                sc["max_score"] += float(r["max_score"])
    return scores


def feedback_files(homes: Path) -> dict[str, list[str]]:
    """The HTML feedback files each student fetched into their home (paths relative to it)."""
    return {s: sorted(str(p.relative_to(homes / s)) for p in (homes / s).rglob("*.html")) for s in STUDENTS}


def cycle(lab: Path, out: Path, browser: bool = True, keep: bool = False) -> dict:
    """The whole assignment cycle for `lab`; returns scores per student, the CSV and a transcript."""
    import nbformat  # noqa: F401  (nbgrader needs it; fail early and clearly)

    lab = lab.resolve()
    lab_id = lab.name.split("_", 1)[0]
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hubclass-"))
    transcript: list[str] = []
    try:
        exchange = work / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)
        course = work / "course"
        layout(course, [lab], exchange)  # as `make nbgrader-course` lays it out
        ihome = work / "homes" / INSTRUCTOR
        with Hub(work, exchange) as hub:
            transcript.append(f"hub up at {hub.url}: {INSTRUCTOR}, {', '.join(STUDENTS)}")
            for s in STUDENTS:
                nbgrader(["db", "student", "add", s], course, INSTRUCTOR, ihome, transcript)
            nbgrader(["generate_assignment", lab_id, "--force", "--create"], course, INSTRUCTOR, ihome, transcript)
            nbgrader(["release_assignment", lab_id, "--force"], course, INSTRUCTOR, ihome, transcript)
            released = json.loads((course / "release" / lab_id / lab.name).read_text())
            instructor_nb = json.loads(lab.read_text())
            plan = {"student1": None, "student2": 1, "student3": 0}  # solved, partly, empty
            for s, how_many in plan.items():
                nb = answered(released, instructor_nb, how_many)
                home = work / "homes" / s
                if s == "student1" and browser:
                    browser_student(hub, s, nb, lab_id, lab.name, out / "student1-submitted.png", transcript)
                    continue
                nbgrader(["fetch_assignment", lab_id, "--course", COURSE], home, s, home, transcript)
                (home / lab_id / lab.name).write_text(json.dumps(nb))
                nbgrader(["submit", lab_id, "--course", COURSE], home, s, home, transcript)
            nbgrader(["collect", lab_id], course, INSTRUCTOR, ihome, transcript)
            report = grade_collected(course, lab, transcript)  # the sandboxed grader, as `make grade`
            nbgrader(["release_feedback", lab_id], course, INSTRUCTOR, ihome, transcript)
            for s in STUDENTS:
                home = work / "homes" / s
                if s == "student1" and browser:
                    fetch_feedback_in_browser(hub, s, lab_id, transcript)
                else:
                    nbgrader(["fetch_feedback", lab_id, "--course", COURSE], home, s, home, transcript)
            grades = out / "grades.csv"
            labgrade.write_gradebook(report, grades)
            transcript.append(f"grader: gradebook {grades}")
        result = {"lab": lab_id, "scores": scores_of(grades, lab_id), "csv": str(grades),
                  "feedback_files": feedback_files(work / "homes"),
                  "transcript": transcript, "browser_student": "student1" if browser else None}
        (out / "result.json").write_text(json.dumps(result, indent=1))
        return result
    finally:
        if keep:
            print(f"hubclass: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="a hub on 127.0.0.1 for trying it by hand (Ctrl-C stops it)")
    s.add_argument("--port", type=int, default=8000)
    c = sub.add_parser("cycle", help="one lab through the exchange, end to end")
    c.add_argument("--lab", type=Path, default=ROOT / "labs" / "lab4_buddy_eviction.ipynb")
    c.add_argument("--out", type=Path, default=HUB_DIR / "run")
    c.add_argument("--no-browser", action="store_true", help="student1 uses the command line too")
    c.add_argument("--keep", action="store_true", help="keep the hub's working folder (to look into a failure)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "serve":
            work = Path(tempfile.mkdtemp(prefix="hubclass-"))
            ex = work / "exchange"
            ex.mkdir()
            ex.chmod(0o1777)
            with Hub(work, ex, args.port) as hub:
                print(f"hub at {hub.url}: users {INSTRUCTOR}, {', '.join(STUDENTS)}; password {PASSWORD!r}. Ctrl-C stops it.")
                try:
                    hub.proc.wait()
                except KeyboardInterrupt:
                    pass
            return 0
        r = cycle(args.lab, args.out, browser=not args.no_browser, keep=args.keep)
    except HubError as exc:
        print(f"hubclass: {exc}", file=sys.stderr)
        return 1
    print("\n".join(r["transcript"]))
    for sid, sc in sorted(r["scores"].items()):
        print(f"{sid}: {sc['score']:g} / {sc['max_score']:g}")
    print(f"gradebook: {r['csv']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
