"""Load every page of the built site in headless Chromium with the network blocked, and check it.

    python -m tools.site.sitecheck book/_build/html [--screenshot book/_build/screenshots/chapter0.png]

The site is served from 127.0.0.1 only; any other request is failed and reported. Per page:

* no console error, no uncaught exception, no blocked (non-local) request;
* every plotly figure drawn: each `.plotly-graph-div` holds plotly's `.main-svg`, and there are at
  least as many as the page's executed notebook (from the build's jupyter-cache) has figure outputs;
* every widget rendered: each widget-view output the executed notebook has appears in the page and
  was replaced by a rendered `.jupyter-widgets` view (the widget state is embedded in the page);
* every LaTeX formula typeset by the site's own MathJax (each `.math` holds an `mjx-container`);
* chapter and lab pages (notebooks/, labs/, book/labs/) show the mode banner (LIVE or REPLAY);
* accessibility, in the page's content: every image has alt text, every SVG drawn as an image
  has a <title>, every plotly figure has an accessible name (the course figure's generated
  description), every link has text or a label, and headings go down one level at a time;
* axe-core (book/_static/axe-core, installed by tools/site/bookassets.py) finds no violation;
* at a phone, a laptop and a wide window (390, 1280, 1920 px): every course diagram's texts lie
  inside its frame, overprint no other text and no box they do not belong to; plotly figures'
  texts do not overprint each other; no figure is wider than the column; no code cell needs
  horizontal scrolling (nor, at laptop width, any output) -- see LAYOUT_JS;
* notebook pages carry the launch buttons when the build was given a repository URL, except the
  labs' student pages (book/labs/), which must not: their notebooks are not in the repository.

Then the search page must find a word every chapter uses, and a screenshot of the first chapter
page is written (its path is printed). Exit 1 on any problem.
"""

from __future__ import annotations

import argparse
import base64
import collections
import functools
import http.server
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tools.site.cdp import BrowserError, Chromium, Page

PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
COURSE_DIRS = ("notebooks/", "labs/", "book/labs/")  # book/labs: the labs' student versions
STUDENT_DIR = "book/labs/"  # written by tools/site/booklabs.py, in the build only

# Evaluated in the page: what is there and what is drawn.
STATE_JS = r"""(() => {
  const figs = [...document.querySelectorAll('.plotly-graph-div')];
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  const rendered = views.filter(v => {
    const p = v.previousElementSibling;
    return p && p.classList.contains('widget-subarea') && p.querySelector('.jupyter-widgets') !== null;
  });
  const text = document.body ? document.body.innerText : '';
  const m = text.match(/mode\s+:\s+(LIVE|REPLAY)/);
  const maths = [...document.querySelectorAll('.math')];
  return {figures: figs.length, drawn: figs.filter(f => f.querySelector('svg.main-svg')).length,
          views: views.length, rendered: rendered.length,
          state: document.querySelectorAll('script[type="application/vnd.jupyter.widget-state+json"]').length,
          banner: m ? m[1] : null,
          math: maths.length, typeset: maths.filter(e => e.querySelector('mjx-container')).length,
          launch: [...document.querySelectorAll('a[href]')].map(a => a.href)
                    .filter(h => /mybinder|colab|git-pull/.test(h)).length,
          ready: document.readyState}; })()"""
# Evaluated in the page: accessibility problems in the content area (the theme's chrome is its own).
A11Y_JS = r"""(() => {
  const root = document.querySelector('main') || document.querySelector('article') || document.body;
  if (!root) return [];
  const out = [];
  root.querySelectorAll('img:not([alt])').forEach(i => out.push('image without alt text: ' + (i.src || '').slice(-60)));
  root.querySelectorAll('svg[role="img"]:not([aria-hidden="true"]):not([aria-label])').forEach(s => { if (!s.querySelector('title'))
    out.push('an SVG image without a <title>'); });
  root.querySelectorAll('.plotly-graph-div').forEach(f => { const named = f.closest('[aria-label]');
    if (!named || !named.getAttribute('aria-label').trim()) out.push('a plotly figure without an accessible name (' + f.id + ')'); });
  root.querySelectorAll('a[href]').forEach(a => { if (a.closest('.modebar')) return;  // plotly's own toolbar
    const t = (a.innerText || '').trim() || (a.textContent || '').trim() || a.getAttribute('aria-label')
      || a.getAttribute('title') || (a.querySelector('img[alt]') && a.querySelector('img[alt]').alt);
    if (!t) out.push('a link without text: ' + a.getAttribute('href').slice(0, 60)); });
  let last = 0;
  root.querySelectorAll('h1, h2, h3, h4, h5, h6').forEach(h => { const lvl = +h.tagName[1];
    if (last && lvl > last + 1) out.push(`heading level jumps from h${last} to h${lvl}: "${h.innerText.trim().slice(0, 50)}"`);
    last = lvl; });
  return out; })()"""
# Evaluated in the page at one window width: what a reader of that width cannot read. Course
# diagrams (helpers/presentation/diagrams.py): every text inside the SVG's frame, no two texts overprinting,
# no text on a box it does not belong to, a box's label inside its box. Plotly figures: no two texts
# of different parts (title and provenance, axis titles, tick labels, legend, annotations)
# overprinting, none outside the figure. Any figure, image or diagram wider than the page's column;
# a code cell whose lines run past it (at every width: code wraps); an output that does (laptop width).
LAYOUT_JS = r"""((checkOutputs, plotlyNotes) => {
  const out = [];
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const R = e => e.getBoundingClientRect();
  const inside = (a, b, tol) => a.left >= b.left - tol && a.right <= b.right + tol && a.top >= b.top - tol && a.bottom <= b.bottom + tol;
  const meet = (a, b, tol) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > tol &&
                              Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > tol;
  const say = t => '"' + (t.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 40) + '"';
  const column = document.querySelector('article') || document.querySelector('main') || document.body;
  const colR = R(column);
  const visible = r => r.width > 0 && r.height > 0;
  document.querySelectorAll('figure.course-diagram svg, svg.course-diagram-svg').forEach((svg, i) => {
    const frame = R(svg);
    if (!visible(frame)) return;
    const name = 'diagram "' + ((svg.querySelector('title') || {}).textContent || ('#' + (i + 1))).slice(0, 50) + '"';
    const texts = [...svg.querySelectorAll('text')].map(t => ({t, r: R(t), g: t.closest('g.node, g.legend-item')}))
                    .filter(x => visible(x.r));
    const boxes = [...svg.querySelectorAll('g.node > rect, g.legend-item > rect')].map(b => ({r: R(b), g: b.parentNode}));
    texts.forEach((a, k) => {
      if (!inside(a.r, frame, 0.5)) out.push(`${name}: ${say(a.t)} runs outside the picture's frame`);
      boxes.forEach(b => {
        if (b.g === a.g) { if (a.g.matches('g.node') && !inside(a.r, b.r, 0.5)) out.push(`${name}: ${say(a.t)} sticks out of its box`); }
        else if (meet(a.r, b.r, 0.5)) out.push(`${name}: ${say(a.t)} overprints a box it does not belong to`);
      });
      texts.slice(k + 1).forEach(b => { if (meet(a.r, b.r, 0.5)) out.push(`${name}: ${say(a.t)} and ${say(b.t)} overprint each other`); });
    });
  });
  new Set(document.querySelectorAll('.plotly-graph-div, .js-plotly-plot')).forEach(div => {
    if (div.parentElement && div.parentElement.closest('.js-plotly-plot')) return;
    const svg = div.querySelector('svg.main-svg');
    if (!svg) return;
    const frame = R(div);
    if (!visible(frame)) return;
    const head = (div.closest('figure') || div).querySelector('.course-figure-title, .gtitle');
    const name = 'figure "' + ((head || {}).textContent || div.id || '?').slice(0, 50) + '"';
    const part = t => { const g = t.closest('.g-gtitle, .g-xtitle, .g-ytitle, .legend, .annotation, .xtick, .ytick, .colorbar');
                        return g ? (g.classList.contains('xtick') ? 'xtick' : g.classList.contains('ytick') ? 'ytick' : g) : null; };
    const texts = [...div.querySelectorAll('svg text')].filter(t => (t.textContent || '').trim())
                    .map(t => ({t, r: R(t), p: part(t)})).filter(x => x.p && visible(x.r));
    const note = plotlyNotes ? 'note: ' : '';
    texts.forEach((a, k) => {
      if (!inside(a.r, frame, 1)) out.push(`${note}${name}: ${say(a.t)} runs outside the figure`);
      texts.slice(k + 1).forEach(b => { if (a.p !== b.p && meet(a.r, b.r, 1)) out.push(`${note}${name}: ${say(a.t)} and ${say(b.t)} overprint each other`); });
    });
  });
  document.querySelectorAll('figure.course-diagram, figure.course-diagram svg, figure.course-figure, .plotly-graph-div, article img').forEach(f => {
    const r = R(f);
    if (visible(r) && r.right > Math.min(colR.right, document.documentElement.clientWidth) + 1)
      out.push(`a ${f.tagName.toLowerCase()}${f.className && typeof f.className === 'string' ? '.' + f.className.split(' ')[0] : ''} is wider than the page's column (${Math.round(r.width)} px, column ends at ${Math.round(colR.right)} px)`);
  });
  document.querySelectorAll('div.cell_input pre, div.cell_output pre').forEach(p => {
    const isInput = !!p.closest('div.cell_input');
    if ((isInput || checkOutputs) && p.scrollWidth > p.clientWidth + 1) {
      const line = (p.textContent || '').split('\n').reduce((a, b) => b.length > a.length ? b : a, '');
      out.push(`${isInput ? 'a code cell' : 'an output'} needs horizontal scrolling: "${line.trim().slice(0, 60)}"`);
    }
  });
  return out; })"""
# Every plotly figure redrawn at the window's new size (and course.js's relayouts done) before measuring.
PLOTS_SETTLED_JS = r"""(async () => {
  await new Promise(r => setTimeout(r, 300));
  if (window.Plotly && window.Plotly.Plots)
    await Promise.all([...document.querySelectorAll('.js-plotly-plot')].map(gd =>
      Promise.resolve(window.Plotly.Plots.resize(gd)).catch(() => 0)));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return 1; })()"""
WIDTHS = (390, 1280, 1920)  # a phone, a laptop, a wide window (CSS px)
LAPTOP = 1280
PHONE_MAX = 600  # below this width plotly's crowding is a note, not a failure (see check_layout)
SETTLED_JS = f"""(() => {{ const s = {STATE_JS};
  return s.ready === 'complete' && s.drawn === s.figures && s.rendered === s.views &&
         s.typeset === s.math ? s : null; }})()"""


@dataclass
class Expected:
    """What the executed notebook behind a page says the page must show."""

    figures: int = 0
    widgets: int = 0
    notebook: bool = False


def executed_notebook(site: Path, page: str, source: Path | None) -> dict | None:
    """The notebook behind `page` with the outputs the build used, or None if there is none.

    The build's jupyter-cache (book/_build/.jupyter_cache) holds the executed notebook of every
    page in cache mode; it is matched against the source notebook under `source`. A notebook that
    the build executed outside the cache (execution_mode force) is read from jupyter_execute/,
    which holds outputs only for notebooks executed in that build.
    """
    import nbformat

    rel = Path(page).with_suffix(".ipynb")
    cache_dir = site.parent / ".jupyter_cache"
    if source is not None and (source / rel).is_file() and (cache_dir / "global.db").is_file():
        from jupyter_cache import get_cache

        try:
            _, nb = get_cache(str(cache_dir)).merge_match_into_notebook(nbformat.read(source / rel, as_version=4))
            return nb
        except KeyError:
            pass
    copy = site.parent / "jupyter_execute" / rel
    if copy.is_file():
        nb = nbformat.read(copy, as_version=4)
        if any(c.get("outputs") for c in nb.cells):
            return nb
    return None


def expected_for(site: Path, page: str, source: Path | None = None) -> Expected:
    """Count figure and widget outputs in the executed notebook of `page` (if it has one)."""
    nb = executed_notebook(site, page, source)
    if nb is None:
        return Expected()
    exp = Expected(notebook=True)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            exp.figures += PLOTLY_MIME in data
            exp.widgets += WIDGET_MIME in data
    return exp


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A quiet HTTP server for `site` on 127.0.0.1 (a free port), running in a thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".woff2": "font/woff2", ".woff": "font/woff"}

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def check_page(page: Page, base: str, site: Path, rel: str, want_launch: bool,
               settle_s: float = 20, source: Path | None = None, widths: tuple[int, ...] = WIDTHS,
               axe: str | None = None) -> tuple[list[str], dict]:
    """Load one page; return its problems and what it showed (with `axe`, axe-core's source, its
    violations too: in the problems and, per rule, in state['axe'])."""
    page.reset_problems()
    page.goto(base + rel)
    state = page.wait_for(SETTLED_JS, timeout=settle_s) or page.evaluate(STATE_JS)
    page.pump(0.3)  # late errors from scripts that ran after load
    exp = expected_for(site, rel, source)
    probs = list(page.problems())
    if rel.startswith(COURSE_DIRS) and not exp.notebook:
        probs.append("no executed notebook found for this chapter/lab page (build cache missing?)")
    if state["drawn"] != state["figures"]:
        probs.append(f"{state['figures'] - state['drawn']} of {state['figures']} plotly figures not drawn "
                     "(no .main-svg)")
    if state["figures"] < exp.figures:
        probs.append(f"{state['figures']} plotly figures on the page, its notebook has {exp.figures}")
    if state["views"] != exp.widgets:
        probs.append(f"{state['views']} widget views on the page, its notebook has {exp.widgets}")
    if state["views"] and not state["state"]:
        probs.append("widget views without the widget state (the notebook was saved without it)")
    if state["rendered"] != state["views"]:
        probs.append(f"{state['views'] - state['rendered']} of {state['views']} widgets not rendered")
    if state["typeset"] != state["math"]:
        probs.append(f"{state['math'] - state['typeset']} of {state['math']} LaTeX formulas not typeset by MathJax")
    probs += [f"accessibility: {p}" for p in (page.evaluate(A11Y_JS) or [])]
    if rel.startswith(COURSE_DIRS) and not state["banner"]:
        probs.append("no mode banner (LIVE/REPLAY) on a chapter or lab page")
    if rel.startswith(STUDENT_DIR):
        if state["launch"]:
            probs.append("launch buttons on a student lab page: they open a file the repository does not have")
    elif want_launch and exp.notebook and not state["launch"]:
        probs.append("no launch buttons on a notebook page although the build had a repository URL")
    if axe is not None:
        found = run_axe(page, axe)
        state["axe"] = {v["id"]: v["nodes"] for v in found}
        probs += [f"axe-core {v['id']} ({v['impact']}): {v['help']}: {v['nodes']} element(s), e.g. {v['where']}"
                  for v in found]
    if widths:
        state["notes"] = []
        probs += check_layout(page, widths, state["notes"])
    return probs, state


def set_width(page: Page, width: int, settle_s: float = 1.0, height: int = 900) -> None:
    """Resize the page's window to `width` CSS px and let it reflow (plotly redraws on resize)."""
    page.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    page.evaluate("window.dispatchEvent(new Event('resize')), 1")
    page.pump(settle_s)
    page.evaluate(PLOTS_SETTLED_JS, timeout=60)


def check_layout(page: Page, widths: tuple[int, ...] = WIDTHS, notes: list[str] | None = None) -> list[str]:
    """The page at each width: clipped or overprinted text, too-wide figures, code that needs scrolling
    (see LAYOUT_JS); outputs are held to the column at laptop width only. Plotly figures are held
    to it from laptop width up; below, what crowds them goes to `notes` (plotly lays out axes and
    legends in fixed pixels and cannot wrap, so a phone-width plot may crowd). Leaves the window at LAPTOP."""
    probs: list[str] = []
    for w in widths:
        set_width(page, w)
        args = f"{'true' if w == LAPTOP else 'false'}, {'true' if w < PHONE_MAX else 'false'}"
        for p in dict.fromkeys(page.evaluate(f"{LAYOUT_JS}({args})") or []):
            if p.startswith("note: "):
                if notes is not None:
                    notes.append(f"at {w} px: {p[6:]}")
            else:
                probs.append(f"at {w} px: {p}")
    set_width(page, LAPTOP)
    return probs


def axe_source(site: Path) -> str | None:
    """axe-core's axe.min.js as tools/site/bookassets.py installed it (the site's or the book's _static)."""
    for p in (site / "_static" / "axe-core" / "axe.min.js",
              Path(__file__).resolve().parents[2] / "book" / "_static" / "axe-core" / "axe.min.js"):
        if p.is_file():
            return p.read_text()
    return None


AXE_RUN_JS = r"""(async () => {
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length,
                                 where: v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')})); })()"""


def run_axe(page: Page, source: str) -> list[dict]:
    """axe-core's violations on the loaded page: rule id, impact, help, how many nodes, where (first 3)."""
    page.evaluate(source + "\n;1")
    return page.evaluate(AXE_RUN_JS, timeout=120) or []


def diagram_shots(page: Page, out: Path, rel: str, widths: tuple[int, ...] = WIDTHS) -> list[Path]:
    """A PNG of each course diagram and figure on the page at each width: out/<page>-<n>-<width>.png."""
    shots = []
    stem = rel.replace("/", "_").removesuffix(".html")
    for w in widths:
        set_width(page, w, height=2400)  # tall enough for a whole figure in view
        n_figs = page.evaluate("document.querySelectorAll('figure.course-diagram').length") or 0
        for n in range(n_figs):
            x, y, width, height = page.evaluate(
                f"(() => {{ const f = document.querySelectorAll('figure.course-diagram')[{n}]; "
                "f.scrollIntoView({block: 'center'}); "
                "const r = f.getBoundingClientRect(); return [r.left + window.scrollX, r.top + window.scrollY, "
                "r.width, r.height]; })()")
            if width <= 0 or height <= 0:
                continue
            data = page.send("Page.captureScreenshot", format="png",
                             clip={"x": x, "y": y, "width": width, "height": min(height, 2400), "scale": 1})["data"]
            p = out / f"{stem}-{n + 1}-{w}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(base64.b64decode(data))
            shots.append(p)
    set_width(page, LAPTOP)
    return shots


def check_search(page: Page, base: str, word: str = "pinned") -> list[str]:
    """The site's search page must list at least one result for `word`, offline."""
    page.reset_problems()
    page.goto(f"{base}search.html?q={word}")
    n = page.wait_for("document.querySelectorAll('#search-results ul.search li').length", timeout=30)
    probs = list(page.problems())
    if not n:
        probs.append(f"search for {word!r} found nothing")
    return probs


def site_pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


def build_had_repository(site: Path) -> bool:
    cfg = site.parent / "_config.yml"
    if not cfg.is_file():
        return False
    import yaml

    return bool((yaml.safe_load(cfg.read_text()).get("repository") or {}).get("url"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, nargs="?", default=Path("book/_build/html"))
    ap.add_argument("--screenshot", type=Path, help="PNG of the first chapter page "
                    "(default: <site>/../screenshots/<page>.png)")
    ap.add_argument("--search-word", default="pinned")
    ap.add_argument("--source", type=Path, default=Path.cwd(),
                    help="the book's source folder, where the notebooks are (default: here)")
    ap.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS),
                    help=f"window widths (CSS px) at which layout is checked (default: {' '.join(map(str, WIDTHS))})")
    ap.add_argument("--no-axe", action="store_true", help="leave out axe-core (it runs by default)")
    ap.add_argument("--shots", type=Path, help="also write a PNG of every course diagram at every width here")
    ap.add_argument("--pages", nargs="*", help="only these pages (paths relative to the site)")
    return ap.parse_args(argv)


class Tally:
    """What the pages checked so far add up to: failures, drawn figures, rendered widgets, banners, axe rules, notes."""

    def __init__(self) -> None:
        self.failures = 0
        self.totals = {"figures": 0, "widgets": 0, "banners": 0}
        self.rules: collections.Counter = collections.Counter()
        self.notes: list[str] = []

    def add(self, label: str, probs: list[str], state: dict | None = None) -> None:
        """Count one checked page (or the search check, without `state`) and print its line."""
        if state is None:
            print(f"  {'FAIL' if probs else 'ok  '} {label}")
        else:
            self.totals["figures"] += state.get("drawn", 0)
            self.totals["widgets"] += state.get("rendered", 0)
            self.totals["banners"] += bool(state.get("banner"))
            self.rules.update(state.get("axe", {}))
            self.notes += state.get("notes", [])
            print(f"  {'FAIL' if probs else 'ok  '} {label}: {state.get('drawn', 0)}/{state.get('figures', 0)} "
                  f"figures drawn, {state.get('rendered', 0)}/{state.get('views', 0)} widgets rendered"
                  f"{', banner ' + state['banner'] if state.get('banner') else ''}")
        for p in probs:
            print(f"         - {p}")
        self.failures += bool(probs)

    def report(self, pages: int, axe: bool) -> None:
        print(f"sitecheck: {pages} pages, {self.failures} with problems; {self.totals['figures']} figures drawn, "
              f"{self.totals['widgets']} widgets rendered, {self.totals['banners']} mode banners")
        if self.notes:
            print(f"sitecheck: {len(self.notes)} notes (plotly figures crowded at phone width, not failures):")
            for n in self.notes:
                print(f"  note {n}")
        if axe:
            print("sitecheck: axe-core violations, elements per rule over all pages: "
                  + (", ".join(f"{k} {n}" for k, n in self.rules.most_common()) or "none"))


def check_site(browser, base: str, site: Path, pages: list[str], args: argparse.Namespace, axe: str | None,
               tally: Tally) -> None:
    """Every page, the search page, and a screenshot of the first chapter page, in one browser tab."""
    page = browser.new_page(allow=[base])
    want_launch = build_had_repository(site)
    for rel in pages:
        try:
            probs, state = check_page(page, base, site, rel, want_launch, source=args.source.resolve(),
                                      widths=tuple(args.widths), axe=axe)
            if args.shots:
                diagram_shots(page, args.shots, rel, tuple(args.widths))
        except BrowserError as exc:
            probs, state = [str(exc)], {}
        tally.add(rel, probs, state)
    tally.add(f"search.html?q={args.search_word}", check_search(page, base, args.search_word))
    chapter = next((p for d in COURSE_DIRS for p in pages if p.startswith(d)), pages[0])
    shot = args.screenshot or site.parent / "screenshots" / (Path(chapter).stem + ".png")
    page.goto(base + chapter)
    page.wait_for(SETTLED_JS, timeout=20)
    page.screenshot(shot)
    print(f"sitecheck: screenshot of {chapter}: {shot}")
    page.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    site = args.site.resolve()
    pages = [p for p in site_pages(site) if not args.pages or p in args.pages]
    axe = None if args.no_axe else axe_source(site)
    if axe is None and not args.no_axe:
        print("sitecheck: axe-core not found (book/_static/axe-core/axe.min.js): run `make book-static`")
        return 1
    if not pages:
        print(f"sitecheck: no pages under {site}")
        return 1
    server, base = serve(site)
    tally = Tally()
    try:
        with Chromium() as browser:
            print(f"sitecheck: {browser.version()}, serving {site} at {base}; every other host blocked")
            check_site(browser, base, site, pages, args, axe, tally)
    except BrowserError as exc:
        print(f"sitecheck: {exc}")
        return 1
    finally:
        server.shutdown()
    tally.report(len(pages), axe is not None)
    return 1 if tally.failures else 0

if __name__ == "__main__":
    sys.exit(main())
