"""No code exercise leaves its answer where the learner's code can read it.

A learner's function runs in the checker's process and can read any frame above it, so a trial
that worked out the expected result before calling it (`want = ...; got = fn(...)`) hands a cheat
the answer: `sys._getframe(1).f_locals["want"]`. Every function-style code exercise
(`checks.code`) is run here with a correct solution wrapped in a spy (tests/learning/answer_spy.py)
that, on each call, looks in every frame up to checks.code's for a value equal to the right
result. The spy's solution must still get its tick, so the check really ran; and every call site
of checks.code in helpers/ must be covered here, so a new exercise cannot slip past.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from conftest import run_on_simulator

from helpers.ch01_path_of_a_copy import exercises as ex1
from helpers.ch02_mmio_and_bars import exercises as ex2
from helpers.ch02_mmio_and_bars import real_bar
from helpers.ch02_mmio_and_bars import real_exercises as real2
from helpers.ch04_pinned_memory import real_exercises as real4
from helpers.ch04_pinned_memory import real_vfio_dma
from helpers.ch06_gem_ttm_dmabuf import exercises as ex6
from helpers.ch06_gem_ttm_dmabuf import real_exercises as real6
from helpers.ch06_gem_ttm_dmabuf import real_fences, real_ttm
from helpers.ch07_command_submission import exercises as ex7
from helpers.ch09_radar_pipeline import exercises as ex9
from helpers.core import transcript
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.learning import checks
from tests.ch01_path_of_a_copy.test_page_code import copy_loop_pinned
from tests.ch09_radar_pipeline.test_cupti_timeline import right_overlap
from tests.learning.answer_spy import Spy

HELPERS = Path(__file__).resolve().parents[2] / "helpers"

#: every exercise that calls checks.code: its id here -> the function that calls it
EXERCISES = {
    "0.5": "helpers.ch00_your_machine.exercises:round_trip_exercise",
    "1.5": "helpers.ch01_path_of_a_copy.exercises:pinned_loop_exercise",
    "2.5": "helpers.ch02_mmio_and_bars.exercises:ex_2_5_write_a_chase",
    "2b decode a BAR": "helpers.ch02_mmio_and_bars.real_exercises:decode_bar_answer",
    "3.6": "helpers.ch03_dma_and_copy_engines.exercises:ex_3_6_copy_kernel",
    "4.4": "helpers.ch04_pinned_memory.exercises:gather_kernel",
    "4b pages charged": "helpers.ch04_pinned_memory.real_exercises:pages_charged_answer",
    "5.4": "helpers.ch05_unified_memory.exercises:example2_fixed",
    "6.5": "helpers.ch06_gem_ttm_dmabuf.exercises:ex65_describe_fd",
    "6b kernel's victims": "helpers.ch06_gem_ttm_dmabuf.real_exercises:kernel_victims",
    "6b who waits": "helpers.ch06_gem_ttm_dmabuf.real_exercises:who_waits",
    "7.4": "helpers.ch07_command_submission.exercises:ex74_capture",
    "8.4": "helpers.ch08_peer_to_peer.exercises:copy_kernel",
    "9.4": "helpers.ch09_radar_pipeline.exercises:detect_kernel",
    "9.6": "helpers.ch09_radar_pipeline.exercises:copy_kernel_overlap",
}
#: exercises whose right result is no secret, so the spy can judge no call: why
NOTHING_TO_HIDE = {"1.5": "the loop's answer is True, as the exercise says; the check judges the copies it made",
                   "3.6": "a copy kernel's right output is its input", "8.4": "a copy kernel's right output is its input"}


def _recorded(experiment_id: str) -> Evidence:
    t = transcript.load(experiment_id)
    return Evidence(experiment_id, t.data, Mode.REPLAY, t.label, why="recorded transcript")


# -- correct solutions of the exercises run in this process ----------------------------------------
def decode_bar(raw):
    return ("io", 32, False) if raw & 1 else ("memory", 64 if (raw >> 1) & 3 == 2 else 32, bool(raw & 8))


def describe_fd(fd):
    return {"size": os.lseek(fd, 0, os.SEEK_END), "link": os.readlink(f"/proc/self/fd/{fd}")}


def least_recently_unpinned(candidates, needed, model):
    return min(candidates, key=lambda b: (b.priority, b.last_use))


def capture(stream, kernel, x, n):
    stream.begin_capture()
    for _ in range(n):
        kernel((1,), (1,), (x,))
    return stream.end_capture()


IN_PROCESS = {
    "1.5": lambda spy: ex1.pinned_loop_exercise(spy.function(copy_loop_pinned)),
    "2.5": lambda spy: ex2.ex_2_5_write_a_chase(spy.function(ex2._follow)),
    "2b decode a BAR": lambda spy: real2.decode_bar_answer(spy.function(decode_bar), _recorded(real_bar.EXPERIMENT)),
    "4b pages charged": lambda spy: real4.pages_charged_answer(
        spy.function(lambda off, size: (off + size + 4095) // 4096), _recorded(real_vfio_dma.EXPERIMENT)),
    "6.5": lambda spy: ex6.ex65_describe_fd(spy.function(describe_fd, lambda d: [d, d["size"], d["link"]])),
    "6b kernel's victims": lambda spy: real6.kernel_victims(
        spy.function(least_recently_unpinned, lambda bo: [bo.name]), _recorded(real_ttm.EXPERIMENT)),
    "6b who waits": lambda spy: real6.who_waits(spy.function(real_fences.kernel_rule),
                                                _recorded(real_fences.EXPERIMENT)),
    "7.4": lambda spy: ex7.ex74_capture(spy.function(capture)),
    "9.6": lambda spy: ex9.copy_kernel_overlap(spy.function(right_overlap)),
}

# -- the Numba ones, on the CUDA simulator in a process of their own --------------------------------
ON_SIMULATOR = '''
import json
import numpy as np
from numba import cuda
from helpers.ch00_your_machine import exercises as ex0
from helpers.ch03_dma_and_copy_engines import exercises as ex3
from helpers.ch04_pinned_memory import exercises as ex4
from helpers.ch05_unified_memory import exercises as ex5
from helpers.ch08_peer_to_peer import exercises as ex8
from helpers.ch09_radar_pipeline import exercises as ex9
from tests.learning.answer_spy import Spy, host

@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1

def round_trip(h):
    d = cuda.to_device(h)
    add_one[(h.size + 63) // 64, 64](d)
    return d.copy_to_host()

def example2_done_right(n):
    a = cuda.mapped_array(n, dtype=np.uint8)
    a[:] = np.arange(n) % 256
    add_one[(n + 255) // 256, 256](a)
    cuda.synchronize()
    return a

@cuda.jit
def copy_dst_src(dst, src):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = src[i]

@cuda.jit
def copy_src_dst(src, dst):
    for i in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        dst[i] = src[i]

@cuda.jit
def gather_sum(x, idx, out):
    acc = 0.0
    for i in range(cuda.grid(1), idx.size, cuda.gridsize(1)):
        acc += x[idx[i]]
    cuda.atomic.add(out, 0, acc)

@cuda.jit
def detect(power, threshold, out):
    i, j = cuda.grid(2)
    if i < power.shape[0] and j < power.shape[1]:
        out[i, j] = 1 if power[i, j] > threshold else 0

runs = {
    "0.5": lambda spy: ex0.round_trip_exercise(spy.function(round_trip)),
    "3.6": lambda spy: ex3.ex_3_6_copy_kernel(spy.kernel(copy_dst_src, lambda a: np.array(a[0]))),
    "4.4": lambda spy: ex4.gather_kernel(spy.kernel(gather_sum, lambda a: float(host(a[2])[0]))),
    "5.4": lambda spy: ex5.example2_fixed(spy.function(example2_done_right)),
    "8.4": lambda spy: ex8.copy_kernel(spy.kernel(copy_src_dst, lambda a: host(a[1]))),
    "9.4": lambda spy: ex9.detect_kernel(spy.kernel(detect, lambda a: host(a[2]))),
}
seen = {}
for name, run in runs.items():
    spy = Spy()
    seen[name] = dict(ticked=run(spy), **spy.report())
print("SEEN " + json.dumps(seen))
'''
SIMULATED = ("0.5", "3.6", "4.4", "5.4", "8.4", "9.4")


@pytest.fixture(scope="module")
def simulated() -> dict:
    out = run_on_simulator(ON_SIMULATOR, timeout_s=600)
    return json.loads(next(ln for ln in out.splitlines() if ln.startswith("SEEN "))[len("SEEN "):])


def test_every_exercise_has_one_way_to_run_here():
    assert set(IN_PROCESS) | set(SIMULATED) == set(EXERCISES) and not set(IN_PROCESS) & set(SIMULATED)


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_no_frame_holds_the_answer_while_the_learners_code_runs(exercise, request, no_gpu, capsys):
    if exercise == "6.5" and not hasattr(os, "memfd_create"):
        pytest.skip("describe_fd's check needs Linux memfd and /proc")
    if exercise in SIMULATED:
        seen = request.getfixturevalue("simulated")[exercise]
    else:
        spy = Spy()
        seen = dict(ticked=IN_PROCESS[exercise](spy), **spy.report())
    out = capsys.readouterr().out
    assert seen["ticked"] is True, f"{exercise}: the spy's correct solution got no tick, so nothing was shown\n{out}"
    assert seen["calls"] > 0 and seen["unreached"] == 0, f"{exercise}: the spy never looked up to checks.code: {seen}"
    assert seen["leaks"] == [], f"{exercise}: the learner's code could read the answer in {seen['leaks']}"
    if exercise in NOTHING_TO_HIDE:
        assert seen["blind"] == seen["calls"], f"{exercise}: {NOTHING_TO_HIDE[exercise]}, yet: {seen}"
    else:
        assert seen["blind"] < seen["calls"], f"{exercise}: the answer was always an input, nothing was judged: {seen}"


def test_the_spy_finds_an_answer_a_trial_computed_first(capsys):
    """The spy itself can fail a trial: one that works out `want` before the learner's call (a
    number; a true-or-false answer over cases), and not the same trial with the order reversed."""
    def want_first(fn):
        for n in (3, 10):
            want = sum(range(n))
            if fn(n) != want:
                return ["wrong"]
        return []

    def bits_first(fn):
        for n in (3, 4, 7, 8):
            waited = n % 2 == 1
            if fn(n) != waited:
                return ["wrong"]
        return []

    def learner_first(fn):
        return checks.learner_first((3, 10), fn, lambda n, got: [] if got == sum(range(n)) else ["wrong"])

    for trial, solution, leak in ((want_first, lambda n: sum(range(n)), "want"),
                                  (bits_first, lambda n: n % 2 == 1, "waited"), (learner_first, lambda n: sum(range(n)), None)):
        spy = Spy()
        assert checks.code("toy", spy.function(solution), trial) is True
        found = spy.report()["leaks"]
        assert found == ([f"{trial.__qualname__}: {leak}"] if leak else []), (trial.__name__, found)
    capsys.readouterr()


def _calls_of_checks_code(path: Path) -> list[str]:
    """'module:function' of each top-level function in `path` that calls checks.code (or a bare
    `code` imported from helpers.learning.checks)."""
    tree = ast.parse(path.read_text(), str(path))
    bare = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module == "helpers.learning.checks" for a in n.names if a.name == "code"}
    module = ".".join(path.relative_to(HELPERS.parent).with_suffix("").parts)
    found = []
    for top in tree.body:
        for n in ast.walk(top):
            f = getattr(n, "func", None) if isinstance(n, ast.Call) else None
            if (isinstance(f, ast.Attribute) and f.attr == "code" and isinstance(f.value, ast.Name)
                    and f.value.id == "checks") or (isinstance(f, ast.Name) and f.id in bare):
                found.append(f"{module}:{getattr(top, 'name', '<module>')}")
    return found


def test_every_call_of_checks_code_is_run_with_the_spy():
    sites = [s for p in sorted(HELPERS.rglob("*.py")) if p.name != "checks.py" for s in _calls_of_checks_code(p)]
    assert len(sites) >= 15  # the scan finds the call sites at all
    assert sorted(sites) == sorted(EXERCISES.values()), \
        f"checks.code called where no spy runs (add the exercise to EXERCISES): {sorted(set(sites) - set(EXERCISES.values()))}"
