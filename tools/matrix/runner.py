"""The course's test matrix: every notebook and lab under nbval in one named configuration.

    python -m tools.matrix.runner run  --mode auto|live|replay|hidden --out result.json [notebooks...]
    python -m tools.matrix.runner merge result*.json [--out matrix.md]
    python -m tools.matrix.runner load --kernels 8 --out load.json [notebooks...]

`run` executes each notebook (default: notebooks/*.ipynb and labs/*.ipynb, so new chapters and
labs are picked up without changes here) on a fresh kernel with `pytest --nbval-lax`, one
pytest process per notebook, and checks for leaks three ways:

- inside the kernel (tools/matrix/leakprobe.py, cells injected into a temporary copy of the notebook
  next to the original): locked host memory (VmLck+VmPin), device memory in use
  (cudaMemGetInfo) and child processes, after the first cell and again after the notebook's
  namespace is dropped; a leak fails the notebook's last cell;
- around the notebook, from outside: device memory used on every GPU (nvidia-smi) before and
  after, so memory a dead kernel's orphans still hold shows up;
- orphans: this process becomes a child subreaper (prctl), so any process the notebook
  started and abandoned is re-parented here when the kernel exits; each is reported and
  killed.

Rows run one after another, never side by side on one machine (a lock refuses a second run):
the nvidia-smi check would count one row's notebooks as the other's leaks. The result is
rewritten after every notebook, and --budget-s stops starting new ones, so a run cut short
still reports what it finished; the rest are listed as not reached and counted as not passed.

Modes: auto (whatever the machine gives: live with a GPU, replay without), live
(COURSE_MODE=live: fails without a GPU), replay (COURSE_MODE=replay: replay forced on a GPU),
hidden (CUDA_VISIBLE_DEVICES= empty: a GPU machine that shows no GPU to CUDA).

`load` is a class on one GPU node: N course kernels at once, each running the chapter notebooks
(rotated, so different chapters overlap) and then tools/matrix/loadprobe.py, which takes a chapter's
live copy evidence five times. Per-notebook leak checks run inside each kernel; the device
memory check from outside and the orphan check run once, around the whole load (side by side,
one kernel's memory is another's baseline; the kernels' own probes still check locked host memory and
child processes, which are per process). The row gives wall time, failures, leaks, whether
the live evidence said "contended", and the spread of the probes' bandwidths.

The result is JSON (one object per notebook, with the raw measurements) plus one markdown
table row: machine | mode | notebooks passed | leaks found. `merge` makes the table from
several results. Needs only pytest, nbval, ipykernel, jupyter_client and nbformat (no Jupyter
server), so it runs on a bare GPU node as well as in CI.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parent / "leakprobe.py"
MODES = ("auto", "live", "replay", "hidden")
MODE_ENV = {"auto": {}, "live": {"COURSE_MODE": "live"}, "replay": {"COURSE_MODE": "replay"},
            "hidden": {"CUDA_VISIBLE_DEVICES": ""}}
MODE_LABEL = {"live": "live", "replay": "replay forced (COURSE_MODE=replay)",
              "hidden": "GPU hidden (CUDA_VISIBLE_DEVICES=)"}
MiB = 1 << 20
TABLE_HEAD = ("| machine | mode | notebooks passed | leaks found |\n"
              "|---|---|---|---|")
COPY_PREFIX = ".matrix-"


class MatrixError(Exception):
    """The matrix was asked for something it cannot do (bad mode, missing notebook, bad result file)."""


# --- the machine, from outside any notebook ---------------------------------------------

def _smi(*query: str) -> list[list[str]] | None:
    """Rows of `nvidia-smi --query-...`, or None where nvidia-smi is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *query, "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [[x.strip() for x in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def gpus() -> list[str]:
    """Names of the machine's GPUs (all of them: nvidia-smi ignores CUDA_VISIBLE_DEVICES)."""
    rows = _smi("--query-gpu=name")
    return [r[0] for r in rows] if rows else []


def machine_name(names: list[str]) -> str:
    """'1× NVIDIA H100 80GB HBM3', '2× NVIDIA H200', or 'no GPU'."""
    if not names:
        return "no GPU"
    kinds = sorted(set(names))
    return ", ".join(f"{names.count(k)}× {k}" for k in kinds)


def device_used_mib() -> list[int] | None:
    """MiB in use on each GPU (nvidia-smi memory.used), None without nvidia-smi."""
    rows = _smi("--query-gpu=memory.used")
    if rows is None:
        return None
    try:
        return [int(float(r[0])) for r in rows]
    except (ValueError, IndexError):
        return None


def settled_device_used_mib(before: list[int] | None, timeout_s: float = 10.0) -> list[int] | None:
    """Device memory in use once the driver has released what ended processes held: polled until it
    is back to `before` or two reads agree (at most timeout_s), instead of sleeping a fixed time."""
    last = device_used_mib()
    deadline = time.monotonic() + timeout_s
    while last and before and any(a > b for a, b in zip(last, before, strict=False)) and time.monotonic() < deadline:
        time.sleep(0.2)
        now = device_used_mib()
        if now == last:
            break
        last = now
    return last


# --- orphans ----------------------------------------------------------------------------

def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux PR_SET_CHILD_SUBREAPER)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _probe_module() -> dict:
    import runpy

    return runpy.run_path(str(PROBE))


def reap_orphans(grace_s: float = 2.0) -> list[dict]:
    """Children of this process that outlived their notebook: reported, then killed."""
    children = _probe_module()["children"]
    deadline = time.monotonic() + grace_s
    found = children()
    while found and time.monotonic() < deadline:  # a kernel's own helpers may still be exiting
        time.sleep(0.2)
        found = children()
    for c in found:
        try:
            os.kill(c["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    _await_exit([c["pid"] for c in found], grace_s)  # SIGKILL is delivered, not yet finished
    while True:  # collect the zombies
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return found


def _await_exit(pids: list[int], wait_s: float) -> None:
    """Reap each of `pids` (children of this subreaper) once it has exited, waiting at most `wait_s`
    in all: a killed process can still be running its exit when kill() returns."""
    deadline = time.monotonic() + wait_s
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not (or no longer) our child: reaped elsewhere
                done = pid
            if done:
                left.discard(pid)
        if left:
            time.sleep(0.01)


# --- one notebook -----------------------------------------------------------------------

def instrumented_copy(nb_path: Path, report: Path, *, pinned_tolerance: int,
                      device_tolerance: int) -> tuple[Path, set[str]]:
    """A copy of the notebook, next to it, with the baseline and leak-check cells added; and nbval's
    names of those two cells ('Cell N', N counting code cells), so their time is not the notebook's."""
    import nbformat

    nb = nbformat.read(str(nb_path), as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if not code:
        raise MatrixError(f"{nb_path}: no code cell to run")
    load = f"import runpy as _mx_runpy\n_mx = _mx_runpy.run_path({str(PROBE)!r})\n"
    base = nbformat.v4.new_code_cell(
        "# injected by tools/matrix/runner.py: what the kernel holds after the first cell\n"
        + load + f"_mx['baseline']({str(report)!r})\ndel _mx, _mx_runpy")
    end = nbformat.v4.new_code_cell(
        "# injected by tools/matrix/runner.py: drop the namespace, then nothing may be left behind\n"
        + load + f"_mx['final']({str(report)!r}, pinned_tolerance={pinned_tolerance}, "
        f"device_tolerance={device_tolerance})")
    nb.cells.insert(code[0] + 1, base)
    nb.cells.append(end)
    for i, c in enumerate(nb.cells):
        c.id = f"mx{i:03d}"
    import uuid

    out = nb_path.with_name(f"{COPY_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}-{nb_path.name}")  # one per run
    nbformat.write(nb, str(out))
    return out, {"Cell 1", f"Cell {len(code) + 1}"}  # right after the first code cell, and last


SLOWEST_CELLS = 6  # per notebook, from pytest's --durations (cells of 0.5 s or more)
_DURATION = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+\S*::(Cell \d+)\s*$")


def cell_durations(pytest_output: str) -> list[tuple[str, str, float]]:
    """(cell, phase, seconds) for every line of pytest's --durations=0 section (nbval names a cell
    'Cell N', N counting code cells from 0 in the instrumented copy, so the leak probe's first cell is 1)."""
    return [(m.group(3), m.group(2), float(m.group(1))) for line in pytest_output.splitlines()
            if (m := _DURATION.match(line))]


def slowest_cells(pytest_output: str) -> list[list]:
    """[[cell, seconds], ...]: the SLOWEST_CELLS longest cell runs ('call') of 0.5 s or more."""
    calls = sorted(((s, c) for c, phase, s in cell_durations(pytest_output) if phase == "call" and s >= 0.5),
                   reverse=True)
    return [[c, s] for s, c in calls[:SLOWEST_CELLS]]


def notebook_seconds(pytest_output: str, probe_cells: set[str]) -> float:
    """The notebook's own time: every phase of every cell (the first cell's setup starts the kernel, as
    opening the notebook does), without the leak probe's injected cells and without pytest's own start-up."""
    return round(sum(s for c, _, s in cell_durations(pytest_output) if c not in probe_cells), 2)


def run_notebook(nb_path: Path, env: dict, *, timeout_s: int, pinned_tolerance: int,
                 device_tolerance: int, device_tolerance_mib_outside: int, alone: bool = True) -> dict:
    """Run one notebook under nbval; return pass/fail, the leaks and the raw measurements.

    alone=False (the load test): other notebooks run beside this one, so the checks from outside
    (nvidia-smi memory, orphans among this process's children) are left to the caller."""
    fd, report_name = tempfile.mkstemp(prefix="matrix-", suffix=".json")
    os.close(fd)
    report = Path(report_name)
    copy, probes = instrumented_copy(nb_path, report, pinned_tolerance=pinned_tolerance,
                                     device_tolerance=device_tolerance)
    before = device_used_mib() if alone else None
    t0 = time.monotonic()
    # only nbval's plugin: every other installed pytest plugin would add its start-up to each notebook
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "nbval.plugin", "-p", "no:cacheprovider", "--nbval-lax",
           f"--nbval-cell-timeout={timeout_s}", f"--rootdir={ROOT}", "-o", "testpaths=",
           "--durations=0", "--durations-min=0", str(copy)]
    env = dict(env, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    slowest: list = []
    cells_s = None
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout_s * 4 + 120)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-4000:]
        slowest = slowest_cells(proc.stdout)
        cells_s = notebook_seconds(proc.stdout, probes)
    except subprocess.TimeoutExpired as exc:
        rc, tail = None, f"pytest did not finish within {exc.timeout:g} s"
    finally:
        copy.unlink(missing_ok=True)
    seconds = round(time.monotonic() - t0, 1)
    orphans = reap_orphans() if alone else []
    if alone:
        time.sleep(0.5)
    after = device_used_mib() if alone else None
    try:
        inside = json.loads(report.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        inside = {}
    report.unlink(missing_ok=True)
    leaks = list(inside.get("leaks", []))
    leaks += [f"orphan process {o['pid']} outlived the kernel: {o['cmd']}" for o in orphans]
    if before is not None and after is not None:
        for i, (b, a) in enumerate(zip(before, after, strict=False)):
            if a - b > device_tolerance_mib_outside:
                leaks.append(f"GPU {i}: {a - b} MiB more in use after the kernel exited (nvidia-smi)")
    return {"notebook": str(nb_path.relative_to(ROOT) if nb_path.is_relative_to(ROOT) else nb_path),
            "passed": rc == 0, "pytest_rc": rc, "seconds": seconds, "cells_seconds": cells_s,
            "leak_check_ran": "final" in inside, "leaks": leaks, "slowest_cells": slowest,
            "kernel": {k: inside.get(k) for k in ("baseline", "held", "final")},
            "device_used_mib": {"before": before, "after": after},
            "output_tail": "" if rc == 0 else tail}


def bytecode_state(env: dict, module: str = "numpy") -> dict:
    """Whether the notebooks' kernels (started with `env`) will find Python bytecode: they write it
    unless PYTHONDONTWRITEBYTECODE is set, and `module` (a library every kernel imports) shows
    whether it is already there. Without both, every kernel compiles its libraries from source:
    on the course's H100 that took the live course from 174 s to 229 s (book/teaching.md)."""
    import importlib.util

    writes = not env.get("PYTHONDONTWRITEBYTECODE")
    spec = importlib.util.find_spec(module)
    cached = None
    if spec is not None and spec.origin and spec.origin.endswith(".py"):
        cached = Path(importlib.util.cache_from_source(spec.origin)).is_file()
    return {"writes": writes, "pycache_prefix": env.get("PYTHONPYCACHEPREFIX"), "module": module,
            "module_cached": cached, "missing": not writes and cached is False}


def default_notebooks() -> list[Path]:
    """Every chapter and lab notebook, as CI runs them (new ones are picked up by the glob)."""
    return sorted(p for d in ("notebooks", "labs") for p in (ROOT / d).glob("*.ipynb")
                  if not p.name.startswith(COPY_PREFIX))


def summary(args: argparse.Namespace, names: list[str], subreaper: bool, notebooks: list[Path],
            results: list[dict], bytecode: dict) -> dict:
    """The result so far: notebooks not reached yet count in the total, not as passed."""
    mode = MODE_LABEL.get(args.mode) or ("live" if names else "replay")
    if not names:
        mode = f"{mode}, no GPU" if args.mode != "auto" else "no GPU (replay)"
    done = {r["notebook"] for r in results}
    not_reached = [str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p) for p in notebooks]
    not_reached = [n for n in not_reached if n not in done]
    out = {"config": args.name or args.mode, "machine": machine_name(names), "gpus": names,
           "mode": mode, "requested_mode": args.mode,
           "passed": sum(r["passed"] for r in results), "total": len(notebooks),
           "leaks": sum(len(r["leaks"]) for r in results),
           "leak_checks_ran": sum(r["leak_check_ran"] for r in results), "not_reached": not_reached,
           "subreaper": subreaper, "host": platform.node(), "python": platform.python_version(), "bytecode": bytecode,
           "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "seconds": round(sum(r["seconds"] for r in results), 1),
           "cells_seconds": round(sum(r.get("cells_seconds") or 0 for r in results), 1), "notebooks": results}
    out["row"] = row(out)
    return out


def _write(path: str | None, out: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        tmp.replace(path)


def one_run_at_a_time():
    """An exclusive lock held for the whole run, or MatrixError if another run holds it.

    Rows must not run side by side on one machine: the nvidia-smi check around a notebook
    sees every process on the GPU, so another row's notebook would show up as this one's
    leak (two rows run at once on the H100 did exactly that).
    """
    import fcntl

    path = Path(tempfile.gettempdir()) / "course-matrix.lock"
    f = open(path, "a+")  # noqa: SIM115 - held open until the process exits
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise MatrixError(f"another matrix run (pid {holder}) is running on this machine; "
                          "run the rows one after another (its GPU check would count their notebooks "
                          "as each other's leaks)") from None
    f.truncate(0)
    f.write(str(os.getpid()))
    f.flush()
    return f


def run(args: argparse.Namespace) -> dict:
    """Run the configuration; write the JSON result and print the table row."""
    if args.mode not in MODES:
        raise MatrixError(f"mode must be one of {', '.join(MODES)}, got {args.mode!r}")
    notebooks = [Path(p).resolve() for p in args.notebooks] or default_notebooks()
    for p in notebooks:
        if not p.is_file():
            raise MatrixError(f"no such notebook: {p}")
    names = gpus()
    env = dict(os.environ, **MODE_ENV[args.mode])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), str(ROOT)) if x)
    lock = one_run_at_a_time()  # noqa: F841 - released when this process exits
    subreaper = become_subreaper()
    bytecode = bytecode_state(env)
    if bytecode["missing"]:
        print(f"[matrix {args.mode}] note: Python here writes no bytecode (PYTHONDONTWRITEBYTECODE) and "
              f"{bytecode['module']} has none: every kernel compiles its libraries from source, so the times below "
              "are longer than a normal install's (book/teaching.md, 'Machine time, live')", flush=True)
    results: list[dict] = []
    started = time.monotonic()
    for i, nb in enumerate(notebooks):
        if args.budget_s and time.monotonic() - started > args.budget_s:
            print(f"[matrix {args.mode}] budget of {args.budget_s} s spent: "
                  f"{len(notebooks) - i} notebook(s) not reached", flush=True)
            break
        print(f"[matrix {args.mode}] {nb.name} ...", flush=True)
        r = run_notebook(nb, env, timeout_s=args.cell_timeout, pinned_tolerance=args.pinned_tolerance,
                         device_tolerance=args.device_tolerance_mib * MiB,
                         device_tolerance_mib_outside=args.device_tolerance_mib)
        verdict = "passed" if r["passed"] else "FAILED"
        print(f"[matrix {args.mode}] {nb.name}: {verdict} in {r['seconds']} s (cells {r['cells_seconds']} s), "
              f"{len(r['leaks'])} leak(s)"
              + "".join(f"\n    leak: {x}" for x in r["leaks"])
              + (f"\n{r['output_tail']}" if not r["passed"] else ""), flush=True)
        results.append(r)
        out = summary(args, names, subreaper, notebooks, results, bytecode)
        _write(args.out, out)  # after every notebook: a run cut short still leaves its rows
    out = summary(args, names, subreaper, notebooks, results, bytecode)
    _write(args.out, out)
    print(TABLE_HEAD)
    print(out["row"])
    return out


# --- a class on one node -----------------------------------------------------------------

def _kernel(k: int, notebooks: list[Path], env: dict, args: argparse.Namespace) -> dict:
    """Course kernel k: the notebooks (rotated by k), then the bandwidth probe."""
    order = notebooks[k % len(notebooks):] + notebooks[:k % len(notebooks)]
    # device memory is one pool for every process (cudaMemGetInfo): side by side, the kernel's own
    # check would count the others' buffers, so device memory is checked around the whole load instead
    results = [run_notebook(nb, env, timeout_s=args.cell_timeout, pinned_tolerance=args.pinned_tolerance,
                            device_tolerance=UNCHECKED, device_tolerance_mib_outside=0, alone=False)
               for nb in order]
    fd, name = tempfile.mkstemp(prefix=f"load-{k}-", suffix=".json")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, "-m", "tools.matrix.loadprobe", name],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.cell_timeout)
        probe = json.loads(Path(name).read_text() or "{}") if proc.returncode in (0, 3) else {
            "error": (proc.stdout + proc.stderr)[-2000:]}
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        probe = {"error": str(exc)}
    finally:
        Path(name).unlink(missing_ok=True)
    return {"kernel": k, "notebooks": results, "probe": probe}


UNCHECKED = 1 << 60  # a tolerance no notebook reaches: the check is made elsewhere


def spread(values: list[float]) -> dict:
    """min, median, max and (max-min)/median of the probes' bandwidths."""
    if not values:
        return {}
    v = sorted(values)
    med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    return {"n": len(v), "min": round(v[0], 2), "median": round(med, 2), "max": round(v[-1], 2),
            "relative_range": round((v[-1] - v[0]) / med, 3) if med else None}


def load(args: argparse.Namespace) -> dict:
    """N course kernels side by side on this machine's GPU; the load row."""
    from concurrent.futures import ThreadPoolExecutor

    if args.kernels < 1:
        raise MatrixError(f"--kernels must be at least 1, got {args.kernels}")
    notebooks = [Path(p).resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("0[0-4]*.ipynb"))
    missing = [str(p) for p in notebooks if not p.is_file()]
    if missing:
        raise MatrixError(f"no such notebook: {missing[0]}")
    names = gpus()
    env = dict(os.environ, **MODE_ENV[args.mode])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), str(ROOT)) if x)
    lock = one_run_at_a_time()  # noqa: F841
    subreaper = become_subreaper()
    before = device_used_mib()
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.kernels) as pool:
        kernels = list(pool.map(lambda k: _kernel(k, notebooks, env, args), range(args.kernels)))
    wall = round(time.monotonic() - t0, 1)
    orphans = reap_orphans()
    after = settled_device_used_mib(before)
    runs = [r for k in kernels for r in k["notebooks"]]
    leaks = [f"kernel {k['kernel']}: {x}" for k in kernels for r in k["notebooks"] for x in r["leaks"]]
    leaks += [f"orphan process {o['pid']} outlived its kernel: {o['cmd']}" for o in orphans]
    if before is not None and after is not None:
        leaks += [f"GPU {i}: {a - b} MiB more in use after the load (nvidia-smi)"
                  for i, (b, a) in enumerate(zip(before, after, strict=False)) if a - b > args.device_tolerance_mib]
    probes = [p for k in kernels for p in k["probe"].get("runs", [])]
    out = {"config": args.name or f"load-{args.kernels}", "machine": machine_name(names), "gpus": names,
           "mode": f"{MODE_LABEL.get(args.mode, args.mode)}, {args.kernels} course kernels at once",
           "kernels": args.kernels,
           "passed": sum(r["passed"] for r in runs), "total": len(runs), "failures": sum(not r["passed"] for r in runs),
           "leaks": len(leaks), "leak_list": leaks, "leak_checks_ran": sum(r["leak_check_ran"] for r in runs),
           "not_reached": [], "subreaper": subreaper, "wall_seconds": wall, "seconds": wall,
           "probe_errors": [k["probe"]["error"] for k in kernels if "error" in k["probe"]],
           "contended_flagged": sum("contended" in p["source"] for p in probes), "probe_runs": len(probes),
           "pinned_h2d_gbps": spread([p["pinned_h2d_gbps"] for p in probes]),
           "host": platform.node(), "python": platform.python_version(),
           "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "kernel_results": kernels}
    out["row"] = row(out)
    _write(args.out, out)
    print(TABLE_HEAD)
    print(out["row"])
    print(f"load: {args.kernels} kernels, wall {wall} s, {out['failures']} failed notebook runs, {len(leaks)} leaks, "
          f"{out['contended_flagged']}/{len(probes)} probe figures flagged contended, pinned h2d GB/s {out['pinned_h2d_gbps']}")
    return out


# --- the table --------------------------------------------------------------------------

def row(result: dict) -> str:
    """One markdown table row from a result."""
    leaks = result["leaks"]
    ran = result["total"] - len(result.get("not_reached", []))
    if result.get("leak_checks_ran", ran) < ran:
        leaks = f"{leaks} ({ran - result['leak_checks_ran']} notebook(s) not checked)"
    passed = f"{result['passed']}/{result['total']}"
    if result.get("not_reached"):
        passed += f" ({len(result['not_reached'])} not reached)"
    return f"| {result['machine']} | {result['mode']} | {passed} | {leaks} |"


def load_result(path: str) -> dict:
    """A result file written by `run`; MatrixError naming the file if it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MatrixError(f"{path}: not a matrix result ({exc})") from None
    need = ("machine", "mode", "passed", "total", "leaks")
    if not isinstance(data, dict) or any(k not in data for k in need):
        raise MatrixError(f"{path}: not a matrix result (needs {', '.join(need)})")
    return data


def merge(paths: list[str]) -> str:
    """The markdown table of several results, in the order given."""
    if not paths:
        raise MatrixError("merge needs at least one result file")
    return "\n".join([TABLE_HEAD] + [row(load_result(p)) for p in paths])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every notebook in one configuration")
    r.add_argument("notebooks", nargs="*", help="default: notebooks/*.ipynb labs/*.ipynb")
    r.add_argument("--mode", default="auto", choices=MODES)
    r.add_argument("--name", default=None, help="the configuration's name in the JSON (default: the mode)")
    r.add_argument("--out", default=None, help="write the JSON result here")
    r.add_argument("--cell-timeout", type=int, default=600)
    r.add_argument("--budget-s", type=float, default=0,
                   help="start no notebook after this many seconds (0: no limit); the rest are 'not reached'")
    r.add_argument("--pinned-tolerance", type=int, default=MiB, help="bytes (default 1 MiB)")
    r.add_argument("--device-tolerance-mib", type=int, default=64, help="MiB (default 64)")
    ld = sub.add_parser("load", help="N course kernels at once on this machine's GPU (a class on one node)")
    ld.add_argument("notebooks", nargs="*", help="default: notebooks/00-04")
    ld.add_argument("--kernels", type=int, default=8)
    ld.add_argument("--mode", default="live", choices=MODES, help="live (default) on the GPU node")
    ld.add_argument("--name", default=None)
    ld.add_argument("--out", default=None)
    ld.add_argument("--cell-timeout", type=int, default=600)
    ld.add_argument("--pinned-tolerance", type=int, default=MiB, help="bytes (default 1 MiB)")
    ld.add_argument("--device-tolerance-mib", type=int, default=64, help="MiB (default 64)")
    m = sub.add_parser("merge", help="markdown table from result files")
    m.add_argument("results", nargs="+")
    m.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd in ("run", "load"):
            out = run(args) if args.cmd == "run" else load(args)
            return 0 if out["passed"] == out["total"] and out["leaks"] == 0 else 1
        table = merge(args.results)
    except MatrixError as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
