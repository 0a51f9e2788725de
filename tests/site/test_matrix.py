"""tools/matrix/runner.py: a clean notebook passes, planted leaks are caught, results merge into a table.

The leaks are planted for real (no GPU needed): locked host memory that nothing references,
a child process the kernel started and forgot, and an orphan that outlives the kernel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]

START = 'from helpers import course\nctx = course.start("matrix test", quiet=True)'
LEAKY = """\
import ctypes, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.malloc.restype = ctypes.c_void_p
p = libc.malloc(256 * 1024)
assert libc.mlock(ctypes.c_void_p(p), ctypes.c_size_t(256 * 1024)) == 0, ctypes.get_errno()
del p                                   # locked, and nothing refers to it any more
subprocess.Popen(["sleep", "301"], start_new_session=True)   # a child nobody waits for
subprocess.run(["setsid", "-f", "sleep", "302"], check=True)  # an orphan in its own session
"""


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    for i, c in enumerate(nb.cells):
        c.id = f"c{i:02d}"
    nbformat.write(nb, str(path))
    return path


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH")) if x))
    env.pop("COURSE_MODE", None)
    return env


def _matrix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.matrix.runner", *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=600)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("nbs")
    clean = _notebook(d / "clean.ipynb", START, "x = sum(range(10))\nprint(x)")
    leaky = _notebook(d / "leaky.ipynb", START, LEAKY, "print('the next cell still runs')")
    out = d / "result.json"
    proc = _matrix("run", "--mode", "replay", "--name", "planted", "--out", str(out),
                   "--pinned-tolerance", str(64 * 1024), str(clean), str(leaky))
    assert out.exists(), proc.stdout + proc.stderr
    return {"proc": proc, "result": json.loads(out.read_text()), "dir": d}


def test_clean_notebook_passes_without_leaks(planted):
    clean = planted["result"]["notebooks"][0]
    assert clean["passed"], clean["output_tail"]
    assert clean["leak_check_ran"] and clean["leaks"] == []


def test_notebook_time_counts_its_cells_not_pytest_or_the_probe(planted):
    clean = planted["result"]["notebooks"][0]
    assert 0 < clean["cells_seconds"] < clean["seconds"]  # pytest's own start-up is not the notebook's
    assert planted["result"]["cells_seconds"] >= clean["cells_seconds"]


def _matrix_module():
    from tools.matrix import runner

    return runner


def test_cell_durations_are_summed_without_the_injected_probe_cells():
    m = _matrix_module()
    out = ("==== slowest durations ====\n"
           "2.00s setup    notebooks/x.ipynb::Cell 0\n"
           "0.90s call     notebooks/x.ipynb::Cell 0\n"
           "0.40s call     notebooks/x.ipynb::Cell 1\n"
           "5.00s call     notebooks/x.ipynb::Cell 2\n"
           "0.30s call     notebooks/x.ipynb::Cell 3\n"
           "0.10s teardown notebooks/x.ipynb::Cell 3\n"
           "1 passed in 9.00s\n")
    assert m.notebook_seconds(out, {"Cell 1", "Cell 3"}) == 7.9  # Cell 1 and Cell 3 are the probe's
    assert m.slowest_cells(out) == [["Cell 2", 5.0], ["Cell 0", 0.9]]


def test_a_run_says_whether_its_kernels_find_bytecode(tmp_path, monkeypatch):
    """Without bytecode every kernel compiles its libraries again (229 vs 174 s on the H100): the
    result records it, and says it is missing only when Python writes none and there is none."""
    import py_compile

    m = _matrix_module()
    (tmp_path / "bc_probe_lib.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    off = {"PYTHONDONTWRITEBYTECODE": "1"}
    missing = m.bytecode_state(off, "bc_probe_lib")
    assert (missing["writes"], missing["module_cached"], missing["missing"]) == (False, False, True)
    assert m.bytecode_state({}, "bc_probe_lib")["missing"] is False  # kernels will write it themselves
    py_compile.compile(str(tmp_path / "bc_probe_lib.py"), cfile=importlib.util.cache_from_source(
        str(tmp_path / "bc_probe_lib.py")))
    there = m.bytecode_state(off, "bc_probe_lib")
    assert (there["module_cached"], there["missing"]) == (True, False)
    assert m.bytecode_state(off, "no_such_module_here")["missing"] is False  # unknown: no claim


def test_the_planted_run_records_its_bytecode_state(planted):
    assert set(planted["result"]["bytecode"]) >= {"writes", "module_cached", "missing"}


def test_the_copy_names_the_cells_it_injected(tmp_path):
    m = _matrix_module()
    nb = _notebook(tmp_path / "two.ipynb", START, "x = 1")
    nbformat_nb = nbformat.read(str(nb), as_version=4)
    nbformat_nb.cells.insert(1, nbformat.v4.new_markdown_cell("text between"))
    nbformat.write(nbformat_nb, str(nb))
    copy, probes = m.instrumented_copy(nb, tmp_path / "r.json", pinned_tolerance=0, device_tolerance=0)
    code = [c.source for c in nbformat.read(str(copy), as_version=4).cells if c.cell_type == "code"]
    copy.unlink()
    assert probes == {"Cell 1", "Cell 3"}
    assert all(code[int(name.split()[1])].startswith("# injected by tools/matrix/runner.py") for name in probes)
    assert not any(code[i].startswith("# injected") for i in (0, 2))


def test_planted_leaks_are_each_caught(planted):
    leaky = planted["result"]["notebooks"][1]
    assert not leaky["passed"]
    text = "\n".join(leaky["leaks"])
    assert "pinned host memory" in text
    assert re.search(r"child process \d+ still running: sleep 301", text)
    assert re.search(r"orphan process \d+ outlived the kernel: sleep 302", text)
    grew = leaky["kernel"]["final"]["locked_host_bytes"] - leaky["kernel"]["baseline"]["locked_host_bytes"]
    assert grew >= 256 * 1024


def test_leaked_processes_are_killed_and_the_run_says_so(planted):
    res, proc = planted["result"], planted["proc"]
    assert proc.returncode == 1
    assert (res["passed"], res["total"]) == (1, 2) and res["leaks"] >= 3
    pids = [int(p) for p in re.findall(r"(?:process|orphan process) (\d+)", "\n".join(res["notebooks"][1]["leaks"]))]
    assert pids and not any(_alive(p) for p in pids)
    # pinned memory, the forgotten child (seen inside the kernel, then again as an orphan once
    # the kernel is gone) and the orphan
    assert res["leaks"] == 4
    assert res["row"] == "| no GPU | replay forced (COURSE_MODE=replay), no GPU | 1/2 | 4 |" or res["gpus"]
    assert not list(planted["dir"].glob(".matrix-*")), "the instrumented copies must be removed"


def test_merge_makes_a_table_and_names_a_bad_file(planted, tmp_path):
    good = tmp_path / "a.json"
    good.write_text(json.dumps(planted["result"]))
    second = dict(planted["result"], machine="2× NVIDIA H200", mode="live", passed=2, leaks=0)
    (tmp_path / "b.json").write_text(json.dumps(second))
    proc = _matrix("merge", str(good), str(tmp_path / "b.json"), "--out", str(tmp_path / "t.md"))
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "t.md").read_text().splitlines()
    assert lines[0].startswith("| machine | mode | notebooks passed | leaks found |")
    assert lines[3] == "| 2× NVIDIA H200 | live | 2/2 | 0 |"
    bad = tmp_path / "bad.json"
    bad.write_text('{"machine": "x"')
    proc = _matrix("merge", str(good), str(bad))
    assert proc.returncode == 2 and str(bad) in proc.stderr


def test_a_spent_budget_leaves_the_rest_not_reached(tmp_path):
    first = _notebook(tmp_path / "first.ipynb", "import time\ntime.sleep(1.0)")
    second = _notebook(tmp_path / "second.ipynb", "print('never run')")
    out = tmp_path / "r.json"
    proc = _matrix("run", "--mode", "replay", "--budget-s", "0.5", "--out", str(out), str(first), str(second))
    res = json.loads(out.read_text())
    assert proc.returncode == 1, "a row with a notebook not reached is not green"
    assert [r["notebook"] for r in res["notebooks"]] == [str(first)]
    assert res["not_reached"] == [str(second)] and (res["passed"], res["total"]) == (1, 2)
    assert "| 1/2 (1 not reached) | 0 |" in res["row"]


def test_a_run_cut_short_still_leaves_what_it_finished(tmp_path):
    """The result is rewritten after every notebook, so a GPU call that runs out of time
    still brings back the rows it did finish; and a second run started meanwhile on the same
    machine is refused (its GPU check would count the first run's notebooks as leaks)."""
    import signal
    import time

    first = _notebook(tmp_path / "first.ipynb", "print(1)")
    slow = _notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(300)")
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "tools.matrix.runner", "run", "--mode", "replay", "--out", str(out),
                             str(first), str(slow)], cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        second = _matrix("run", "--mode", "replay", str(first))  # while the slow one runs
        assert second.returncode == 2 and f"another matrix run (pid {proc.pid})" in second.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    res = json.loads(out.read_text())
    assert [r["notebook"] for r in res["notebooks"]] == [str(first)] and res["notebooks"][0]["passed"]
    assert res["not_reached"] == [str(slow)]
    assert res["row"].endswith("| 1/2 (1 not reached) | 0 |")


def test_default_notebooks_pick_up_every_chapter_and_lab():
    from tools.matrix import runner as matrix

    found = {p.relative_to(ROOT).as_posix() for p in matrix.default_notebooks()}
    on_disk = {p.relative_to(ROOT).as_posix() for d in ("notebooks", "labs") for p in (ROOT / d).glob("*.ipynb")}
    assert found == on_disk and len(found) >= 11
    assert matrix.machine_name(["NVIDIA H200", "NVIDIA H200"]) == "2× NVIDIA H200"
    assert matrix.machine_name([]) == "no GPU"


@pytest.mark.gpu
def test_planted_device_leak_is_caught_live(tmp_path):
    """On a GPU: 256 MiB of device memory and 128 MiB of cudaHostAlloc'd memory kept alive by a
    module (they survive the namespace) are leaks; the same held in a variable are not."""
    from conftest import has_gpu

    if not has_gpu():
        pytest.skip("needs a usable CUDA GPU; runs live on the GPU machine")
    leaky = _notebook(tmp_path / "device_leak.ipynb", START,
                      "import cupy, helpers\nhelpers._planted = cupy.zeros(256 << 20, dtype=cupy.uint8)\n"
                      "helpers._planted_pinned = cupy.cuda.alloc_pinned_memory(128 << 20)")
    clean = _notebook(tmp_path / "device_clean.ipynb", START,
                      "import cupy\nx = cupy.zeros(256 << 20, dtype=cupy.uint8)\nprint(int(x.sum()))\n"
                      "h = cupy.cuda.alloc_pinned_memory(128 << 20)")
    out = tmp_path / "r.json"
    _matrix("run", "--mode", "live", "--out", str(out), str(clean), str(leaky))
    res = json.loads(out.read_text())
    ok, bad = res["notebooks"]
    assert ok["passed"] and ok["leaks"] == [], ok
    text = "\n".join(bad["leaks"])
    assert not bad["passed"] and "device memory" in text and "CuPy's pool" in text, bad
    assert "pinned host memory" in text, f"the pinned (cudaHostAlloc) leak was not seen: {bad}"


def test_load_runs_kernels_side_by_side_and_checks_leaks_around_them(tmp_path):
    """Two kernels at once, each running a clean and a leaky notebook: every run is counted, the
    leaks are caught inside each kernel and (orphans) once around the load, and without a GPU the
    bandwidth probe says why it measured nothing."""
    clean = _notebook(tmp_path / "clean.ipynb", START, "x = 1")
    leaky = _notebook(tmp_path / "leaky.ipynb", START, LEAKY)
    out = tmp_path / "load.json"
    proc = _matrix("load", "--kernels", "2", "--mode", "replay", "--out", str(out),
                   "--pinned-tolerance", str(64 * 1024), str(clean), str(leaky))
    res = json.loads(out.read_text())
    assert proc.returncode == 1 and res["kernels"] == 2 and (res["passed"], res["total"]) == (2, 4)
    assert res["failures"] == 2 and [len(k["notebooks"]) for k in res["kernel_results"]] == [2, 2]
    assert [k["notebooks"][0]["notebook"].endswith(n) for k, n in zip(res["kernel_results"], ("clean.ipynb", "leaky.ipynb"),
                                                                      strict=True)] == [True, True]  # rotated
    text = "\n".join(res["leak_list"])
    assert text.count("pinned host memory") == 2 and re.search(r"orphan process \d+ outlived its kernel", text)
    if not res["gpus"]:
        assert len(res["probe_errors"]) == 2 and "no usable GPU" in res["probe_errors"][0]
    assert res["wall_seconds"] > 0 and not list(tmp_path.glob(".matrix-*"))
