"""The syscall census: strace's summary parsed from real captured output, the growth fit and
its verdict, the strace finder's errors, input checks and the child's hard time limit.

tests/ch01_path_of_a_copy/data/strace_cpu_getppid_N.txt were captured on the course's CPU machine with
`strace -f -c -o FILE python tests/ch01_path_of_a_copy/data/cpu_getppid_program.py N` (strace 6.1): a program
that makes exactly N getppid() and N write() calls, so the true counts are known.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from helpers.ch01_path_of_a_copy import findings, syscalls
from helpers.core.errors import InputError, InputTypeError
from helpers.recording import recorder

DATA = Path(__file__).parent / "data"
CPU_NS = (0, 10, 100, 1000)


def cpu_capture(n: int) -> str:
    return (DATA / f"strace_cpu_getppid_{n}.txt").read_text()


def cpu_census() -> dict:
    """Census-shaped data from the real CPU captures (N=0 used twice as the baseline pair)."""
    runs = []
    for n in (0, *CPU_NS[1:], 0):
        counts = {k: vars(v) for k, v in syscalls.parse_summary(cpu_capture(n)).items()}
        runs.append({"rounds": n, "counts": counts})
    return {"workload": "cpu getppid+write", "nbytes": 1, "runs": runs}


@pytest.mark.parametrize("n", CPU_NS)
def test_parser_reads_the_known_counts(n):
    counts = syscalls.parse_summary(cpu_capture(n))
    got = {k: counts[k].calls if k in counts else 0 for k in ("getppid", "write")}
    # the program makes n getppid calls; the write count also holds nothing else at n > 0
    assert got["getppid"] == n
    assert got["write"] == n
    assert counts["mmap"].calls > 0 and counts["mmap"].errors == 0


def test_parser_reads_errors_and_matches_the_total_line():
    text = cpu_capture(1000)
    counts = syscalls.parse_summary(text)
    total_line = [ln for ln in text.splitlines() if ln.rstrip().endswith(" total")][0].split()
    assert sum(c.calls for c in counts.values()) == int(total_line[3])
    assert sum(c.errors for c in counts.values()) == int(total_line[4])
    assert counts["ioctl"].errors == 60 and counts["ioctl"].calls == 61


def test_parser_ignores_surrounding_lines_and_sums_personalities():
    table = cpu_capture(10)
    text = ("strace: Process 4242 attached\nchild says hello\n" + table
            + "System call usage summary for 32 bit mode:\n" + table)
    one, both = syscalls.parse_summary(table), syscalls.parse_summary(text)
    assert both["getppid"].calls == 2 * one["getppid"].calls == 20


@pytest.mark.parametrize("bad", ["", "hello\nworld", "% time     seconds  usecs/call     calls    errors syscall\n"
                                 "------ ----------- ----------- --------- --------- ----------------\n"
                                 " 10.00    0.000001           1        abc           read\n"])
def test_parser_rejects_what_is_not_a_table(bad):
    with pytest.raises(syscalls.StraceOutputError):
        syscalls.parse_summary(bad)


def test_parser_rejects_a_table_that_does_not_add_up():
    lines = cpu_capture(100).splitlines()
    cut = "\n".join(ln for ln in lines if not ln.rstrip().endswith(" getppid"))
    with pytest.raises(syscalls.StraceOutputError, match="add up"):
        syscalls.parse_summary(cut)


def test_growth_fit_on_real_captures():
    data = cpu_census()
    assert syscalls.growth(data, "getppid").per_round == pytest.approx(1.0, abs=1e-9)
    assert syscalls.growth(data, "getppid").grows
    assert not syscalls.growth(data, "mmap").grows
    assert {g.name for g in syscalls.growers(data)} == {"getppid", "write"}
    assert syscalls.total_growth(data).per_round == pytest.approx(2.0, abs=0.05)


def test_table_rows_show_every_n():
    data = cpu_census()
    rows = syscalls.table_rows(data, ("write", "mmap"))
    assert len(syscalls.table_headers(data)) == len(rows[0])
    assert rows[0][1] == "0 / 0" and rows[0][-2] == "+1.000 ± 0.000"


def test_hypothesis_one_verdict_follows_the_data():
    """The same verdict code says 'supported' for a program that writes per transfer."""
    data = cpu_census()
    fake_maps = {"stages": [{"stage": "after import cupy", "lines": []},
                            {"stage": "after CUDA initialisation", "lines": []}]}
    cpu = {"scheds": [{"sched": s, "runs": [
        {"host_kind": k, "direction": "h2d", "nbytes": 1 << 28, "reps": 1, "wall": 0.1, "user": 0.1,
         "sys": 0.0, "thread_user": 0.1, "thread_sys": 0.0} for k in ("pageable", "pinned")]}
        for s in ("auto", "blocking")]}
    v = findings.verdicts(data, fake_maps, cpu)
    assert v[0].verdict.startswith("supported")
    assert "not supported" in v[1].verdict  # no device-node mapping in this fake


def test_missing_strace_names_what_to_install(monkeypatch):
    monkeypatch.delenv("COURSE_STRACE", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(syscalls.StraceMissingError, match="apt-get install strace") as e:
        syscalls.find_strace()
    assert "dnf install strace" in str(e.value)
    assert not syscalls.strace_available()
    with pytest.raises(recorder.SkipExperiment, match="strace"):
        syscalls.record_syscall_census(True)


def test_course_strace_must_be_executable(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_STRACE", str(tmp_path / "no-such-strace"))
    with pytest.raises(syscalls.StraceMissingError, match="COURSE_STRACE"):
        syscalls.find_strace()
    fake = tmp_path / "strace"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("COURSE_STRACE", str(fake))
    assert syscalls.find_strace() == str(fake)


@pytest.mark.parametrize("bad, exc", [(-1, InputError), (syscalls.MAX_ROUNDS + 1, InputError),
                                      (10**12, InputError), (1.5, InputTypeError), (True, InputTypeError),
                                      ("10", InputTypeError), (None, InputTypeError)])
def test_bad_round_counts(bad, exc):
    with pytest.raises(exc, match="number of round trips"):
        syscalls.check_rounds(bad)


@pytest.mark.parametrize("bad, exc", [([], InputError), ([10, -5], InputError), (10, InputTypeError),
                                      ("10", InputTypeError), ([True], InputTypeError)])
def test_bad_round_lists(bad, exc):
    with pytest.raises(exc):
        syscalls.check_round_list(bad)
    assert issubclass(syscalls.CensusInputError, InputError)


def test_bad_census_inputs_fail_before_running_anything(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # would fail later if the checks came too late
    with pytest.raises(InputError, match="round trips"):
        syscalls.census((10, -5))
    with pytest.raises(InputError, match="copy size"):
        syscalls.traced_run("census", 10, nbytes=0)
    with pytest.raises(syscalls.CensusInputError):
        syscalls.traced_run("rm -rf", 10)


def test_child_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    # the grandchild would outlive any wait, so finding it dead below proves the group was killed;
    # a child that ran out its 60 s would end without the timeout error
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    with pytest.raises(syscalls.ChildTimeoutError, match="did not finish within 2 s"):
        syscalls.run_child([sys.executable, "-c", code], 2, "sleeper")
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} still running after the timeout")


def test_child_timeout_must_be_positive():
    with pytest.raises(InputError, match="timeout"):
        syscalls.run_child([sys.executable, "-c", "pass"], 0)


@pytest.mark.skipif(not syscalls.strace_available(), reason="strace is not installed here")
def test_live_census_of_the_write_workload():
    """Runs strace for real on a CPU program: write grows by one per round, mmap does not."""
    data = syscalls.census((5, 50), workload="writes", progress=False, repeats=2)
    assert [r["rounds"] for r in data["runs"]] == [0, 5, 50, 50, 5, 0]
    assert syscalls.growth(data, "write").per_round == pytest.approx(1.0, abs=1e-6)
    assert not syscalls.growth(data, "mmap").grows
    assert data["strace"].startswith("strace")

