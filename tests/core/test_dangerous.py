"""Dangerous demonstrations stay in child processes with time limits.

Structural: every crash-prone child program in helpers/ is handed only to the sandbox, every
child process the helpers start has a timeout, and no notebook runs dangerous code itself.
Behavioural (no GPU needed): the sandbox really contains a crash and a hang, and the parent
keeps working; pointer_access's wrong ways go through the sandbox with a finite timeout.
The GPU side (the parent's CUDA context survives) is in test_um_live.py.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from helpers.ch05_unified_memory import pointer_access
from helpers.core.errors import InputError, InputTypeError
from helpers.measure import sandbox
from helpers.measure.kernel_vm import bundle

ROOT = Path(__file__).resolve().parents[2]
# the package's modules; the guest programs (package data) run in the kernel lab's VM, not here
HELPERS = sorted(p for p in (ROOT / "helpers").rglob("*.py") if bundle.SOURCES not in p.parents)
NOTEBOOKS = sorted(p for d in ("notebooks", "labs") for p in (ROOT / d).glob("*.ipynb")
                   if not p.name.startswith(".matrix-"))
SPAWNERS = {"run", "check_output", "check_call", "call", "Popen"}
DANGEROUS = ("GPU_READ_CHILD", "RESERVED_RANGE_CHILD")
# Measuring functions a page shows but that run only in a sandboxed child (pointer_access.child_script
# turns one into the child's program): a notebook may define them, never call them.
CHILD_ONLY = ("store_through_device_pointer",)
# The one module that may exec code: the lab grader's worker runs the learner's solution cells, and it
# runs only inside the grader's sandbox (tools/grader/sandbox.py: bubblewrap, another uid, rlimits).
EXEC_ALLOWED = {ROOT / "helpers" / "labs" / "grading" / "worker.py"}


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return f"{_name(func.value)}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else "?"


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_every_child_process_of_the_helpers_has_a_timeout():
    """subprocess.run & co. carry timeout=; a function that uses Popen waits with a timeout."""
    missing = []
    for path in HELPERS:
        tree = ast.parse(path.read_text())
        for fn in _functions(tree):
            calls = [c for c in _calls(fn) if _name(c.func).startswith("subprocess.")
                     and _name(c.func).split(".")[-1] in SPAWNERS]
            for c in calls:
                kw = {k.arg for k in c.keywords}
                where = f"{path.relative_to(ROOT)}:{c.lineno} ({fn.name})"
                if _name(c.func).endswith("Popen"):
                    waits = [w for w in _calls(fn) if isinstance(w.func, ast.Attribute)
                             and w.func.attr in ("communicate", "wait")
                             and any(k.arg == "timeout" for k in w.keywords)]
                    started_elsewhere = fn.name == "__init__"  # ToyGPU: waited for in _shutdown/start-up loop
                    # or the function polls the child against a time.monotonic() deadline
                    polls = any(isinstance(w.func, ast.Attribute) and w.func.attr == "poll" for w in _calls(fn))
                    clock = any(_name(w.func) == "time.monotonic" for w in _calls(fn))
                    if not waits and not started_elsewhere and not (polls and clock):
                        missing.append(where)
                elif "timeout" not in kw:
                    missing.append(where)
    assert not missing, "child processes without a time limit: " + ", ".join(missing)


def test_crash_prone_child_programs_go_only_to_the_sandbox():
    tree = ast.parse((ROOT / "helpers" / "ch05_unified_memory" / "pointer_access.py").read_text())
    uses = {}
    for c in _calls(tree):
        for a in c.args:
            if isinstance(a, ast.Name) and a.id in DANGEROUS:
                uses.setdefault(a.id, []).append(_name(c.func))
    assert set(uses) == set(DANGEROUS)
    assert all(f == ["sandbox.run_python"] for f in uses.values()), uses
    # a shown child-only function reaches a process only as child_script(...) handed to the sandbox
    scripts = [c for c in _calls(tree) if _name(c.func) == "child_script"]
    assert scripts and all(any(_name(o.func) == "sandbox.run_python" and c in o.args for o in _calls(tree))
                           for c in scripts)
    # and nowhere else: no exec/eval of them, no other reference
    for path in HELPERS:
        text = path.read_text()
        for name in DANGEROUS:
            if path.name != "pointer_access.py":
                assert name not in text, f"{path.name} refers to {name}"
        if path not in EXEC_ALLOWED:
            assert not any(_name(c.func) in ("exec", "eval") for c in _calls(ast.parse(text))), path.name


def test_notebooks_do_not_run_dangerous_code_in_their_own_kernel():
    """Stores through raw addresses, cuMemAlloc'd pointers and raw kernels on host addresses
    only ever appear in the helpers' sandboxed child programs, never in a notebook cell."""
    bad = ("ctypes.memset", "cuMemAlloc", "ctypes.memmove", "ctypes.string_at(")
    found = []
    for nb in NOTEBOOKS:
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] != "code":
                continue
            src = _without_child_only_definitions(src)
            found += [f"{nb.name}: {b}" for b in bad if b in src]
            found += [f"{nb.name}: calls {n}" for n in CHILD_ONLY if re.search(rf"\b{n}\s*\(", src)]
    assert not found, found


def _without_child_only_definitions(src: str) -> str:
    """The cell's code minus the definitions of CHILD_ONLY functions (shown on the page, run in a child)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in CHILD_ONLY:
            for i in range(node.lineno - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines)


def test_wrong_ways_use_the_sandbox_with_a_finite_timeout(monkeypatch):
    seen = []

    def fake(code, timeout_s=60.0, *, env=None):
        seen.append((code, timeout_s))
        return sandbox.Outcome(status="signal", returncode=None, signal_number=11, signal_name="SIGSEGV",
                               duration_s=0.1, timeout_s=timeout_s)

    monkeypatch.setattr(sandbox, "run_python", fake)
    pointer_access.host_write_through_device_pointer()
    pointer_access.gpu_reads_malloc_pointer()
    pointer_access.cpu_write_to_reserved_range()
    assert [c for c, _ in seen] == [pointer_access.child_script(pointer_access.store_through_device_pointer),
                                    pointer_access.GPU_READ_CHILD, pointer_access.RESERVED_RANGE_CHILD]
    assert all(0 < t <= sandbox.MAX_TIMEOUT_S for _, t in seen)


def test_a_real_crash_stays_in_the_child_and_the_parent_carries_on():
    before = os.getpid(), len(os.listdir("/proc/self/task"))
    out = pointer_access.cpu_write_to_reserved_range(timeout_s=60)
    assert out.status == "signal" and out.signal_name in ("SIGSEGV", "SIGBUS"), out.summary()
    assert out.results.get("reserved_ptr"), "the child reported its address before it died"
    assert (os.getpid(), len(os.listdir("/proc/self/task"))) == before
    assert sum(range(1000)) == 499500  # this process still computes


def test_a_hang_is_killed_with_everything_it_started(tmp_path):
    pidfile = tmp_path / "grandchild"
    code = ("import subprocess, time\n"
            f"p = subprocess.Popen(['sleep', '300']); open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(300)")
    out = sandbox.run_python(code, timeout_s=3)
    assert out.status == "timeout" and out.duration_s < 60
    pid = int(pidfile.read_text())
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    assert state in ("gone", "Z"), "the hung child's own child survived the timeout"


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "10", None, True, 10_000])
def test_the_sandbox_refuses_unbounded_or_bad_timeouts(timeout):
    with pytest.raises((InputError, InputTypeError), match="timeout"):
        sandbox.run_python("print(1)", timeout)

