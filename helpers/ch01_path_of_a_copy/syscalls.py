"""The syscall census: how often a CUDA program enters the kernel, and whether that grows
with the number of copies it makes.

A child Python process makes N round trips (copy host->device, launch a kernel, copy
device->host) under `strace -f -c`, which counts every system call of every thread. Doing
that for N = 0, 10, 100, 1000 and fitting count = a + b*N separates the one-time cost (a,
context creation and the driver's mappings) from the per-round-trip cost (b). Source question 000's
hypothesis 1 (one read/write per transfer) predicts b >= 1 for read or write; a user-space
driver that rings a doorbell predicts b ~ 0 for every call that reaches the driver.

strace is found by helpers.core.config.strace_binary (COURSE_STRACE or PATH; Linux only), the
same lookup the evidence contract makes for an experiment that needs strace: without strace or
a GPU the census replays the recording and says why, and how to install strace.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from helpers.ch01_path_of_a_copy.loops import code_file, copy_loop
from helpers.core import config, validate
from helpers.core.errors import (
    CourseError,
    InputError,
    InputTypeError,
    ReferenceDataError,
    SkipExperiment,
)
from helpers.core.experiments import GPU, STRACE, experiment
from helpers.core.figures import CourseFigure

WORKLOAD = Path(__file__).resolve().parent / "_copy_workload.py"
FOCUS = ("ioctl", "mmap", "munmap", "read", "write", "poll")
ROUNDS = (10, 100, 1000)
QUICK_ROUNDS = (10, 100)
MAX_ROUNDS = 100_000
COPY_BYTES = 1 << 20  # each copy in the census moves 1 MiB
GROWTH_MIN_CALLS = 10  # extra calls at the largest N below this count as "does not grow"
INSTALL_HINT = config.STRACE_INSTALL_HINT


class StraceMissingError(CourseError):
    """No strace binary could be found (or COURSE_STRACE names a file that is not one)."""


class StraceFailedError(CourseError):
    """strace ran but could not trace the child (ptrace forbidden, child crashed)."""


class StraceOutputError(CourseError, ValueError):
    """Text handed to the parser is not an `strace -c` summary table."""


class ChildTimeoutError(CourseError, TimeoutError):
    """A child process ran past its time limit and was killed, with its whole process group."""


class CensusInputError(InputError):
    """A bad number of round trips, workload, copy size or time limit was asked for."""


# --- finding strace -------------------------------------------------------------------

def strace_or_skip() -> str:
    """find_strace() for the recorder (which runs experiments without checking their needs):
    without strace the experiment is skipped, saying why."""
    try:
        return find_strace()
    except StraceMissingError as exc:
        raise SkipExperiment(str(exc)) from None


def find_strace() -> str:
    """Path of the strace to use, as config.strace_binary finds it (the course's one lookup);
    StraceMissingError with the reason and the fix when there is none."""
    found, why = config.strace_binary()
    if found is None:
        raise StraceMissingError(why)
    return found


def strace_available() -> bool:
    """True when find_strace() would succeed."""
    try:
        find_strace()
    except StraceMissingError:
        return False
    return True


# --- running a child with a hard time limit -------------------------------------------

def run_child(cmd: list[str], timeout_s: float, what: str = "child process") -> subprocess.CompletedProcess:
    """Run cmd in its own process group; kill the whole group when it outlives timeout_s.

    strace and its tracee are two processes: killing only strace would leave the tracee
    running, so the group is killed, and ChildTimeoutError says what took too long.
    """
    validate.seconds(timeout_s, f"{what}: timeout")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ChildTimeoutError(f"{what} did not finish within {timeout_s:g} s and was killed") from None
    except BaseException:  # KeyboardInterrupt (a kernel interrupt): strace and its tracee go too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


# --- parsing strace -c ------------------------------------------------------------------

@dataclass(frozen=True)
class SyscallCount:
    """One row of strace's summary: a system call, how often it was made, how often it failed."""

    name: str
    calls: int
    errors: int
    seconds: float


_HEADER = re.compile(r"^\s*%\s*time\s+seconds\b.*\bcalls\b.*\bsyscall\s*$")
_SEPARATOR = re.compile(r"^\s*-{3,}(\s+-{3,})+\s*$")


def _columns(header: str) -> list[str]:
    cols = header.replace("% time", "%time").split()
    return cols[:-1]  # numeric columns; the last header word is "syscall"


def _parse_row(line: str, cols: list[str], lineno: int) -> SyscallCount:
    tokens = line.split()
    name, nums = tokens[-1], tokens[:-1]
    if len(nums) == len(cols) - 1 and "errors" in cols:
        cols = [c for c in cols if c != "errors"]  # strace leaves errors blank when zero
    if len(nums) != len(cols):
        raise StraceOutputError(f"line {lineno}: expected {len(cols)} numbers before the syscall "
                                f"name, got {len(nums)}: {line.strip()!r}")
    try:
        values = dict(zip(cols, (float(x) for x in nums), strict=True))
    except ValueError:
        raise StraceOutputError(f"line {lineno}: not a summary row: {line.strip()!r}") from None
    return SyscallCount(name, int(values["calls"]), int(values.get("errors", 0)), values.get("seconds", 0.0))


def parse_summary(text: str) -> dict[str, SyscallCount]:
    """Parse the summary table(s) `strace -c` prints, summing tables of several personalities.

    Robust to the lines strace and the child print around it, to blank `errors` cells and to
    extra columns (found by the header). Raises StraceOutputError when no table is found or
    when the rows do not add up to the table's own `total` line.
    """
    if not isinstance(text, str):
        raise StraceOutputError(f"strace output must be text, got {type(text).__name__}")
    lines = text.splitlines()
    counts: dict[str, SyscallCount] = {}
    tables = 0
    i = 0
    while i < len(lines):
        if not _HEADER.match(lines[i]):
            i += 1
            continue
        cols = _columns(lines[i])
        if "calls" not in cols:
            raise StraceOutputError(f"line {i + 1}: header has no calls column: {lines[i]!r}")
        tables += 1
        i += 1
        rows, total = [], None
        while i < len(lines) and not _HEADER.match(lines[i]):
            line = lines[i]
            i += 1
            if not line.strip() or _SEPARATOR.match(line):
                continue
            if not re.match(r"^\s*[\d.]+\s", line):
                break  # end of this table (e.g. "System call usage summary for 32 bit mode:")
            row = _parse_row(line, cols, i)
            if row.name == "total":
                total = row
                break
            rows.append(row)
        if total is not None and sum(r.calls for r in rows) != total.calls:
            raise StraceOutputError(f"table {tables}: rows add up to {sum(r.calls for r in rows)} "
                                    f"calls, but its total line says {total.calls}; truncated output?")
        for r in rows:
            old = counts.get(r.name)
            counts[r.name] = r if old is None else SyscallCount(
                r.name, old.calls + r.calls, old.errors + r.errors, old.seconds + r.seconds)
    if tables == 0:
        head = " | ".join(lines[:3]) or "(empty)"
        raise StraceOutputError(f"no `strace -c` summary table found (it starts with a "
                                f"'% time  seconds ... calls ... syscall' header); got: {head[:200]}")
    return counts


# --- the census -----------------------------------------------------------------------

def check_rounds(n, what: str = "number of round trips") -> int:
    """N must be a whole number from 0 to MAX_ROUNDS (a census needs no more; strace would take minutes)."""
    return validate.whole_number(n, what, 0, MAX_ROUNDS)


def check_round_list(rounds, what: str = "rounds") -> tuple[int, ...]:
    """A non-empty list of round-trip counts, each checked by check_rounds."""
    if isinstance(rounds, (str, bytes)) or not isinstance(rounds, (list, tuple)):
        raise InputTypeError(f"{what} must be a list of whole numbers of round trips, got {rounds!r}")
    if not rounds:
        raise CensusInputError(f"{what}: a census needs at least one N")
    return tuple(check_rounds(n, f"{what}: number of round trips") for n in rounds)


ROUND_LIST = validate.Rule(check_round_list, f"a non-empty list of round-trip counts from 0 to {MAX_ROUNDS}")


def workload_args(workload: str, n: int, nbytes: int, code, folder: str) -> list[str]:
    """The child's arguments: the census also gets the file holding `code` (loops.code_file)."""
    if workload != "census":
        return [str(n)]
    path, name = code_file(code, folder)
    return [str(n), str(nbytes), str(path), name]


def traced_run(workload: str, n: int, *, nbytes: int = COPY_BYTES, timeout_s: float = 120.0,
               strace: str | None = None, code=copy_loop) -> dict:
    """Run one workload ('census': `code`, the page's copy_loop; or 'writes') with n rounds under
    `strace -f -c`.

    Returns {'rounds', 'counts': {name: {calls, errors, seconds}}, 'child': the child's JSON,
    'raw': strace's summary text}.
    """
    n = check_rounds(n)
    check_workload(workload)
    validate.byte_size(nbytes, "copy size", 1, 256 << 20)
    strace = strace or find_strace()
    with tempfile.TemporaryDirectory(prefix="course-strace-") as tmp:
        args = workload_args(workload, n, nbytes, code, tmp)
        summary = Path(tmp) / "summary.txt"
        cmd = [strace, "-f", "-c", "-o", str(summary), sys.executable, str(WORKLOAD), workload, *args]
        proc = run_child(cmd, timeout_s, f"strace of {workload} with N={n}")
        raw = summary.read_text() if summary.exists() else ""
    if proc.returncode != 0:
        why = (proc.stderr or "").strip().splitlines()[-3:]
        hint = (" (ptrace is not permitted here: a container without CAP_SYS_PTRACE, or "
                "/proc/sys/kernel/yama/ptrace_scope = 3)" if "ptrace" in (proc.stderr or "").lower() else "")
        raise StraceFailedError(f"strace of {workload} N={n} exited {proc.returncode}{hint}: {' | '.join(why)}")
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    counts = parse_summary(raw)
    return {"rounds": n, "counts": {k: asdict(v) for k, v in counts.items()}, "child": child, "raw": raw}


def check_workload(workload: str) -> str:
    """'census' (copies and kernels) or 'writes' (a write(2) per round trip, the contrast)."""
    if workload not in ("census", "writes"):
        raise CensusInputError(f"workload must be 'census' or 'writes', got {workload!r}")
    return workload


def census(rounds=ROUNDS, *, workload: str = "census", nbytes: int = COPY_BYTES,
           timeout_s: float = 120.0, progress: bool = True, code=copy_loop) -> dict:
    """Baseline (N=0), each N in rounds, and the baseline again: strace counts of every run.

    The first, untraced run primes CuPy's kernel cache so both baselines see the same
    start-up; the two baselines show how much start-up varies on its own.
    """
    from helpers.core.progress import Progress

    ns = check_round_list(rounds, "census rounds")
    check_workload(workload)
    strace = find_strace()
    if workload == "census":  # prime caches outside strace
        with tempfile.TemporaryDirectory(prefix="course-warm-") as tmp:
            run_child([sys.executable, str(WORKLOAD), "census", *workload_args(workload, 0, nbytes, code, tmp)],
                      timeout_s, "warm-up child")
    plan = [0, *ns, 0]
    bar = Progress(len(plan), "strace runs") if progress else None
    runs = []
    for n in plan:
        runs.append(traced_run(workload, n, nbytes=nbytes, timeout_s=timeout_s, strace=strace, code=code))
        if bar:
            bar.step(f"N={n}")
    return {"workload": workload, "nbytes": nbytes, "strace": strace_version(strace), "runs": runs}


def strace_version(strace: str) -> str:
    """strace's first -V line, e.g. 'strace -- version 6.1'."""
    try:
        out = run_child([strace, "-V"], 10, "strace -V").stdout
    except ChildTimeoutError:
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


# --- analysis ------------------------------------------------------------------------

@dataclass(frozen=True)
class Growth:
    """How one system call's count depends on N: a straight-line fit and a verdict."""

    name: str
    counts: dict[int, list[int]]  # N -> counts of the runs with that N
    baseline: float  # mean count at N = 0: start-up only
    baseline_spread: int  # max - min over the baseline runs
    per_round: float  # fitted extra calls per round trip
    grows: bool

    @property
    def extra_at_max(self) -> float:
        return self.per_round * max(self.counts)

    def describe(self) -> str:
        if self.grows:
            return f"grows: {self.per_round:.2f} calls per round trip"
        return f"does not grow (start-up: {self.baseline:.0f} calls)"


def counts_by_n(data: dict, name: str) -> dict[int, list[int]]:
    """{N: [calls of `name` in each run with that N]} from census data (0 when absent)."""
    out: dict[int, list[int]] = {}
    for run in data["runs"]:
        c = run["counts"].get(name)
        out.setdefault(int(run["rounds"]), []).append(int(c["calls"]) if c else 0)
    return out


def growth(data: dict, name: str) -> Growth:
    """Fit calls = a + b*N over every run; b is per round trip.

    It grows when the fitted extra calls at the largest N reach GROWTH_MIN_CALLS and three
    times the spread between the baseline runs (start-up noise), whichever is larger.
    """
    by_n = counts_by_n(data, name)
    xs = np.array([n for n, cs in by_n.items() for _ in cs], dtype=float)
    ys = np.array([c for cs in by_n.values() for c in cs], dtype=float)
    if len(set(xs)) < 2:
        raise CensusInputError("a growth fit needs runs at two or more different N")
    slope, _ = np.polyfit(xs, ys, 1)
    base = by_n.get(0, [int(ys[np.argmin(xs)])])
    spread = max(base) - min(base)
    extra = slope * xs.max()
    grows = bool(extra >= max(GROWTH_MIN_CALLS, 3 * spread))
    return Growth(name, by_n, float(np.mean(base)), int(spread), float(slope), grows)


def all_names(data: dict) -> list[str]:
    """Every system call seen in any run, most frequent first."""
    total: dict[str, int] = {}
    for run in data["runs"]:
        for k, v in run["counts"].items():
            total[k] = total.get(k, 0) + int(v["calls"])
    return sorted(total, key=lambda k: -total[k])


def growers(data: dict) -> list[Growth]:
    """The system calls whose count grows with N, largest per-round cost first."""
    gs = [growth(data, n) for n in all_names(data)]
    return sorted((g for g in gs if g.grows), key=lambda g: -g.per_round)


def signed(x: float, digits: int = 3) -> str:
    """+0.001 / -0.250 / +0.000 (never '-0.000' for a slope that rounds to zero)."""
    return f"{round(x, digits) + 0.0:+.{digits}f}"


def table_rows(data: dict, names=FOCUS) -> list[tuple]:
    """Rows: syscall, count at each N (baseline first), per round trip, verdict."""
    rows = []
    for name in names:
        g = growth(data, name)
        cells = [" / ".join(str(c) for c in g.counts[n]) for n in sorted(g.counts)]
        rows.append((name, *cells, signed(g.per_round), g.describe()))
    return rows


def table_headers(data: dict) -> tuple[str, ...]:
    ns = sorted({int(r["rounds"]) for r in data["runs"]})
    return ("syscall", *[("N=0 (start-up, 2 runs)" if n == 0 else f"N={n}") for n in ns],
            "fitted calls per round trip", "verdict")


def total_per_round(data: dict) -> float:
    """Fitted extra system calls (all kinds together) per round trip."""
    ns = np.array([r["rounds"] for r in data["runs"]], dtype=float)
    tot = np.array([sum(int(v["calls"]) for v in r["counts"].values()) for r in data["runs"]], dtype=float)
    return float(np.polyfit(ns, tot, 1)[0])


def figure(ev, workload: str = "gpu", names=FOCUS) -> CourseFigure:
    """Counts per N on log-log axes (N=0 drawn at N=1, labelled): flat lines do not grow.

    `ev` is the census Evidence; `workload` picks its 'gpu' census or its 'writes' contrast."""
    import plotly.graph_objects as go

    data = ev.require()[workload]
    fig = go.Figure()
    ns = sorted({int(r["rounds"]) for r in data["runs"]})
    for name in names:
        by = counts_by_n(data, name)
        fig.add_scatter(x=[max(n, 1) for n in ns], y=[max(np.mean(by[n]), 0.5) for n in ns],
                        mode="lines+markers", name=name)
    base = growth(data, "ioctl").baseline
    fig.add_scatter(x=[max(n, 1) for n in ns], y=[base + 3 * n for n in ns], mode="lines",
                    line={"dash": "dot", "color": "gray"},
                    name="ioctl if every copy and launch entered the driver<br>(start-up + 3 per round trip)")
    fig.update_xaxes(type="log", title="round trips N (copy in, kernel, copy out); N=0 drawn at 1",
                     tickvals=[max(n, 1) for n in ns], ticktext=[str(n) for n in ns])
    fig.update_yaxes(type="log", title="system calls in the whole run (count)")
    fig.update_layout(title=f"System calls vs number of round trips ({data['workload']}, "
                            f"{data['nbytes'] >> 10} KiB copies)")
    return CourseFigure(fig, ev.parts)


@experiment("path.syscall_census", chapter=1, needs=(GPU, STRACE),
            title="strace -f -c of N pageable round trips (copy in, kernel, copy out), N = 0..1000",
            params={"rounds": ROUND_LIST})
def record_syscall_census(quick: bool, rounds: tuple[int, ...] = ROUNDS, code=copy_loop) -> dict:
    """The census of the copy loop `code` (the page's copy_loop: 'gpu') and of the write(2)
    contrast ('writes'), each at N = 0, every N in `rounds`, and 0 again (the recorder's smoke
    test: N = 10 and 100)."""
    strace_or_skip()
    ns = QUICK_ROUNDS if quick else rounds
    gpu_runs = census(ns, code=code)
    contrast = census(ns, workload="writes", progress=False)
    return {"gpu": gpu_runs, "writes": contrast}


def recorded_writes(ref) -> dict:
    """The write(2) contrast of a reference file's census (recorded with path.syscall_census)."""
    data = ref.experiment("path.syscall_census")
    if not isinstance(data, dict) or "writes" not in data:
        raise ReferenceDataError(f"{ref.path.name}: path.syscall_census has no 'writes' census; re-record it with "
                                 "`python -m helpers.record --only path.syscall_census`")
    return data["writes"]


@experiment("path.write_census", chapter=1, needs=(STRACE,), recorded_in=recorded_writes,
            title="strace -f -c of a child that calls write(2) once per round trip (no GPU needed)",
            params={"rounds": ROUND_LIST})
def write_census(quick: bool, rounds: tuple[int, ...] = ROUNDS) -> dict:
    """The contrast on its own: it needs strace but no GPU, so it runs live on a laptop too.
    Its recording is the 'writes' half of path.syscall_census, taken in the same run."""
    return census(QUICK_ROUNDS if quick else rounds, workload="writes", progress=False)
