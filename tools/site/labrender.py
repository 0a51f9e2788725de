"""Every chapter and lab as `make lab`'s JupyterLab renders it: no raw MyST markup, terms and sources reachable.

    python -m tools.site.labrender -- make lab LAB_FLAGS="--no-browser --LabApp.expose_app_in_browser=True"

One JupyterLab (the course's `make lab`, through tools/site/labbrowser.py's server) and one headless
Chromium with every other host blocked. Each notebook in notebooks/ and each lab's student
version in my_labs/ (which `make lab` writes) is opened and its markdown rendered, without
running a code cell (the kernel is shut down as soon as the notebook is open). Checks:

* in every rendered markdown cell, outside code, none of `{term}`, `{cite}`, `{doc}`, ```{ or
  `:::` (markup JupyterLab showed raw), and no "Citation Not Found" or "Unknown Directive";
* a glossary link (Chapter 0's first) opens book/glossary.md in JupyterLab, and the page shows that
  term with the first words of its definition;
* a citation link shows the readable reference tools/checks/labroles.py derives from book/references.bib
  for its key (not the key) and points at the bibliography entry;
* no console error, no request to another host; no notebook file changed.

It prints how long the whole run took.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

from tools.checks import labroles
from tools.site.cdp import BrowserError, Chromium, Page
from tools.site.labbrowser import LabStartError, lab_server

ROOT = Path(__file__).resolve().parents[2]
RAW = ("{term}`", "{cite}`", "{doc}`", "```{", ":::", "Citation Not Found", "Unknown Directive")
OPEN_JS = """(async () => {
  const path = %s;
  let p = [...jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);
  if (!p) { p = await jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'}); }
  await p.context.ready; await p.sessionContext.ready;
  window.__panel = p; jupyterapp.shell.activateById(p.id); return p.content.widgets.length; })()"""
# the kernel JupyterLab started with the notebook: stopped once idle (no cell is ever run)
STOP_JS = """(async () => { const s = window.__panel.sessionContext;
  const k = s.session && s.session.kernel; if (!k) return 1;
  if (k.status !== 'idle') return null;
  await new Promise(r => setTimeout(r, 1000)); await s.shutdown(); return 1; })()"""
# the rendered text of every markdown cell, code elements left out; null until all are rendered
RENDERED_JS = """(() => {
  const p = window.__panel; const md = p.content.widgets.filter(c => c.model.type === 'markdown');
  const out = [];
  for (const c of md) {
    const node = c.node.querySelector('.myst, .jp-MarkdownOutput');
    if (!node || !c.rendered) return null;  // JupyterLab renders the cells further down when idle
    const copy = node.cloneNode(true); copy.querySelectorAll('code, pre').forEach(e => e.remove());
    out.push(copy.textContent);
  }
  return {count: md.length, texts: out}; })()"""
# JupyterLab rewrites a local link's href to its /files/ URL (with a query) before the fragment
GLOSSARY_LINK = re.compile(r"book/glossary\.md(?:\?[^#]*)?#term-([a-z0-9-]+)$")
CITE_LINK = re.compile(r"book/bibliography\.md(?:\?[^#]*)?#cite-([a-z0-9-]+)$")
# every local link of the open notebook whose file is missing (checked through the contents API)
DEAD_LINKS_JS = """(async () => {
  const paths = [...new Set([...window.__panel.node.querySelectorAll('.myst a')].map(a => a.getAttribute('href') || '')
    .filter(h => h.includes('/files/')).map(h => decodeURIComponent(new URL(h).pathname.split('/files/')[1])))];
  const dead = [];
  for (const path of paths) {
    const r = await fetch(jupyterapp.serviceManager.serverSettings.baseUrl + 'api/contents/' +
      path.split('/').map(encodeURIComponent).join('/') + '?content=0',
      {headers: {Authorization: 'token ' + jupyterapp.serviceManager.serverSettings.token}});
    if (!r.ok) dead.push(path);
  }
  return {checked: paths.length, dead}; })()"""
LINKS_JS = """(() => [...window.__panel.node.querySelectorAll('.myst a')].map(a => ({text: a.textContent,
  href: a.getAttribute('href') || ''})))()"""


def pages() -> list[str]:
    nbs = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("my_labs/lab*.ipynb"))
    return [str(p.relative_to(ROOT)) for p in nbs]


def check_rendered(page: Page, path: str) -> list[str]:
    """Open `path` without running it and look for raw markup in its rendered markdown."""
    page.evaluate(OPEN_JS % json.dumps(path), timeout=120)
    got = page.wait_for(RENDERED_JS, timeout=60, poll=1)
    page.wait_for(STOP_JS, timeout=60, poll=0.5)
    if not got:
        return [f"{path}: its markdown cells were not all rendered within 60 s"]
    links = page.evaluate(DEAD_LINKS_JS, timeout=120)
    probs = [f"{path}: a link to {d}, which does not exist" for d in links["dead"]]
    for i, text in enumerate(got["texts"]):
        for raw in RAW:
            if raw in text:
                at = text.index(raw)
                probs.append(f"{path}: markdown cell {i} shows {raw!r}: ...{text[max(0, at - 40):at + 60]!r}")
    return probs


def check_term(page: Page, base: str) -> list[str]:
    """Follow Chapter 0's first glossary link; the glossary must open and show that definition."""
    link = next((a for a in page.evaluate(LINKS_JS) if GLOSSARY_LINK.search(a["href"])), None)
    if not link:
        return ["Chapter 0 has no glossary link"]
    frag = GLOSSARY_LINK.search(link["href"]).group(1)
    terms = labroles.glossary_terms(labroles.GLOSSARY.read_text())
    term = next((t for t in terms if labroles.slug(t) == frag), None)
    if term is None:
        return [f"glossary link #term-{frag} names no glossary term"]
    block = re.search(rf"^{re.escape(term)}\n((?:[ \t]+.*\n?)+)", labroles.GLOSSARY.read_text(), re.M)
    words = " ".join(block.group(1).split()[:6]) if block else ""
    page.evaluate("(() => { const a = [...window.__panel.node.querySelectorAll('.myst a')].find(a => "
                  f"(a.getAttribute('href') || '').includes({json.dumps('#term-' + frag)})); a.click(); return 1; }})()")
    shown = page.wait_for("(() => { const w = jupyterapp.shell.currentWidget; return w && w.context && "
                          "w.context.path === 'book/glossary.md' && w.node.textContent.length > 1000 ? "
                          "w.node.textContent : null; })()", timeout=60, poll=0.5)
    if not shown:
        return [f"clicking the term {link['text']!r} did not open book/glossary.md"]
    flat = " ".join(shown.split())
    if not words or f"{term} {words}" not in flat:
        return [f"book/glossary.md opened but does not show {term!r} with its definition ({words!r})"]
    print(f"labrender: the term {link['text']!r} opens book/glossary.md, showing {term!r}: {words} ...")
    return []


def check_citation(page: Page) -> list[str]:
    """A citation link in the open notebook reads as its reference, not its key."""
    refs = labroles.Targets.load().refs
    cites = [a for a in page.evaluate(LINKS_JS) if CITE_LINK.search(a["href"])]
    if not cites:
        return ["no citation link in the notebook"]
    bad = []
    for a in cites:
        key = next((k for k in refs if CITE_LINK.search(a["href"]).group(1) == labroles.slug(k)), None)
        if key is None or a["text"] != refs[key] or a["text"] == key:
            bad.append(f"citation {a['href']} reads {a['text']!r}, not a readable reference")
    if not bad:
        print(f"labrender: {len(cites)} citations read as references, e.g. {cites[0]['text']!r}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = [c for c in args.cmd if c != "--"]
    if not cmd:
        ap.error("give the command that starts JupyterLab after --")
    t0 = time.monotonic()
    probs: list[str] = []
    try:
        with lab_server(cmd) as (base, token):
            todo = pages()  # after `make lab` wrote my_labs/
            before = {p: hashlib.sha256((ROOT / p).read_bytes()).hexdigest() for p in todo}
            if not any(p.startswith("my_labs/") for p in todo):
                probs.append("no student labs in my_labs/ (make lab should write them)")
            with Chromium() as browser:
                page = browser.new_page(allow=[base, base.replace("http", "ws")])
                page.goto(f"{base}/lab?token={token}")
                if not page.wait_for("!!(window.jupyterapp && jupyterapp.shell)", timeout=120, poll=0.5):
                    raise BrowserError("JupyterLab did not start in the browser")
                page.pump(2)
                for path in todo:
                    found = check_rendered(page, path)
                    probs += found
                    print(f"labrender: {path}: {'ok' if not found else f'{len(found)} problems'}")
                    if path == "notebooks/00_your_machine.ipynb":
                        probs += check_citation(page) + check_term(page, base)
                probs += page.problems()
                page.close()
            probs += [f"{p} was modified by the test's JupyterLab" for p, h in before.items()
                      if hashlib.sha256((ROOT / p).read_bytes()).hexdigest() != h]
    except (BrowserError, LabStartError) as exc:
        probs.append(str(exc))
    for p in probs:
        print(f"labrender: FAIL {p}")
    print(f"labrender: {'FAILED' if probs else 'ok'}: every notebook and lab rendered in JupyterLab "
          f"({time.monotonic() - t0:.0f} s)")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
