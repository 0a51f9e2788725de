"""JupyterLab in headless Chromium: start `make lab`, open Chapter 0, run every cell, check the result.

    python -m tools.site.labbrowser [--notebook notebooks/00_your_machine.ipynb] -- make lab LAB_FLAGS=--no-browser

The server is the course's own `make lab` (the command after --), started with a token, a
throw-away JupyterLab settings folder (autosave off, so the notebook in the repository is not
rewritten) and `--LabApp.expose_app_in_browser` so the test can call JupyterLab's own commands.
Chromium may reach only that server. Checks:

* the notebook opens and its kernel starts; `notebook:run-all-cells` runs every cell, and each
  code cell ends with an execution count and no error output;
* the first code cell's output is the course's mode banner (LIVE or REPLAY);
* the first plotly figure is drawn by JupyterLab's plotly renderer (its `.main-svg` is in the page);
* every course diagram and plotly figure in the outputs reads at a laptop and a wide window
  (1280 and 1920 px): tools/site/sitecheck.py's layout check (no text clipped or overprinted), each
  output scrolled into view first (JupyterLab draws only the cells near the view);
* no console error, no uncaught exception, no request to any other host;
* the notebook file is byte-for-byte unchanged afterwards.

A screenshot of the drawn figure is written (default book/_build/screenshots/lab-<notebook>.png).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.site.cdp import BrowserError, Chromium, Page
from tools.site.labcheck import free_port, get

# The notebook's panel among JupyterLab's main-area widgets (window.__panel once found).
PANEL = "window.__panel"
OPENED_JS = """(async () => {
  if (!window.jupyterapp) return null;
  const p = [...jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === %s);
  if (!p) return null;
  window.__panel = p;
  await p.context.ready; await p.sessionContext.ready;
  const k = p.sessionContext.session && p.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return null;
  jupyterapp.shell.activateById(p.id);
  return jupyterapp.shell.currentWidget === p ? k.name : null; })()"""
DONE_JS = f"""(() => {{
  const p = {PANEL}; const k = p.sessionContext.session.kernel;
  const cells = p.content.widgets.filter(c => c.model.type === 'code');
  const pending = cells.filter(c => c.model.executionCount === null || c.model.executionCount === undefined);
  return k.status === 'idle' && pending.length === 0 ? cells.length : null; }})()"""
SUMMARY_JS = f"""(() => {{
  const p = {PANEL};
  const cells = p.content.widgets.filter(c => c.model.type === 'code');
  const outs = cells.map(c => c.model.outputs.toJSON());
  const text = o => [o.text, (o.data || {{}})['text/plain']].flat().filter(Boolean).join('');
  return {{cells: cells.length,
    counts: cells.map(c => c.model.executionCount),
    errors: outs.flatMap((os, i) => os.filter(o => o.output_type === 'error')
                                   .map(o => `cell ${{i}}: ${{o.ename}}: ${{o.evalue}}`)),
    first_output: outs.length ? outs[0].map(text).join('') : '',
    plotly_cell: p.content.widgets.findIndex(c => c.model.type === 'code' &&
        c.model.outputs.toJSON().some(o => (o.data || {{}})['application/vnd.plotly.v1+json']))}}; }})()"""


def drawn_js(index: int) -> str:
    return f"""(async () => {{
  const p = {PANEL}; const cell = p.content.widgets[{index}];
  await p.content.scrollToCell(cell);
  const svg = cell.node.querySelector('.jp-OutputArea .main-svg');
  return svg ? cell.node.querySelectorAll('.jp-OutputArea .main-svg').length : null; }})()"""


def lab_settings(folder: Path) -> None:
    """User settings for the test's JupyterLab: no autosave, no news or update checks."""
    docman = folder / "@jupyterlab" / "docmanager-extension"
    docman.mkdir(parents=True)
    (docman / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    news = folder / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))


def run_notebook(page: Page, base: str, token: str, notebook: str, shot: Path,
                 run_timeout: float) -> list[str]:
    """Open, run and inspect the notebook in JupyterLab; return the problems found."""
    probs: list[str] = []
    page.goto(f"{base}/lab/tree/{notebook}?token={token}")
    kernel = page.wait_for(OPENED_JS % json.dumps(notebook), timeout=180, poll=1)
    if not kernel:
        return page.problems() + [f"{notebook} did not open with an idle kernel within 180 s"]
    print(f"labbrowser: {notebook} open, kernel {kernel!r} idle; running all cells")
    t0 = time.monotonic()
    page.evaluate(f"{PANEL}.content.activeCellIndex = 0, jupyterapp.commands.execute('notebook:run-all-cells'), 1")
    n = page.wait_for(DONE_JS, timeout=run_timeout, poll=1)
    s = page.evaluate(SUMMARY_JS)
    if not n:
        probs.append(f"not every cell ran within {run_timeout:.0f} s (execution counts: {s['counts']})")
    print(f"labbrowser: {s['cells']} code cells ran in {time.monotonic() - t0:.1f} s")
    probs += [f"error output in {e}" for e in s["errors"]]
    if "mode      : " not in s["first_output"] or not any(m in s["first_output"] for m in ("LIVE", "REPLAY")):
        probs.append(f"the first cell's output is not the mode banner: {s['first_output'][:200]!r}")
    else:
        print("labbrowser: banner: " + next(ln for ln in s["first_output"].splitlines() if ln.startswith("mode")))
    if s["plotly_cell"] < 0:
        probs.append("no plotly figure among the outputs")
    else:
        svgs = page.wait_for(drawn_js(s["plotly_cell"]), timeout=60, poll=0.5)
        if not svgs:
            probs.append(f"the plotly figure of cell {s['plotly_cell']} was not drawn (no .main-svg)")
        else:
            print(f"labbrowser: plotly figure in cell {s['plotly_cell']} drawn ({svgs} svg layers)")
        page.pump(1)
        page.screenshot(shot, full_page=False)
        print(f"labbrowser: screenshot {shot}")
    probs += check_outputs_layout(page)
    page.evaluate(f"{PANEL}.sessionContext.shutdown().then(() => 1)")
    return page.problems() + probs


FIGURE_CELLS_JS = f"""(() => {PANEL}.content.widgets.map((c, i) => [c, i]).filter(([c]) => c.model.type === 'code' &&
  c.model.outputs.toJSON().some(o => {{ const d = o.data || {{}};
    return d['application/vnd.plotly.v1+json'] || /course-diagram/.test(d['text/html'] || ''); }})).map(([, i]) => i))()"""


def check_outputs_layout(page: Page, widths: tuple[int, ...] = (1280, 1920)) -> list[str]:
    """sitecheck's layout check over each figure or diagram output, scrolled into view, at each width."""
    from tools.site import sitecheck

    cells = page.evaluate(FIGURE_CELLS_JS) or []
    found: dict[str, None] = {}
    for w in widths:
        sitecheck.set_width(page, w, settle_s=1.0)
        for i in cells:
            page.evaluate(f"(async () => {{ await {PANEL}.content.scrollToCell({PANEL}.content.widgets[{i}]); "
                          "return 1; })()")
            page.pump(0.5)
            for p in page.evaluate(f"{sitecheck.LAYOUT_JS}(false, false)") or []:
                found[f"at {w} px (JupyterLab): {p}"] = None
    print(f"labbrowser: layout of {len(cells)} figure/diagram outputs checked at {', '.join(map(str, widths))} px: "
          f"{len(found)} problems")
    sitecheck.set_width(page, sitecheck.LAPTOP)
    return list(found)


class LabStartError(RuntimeError):
    """The JupyterLab command exited or did not answer."""


@contextlib.contextmanager
def lab_server(cmd: list[str], start_timeout: float = 120):
    """Run `cmd` (the course's `make lab`) with a token and throw-away settings; yield (base URL, token).

    The server gets PORT=<free port> appended; it is stopped (its whole process group) on exit."""
    port, token = free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="course-lab-") as tmp:
        lab_settings(Path(tmp) / "settings")
        # checkpoints (JupyterLab makes one when it opens a notebook) go to the throw-away folder,
        # not into .ipynb_checkpoints/ beside the course's notebooks
        config = Path(tmp) / "config"
        config.mkdir()
        (config / "jupyter_server_config.json").write_text(json.dumps(
            {"FileCheckpoints": {"checkpoint_dir": str(Path(tmp) / "checkpoints")}}))
        env = dict(os.environ, JUPYTER_TOKEN=token, JUPYTERLAB_SETTINGS_DIR=str(Path(tmp) / "settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(Path(tmp) / "workspaces"), JUPYTER_CONFIG_DIR=str(config))
        with open(Path(tmp) / "lab.log", "w+") as log:
            proc = subprocess.Popen(cmd + [f"PORT={port}"], env=env, start_new_session=True,
                                    stdout=log, stderr=subprocess.STDOUT, text=True)
            try:
                deadline = time.monotonic() + start_timeout
                while True:
                    if proc.poll() is not None:
                        log.seek(0)
                        raise LabStartError(f"{log.read()[-3000:]}\n`{' '.join(cmd)}` exited "
                                            f"{proc.returncode} before serving")
                    try:
                        get(f"{base}/api/status?token={token}")
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise LabStartError(f"no answer from {base} within {start_timeout:.0f} s") from None
                        time.sleep(1)
                yield base, token
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebook", default="notebooks/00_your_machine.ipynb")
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--timeout", type=float, default=600, help="seconds for running all cells")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = [c for c in args.cmd if c != "--"]
    if not cmd:
        ap.error("give the command that starts JupyterLab after --")
    shot = args.screenshot or Path("book/_build/screenshots") / f"lab-{Path(args.notebook).stem}.png"
    before = hashlib.sha256(Path(args.notebook).read_bytes()).hexdigest()
    try:
        with lab_server(cmd) as (base, token):
            with Chromium() as browser:
                print(f"labbrowser: {browser.version()} on {base}; every other host blocked")
                page = browser.new_page(allow=[base, base.replace("http", "ws")])
                probs = run_notebook(page, base, token, args.notebook, shot, args.timeout)
                page.close()
    except (BrowserError, LabStartError) as exc:
        probs = [str(exc)]
    if hashlib.sha256(Path(args.notebook).read_bytes()).hexdigest() != before:
        probs.append(f"{args.notebook} was modified by the test's JupyterLab")
    for p in probs:
        print(f"labbrowser: FAIL {p}")
    print(f"labbrowser: {'FAILED' if probs else 'ok'}: {args.notebook} run in JupyterLab in Chromium")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
