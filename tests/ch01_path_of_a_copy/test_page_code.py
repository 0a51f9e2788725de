"""Chapter 1's measuring code on the page: how it reaches the traced child (loops.code_file and
the workload's loader), the one strace lookup, and the exercises' checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.ch01_path_of_a_copy import exercises, loops, syscalls
from helpers.core import config, errors, evidence, experiments

WORKLOAD = Path(syscalls.WORKLOAD)


def test_code_file_writes_the_functions_text_without_decorators(tmp_path):
    path, name = loops.code_file(loops.copy_loop, tmp_path)
    text = path.read_text()
    assert name == "copy_loop" and text.startswith("def copy_loop(rounds: int, nbytes: int) -> bool:")
    assert "rt.memcpy(" in text and "dev += 1" in text


def test_code_file_refuses_what_cannot_travel(tmp_path):
    with pytest.raises(errors.InputError, match="define it with `def`"):
        loops.code_file(lambda r, n: True, tmp_path)
    with pytest.raises(errors.InputTypeError):
        loops.code_file("copy_loop", tmp_path)


def test_the_child_defines_the_page_function_from_its_file(tmp_path):
    """The child's loader (no GPU needed to define a function) gives back the same function text.
    Empty stand-ins for cupy and cupyx let it import where CuPy is not installed (a laptop, CI)."""
    path, name = loops.code_file(loops.cpu_seconds, tmp_path)
    for mod in ("cupy", "cupyx"):
        (tmp_path / "standins" / mod).mkdir(parents=True)
        (tmp_path / "standins" / mod / "__init__.py").write_text("")
    probe = (f"import _copy_workload as w; "
             f"f = w._load({str(path)!r}, {name!r}); print(f.__name__, sorted(f.__globals__))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "standins"), str(WORKLOAD.parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("cpu_seconds") and "'resource'" in out.stdout and "'cp'" in out.stdout


def test_the_experiments_show_the_pages_functions():
    reg = experiments.discover()
    assert reg["path.syscall_census"].shown is loops.copy_loop
    assert reg["path.cpu_time"].shown is loops.cpu_seconds


def test_one_strace_lookup_for_the_contract_and_the_chapter(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    found, why = config.strace_binary()
    assert found is None and "apt-get install strace" in why
    with pytest.raises(syscalls.StraceMissingError, match="apt-get install strace"):
        syscalls.find_strace()
    exp = experiments.get("path.syscall_census")
    assert evidence.missing_needs(exp, True, "live") == why
    fake = tmp_path / "strace"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert config.strace_binary() == (str(fake), "") and syscalls.find_strace() == str(fake)
    assert evidence.missing_needs(exp, True, "live") is None


def test_strace_is_linux_only(monkeypatch):
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    found, why = config.strace_binary()
    assert found is None and "Linux" in why and "darwin" in why


def test_extra_ioctls_exercise(capsys):
    census = {"runs": [{"rounds": n, "counts": {"ioctl": {"calls": 900 + (3 * n if grow else 0)}}}
                       for n in (0, 10, 100, 1000, 0) for grow in [False]]}
    assert exercises.extra_ioctls(0, census) is True
    assert exercises.extra_ioctls(3000, census) is False
    assert "3 per round trip" in capsys.readouterr().out
    assert exercises.extra_ioctls(None, census) is None
    assert exercises.extra_ioctls("0", census) is True and exercises.extra_ioctls(0.4, census) is True  # rounded
    capsys.readouterr()
    for odd in (float("inf"), float("nan"), "x", [0]):  # inf raised OverflowError out of the check
        assert exercises.extra_ioctls(odd, census) is False
    assert exercises.extra_ioctls(False, census) is False  # a yes/no is not a count of 0
    assert "yes/no" in capsys.readouterr().out


@pytest.mark.parametrize("pick, ok", [("b", True), ("a", False), ("d", False)])
def test_map_memory_question(capsys, pick, ok):
    assert exercises.map_memory_question(pick) is ok
    assert "file descriptor" in capsys.readouterr().out or pick == "d"


def copy_loop_pinned(rounds: int, nbytes: int) -> bool:
    host = cupyx.empty_pinned(nbytes, dtype=np.uint8)  # noqa: F821 - the check supplies cupyx
    host.fill(7)
    back = cupyx.empty_pinned(nbytes, dtype=np.uint8)  # noqa: F821
    dev = cp.empty(nbytes, dtype=cp.uint8)  # noqa: F821
    rt = cp.cuda.runtime  # noqa: F821
    for _ in range(rounds):
        rt.memcpy(dev.data.ptr, host.ctypes.data, nbytes, rt.memcpyHostToDevice)
        dev += 1
        rt.memcpy(back.ctypes.data, dev.data.ptr, nbytes, rt.memcpyDeviceToHost)
    return rounds == 0 or bool((back == 8).all())


def test_pinned_loop_exercise_without_a_gpu_runs_the_loop_on_the_stand_in(no_gpu, capsys):
    assert exercises.pinned_loop_exercise(copy_loop_pinned) is True
    assert "stand-in CuPy" in capsys.readouterr().out
    assert exercises.pinned_loop_exercise(loops.copy_loop) is False  # planted: still pageable
    assert "pageable host memory" in capsys.readouterr().out
