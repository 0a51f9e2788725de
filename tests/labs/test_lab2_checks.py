"""Lab 2's graded checks, run in-process on the solution and on typical wrong answers.

Each wrong answer must fail its check with the feedback that names the mistake; the solution
must pass every check. The checks run as the student version has them (published examples;
tests/labs/test_planted.py grades the hidden cases). (CI also grades the whole notebook through nbgrader: make test-labs.)
"""

from pathlib import Path

import nbformat
import numpy as np
import pytest

from helpers.labs import grading
from tests.labs import labsim

LAB = Path(__file__).resolve().parents[2] / "labs" / "lab2_bandwidth_test.ipynb"


def _cells():
    nb = nbformat.read(LAB, as_version=4)
    return [(c.metadata["nbgrader"], c.source) for c in nb.cells if c.cell_type == "code"]


@pytest.fixture
def lab(monkeypatch):
    """The lab's namespace after its setup and solution cells, in replay mode; and its checks."""
    monkeypatch.setenv("COURSE_MODE", "replay")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ns: dict = {}
    checks = {}
    for meta, src in _cells():
        if meta.get("grade") and not meta.get("solution"):
            checks[meta["grade_id"]] = labsim.strip_hidden(src)  # as the student version has it
        elif meta.get("solution") or meta["grade_id"] == "code01":
            exec(compile(src, meta["grade_id"], "exec"), ns)
    grading.results.clear()
    return ns, checks


def run_check(lab, gid, capsys, **override) -> str:
    ns, checks = lab
    ns = dict(ns, **override)
    exec(compile(checks[gid], gid, "exec"), ns)
    return capsys.readouterr().out


def test_solution_passes_every_check(lab, capsys):
    _, checks = lab
    assert set(checks) == {"timed_copy_events", "benchmark_warmup", "benchmark_agrees", "fit_synthetic",
                           "predict_reference", "batch_slowdown"}
    for gid in checks:
        out = run_check(lab, gid, capsys)
        assert f"✔ {gid}: PASS" in out, out


# ----------------------------------------------------------------------- wrong answers
def copy_in_ms(cuda, stream, dst, src, nbytes, kind):
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    end.record(stream)
    end.synchronize()
    return cuda.get_elapsed_time(start, end)


def copy_no_wait(cuda, stream, dst, src, nbytes, kind):
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    end.record(stream)
    return cuda.get_elapsed_time(start, end) / 1e3


def copy_end_first(cuda, stream, dst, src, nbytes, kind):
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    end.record(stream)
    cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    end.synchronize()
    return cuda.get_elapsed_time(start, end) / 1e3


@pytest.mark.parametrize("wrong, feedback", [
    (copy_in_ms, "1000x too large"),
    (copy_no_wait, "cudaErrorNotReady"),
    (copy_end_first, "end event recorded before the copy"),
])
def test_timed_copy_mistakes(lab, capsys, wrong, feedback):
    out = run_check(lab, "timed_copy_events", capsys, timed_copy=wrong)
    assert "✘ timed_copy_events: FAIL" in out and feedback in out, out


def bench_keeps_warmup(timer, reps=20, warmup=3):
    times = [timer() for _ in range(warmup + reps)][:reps]  # keeps the first calls, drops the last
    return {"times_s": times, "median_s": float(np.median(times)), "min_s": min(times)}


def bench_mean(timer, reps=20, warmup=3):
    for _ in range(warmup):
        timer()
    times = [timer() for _ in range(reps)]
    return {"times_s": times, "median_s": float(np.mean(times)), "min_s": min(times)}


def bench_no_warmup_calls(timer, reps=20, warmup=3):
    times = [timer() for _ in range(reps)]
    return {"times_s": times, "median_s": float(np.median(times)), "min_s": min(times)}


@pytest.mark.parametrize("gid, wrong, feedback", [
    ("benchmark_warmup", bench_keeps_warmup, "did you discard the warm-up"),
    ("benchmark_warmup", bench_mean, "that is the mean"),
    ("benchmark_warmup", bench_no_warmup_calls, "called timer() 20 times"),
    ("benchmark_agrees", bench_mean, "your median of the repetitions recorded on"),
])
def test_benchmark_mistakes(lab, capsys, gid, wrong, feedback):
    out = run_check(lab, gid, capsys, benchmark=wrong)
    assert f"✘ {gid}: FAIL" in out and feedback in out, out


def fit_unweighted(nbytes, times_s):
    slope, t0 = np.polyfit(np.asarray(nbytes, float), np.asarray(times_s, float), 1)
    return float(t0), float(1 / slope)


def fit_gbps(nbytes, times_s):
    slope, t0 = np.polyfit(np.asarray(nbytes, float), np.asarray(times_s, float), 1)
    return float(t0), float(1 / slope / 1e9)


@pytest.mark.parametrize("wrong, feedback", [
    (fit_unweighted, "weight each point by 1/t"),
    (fit_gbps, "1e9 times too small"),
])
def test_fit_mistakes(lab, capsys, wrong, feedback):
    out = run_check(lab, "fit_synthetic", capsys, fit_line=wrong)
    assert "✘ fit_synthetic: FAIL" in out and feedback in out, out


def test_prediction_without_t0_fails(lab, capsys):
    out = run_check(lab, "predict_reference", capsys,
                    predict_time=lambda n, t0, bw: np.asarray(n, float) / bw)
    assert "✘ predict_reference: FAIL" in out and "the sweep recorded on" in out, out


def test_batch_slowdown_ignoring_latency_fails(lab, capsys):
    out = run_check(lab, "batch_slowdown", capsys, batch_slowdown=lambda count, each, t0, bw: 1.0)
    assert "✘ batch_slowdown: FAIL" in out, out
