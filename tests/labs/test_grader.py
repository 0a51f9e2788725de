"""The lab grader (tools/grader): what crosses the pipe, what is read from a submission, the
sandbox a worker runs in, and that each lab's graded parts match its notebook."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from helpers.labs.grading import wire  # noqa: E402
from helpers.models import routes  # noqa: E402
from tools.grader import classrun, sandbox  # noqa: E402
from tools.grader.api import Student, StudentRaised  # noqa: E402
from tools.grader.session import Session, WorkerGone  # noqa: E402
from tools.grader.submission import SubmissionError, lab_source, solution_cells  # noqa: E402

LABS = sorted((ROOT / "labs").glob("lab*.ipynb"))


# ------------------------------------------------------------------------------- the wire
def _roundtrip(x):
    return wire.decode(json.loads(wire.dumps({"v": wire.encode(x)}))["v"])


def test_plain_data_crosses_unchanged():
    wire.allow((routes.LinkMatrix,))
    m = routes.synthetic(3, 5)
    x = {"t": (1, 2.5, "a"), 3: [None, True], "nan": math.nan, "a": np.arange(6, dtype=np.float32).reshape(2, 3),
         "s": np.float64(2.0), "m": m}
    y = _roundtrip(x)
    assert y["t"] == (1, 2.5, "a") and y[3] == [None, True] and math.isnan(y["nan"]) and y["s"] == 2.0
    assert y["a"].dtype == np.float32 and y["a"].shape == (2, 3) and (y["a"] == x["a"]).all()
    assert y["m"] == m and isinstance(y["m"], routes.LinkMatrix)


class Liar(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def test_a_subclass_crosses_as_its_plain_value():
    y = _roundtrip([Liar(1.0), {"k": Liar(2.0)}])
    assert type(y[0]) is float and y[0] == 1.0 and y[0] != 5.0 and type(y[1]["k"]) is float


@pytest.mark.parametrize("value", [object(), np.array([object()]), {1: object()}, [lambda: 1], Ellipsis])
def test_objects_that_are_not_plain_data_are_refused(value):
    with pytest.raises(wire.WireError):
        wire.encode(value)


def test_only_the_dataclasses_the_lab_declares_cross():
    """wire knows no chapter or model: what may cross is what the graded lab declares (WIRE_TYPES)."""
    m = routes.synthetic(2, 1)
    wire.allow(())
    with pytest.raises(wire.WireError):
        wire.encode(m)
    wire.allow_named([wire.type_name(routes.LinkMatrix)])  # the worker, told by the grader
    sent = wire.encode(m)
    assert sent["__dc__"] == "helpers.models.routes:LinkMatrix" and wire.decode(sent) == m
    wire.allow(())
    with pytest.raises(wire.WireError):
        wire.decode(sent)  # another lab's dataclass is refused


@pytest.mark.parametrize("names", [["os:system"], ["helpers.models.routes:HOST"], ["helpers.models.routes:Nope"],
                                   ["helpers.models.routes"], ["helpers.models.routes:a.b"]])
def test_a_worker_imports_only_course_dataclasses(names):
    with pytest.raises(wire.WireError):
        wire.allow_named(names)


def _imports(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return imported | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_wire_imports_no_chapter_and_no_lab():
    imported = _imports(ROOT / "helpers" / "labs" / "grading" / "wire.py")
    assert {m for m in imported if m.startswith("helpers")} == {"helpers.core.errors"}


def test_the_learner_side_imports_no_chapter_no_tool_and_nothing_of_the_instructors():
    """helpers/labs/grading runs in the learner's kernel and the sandbox: no chapter, no tools/, no instructor/."""
    for path in sorted((ROOT / "helpers" / "labs" / "grading").glob("*.py")):
        bad = {m for m in _imports(path) if m.startswith(("helpers.ch", "tools", "instructor"))}
        assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("data", [{"__dc__": "Evil", "v": {}}, {"__dc__": ["x"], "v": {}}, {"__remote__": "callback", "name": "x"},
                                  {"__nd__": ["object", [1], ""]}, {"__nd__": ["float64", [3], "AAAA"]}])
def test_what_a_worker_sends_decodes_to_data_or_is_refused(data):
    with pytest.raises(wire.WireError):
        wire.decode(data)


# ------------------------------------------------------------------------------- submissions
def test_only_solution_cells_are_taken(tmp_path):
    src = ROOT / "labs" / "lab5_p2p_routing.ipynb"
    source = lab_source(src)
    assert source.solution_ids == ("route_time", "makespan", "best_routes", "predicted_order")
    assert "course.start" in source.setup[0] and sum(source.points.values()) == 25
    nb = json.loads(src.read_text())
    for c in nb["cells"]:
        meta = c.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            c["source"] = "import os; os.system('rm -rf /')"
    p = tmp_path / src.name
    p.write_text(json.dumps(nb))
    cells = solution_cells(p, source)
    assert list(cells) == list(source.solution_ids)
    assert all("rm -rf" not in s for s in cells.values())


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b'{"cells": [{"cell_type": "code", "source": "x"}]}'])
def test_a_file_that_is_not_the_lab_is_refused_with_a_reason(tmp_path, content):
    p = tmp_path / "lab5_p2p_routing.ipynb"
    p.write_bytes(content)
    with pytest.raises(SubmissionError):
        solution_cells(p, lab_source(ROOT / "labs" / p.name))


@pytest.mark.parametrize("lab", [p for p in LABS if (ROOT / "instructor" / "labs" / f"{p.name[:4]}_checks.py").exists()],
                         ids=lambda p: p.name)
def test_graded_parts_match_the_notebook(lab):
    source = lab_source(lab)
    parts = classrun.lab_parts(source.lab)
    assert [p.grade_id for p in parts] == list(source.points)
    assert {p.grade_id: p.points for p in parts} == source.points


def test_part_seeds_are_reproducible_and_differ_by_part():
    assert classrun.part_seed(7, "a") == classrun.part_seed(7, "a") != classrun.part_seed(7, "b")


# ------------------------------------------------------------------------------- the sandbox
FACTS = '''
def facts(root):
    import os, socket
    out = {"uid": os.getuid(), "cwd": os.getcwd(), "instructor_visible": os.path.exists(root + "/instructor"),
           "course": sorted(os.listdir("/course")), "env": sorted(k for k in os.environ if "NBGRADER" in k),
           "home": sorted(os.listdir("."))}
    for name, path in (("write_course", "/course/helpers/x.py"), ("write_root", root + "/x"),
                       ("write_scratch", "mine.txt")):
        try:
            with open(path, "w") as f:
                f.write("x")
            out[name] = True
        except OSError:
            out[name] = False
    try:
        with open("big.bin", "wb") as f:
            for _ in range(12):
                f.write(b"x" * (1 << 20))
        out["write_12_mib"] = True
    except OSError:
        out["write_12_mib"] = False
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        out["network"] = True
    except OSError:
        out["network"] = False
    return out


def loop():
    while True:
        pass
'''


def test_a_worker_sees_no_instructor_files_no_network_and_writes_only_its_scratch(tmp_path):
    assert sandbox.available() is None, f"grading needs the sandbox (labs/README.md): {sandbox.available()}"
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # the grader's environment does not leak in
    try:
        (tmp_path / "scratch").mkdir()
        (tmp_path / "scratch" / "lab5_p2p_routing.ipynb").write_text("{}")
        with Session(ROOT, tmp_path / "scratch", limits=sandbox.Limits(call_s=10, scratch_bytes=8 << 20)) as s:
            assert s.request({"op": "load", "setup": [], "cells": {"x": FACTS}}, 60)["errors"] == {}
            f = Student(s, 20).facts(str(ROOT))
    finally:
        del os.environ["NBGRADER_EXECUTION"]
    assert f["instructor_visible"] is False and f["course"] == ["data", "helpers"]
    assert f["write_course"] is False and f["write_root"] is False and f["write_scratch"] is True
    assert f["network"] is False and f["env"] == [] and f["write_12_mib"] is False  # its home holds 8 MiB
    if os.geteuid() == 0:
        assert f["uid"] == sandbox.NOBODY
    assert f["cwd"] == sandbox.SCRATCH and f["home"] == ["lab5_p2p_routing.ipynb"]
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == ["lab5_p2p_routing.ipynb"]  # nothing out


def test_a_hung_call_is_killed_at_its_deadline_and_a_raise_comes_back_as_data(tmp_path):
    with Session(ROOT, tmp_path / "scratch") as s:
        s.request({"op": "load", "setup": [], "cells": {"x": FACTS + "\ndef bad():\n    raise KeyError('k')\n"}}, 60)
        with pytest.raises(StudentRaised) as exc:
            Student(s, 10).bad()
        assert exc.value.isa("KeyError") and exc.value.isa("LookupError") and not exc.value.isa("ValueError")
        with pytest.raises(WorkerGone, match="did not answer in time"):
            Student(s, 2).loop()
        assert not s.alive and s.proc.poll() is not None


def test_the_lab5_reference_raises_what_the_lab_asks_for():
    """Lab 5 asks route_time to raise ValueError on a missing link; the reference (bound in
    place of the learner's route_time for later parts) must too, not RoutingError."""
    from instructor.labs import lab5

    missing = routes.LinkMatrix(2, {("GPU0", "host"): 1e-6}, {("GPU0", "host"): 1e9})
    with pytest.raises(ValueError, match="no link GPU0 -> GPU1"):
        lab5.route_time(missing, ("GPU0", "GPU1"), 8)


def test_feedback_cannot_forge_report_lines():
    forged = "boom\n== mallory ==\nlab5: check_makespan ..... OK (5/5)\x1b[2J"
    out = classrun.printable(forged)
    assert "\n" not in out and "\x1b" not in out and "\\x1b" in out and "== mallory ==" in out


def test_a_deeply_nested_file_is_refused_not_a_crash(tmp_path):
    p = tmp_path / "lab5_p2p_routing.ipynb"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SubmissionError):
        solution_cells(p, lab_source(ROOT / "labs" / p.name))
