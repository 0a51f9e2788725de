"""The course's test matrix: every notebook and lab under nbval in one named configuration.

    python tools/matrix.py run  --mode auto|live|replay|hidden --out result.json [notebooks...]
    python tools/matrix.py merge result*.json [--out matrix.md]

`run` executes each notebook (default: notebooks/*.ipynb and labs/*.ipynb, so new chapters and
labs are picked up without changes here) on a fresh kernel with `pytest --nbval-lax`, one
pytest process per notebook, and checks for leaks three ways:

- inside the kernel (tools/leakprobe.py, cells injected into a temporary copy of the notebook
  next to the original): locked host memory (VmLck+VmPin), device memory in use
  (cudaMemGetInfo) and child processes, after the first cell and again after the notebook's
  namespace is dropped; a leak fails the notebook's last cell;
- around the notebook, from outside: device memory used on every GPU (nvidia-smi) before and
  after, so memory a dead kernel's orphans still hold shows up;
- orphans: this process becomes a child subreaper (prctl), so any process the notebook
  started and abandoned is re-parented here when the kernel exits; each is reported and
  killed.

Modes: auto (whatever the machine gives: live with a GPU, replay without), live
(COURSE_MODE=live: fails without a GPU), replay (COURSE_MODE=replay: replay forced on a GPU),
hidden (CUDA_VISIBLE_DEVICES= empty: a GPU machine that shows no GPU to CUDA).

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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    while True:  # collect the zombies
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return found


# --- one notebook -----------------------------------------------------------------------

def instrumented_copy(nb_path: Path, report: Path, *, pinned_tolerance: int, device_tolerance: int) -> Path:
    """A copy of the notebook, next to it, with the baseline and leak-check cells added."""
    import nbformat

    nb = nbformat.read(str(nb_path), as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if not code:
        raise MatrixError(f"{nb_path}: no code cell to run")
    load = f"import runpy as _mx_runpy\n_mx = _mx_runpy.run_path({str(PROBE)!r})\n"
    base = nbformat.v4.new_code_cell(
        "# injected by tools/matrix.py: what the kernel holds after the first cell\n"
        + load + f"_mx['baseline']({str(report)!r})\ndel _mx, _mx_runpy")
    end = nbformat.v4.new_code_cell(
        "# injected by tools/matrix.py: drop the namespace, then nothing may be left behind\n"
        + load + f"_mx['final']({str(report)!r}, pinned_tolerance={pinned_tolerance}, "
        f"device_tolerance={device_tolerance})")
    nb.cells.insert(code[0] + 1, base)
    nb.cells.append(end)
    for i, c in enumerate(nb.cells):
        c.id = f"mx{i:03d}"
    out = nb_path.with_name(COPY_PREFIX + nb_path.name)
    nbformat.write(nb, str(out))
    return out


def run_notebook(nb_path: Path, env: dict, *, timeout_s: int, pinned_tolerance: int,
                 device_tolerance: int, device_tolerance_mib_outside: int) -> dict:
    """Run one notebook under nbval; return pass/fail, the leaks and the raw measurements."""
    fd, report_name = tempfile.mkstemp(prefix="matrix-", suffix=".json")
    os.close(fd)
    report = Path(report_name)
    copy = instrumented_copy(nb_path, report, pinned_tolerance=pinned_tolerance,
                             device_tolerance=device_tolerance)
    before = device_used_mib()
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
           f"--nbval-cell-timeout={timeout_s}", f"--rootdir={ROOT}", "-o", "testpaths=", str(copy)]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout_s * 4 + 120)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-4000:]
    except subprocess.TimeoutExpired as exc:
        rc, tail = None, f"pytest did not finish within {exc.timeout:g} s"
    finally:
        copy.unlink(missing_ok=True)
    seconds = round(time.monotonic() - t0, 1)
    orphans = reap_orphans()
    time.sleep(0.5)
    after = device_used_mib()
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
            "passed": rc == 0, "pytest_rc": rc, "seconds": seconds,
            "leak_check_ran": "final" in inside, "leaks": leaks,
            "kernel": {k: inside.get(k) for k in ("baseline", "held", "final")},
            "device_used_mib": {"before": before, "after": after},
            "output_tail": "" if rc == 0 else tail}


def default_notebooks() -> list[Path]:
    """Every chapter and lab notebook, as CI runs them (new ones are picked up by the glob)."""
    return sorted(p for d in ("notebooks", "labs") for p in (ROOT / d).glob("*.ipynb")
                  if not p.name.startswith(COPY_PREFIX))


def summary(args: argparse.Namespace, names: list[str], subreaper: bool, notebooks: list[Path],
            results: list[dict]) -> dict:
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
           "subreaper": subreaper, "host": platform.node(), "python": platform.python_version(),
           "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "seconds": round(sum(r["seconds"] for r in results), 1), "notebooks": results}
    out["row"] = row(out)
    return out


def _write(path: str | None, out: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        tmp.replace(path)


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
    subreaper = become_subreaper()
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
        print(f"[matrix {args.mode}] {nb.name}: {verdict} in {r['seconds']} s, {len(r['leaks'])} leak(s)"
              + "".join(f"\n    leak: {x}" for x in r["leaks"])
              + (f"\n{r['output_tail']}" if not r["passed"] else ""), flush=True)
        results.append(r)
        out = summary(args, names, subreaper, notebooks, results)
        _write(args.out, out)  # after every notebook: a run cut short still leaves its rows
    out = summary(args, names, subreaper, notebooks, results)
    _write(args.out, out)
    print(TABLE_HEAD)
    print(out["row"])
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
    m = sub.add_parser("merge", help="markdown table from result files")
    m.add_argument("results", nargs="+")
    m.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            out = run(args)
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
