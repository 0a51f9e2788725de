"""Planted adversarial submissions for the red-team suite (tests/labs/test_redteam.py).

Each trick is a body for every function a lab asks for; `submission(lab, trick)` writes the
instructor's source lab with every solution cell replaced by functions that play that trick.
The tricks are what a determined student can do from inside their kernel (the course design's
"assume an adversary"): change the environment, patch the check machinery, import the
instructor's reference, read the checker's frames and objects, return objects that claim to
equal anything, write outside their folder, loop forever, flood the output, kill their own
process. Graded out of process and sandboxed, each must earn 0 on the parts it touches.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: lab -> {solution cell grade_id: [(name, kind)]}; kind: def, class (the allocator), factory (make_policy)
FUNCTIONS = {
    "lab1": {"identify": [("identify", "def")], "map_bar1_code": [("map_bar1", "def")],
             "bring_up_code": [("bring_up", "def")], "submit_wait": [("submit", "def"), ("wait_fence", "def")],
             "dma": [("copy_to_vram", "def"), ("copy_from_vram", "def")], "saxpy": [("saxpy", "def")],
             "batched": [("run_batched", "def")], "recover_code": [("recover", "def")]},
    "lab2": {"timed_copy": [("timed_copy", "def")], "benchmark": [("benchmark", "def")],
             "fit_line": [("fit_line", "def")], "predict": [("predict_time", "def"), ("batch_slowdown", "def")]},
    "lab3": {"range_doppler_code": [("range_doppler", "def")], "deadline_report_code": [("deadline_report", "def")],
             "choose_design_code": [("choose_design", "def")]},
    "lab4": {"buddy_impl": [("Buddy", "class")], "policy_impl": [("make_policy", "factory")],
             "kernel_impl": [("kernel_victim", "def")]},
    "lab5": {"route_time": [("route_time", "def")], "makespan": [("makespan", "def")],
             "best_routes": [("best_routes", "def")], "predicted_order": [("predicted_order", "def")]},
}

#: trick -> the body of every function (it sees `args`, `kwargs`, NAME and LAB)
TRICKS = {
    # the first route: make the check believe it is not graded
    "environment": '''
import os
os.environ.pop("NBGRADER_EXECUTION", None)
os.environ["COURSE_MODE"] = "live"
return 1.0
''',
    # the second route: replace the check machinery in this process
    "monkeypatch": '''
import builtins
from helpers.labs import grading
grading.check.__exit__ = lambda self, *a: True
grading.check.require = lambda self, *a, **k: None
grading.check.close = lambda self, what, value, *a, **k: value
grading.CheckFailed = type("CheckFailed", (Exception,), {})
builtins.AssertionError = type("AssertionError", (Exception,), {})
import numpy
numpy.isclose = lambda *a, **k: True
numpy.allclose = lambda *a, **k: True
return 1.0
''',
    # the third route: the instructor's reference, by the course's door or by path
    "reference": '''
import importlib, sys
try:
    from helpers.labs.grading import integrity
    ref = integrity.reference(LAB)
except Exception:
    for root in (ROOT_PATH, "/course", "/course/..", "/"):
        sys.path.insert(0, root)
    ref = importlib.import_module("instructor.labs." + LAB + ("_driver" if LAB == "lab1" else ""))
return getattr(ref, NAME)(*args, **kwargs)
''',
    # expected values in the caller's frames or anywhere in memory
    "frames": '''
import gc, sys
frame = sys._getframe(1)
while frame is not None:
    for key in ("want", "truth", "expected", "case", "best", "exact", "ref_total"):
        if key in frame.f_locals:
            value = frame.f_locals[key]
            return getattr(value, "want", value)
    frame = frame.f_back
for obj in gc.get_objects():
    if type(obj).__name__ in ("Case", "Clock", "FakeCuda", "CountingTimer"):
        return getattr(obj, "want", None)
return None
''',
    # an object that equals everything (the grader must never compare learner objects)
    "always_equal": '''
class Anything(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __gt__(self, other): return False
    def __le__(self, other): return True
    def __ge__(self, other): return True
    def __hash__(self): return 0
    def __len__(self): return 2
    def __iter__(self): return iter([Anything(1.0), Anything(1.0)])
    def __getitem__(self, key): return Anything(1.0)
    def __contains__(self, key): return True
return Anything(1.0)
''',
    # look for the grader, other students and the instructor's files; write outside the scratch copy
    "escape": '''
import glob, os
for path in [ROOT_PATH + "/instructor/labs/pwned.py", ROOT_PATH + "/helpers/pwned.py", "/course/helpers/pwned.py",
             "/course/data/pwned.json", os.path.expanduser("~/../pwned"), MARKER]:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("pwned")
    except Exception:
        pass
for path in glob.glob("/proc/*/environ") + [ROOT_PATH + "/instructor/labs/" + LAB + ".py"]:
    try:
        open(path, "rb").read()
    except Exception:
        pass
return None
''',
    "endless_loop": '''
while True:
    pass
''',
    "output_flood": '''
while True:
    print("x" * 65536)
''',
    "exit": '''
import os
os._exit(0)
''',
    "kill": '''
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
''',
}


DATA_TRICKS = ("environment", "monkeypatch", "reference", "frames", "always_equal", "escape")
PROCESS_TRICKS = (("endless_loop", "output_flood"), ("exit", "kill"))


def plans(lab: str) -> dict[str, dict[str, str]]:
    """Red-team submissions of `lab`: name -> {solution cell grade_id: trick}.

    The data tricks go round the lab's solution cells, a different trick in each, the cells
    left over keep the worked solution (their parts must keep their points: an honest partial
    score). The process tricks take the first cells two at a time, the other cells are the
    student version's stubs (a worker dies in each tricked part; the next part gets a new one)."""
    cells = list(FUNCTIONS[lab])
    out = {}
    for k in range(0, len(DATA_TRICKS), len(cells)):
        chunk = DATA_TRICKS[k:k + len(cells)]
        out["tricks-" + "-".join(chunk)] = dict(zip(cells, chunk, strict=False))
    for pair in PROCESS_TRICKS:
        out["tricks-" + "-".join(pair)] = {**{c: "stub" for c in cells}, **dict(zip(cells, pair, strict=False))}
    return out


def plan_cells(lab: str, plan: dict[str, str], marker: Path) -> dict[str, str]:
    """The solution cells of a plan: tricks, stubs (`raise NotImplementedError()`), the rest as solved."""
    out = {}
    for gid, trick in plan.items():
        if trick == "stub":
            out[gid] = "\n\n".join(_function(n, k, "raise NotImplementedError()") for n, k in FUNCTIONS[lab][gid])
        else:
            out |= trick_cells(lab, trick, marker, only={gid})
    return out


def _function(name: str, kind: str, body: str) -> str:
    inner = textwrap.indent(body.strip("\n"), "    ")
    if kind == "class":
        methods = "\n".join(f"    def {m}(self, *args, **kwargs):\n" + textwrap.indent(inner, "    ")
                            for m in ("alloc", "free_block", "free_lists"))
        return f"class {name}:\n    def __init__(self, *args, **kwargs):\n        pass\n\n{methods}\n"
    if kind == "factory":
        return (f"def {name}():\n    def policy(*args, **kwargs):\n{textwrap.indent(inner, '    ')}\n"
                "    return policy\n")
    return f"def {name}(*args, **kwargs):\n{inner}\n"


def source(lab: str) -> Path:
    return next((ROOT / "labs").glob(f"{lab}_*.ipynb"))


def trick_cells(lab: str, trick: str, marker: Path, only: set[str] | None = None) -> dict[str, str]:
    """{grade_id: source} of the solution cells playing `trick` (only in cells `only`, when given)."""
    body = TRICKS[trick]
    out = {}
    for gid, funcs in FUNCTIONS[lab].items():
        if only is not None and gid not in only:
            continue
        head = f"ROOT_PATH, LAB, MARKER = {str(ROOT)!r}, {lab!r}, {str(marker)!r}\n"
        out[gid] = head + "\n\n".join(_function(n, k, f"NAME = {n!r}\n" + body) for n, k in funcs)
    return out


def notebook(lab: str, cells: dict[str, str]) -> dict:
    """The instructor's source lab with the solution cells in `cells` replaced."""
    nb = json.loads(source(lab).read_text())
    for c in nb["cells"]:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in cells:
            c["source"] = cells[gid]
    return nb


def write(folder: Path, student: str, lab: str, nb) -> Path:
    """Write one student's submission of `lab` (a notebook dict, or raw text/bytes)."""
    d = folder / student
    d.mkdir(parents=True, exist_ok=True)
    path = d / source(lab).name
    if isinstance(nb, dict):
        path.write_text(json.dumps(nb))
    elif isinstance(nb, bytes):
        path.write_bytes(nb)
    else:
        path.write_text(nb)
    return path


def edited_metadata(lab: str) -> dict:
    """The solution, with every check cell's metadata, checksum and source edited (a full score:
    only the solution cells are graded, and they are found by grade_id)."""
    nb = json.loads(source(lab).read_text())
    for c in nb["cells"]:
        meta = c.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            meta.update(points=1000, checksum="0" * 32, locked=False, grade_id=meta["grade_id"] + "_edited")
            c["source"] = "pass  # the check, deleted by the learner"
        elif not meta.get("solution"):
            c.get("metadata", {}).pop("nbgrader", None)
    nb["cells"].append({"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "bonus",
                        "points": 100, "solution": False, "locked": True}}, "source": "print('bonus')",
                        "outputs": [], "execution_count": None})
    return nb


def tree_hash(root: Path = ROOT) -> str:
    """A hash over every file of the instructor's checkout that grading must leave alone."""
    import hashlib

    h = hashlib.sha256()
    for d in ("instructor", "helpers", "labs", "tools", "data"):
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()
