"""The syscall census: how often a CUDA program enters the kernel, and whether that grows
with the number of copies it makes.

A child Python process makes N round trips (copy host->device, launch a kernel, copy
device->host) under `strace -f -c`, which counts every system call of every thread. Doing
that for N = 0, 10, 100, 1000, several times each and interleaved, and fitting
count = a + b*N separates the one-time cost (a, context creation and the driver's mappings)
from the per-round-trip cost (b). Start-up itself is not always the same: on the reference
H100 it takes one of several paths, up to about 170 mmap and munmap calls apart, whatever N is.
So b comes with a 95 % interval from the scatter of the runs, and the verdict (`Growth`) says
"grows" only when the whole interval is above zero, "does not grow" only when its top is
below one call per round trip, and "unclear" otherwise. Source question 000's hypothesis 1
(one read/write per transfer) predicts b >= 2 for read or write; a user-space driver that
rings a doorbell predicts b ~ 0 for every call that reaches the driver.

strace is found by helpers.core.config.strace_binary (COURSE_STRACE or PATH; Linux only), the
same lookup the evidence contract makes for an experiment that needs strace: without strace or
a GPU the census replays the recording and says why, and how to install strace.
"""

from __future__ import annotations

import json
import re
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
from helpers.core.process_group import kill_group
from helpers.presentation.figures import CourseFigure

WORKLOAD = Path(__file__).resolve().parent / "_copy_workload.py"
FOCUS = ("ioctl", "mmap", "munmap", "read", "write", "poll")
ROUNDS = (10, 100, 1000)
QUICK_ROUNDS = (10, 100)
MAX_ROUNDS = 100_000
COPY_BYTES = 1 << 20  # each copy in the census moves 1 MiB
# Runs of every N, start-up included. On the H100 start-up takes one of several paths whatever N is
# (mmap 1834, 1882, 1962 or 2008 in 24 runs of 2026-11-27); in that census's first 16 runs every
# N = 0 run took the same path, so 4 repeats can miss what 6 showed. The recorder keeps 6; Chapter 1's
# live page asks for 4 (each run is a fresh process starting CUDA under strace, ~1.4 s on the H100): on
# that census's first 16 runs (4 interleaved repeats) every call's verdict is the one the 24 gave (all
# flat, ioctl exactly 0 extra for 990 more round trips), mmap still falls into its 4 start-up groups,
# and mmap's 95% interval per round trip widens from +-0.068 to +-0.091 calls.
REPEATS = 6
QUICK_REPEATS = 2
MAX_REPEATS = 20
GROWTH_MIN_CALLS = 10  # a fit that adds fewer calls than this at the largest N is not called growth
FLAT_BOUND = 1.0  # calls per round trip: an interval below this rules out one call per copy or launch
PATH_GAP = 20  # start-up counts further apart than this (calls) belong to different start-up paths
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
        kill_group(proc.pid)
        proc.communicate()
        raise ChildTimeoutError(f"{what} did not finish within {timeout_s:g} s and was killed") from None
    except BaseException:  # KeyboardInterrupt (a kernel interrupt): strace and its tracee go too
        kill_group(proc.pid)
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


def plan(rounds, repeats: int = REPEATS) -> list[int]:
    """The order of the census's runs: start-up alone (N = 0) and every N of `rounds`, `repeats`
    times, interleaved (ascending, then descending, ...), so that every N sees start-up's own
    variation and a drift during the census (a cache warming, another process) cannot pass for
    growth with N. Example: plan((10, 100), 2) == [0, 10, 100, 100, 10, 0]."""
    ns = check_round_list(rounds, "census rounds")
    repeats = validate.whole_number(repeats, "census repeats", 2, MAX_REPEATS)
    cycle = sorted({0, *ns})
    return [n for r in range(repeats) for n in (cycle if r % 2 == 0 else cycle[::-1])]


def census(rounds=ROUNDS, *, workload: str = "census", nbytes: int = COPY_BYTES, repeats: int = REPEATS,
           timeout_s: float = 120.0, progress: bool = True, code=copy_loop) -> dict:
    """strace counts of start-up alone (N = 0) and of every N in rounds, each `repeats` times,
    interleaved (see plan).

    The first, untraced run primes CuPy's kernel cache so that every traced run starts the same
    way; the repeats show how much start-up varies on its own, which the growth fit must see
    to tell it from growth with N.
    """
    from helpers.core.progress import Progress

    order = plan(rounds, repeats)
    check_workload(workload)
    strace = find_strace()
    if workload == "census":  # prime caches outside strace
        with tempfile.TemporaryDirectory(prefix="course-warm-") as tmp:
            run_child([sys.executable, str(WORKLOAD), "census", *workload_args(workload, 0, nbytes, code, tmp)],
                      timeout_s, "warm-up child")
    bar = Progress(len(order), "strace runs") if progress else None
    runs = []
    for n in order:
        runs.append(traced_run(workload, n, nbytes=nbytes, timeout_s=timeout_s, strace=strace, code=code))
        if bar:
            bar.step(f"N={n}")
    return {"workload": workload, "nbytes": nbytes, "repeats": repeats, "strace": strace_version(strace),
            "runs": runs}


def strace_version(strace: str) -> str:
    """strace's first -V line, e.g. 'strace -- version 6.1'."""
    try:
        out = run_child([strace, "-V"], 10, "strace -V").stdout
    except ChildTimeoutError:
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


# --- analysis ------------------------------------------------------------------------

# Student's t, two-sided 95 %, by degrees of freedom (a straight-line fit over n runs has n - 2);
# beyond the table the normal 1.96 is close enough.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with `dof` degrees of freedom (inf for none)."""
    if dof < 1:
        return float("inf")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


@dataclass(frozen=True, kw_only=True)
class Growth:
    """How one system call's count depends on N: a straight-line fit over every run, the
    slope's 95 % interval (its uncertainty comes from the scatter of the runs, start-up's own
    variation included), and a verdict that says only what the interval allows.

    verdict: 'grows' (the whole interval is above zero and the fit adds GROWTH_MIN_CALLS or more
    at the largest N), 'flat' (no growth found and the interval's top is below FLAT_BOUND calls
    per round trip, so not one call per copy or launch), or 'unclear' (the runs scatter too much
    to tell: more repeats are needed)."""

    name: str
    counts: dict[int, list[int]]  # N -> counts of the runs with that N
    baseline: float  # mean count at N = 0: start-up only
    startup_spread: int  # max - min over the N = 0 runs: how much start-up varies by itself
    per_round: float  # fitted extra calls per round trip
    half_width: float  # of the slope's 95 % interval (inf when the runs cannot give one)
    verdict: str

    @property
    def grows(self) -> bool:
        return self.verdict == "grows"

    @property
    def high(self) -> float:
        """The top of the 95 % interval of calls per round trip."""
        return self.per_round + self.half_width

    @property
    def scatter(self) -> int:
        """How far apart the runs' start-up counts lie (each run's count less the fitted growth
        when the call grows): start-up's own variation, seen at every N."""
        paths = startup_paths(self)
        return paths[-1][1] - paths[0][0]

    @property
    def runs(self) -> int:
        return sum(len(c) for c in self.counts.values())

    def slope_text(self, digits: int = 3) -> str:
        """'+0.098 ± 0.348' (95 %), or '+0.000 ± 0.000' when every run lies on the line."""
        hw = "?" if self.half_width == float("inf") else f"{self.half_width:.{digits}f}"
        return f"{signed(self.per_round, digits)} ± {hw}"

    def extra(self, more_rounds: int) -> tuple[int, int | None]:
        """(extra calls for `more_rounds` more round trips, by the fit, in whole calls; its 95 %
        half-width in whole calls, None when the runs cannot give one)."""
        hw = None if self.half_width == float("inf") else round(self.half_width * more_rounds)
        return round(self.per_round * more_rounds) + 0, hw

    def extra_text(self, more_rounds: int) -> str:
        """'By the fit, 990 more round trips make 0 ± 0 more ioctl calls (95 %): 0 within the noise.'"""
        value, hw = self.extra(more_rounds)
        tail = {"grows": "they grow with N", "flat": "no growth with N", "unclear": "too noisy to tell"}[self.verdict]
        return (f"By the fit, {more_rounds} more round trips make {value} ± {'?' if hw is None else hw} more "
                f"{self.name} calls (95 %): {tail}.")

    def describe(self) -> str:
        if self.verdict == "grows":
            return f"grows: {self.slope_text(2)} calls per round trip"
        if self.verdict == "flat":
            same = self.half_width == 0 and self.per_round == 0
            noise = ("the same in every run" if same else
                     "0 within the noise" if self.per_round - self.half_width <= 0 else
                     f"fewer than {GROWTH_MIN_CALLS} extra calls at N = {max(self.counts)}")
            bound = "" if same else f", at most {bound_text(self.high)} per round trip"
            spread = f"; runs differ by up to {self.scatter}, not in proportion to N" if self.scatter > 1 else ""
            return f"does not grow: {noise}{bound}{spread}"
        return (f"unclear: {self.slope_text(2)} per round trip; the runs scatter too much to tell growth "
                f"from start-up's own variation")


def bound_text(x: float) -> str:
    """An upper bound in calls per round trip, to two significant digits: '0.45', '0.0036', '0'."""
    if x <= 0:
        return "0"
    return "0.001" if x < 1e-3 else f"{x:.2g}"


def counts_by_n(data: dict, name: str) -> dict[int, list[int]]:
    """{N: [calls of `name` in each run with that N]} from census data (0 when absent)."""
    out: dict[int, list[int]] = {}
    for run in data["runs"]:
        c = run["counts"].get(name)
        out.setdefault(int(run["rounds"]), []).append(int(c["calls"]) if c else 0)
    return out


def totals_by_n(data: dict) -> dict[int, list[int]]:
    """{N: [all system calls of each run with that N]}."""
    out: dict[int, list[int]] = {}
    for run in data["runs"]:
        out.setdefault(int(run["rounds"]), []).append(sum(int(v["calls"]) for v in run["counts"].values()))
    return out


def fit(name: str, by_n: dict[int, list[int]]) -> Growth:
    """The straight line calls = a + b*N through every run, b's 95 % interval and the verdict.

    The interval comes from the runs' scatter about the line, so a start-up that takes one
    of two paths widens it instead of passing for growth; with repeats at every N it narrows."""
    xs = np.array([n for n, cs in by_n.items() for _ in cs], dtype=float)
    ys = np.array([c for cs in by_n.values() for c in cs], dtype=float)
    if len(set(xs)) < 2:
        raise CensusInputError("a growth fit needs runs at two or more different N")
    slope, icpt = np.polyfit(xs, ys, 1)
    resid = ys - (icpt + slope * xs)
    dof = len(xs) - 2
    sxx = float(((xs - xs.mean()) ** 2).sum())
    se = float(np.sqrt((resid @ resid) / dof / sxx)) if dof > 0 else float("inf")
    slope, se = round(float(slope), 9) + 0.0, round(se, 9)  # float noise of an exact fit is not a measurement
    half = se * t975(dof) if dof > 0 else float("inf")
    base = by_n.get(0, by_n[min(by_n)])
    if slope - half > 0 and slope * xs.max() >= GROWTH_MIN_CALLS:
        verdict = "grows"
    elif slope + half < FLAT_BOUND:
        verdict = "flat"
    else:
        verdict = "unclear"
    return Growth(name=name, counts=by_n, baseline=float(np.mean(base)),
                  startup_spread=int(max(base) - min(base)), per_round=slope, half_width=half,
                  verdict=verdict)


def growth(data: dict, name: str) -> Growth:
    """The fit of one system call's count against N over every run of the census."""
    return fit(name, counts_by_n(data, name))


def total_growth(data: dict) -> Growth:
    """The fit of all system calls together against N."""
    return fit("all system calls", totals_by_n(data))


def startup_paths(g: Growth, gap: int = PATH_GAP) -> list[tuple[int, int, list[int]]]:
    """The start-up counts of every run, grouped where neighbours differ by more than `gap`
    calls: [(lowest, highest, the N of each run in the group)], lowest group first. A run's
    start-up count is its count, less the fitted growth when the call grows (so runs at any N
    count). Two groups: start-up took one of two paths."""
    slope = g.per_round if g.grows else 0.0
    starts = sorted((round(c - slope * n), n) for n, cs in g.counts.items() for c in cs)
    groups = [[starts[0]]]
    for v in starts[1:]:
        if v[0] - groups[-1][-1][0] > gap:
            groups.append([])
        groups[-1].append(v)
    return [(grp[0][0], grp[-1][0], [n for _, n in grp]) for grp in groups]


def paths_text(g: Growth) -> str:
    """'1825–1828 (2 runs: N = 0, 0) and 1996–1998 (3 runs: N = 10, 100, 1000)'."""
    parts = [(f"{lo}–{hi}" if hi != lo else f"{lo}") + f" ({len(ns)} run{'s' if len(ns) != 1 else ''}: N = "
             + ", ".join(map(str, sorted(ns))) + ")" for lo, hi, ns in startup_paths(g)]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def startup_sentence(g: Growth) -> str:
    """What the groups of start-up counts say, and no more: start-up alone takes several paths
    (runs at N = 0 fall into different groups), or runs with and without copies differ by a
    fixed step that this census cannot attribute, or start-up hardly varies."""
    paths = startup_paths(g)
    if len(paths) == 1:
        how = "exactly the same" if g.startup_spread == 0 else f"the same within {paths[0][1] - paths[0][0]} calls"
        return f"Start-up made {how} {g.name} calls in all {g.runs} runs."
    zero_groups = sum(1 for _, _, ns in paths if 0 in ns)
    text = f"{g.name}'s counts fall into {len(paths)} groups, {paths_text(g)}. "
    if zero_groups > 1:
        return text + ("Start-up alone (N = 0) took more than one path, so runs differ by how start-up went, "
                       "not by how many copies they made.")
    if all(set(ns) == {0} or 0 not in ns for _, _, ns in paths):
        return text + ("Runs without copies and runs with copies differ by a step that is the same at every N > 0: "
                       "a one-time cost of the first copy or launch, or a start-up path these few runs happened to "
                       "split by; more start-up runs would tell. Either way it does not grow with N.")
    order = [max(ns) for _, _, ns in paths]
    if any(later < earlier for earlier, later in zip(order, order[1:], strict=False)):
        return text + ("The groups do not follow N (more copies sit in a lower group), so start-up took "
                       "different paths.")
    return text + "The fit's interval above includes this scatter."


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
    """Rows: syscall, every run's count at each N (start-up first), calls per round trip, verdict."""
    rows = []
    for name in names:
        g = growth(data, name)
        cells = [" / ".join(str(c) for c in g.counts[n]) for n in sorted(g.counts)]
        rows.append((name, *cells, g.slope_text(), g.describe()))
    return rows


def table_headers(data: dict) -> tuple[str, ...]:
    by_n = totals_by_n(data)
    return ("syscall", *[(f"N=0 (start-up, {len(by_n[n])} runs)" if n == 0 else
                          f"N={n} ({len(by_n[n])} run{'s' if len(by_n[n]) != 1 else ''})") for n in sorted(by_n)],
            "calls per round trip (fit ± 95 %)", "verdict")


def summary(data: dict, names=FOCUS) -> list[str]:
    """What the census shows, one sentence per finding, each computed from the fits: which calls
    grow with N, which do not (with the bound), which cannot be told apart from start-up's own
    variation, and the start-up paths of the call whose start-up varies most."""
    gs = [growth(data, n) for n in names]
    out = []
    grow = [g for g in gs if g.grows]
    flat = [g for g in gs if g.verdict == "flat"]
    unclear = [g for g in gs if g.verdict == "unclear"]
    if grow:
        out.append("Grows with N: " + "; ".join(f"{g.name} {g.slope_text(2)} calls per round trip"
                                                  for g in grow) + ". That is a system call made on every round trip.")
    if flat:
        worst = max(flat, key=lambda g: g.high)
        out.append(f"No growth with N for {', '.join(g.name for g in flat)}: by the fits, none of them makes more "
                   f"than {bound_text(worst.high)} calls per round trip (top of the 95 % interval, {worst.name}), "
                   f"far below one call per round trip.")
    if unclear:
        out.append(f"Cannot tell growth from start-up's own variation for {', '.join(g.name for g in unclear)} "
                   f"with {gs[0].runs} runs: more repeats would narrow the interval.")
    varied = max(gs, key=lambda g: (len(startup_paths(g)), g.scatter))  # the call whose start-up varies most
    out.append(startup_sentence(varied))
    return out


def figure(ev, workload: str = "gpu", names=FOCUS) -> CourseFigure:
    """Every run's count against N on log-log axes (N=0 drawn at N=1, labelled), each call's
    runs joined through their means: flat lines do not grow, and runs of one N that sit apart
    are start-up taking different paths.

    `ev` is the census Evidence; `workload` picks its 'gpu' census or its 'writes' contrast."""
    import plotly.graph_objects as go

    data = ev.require()[workload]
    fig = go.Figure()
    ns = sorted({int(r["rounds"]) for r in data["runs"]})
    for name in names:
        by = counts_by_n(data, name)
        fig.add_scatter(x=[max(n, 1) for n in ns for _ in by[n]], y=[max(c, 0.5) for n in ns for c in by[n]],
                        mode="markers", name=f"{name} (each run)", legendgroup=name, showlegend=False,
                        marker={"size": 6, "opacity": 0.6})
        fig.add_scatter(x=[max(n, 1) for n in ns], y=[max(float(np.mean(by[n])), 0.5) for n in ns],
                        mode="lines+markers", name=name, legendgroup=name)
    base = growth(data, "ioctl").baseline
    fig.add_scatter(x=[max(n, 1) for n in ns], y=[base + 3 * n for n in ns], mode="lines",
                    line={"dash": "dot", "color": "gray"},
                    name="ioctl if every copy and launch entered the driver<br>(start-up + 3 per round trip)")
    fig.update_xaxes(type="log", title="round trips N (copy in, kernel, copy out); N=0 drawn at 1",
                     tickvals=[max(n, 1) for n in ns], ticktext=[str(n) for n in ns])
    fig.update_yaxes(type="log", title="system calls in the whole run (count)")
    fig.update_layout(title=f"System calls vs number of round trips ({data['workload']}, "
                            f"{data['nbytes'] >> 10} KiB copies, {len(data['runs'])} runs)")
    return CourseFigure(fig, ev.parts)


REPEAT_RULE = validate.count(2, MAX_REPEATS)  # runs of every N


@experiment("path.syscall_census", chapter=1, needs=(GPU, STRACE),
            title="strace -f -c of N pageable round trips (copy in, kernel, copy out), N = 0..1000, repeated",
            params={"rounds": ROUND_LIST, "repeats": REPEAT_RULE})
def record_syscall_census(quick: bool, rounds: tuple[int, ...] = ROUNDS, repeats: int = REPEATS,
                          code=copy_loop) -> dict:
    """The census of the copy loop `code` (the page's copy_loop: 'gpu') and of the write(2)
    contrast ('writes'): start-up alone and every N in `rounds`, `repeats` times each, interleaved
    (the recorder's smoke test: N = 10 and 100, twice)."""
    strace_or_skip()
    ns, reps = (QUICK_ROUNDS, QUICK_REPEATS) if quick else (rounds, repeats)
    gpu_runs = census(ns, code=code, repeats=reps)
    contrast = census(ns, workload="writes", repeats=reps, progress=False)
    return {"gpu": gpu_runs, "writes": contrast}


def recorded_writes(data: dict) -> dict:
    """The write(2) contrast of a recorded census (recorded with path.syscall_census)."""
    if not isinstance(data, dict) or "writes" not in data:
        raise ReferenceDataError("path.syscall_census has no 'writes' census; re-record it with "
                                 "`python -m helpers.record --only path.syscall_census`")
    return data["writes"]


@experiment("path.write_census", chapter=1, needs=(STRACE,), recorded_in="path.syscall_census", from_recording=recorded_writes,
            title="strace -f -c of a child that calls write(2) once per round trip (no GPU needed)",
            params={"rounds": ROUND_LIST, "repeats": REPEAT_RULE})
def write_census(quick: bool, rounds: tuple[int, ...] = ROUNDS, repeats: int = REPEATS) -> dict:
    """The contrast on its own: it needs strace but no GPU, so it runs live on a laptop too.
    Its recording is the 'writes' half of path.syscall_census, taken in the same run."""
    ns, reps = (QUICK_ROUNDS, QUICK_REPEATS) if quick else (rounds, repeats)
    return census(ns, workload="writes", repeats=reps, progress=False)
