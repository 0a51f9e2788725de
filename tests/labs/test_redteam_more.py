"""Red team, issue 39: the tricks that still scored, each with a small fixture.

- an empty Lab 6 (no driver function defined) and a Lab 6 driver that walks the harness's frames
  for the plan (every part's reference and hidden inputs);
- the "your own work" rule patched away in the learner's process, and the course's functions
  cloned with types.FunctionType (Lab 2's fit, Lab 3's range-Doppler map and deadline report);
- submissions that are symlinks (to the instructor's lab, or a student folder to another's),
  FIFOs, devices, hard links to a file outside, oversized files;
- correct answers in other Python types (NumPy arrays and scalars, namedtuples, defaultdicts):
  full marks, not 0;
- time and memory: no call outlives the lab's budget; the whole worker's memory is one cap;
  Lab 6 boots its VM once per student.
Each of these tests fails on the grader before issue 39's fix (see the closing note's table).
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
from helpers.labs import grading  # noqa: E402
from helpers.labs.grading import CheckFailed  # noqa: E402
from tests.labs import redteam, tricks39  # noqa: E402
from tools.grader import labgrade, memcap, sandbox  # noqa: E402
from tools.grader.api import PartTimeout, Student  # noqa: E402
from tools.grader.classrun import grade_class, lab_parts, part_seed  # noqa: E402
from tools.grader.submission import MAX_BYTES, read_class  # noqa: E402

LIMITS = sandbox.Limits(call_s=10.0, load_s=60.0, part_s=60.0, submission_s=240.0)


# ------------------------------------------------------------------ Lab 6: the learner's code only
class FakeLab6Student:
    """What lab6_checks sees of a student: lab6_code() and the lab's seed and deadline."""

    def __init__(self, code: dict, lab_seed: int = 7) -> None:
        self.code, self.lab_seed, self.lab_deadline = code, lab_seed, None

    def lab6_code(self):
        return self.code


def _lab6_scores(student, monkeypatch) -> tuple[dict[str, float], list]:
    from instructor.labs import lab6 as ref
    from instructor.labs import lab6_checks

    boots = []

    def fake_grade(code, seed, **kw):  # the VM, answering "ok" for every part it is asked about
        boots.append(seed)
        return {"parts": {p: {"ok": True, "feedback": ""} for p in ref.published.PARTS}}

    monkeypatch.setattr(ref, "grade", fake_grade)
    lab6_checks._RUNS.clear()
    scores = {}
    for part in lab6_checks.GRADED:
        try:
            part.run(grading.check(part.grade_id), student, part_seed(99, part.grade_id))
            scores[part.grade_id] = part.points
        except CheckFailed as exc:
            scores[part.grade_id] = 0
            assert "not defined" in str(exc)
    return scores, boots


def test_an_empty_lab6_scores_nothing_and_boots_nothing(monkeypatch):
    scores, boots = _lab6_scores(FakeLab6Student({}), monkeypatch)
    assert sum(scores.values()) == 0 and boots == []


def test_lab6_boots_once_per_student(monkeypatch):
    from instructor.labs import lab6 as ref

    scores, boots = _lab6_scores(FakeLab6Student(ref.reference_code()), monkeypatch)
    assert sum(scores.values()) == 25 and boots == [7]  # seven parts, one boot, the lab's seed


FRAMES_TRICK = '''
def factorial(dev, n):
    import gc, sys
    found = []
    f = sys._getframe(1)
    while f is not None:
        found += [k for k, v in f.f_locals.items() if isinstance(v, dict) and ("reference" in v or "parts" in v)]
        f = f.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict) and ("reference" in obj or "inputs" in obj or "parts" in obj):
            found.append("gc dict")
        elif isinstance(obj, str) and "REG_FACTORIAL" in obj and obj.startswith("def factorial"):
            found.append("the reference's source")
    g = globals()
    if "factorial" in g and g["factorial"] is not factorial:
        found.append("another factorial")
    return found
'''


def _child(functions: dict):
    """helpers/measure/kernel_vm/guest/lab6_harness.py's child, run here (no VM, no uid change): (send, close)."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-S", str(ROOT / "helpers/measure/kernel_vm/guest/lab6_harness.py"), "--child",
                             str(a_r), str(b_w)], pass_fds=(a_r, b_w), stdout=subprocess.DEVNULL)
    os.close(a_r)
    os.close(b_w)
    to, frm = os.fdopen(a_w, "w"), os.fdopen(b_r, "r")
    to.write(json.dumps(functions) + "\n")
    to.flush()

    def call(fn, *args):
        to.write(json.dumps({"fn": fn, "args": list(args)}) + "\n")
        to.flush()
        return json.loads(frm.readline())

    def close():
        to.close()
        proc.wait(timeout=20)
    return call, close


def _guest(name: str):
    """The guest module `name` of helpers/measure/kernel_vm/guest, loaded from its file (the guest folder is no
    package: in the VM these modules import each other by their bare names, so they are registered so here too)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "helpers/measure/kernel_vm/guest" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _harness():
    for dependency in ("edu", "edu_probe"):  # lab6_harness imports them by their bare names
        _guest(dependency)
    return _guest("lab6_harness")


def test_lab6_child_holds_no_plan_and_not_this_parts_reference():
    from helpers.labs import lab6
    from instructor.labs import lab6 as ref

    plan = {"parts": [{"part": p, "inputs": ref.cases(p, 5)} for p in lab6.PARTS],
            "learner": {"factorial": {"source": FRAMES_TRICK}}, "reference": ref.reference_code()}
    functions = _harness().child_functions(plan, "factorial")
    assert functions["factorial"] == {"source": FRAMES_TRICK} and "identify" in functions
    call, close = _child(functions)
    try:
        assert call("factorial", None, 5) == {"ok": []}  # no plan, no inputs, no reference factorial
    finally:
        close()


def test_lab6_a_function_not_written_is_not_defined_never_the_reference():
    from helpers.labs import lab6
    from instructor.labs import lab6 as ref

    plan = {"parts": [{"part": p, "inputs": ref.cases(p, 5)} for p in lab6.PARTS], "learner": {},
            "reference": ref.reference_code()}
    for part, funcs in lab6.PART_FUNCTIONS.items():
        functions = _harness().child_functions(plan, part)
        assert not set(funcs) & set(functions), part
    call, close = _child(_harness().child_functions(plan, "faults"))
    try:
        reply = call("fault_addresses", ["DMAR: [DMA Write] Request device [00:01.0] fault addr 0x1000"])
        assert reply.get("raised") == "NameError" and "not defined" in reply["message"]
    finally:
        close()


# ------------------------------------------------------------------ submissions read, never followed
def test_submissions_are_read_as_files_never_followed(tmp_path):
    lab = ROOT / "labs" / "lab2_bandwidth_test.ipynb"
    cls = tmp_path / "class"
    (cls / "ann").mkdir(parents=True)
    (cls / "ann" / lab.name).write_text("{}")
    (cls / "bob").symlink_to(cls / "ann")                                 # a folder linked to another's
    (cls / "cyd").mkdir()
    (cls / "cyd" / lab.name).symlink_to(lab)                              # the instructor's solutions
    (cls / "dan").mkdir()
    os.mkfifo(cls / "dan" / lab.name)                                     # a FIFO (would hang a read)
    outside = tmp_path / "outside.ipynb"
    outside.write_text("{}")
    (cls / "eve").mkdir()
    os.link(outside, cls / "eve" / lab.name)                              # a hard link to a file outside
    (cls / "fay").mkdir()
    with open(cls / "fay" / lab.name, "wb") as f:                         # oversized (sparse)
        f.truncate(MAX_BYTES + 1)
    (cls / "gus" / "lab2").mkdir(parents=True)
    (cls / "gus" / "lab2" / lab.name).symlink_to(lab)                     # nbgrader's layout, one deeper
    (cls / "hal").mkdir()
    os.symlink(cls / "ann", cls / "hal" / "lab2")                         # a linked lab folder
    if os.geteuid() == 0:
        (cls / "ivy").mkdir()
        os.mknod(cls / "ivy" / lab.name, 0o600 | 0o020000, os.makedev(1, 3))  # a device (/dev/null's)
    got = read_class(cls)
    assert isinstance(got["bob"], str) and "symbolic link" in got["bob"]
    reasons = {s: got[s][0].refused for s in ("cyd", "dan", "eve", "fay", "gus", "hal")}
    assert all(r and "refused" in r for r in reasons.values()), reasons
    assert "symbolic link" in reasons["cyd"] and "FIFO" in reasons["dan"] and "hard link" in reasons["eve"]
    assert "MiB" in reasons["fay"] and "symbolic link" in reasons["gus"]
    if os.geteuid() == 0:
        assert "device" in got["ivy"][0].refused
    report = grade_class(ROOT, cls, {"lab2": lab}, sandboxed=False, limits=LIMITS, progress=lambda m: None)
    for s in ("bob", "cyd", "dan", "eve", "fay", "gus", "hal"):
        assert sum(r.score for r in report[s]) == 0 and all(r.status == "ERROR" for r in report[s]), s
        assert any("refused" in r.feedback for r in report[s]), s


# ------------------------------------------------------------------ time and memory
class RecordingSession:
    alive = True

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def request(self, message, timeout, callbacks=None):
        self.timeouts.append(timeout)
        return {"op": "return", "value": 1}


def test_no_call_outlives_the_labs_budget():
    s = RecordingSession()
    now = time.monotonic()
    student = Student(s, 60.0, now + 240.0, lab_deadline=now + 5.0)
    student.f()
    assert s.timeouts[-1] <= 5.0  # cut to the lab's deadline, not the call's 60 s or the part's 240 s
    late = Student(s, 60.0, now + 240.0, lab_deadline=now - 1.0)
    with pytest.raises(PartTimeout):
        late.f()


def test_the_whole_workers_memory_is_one_cap():
    """Three processes of 150 MiB each, under a 300 MiB cap for the worker: each is within the
    per-process limit, together they are over it. Each child says when its memory is resident
    (a byte on stdout) and then waits for stdin to close: the test waits for those three bytes,
    not for a time."""
    code = ("import os\nfor _ in range(3):\n    if os.fork() == 0:\n        b = bytearray(150 << 20)\n"
            "        b[::4096] = b'\\x01' * len(range(0, len(b), 4096))  # every page written: resident\n"
            "        os.write(1, b'r')\n        os.read(0, 1)\n        os._exit(0)\nos.read(0, 1)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            start_new_session=True)
    try:
        ready = b""
        while len(ready) < 3:  # a bound against a hang, not a measurement
            assert select.select([proc.stdout], [], [], 120)[0], "the children never reported their memory"
            chunk = os.read(proc.stdout.fileno(), 3 - len(ready))
            assert chunk, "the children exited before reporting their memory"
            ready += chunk
        assert memcap.MemoryCap(300 << 20).over(proc.pid), memcap.resident_bytes(proc.pid)
        assert not memcap.MemoryCap(2 << 30).over(proc.pid)
    finally:
        os.killpg(proc.pid, 9)  # this test's own process group: the child and its three
        proc.wait()


# ------------------------------------------------------------------ graded for real, sandboxed
@pytest.fixture(scope="module")
def tricked_class(tmp_path_factory):
    assert sandbox.available() is None, f"the red team needs the sandbox: {sandbox.available()}"
    folder = tmp_path_factory.mktemp("class39")
    for name, (lab, cells) in {**tricks39.OWN_WORK, **tricks39.TYPES}.items():
        redteam.write(folder, name, lab, redteam.notebook(lab, cells))
    redteam.write(folder, "defaultdict_buddy", "lab4", redteam.notebook("lab4", tricks39.defaultdict_buddy()))
    return labgrade.grade(folder, [ROOT / "labs" / "lab2_bandwidth_test.ipynb",
                                   ROOT / "labs" / "lab3_realtime_pipeline.ipynb",
                                   ROOT / "labs" / "lab4_buddy_eviction.ipynb"], limits=LIMITS)


@pytest.mark.slow
@pytest.mark.parametrize("trick", sorted(tricks39.OWN_WORK))
def test_cloning_the_courses_implementation_earns_nothing(tricked_class, trick):
    lab, cells = tricks39.OWN_WORK[trick]
    results = {r.grade_id: r for r in tricked_class[trick]}
    played = {p.grade_id for p in tricks39.parts_of(lab, cells)}
    assert played and all(results[g].score == 0 for g in played), {g: results[g].feedback for g in played}
    assert any("not available in this part" in results[g].feedback for g in played)
    others = [p for p in lab_parts(lab) if p.grade_id not in played]
    assert all(results[p.grade_id].score == p.points for p in others), [results[p.grade_id] for p in others]


@pytest.mark.slow
@pytest.mark.parametrize("trick", [*sorted(tricks39.TYPES), "defaultdict_buddy"])
def test_a_correct_answer_in_another_type_gets_full_marks(tricked_class, trick):
    results = tricked_class[trick]
    assert all(r.score == r.max_score for r in results), [(r.grade_id, r.feedback) for r in results if r.score < r.max_score]


def test_a_cgroup_v2_caps_the_worker_where_one_is_delegated(tmp_path, monkeypatch):
    """The cgroup path, on a stand-in hierarchy (this machine may have none): memory.max is the
    cap, and the cgroup's OOM kill is what `over` reports."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(memcap, "CGROUP", tmp_path)
    monkeypatch.setattr(memcap, "_own_cgroup", lambda: tmp_path)
    cap = memcap.MemoryCap(300 << 20)
    assert cap.cgroup is not None and (cap.cgroup / "memory.max").read_text() == str(300 << 20)
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory"
    (cap.cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    assert not cap.over(os.getpid())
    (cap.cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n")
    assert cap.over(os.getpid())
    (cap.cgroup / "memory.events").unlink()
    (cap.cgroup / "memory.max").unlink()
    cap.close()
    assert not cap.cgroup.exists()
