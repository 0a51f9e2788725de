"""Chapter 5's new helpers on recorded data: shown functions, the child script, verdicts, exercises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import recorded_machine

from helpers.ch05_unified_memory import diagrams, exercises, first_touch, managed, pointer_access
from helpers.core import experiments
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode

ROOT = Path(__file__).resolve().parents[2]
REF = recorded_machine()["experiments"]


def _ev(exp_id: str, data=None) -> Evidence:
    return Evidence(exp_id, REF[exp_id]["data"] if data is None else data, Mode.REPLAY, "h100 test", why="test")


def test_the_shown_functions_are_the_experiments_code():
    reg = experiments.discover()
    assert reg["um.wrong_ways"].shown is pointer_access.store_through_device_pointer
    assert reg["um.fault_vs_prefetch"].shown is first_touch.time_fault_vs_prefetch


def test_child_script_carries_the_function_and_calls_it():
    script = pointer_access.child_script(pointer_access.store_through_device_pointer)
    assert "def store_through_device_pointer" in script and script.rstrip().endswith("store_through_device_pointer()")
    compile(script, "<child>", "exec")
    with pytest.raises(InputError, match="source text"):
        pointer_access.child_script(len)


def test_the_child_without_a_gpu_ends_with_an_error_not_a_hang(no_gpu):
    out = pointer_access.host_write_through_device_pointer(timeout_s=120)
    assert out.status in ("error", "signal", "ok") and out.status != "timeout"


def test_recorded_verdict_names_the_reservation():
    text = pointer_access.claim_vs_measurement(REF["um.wrong_ways"]["data"])
    assert "---p" in text and "SEGV_ACCERR" in text and "no mapping" not in text
    unmapped = json.loads(json.dumps(REF["um.wrong_ways"]["data"]))
    unmapped["host_write_device_ptr"]["results"]["cpu_mapping"] = None
    assert "SEGV_MAPERR" in pointer_access.claim_vs_measurement(unmapped)


def test_recorded_rows_say_source_question_not_seed():
    rows = pointer_access.correct_rows(REF["um.correct_ways"]["data"])
    assert not any("seed" in r[0] for r in rows)
    assert pointer_access.driver_example(REF["um.correct_ways"]["data"], 2)["intact"]
    names = [r[0] for r in pointer_access.outcome_rows(REF["um.wrong_ways"]["data"])]
    assert not any("seed" in n for n in names)


def test_fault_vs_prefetch_views():
    data = {"runs": [{"nbytes": 1 << 30, "repeat": r, "fault": {"prefetch_ms": 0.0, "first_read_ms": 100.0},
                      "prefetch": {"prefetch_ms": 20.0, "first_read_ms": 5.0}} for r in range(3)]}
    assert first_touch.rows(data)[0][-1] == "4.0x"
    assert "4.0x as long" in first_touch.summary(Evidence("um.fault_vs_prefetch", data, Mode.REPLAY, "x", why="t"))
    pending = Evidence("um.fault_vs_prefetch", None, Mode.REPLAY, "x", why="t", missing="absent")
    assert "recording pending" in first_touch.summary(pending)


def test_exercise_answers_come_from_the_recording(capsys):
    mig = _ev("um.migration")
    want = exercises.fault_overhead_ms(mig.data)
    assert want > 0 and exercises.fault_overhead(want, mig) is True
    assert exercises.fault_overhead(want / 1e3, mig) is False
    assert "seconds" in capsys.readouterr().out
    largest = managed.largest_safe(mig.data["free_device_bytes_at_start"]) / 2**30
    assert exercises.safe_share(largest, mig) is True
    assert exercises.safe_share(largest / managed.SAFE_MANAGED_SHARE, mig) is False
    assert "share" in capsys.readouterr().out


def test_si_code_follows_the_recorded_mapping():
    wrong = _ev("um.wrong_ways")
    assert exercises.which_si_code("b", wrong) is True  # the recording shows ---p: SEGV_ACCERR
    assert exercises.which_si_code("a", wrong) is False
    unmapped = json.loads(json.dumps(wrong.data))
    unmapped["host_write_device_ptr"]["results"]["cpu_mapping"] = None
    assert exercises.which_si_code("a", _ev("um.wrong_ways", unmapped)) is True


def test_example2_trial_catches_the_copying_version(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    code = textwrap.dedent("""
        import numpy as np
        from numba import cuda
        from helpers.ch05_unified_memory import exercises

        @cuda.jit
        def add_one(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = a[i] + 1

        def right(n):
            a = cuda.mapped_array(n, dtype=np.uint8)
            a[:] = np.arange(n) % 256
            add_one[(n + 255) // 256, 256](a)
            cuda.synchronize()
            return a

        def copying(n):
            a = cuda.device_array(n, dtype=np.uint8)
            a.copy_to_device((np.arange(n) % 256).astype(np.uint8))
            add_one[(n + 255) // 256, 256](a)
            return a.copy_to_host()

        def mapped_then_copied(n):
            a = cuda.mapped_array(n, dtype=np.uint8)
            a[:] = np.arange(n) % 256
            d = cuda.to_device(a)
            add_one[(n + 255) // 256, 256](d)
            return d.copy_to_host()

        from helpers.learning import checks
        print("RIGHT", exercises.example2_trial(right, n=600))
        print("MIXED", exercises.example2_trial(mapped_then_copied, n=600))
        try:
            exercises.example2_trial(copying, n=600)
        except checks.NotAnswered as exc:
            print("COPYING (not answered)", exc)
    """)
    script = tmp_path / "trial.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RIGHT []" in proc.stdout
    copying = next(line for line in proc.stdout.splitlines() if line.startswith("COPYING"))
    assert "not answered" in copying and "device_array" in copying  # what the starter does
    mixed = next(line for line in proc.stdout.splitlines() if line.startswith("MIXED"))
    assert "explicit copy" in mixed and "to_device" in mixed


def test_prefetch_choice_and_diagram():
    assert exercises.prefetch_why("a") is True and exercises.prefetch_why("d") is False
    d = diagrams.fault_migration_diagram()
    assert "replay" in d.description and "<desc" in d.svg()


def test_the_page_never_calls_the_child_function_in_process():
    import nbformat

    nb = nbformat.read(ROOT / "notebooks/05_unified_memory.ipynb", as_version=4)
    calls = [c.source for c in nb.cells if c.cell_type == "code"
             and "store_through_device_pointer()" in c.source.replace("def store_through_device_pointer()", "")]
    assert calls == [], "the crash experiment must only run in a child process"
