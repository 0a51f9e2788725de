"""The browser checks themselves, in headless Chromium (marker `browser`; run by `make test-browser`).

Two kinds of test: small hand-written pages on which tools/site/sitecheck.py must find exactly the
fault planted in them (so the site check can fail), and a one-notebook Jupyter Book built with
the course's own book configuration whose notebook displays ipywidgets panels (an Output widget
holding a course figure, and `interact`), which must render offline: any chapter that displays
a widget gets the same treatment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from tools.site import bookassets, sitecheck
from tools.site.cdp import Chromium

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "book" / "_static"
# a figure that fits a phone's column too, with its y tick labels off the corner (as CourseFigure's)
PLOT = ('<figure aria-label="Figure: two bars, 3 and 4."><div id="f1" class="plotly-graph-div" '
        'style="height:300px;width:100%;max-width:400px"></div></figure>'
        '<script>Plotly.newPlot("f1", [{"type": "bar", "x": ["a", "b"], "y": [3, 4]}], '
        '{"yaxis": {"ticklabelstandoff": 4}});</script>')


@pytest.fixture(scope="module")
def static_assets():
    """plotly.js and the widget manager in book/_static, as `make book` puts them."""
    assert bookassets.main([str(STATIC)]) == 0
    return STATIC


@pytest.fixture(scope="module")
def browser():
    with Chromium() as b:
        yield b


def _site(tmp_path: Path, pages: dict[str, str], static: Path) -> Path:
    site = tmp_path / "html"
    shutil.copytree(static, site / "_static")
    for rel, body in pages.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        depth = "../" * rel.count("/")
        p.write_text(f'<!doctype html><html><head><link rel="icon" href="data:,">'
                     f'<script src="{depth}_static/plotly.min.js"></script></head><body>{body}</body></html>')
    return site


def _check(browser, site: Path, rel: str, want_launch: bool = False, source: Path | None = None):
    server, base = sitecheck.serve(site)
    try:
        page = browser.new_page(allow=[base])
        try:
            return sitecheck.check_page(page, base, site, rel, want_launch, settle_s=5, source=source)
        finally:
            page.close()
    finally:
        server.shutdown()


def test_untypeset_math_fails(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"p.html": '<span class="math">\\(x^2\\)</span>'}, static_assets)
    probs, state = _check(browser, site, "p.html")
    assert state["math"] == 1 and any("not typeset" in p for p in probs)


def test_good_page_passes(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"p.html": PLOT}, static_assets)
    probs, state = _check(browser, site, "p.html")
    assert probs == [] and state["drawn"] == state["figures"] == 1


def test_accessibility_problems_are_each_named(browser, static_assets, tmp_path):
    body = ('<main><h1>Chapter</h1><h3>skipped a level</h3><img src="x.png"><a href="y.html"></a>'
            '<svg role="img" viewBox="0 0 4 4"><rect width="4" height="4"/></svg>'
            + PLOT.replace('<figure aria-label="Figure: two bars, 3 and 4.">', '<figure>') + '</main>')
    site = _site(tmp_path, {"p.html": body}, static_assets)
    (site / "x.png").write_bytes(b"")
    probs, _ = _check(browser, site, "p.html")
    found = " | ".join(p for p in probs if p.startswith("accessibility"))
    for part in ("h1 to h3", "image without alt", "link without text", "SVG image without a <title>",
                 "plotly figure without an accessible name"):
        assert part in found, part


def test_folded_link_with_text_is_not_a_problem(browser, static_assets, tmp_path):
    """A link inside a closed <details> (a folded result cell, a collapsed aside) has text even though
    Chrome renders none of it until the reader opens the fold; an empty link beside it still fails."""
    body = ('<main><h1>Chapter</h1><details><summary>Show output</summary>'
            '<a href="data:text/csv;base64,eA==">Download the data (CSV)</a>'
            '<a href="g.html#term-SDMA"><span>SDMA</span></a></details><a href="z.html"></a></main>')
    site = _site(tmp_path, {"p.html": body}, static_assets)
    probs, _ = _check(browser, site, "p.html")
    found = [p for p in probs if "link without text" in p]
    assert len(found) == 1 and "z.html" in found[0], probs


def test_undrawn_figure_and_script_error_fail(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"p.html": PLOT.replace("Plotly.newPlot", "Plotly.nonexistent")}, static_assets)
    probs, _ = _check(browser, site, "p.html")
    assert any("not drawn" in p for p in probs)
    assert any("uncaught" in p and "nonexistent" in p for p in probs)


def test_cdn_request_is_blocked_and_reported(browser, static_assets, tmp_path):
    body = '<script src="https://cdn.jsdelivr.net/npm/left-pad@1.3.0/index.js"></script>'
    site = _site(tmp_path, {"p.html": body}, static_assets)
    probs, _ = _check(browser, site, "p.html")
    assert any("blocked" in p and "cdn.jsdelivr.net" in p for p in probs)


def test_chapter_page_without_banner_fails(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"notebooks/01_x.html": "<pre>no banner here</pre>",
                            "notebooks/02_y.html": "<pre>mode      : REPLAY: recorded</pre>"}, static_assets)
    probs, _ = _check(browser, site, "notebooks/01_x.html")
    assert any("banner" in p for p in probs)
    probs, state = _check(browser, site, "notebooks/02_y.html")
    assert state["banner"] == "REPLAY" and not any("banner" in p for p in probs)
    # a chapter page whose executed notebook cannot be found is itself a problem
    assert any("no executed notebook" in p for p in probs)


def test_launch_buttons_on_a_student_lab_page_fail(browser, static_assets, tmp_path):
    """A student lab (book/labs/) must not offer launch buttons; other course pages must, with a repository."""
    buttons = '<a href="https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/x.ipynb">Binder</a>'
    banner = "<pre>mode      : REPLAY: recorded</pre>"
    site = _site(tmp_path, {"book/labs/lab2_x.html": banner + buttons, "book/labs/lab3_y.html": banner},
                 static_assets)
    probs, state = _check(browser, site, "book/labs/lab2_x.html", want_launch=True)
    assert state["launch"] == 1 and any("launch buttons on a student lab page" in p for p in probs)
    probs, state = _check(browser, site, "book/labs/lab3_y.html", want_launch=True)
    assert state["banner"] == "REPLAY" and not any("launch" in p for p in probs)


def test_widget_view_without_state_fails(browser, static_assets, tmp_path):
    view = {"version_major": 2, "version_minor": 0, "model_id": "0123"}
    body = (f'<script type="application/vnd.jupyter.widget-view+json">{json.dumps(view)}</script>'
            '<script src="_static/jupyter-widgets/embed.js"></script>')
    site = _site(tmp_path, {"p.html": body}, static_assets)
    probs, state = _check(browser, site, "p.html")
    assert state["views"] == 1 and state["rendered"] == 0
    assert any("without the widget state" in p for p in probs)
    assert any("not rendered" in p for p in probs)


def test_missing_figure_against_executed_notebook_fails(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"nb.html": "<p>figure lost</p>"}, static_assets)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig")
    cell.outputs = [nbformat.v4.new_output("display_data", data={sitecheck.PLOTLY_MIME: {}, "text/plain": "f"})]
    nb.cells = [cell]
    (tmp_path / "jupyter_execute").mkdir()
    nbformat.write(nb, tmp_path / "jupyter_execute" / "nb.ipynb")
    probs, _ = _check(browser, site, "nb.html")
    assert any("its notebook has 1" in p for p in probs)


WIDGET_NOTEBOOK = [
    "from helpers import course\nfrom helpers.presentation import figures\nctx = course.start('Widget fixture')",
    "import plotly.graph_objects as go\nfrom helpers.core.mode import Mode\n\n"
    "def fig(title):\n"
    "    return figures.CourseFigure(go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2]), layout_title_text=title),\n"
    "                                [(Mode.SIMULATED, 'fixture data')])\n\nfig('top level')",
    "import ipywidgets as w\nfrom IPython.display import display\n\nout = w.Output()\nwith out:\n"
    "    print('inside the Output widget')\n    display(fig('inside a widget'))\n"
    "w.VBox([w.HBox([w.IntSlider(value=3, min=0, max=10, description='n'), w.Dropdown(options=['a', 'b'])]), out])",
    "w.interact(lambda k=2: print('k =', k), k=(0, 5));",
]


@pytest.fixture(scope="module")
def widget_book(static_assets, tmp_path_factory):
    """A one-notebook book built with book/_config.yml's settings (executes the notebook)."""
    src = tmp_path_factory.mktemp("widgetbook")
    (src / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_markdown_cell("# Widget fixture\n\nInline $t = L + n/B$ and\n\n"
                                              "$$B_{1/2} = \\frac{n_{1/2}}{L + n_{1/2}/B}$$")]
    nb.cells += [nbformat.v4.new_code_cell(c)
                 for c in WIDGET_NOTEBOOK]
    nbformat.write(nb, src / "notebooks" / "99_widgets.ipynb")
    (src / "intro.md").write_text("# Fixture\n")
    (src / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/99_widgets\n")
    cfg = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    cfg["exclude_patterns"] = ["_build"]
    sx = cfg["sphinx"]["config"]
    sx["html_static_path"] = [str(ROOT / d) for d in sx["html_static_path"]]
    cfg["bibtex_bibfiles"] = [str(ROOT / f) for f in cfg.get("bibtex_bibfiles", [])]
    sx["html_extra_path"] = [str(ROOT / "book" / "_extra")]
    cfg["html"]["favicon"] = str(ROOT / "book" / "favicon.svg")
    cfg["sphinx"]["local_extensions"] = {k: str(ROOT / "book" / v)
                                         for k, v in cfg["sphinx"]["local_extensions"].items()}
    cfg.pop("launch_buttons", None)
    (src / "_config.yml").write_text(yaml.safe_dump(cfg))
    jb = Path(sys.executable).parent / "jupyter-book"
    proc = subprocess.run([str(jb), "build", str(src), "-W", "-n", "--keep-going"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return src / "_build" / "html"


def test_widgets_and_figures_render_offline_in_a_built_book(browser, widget_book):
    source = widget_book.parent.parent
    exp = sitecheck.expected_for(widget_book, "notebooks/99_widgets.html", source)
    assert (exp.notebook, exp.figures, exp.widgets) == (True, 1, 2)  # from the build's jupyter-cache
    probs, state = _check(browser, widget_book, "notebooks/99_widgets.html", source=source)
    assert probs == []
    assert state["views"] == state["rendered"] == 2  # the VBox panel and interact's controls
    assert state["figures"] == state["drawn"] == 2   # one at top level, one inside the Output widget
    assert state["banner"] in ("REPLAY", "LIVE")
    assert state["math"] == state["typeset"] == 2   # inline and display math, by the local MathJax


# --- layout: pictures that clip or overprint, code that scrolls; axe-core ------------------------

def _svg(texts: str) -> str:
    """A course-diagram figure (the structure helpers/presentation/diagrams.py writes) holding `texts`."""
    return ("<main><article><figure class='course-diagram'><svg xmlns='http://www.w3.org/2000/svg' role='img' "
            "class='course-diagram-svg' viewBox='0 0 300 100' width='300' height='100' "
            "style='max-width:100%;height:auto'><title>Planted</title>"
            "<g class='node'><rect x='10' y='10' width='120' height='40' fill='#cfe3f3'/>"
            "<text x='70' y='35' text-anchor='middle' font-size='13'>box A</text></g>"
            "<g class='node'><rect x='170' y='10' width='120' height='40' fill='#f6d0bd'/>"
            "<text x='230' y='35' text-anchor='middle' font-size='13'>box B</text></g>"
            f"{texts}</svg><figcaption>Planted.</figcaption></figure></article></main>")


def _layout(browser, site: Path, rel: str = "p.html", widths=sitecheck.WIDTHS) -> list[str]:
    server, base = sitecheck.serve(site)
    try:
        page = browser.new_page(allow=[base])
        try:
            page.goto(base + rel)
            return sitecheck.check_layout(page, widths)
        finally:
            page.close()
    finally:
        server.shutdown()


def test_a_clear_diagram_passes_at_every_width(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"p.html": _svg("<text x='150' y='80' font-size='12'>a free label</text>")}, static_assets)
    assert _layout(browser, site) == []


@pytest.mark.parametrize("planted, found", [
    ("<text x='250' y='80' font-size='12'>a label clipped at the edge</text>", "runs outside the picture's frame"),
    ("<text x='20' y='80' font-size='12'>one label</text><text x='40' y='84' font-size='12'>another</text>",
     "overprint each other"),
    ("<text x='100' y='35' font-size='12'>on box B</text>", "overprints a box it does not belong to"),
])
def test_a_planted_clip_or_overlap_fails_at_every_width(browser, static_assets, tmp_path, planted, found):
    site = _site(tmp_path, {"p.html": _svg(planted)}, static_assets)
    probs = _layout(browser, site)
    assert [w for w in sitecheck.WIDTHS if any(p.startswith(f"at {w} px") and found in p for p in probs)] \
        == list(sitecheck.WIDTHS), probs


def test_a_label_sticking_out_of_its_box_fails(browser, static_assets, tmp_path):
    body = _svg("").replace(">box A<", ">box A with a label far too long for it<")
    probs = _layout(browser, _site(tmp_path, {"p.html": body}, static_assets), widths=(1280,))
    assert any("sticks out of its box" in p for p in probs), probs


def test_a_figure_wider_than_the_column_and_code_that_scrolls_fail(browser, static_assets, tmp_path):
    body = ("<main><article style='max-width:600px'><figure class='course-diagram' style='width:900px'>x</figure>"
            "<div class='cell_input'><pre style='overflow:auto'>" + "x = 1  # " + "long " * 80 + "</pre></div>"
            "</article></main>")
    probs = _layout(browser, _site(tmp_path, {"p.html": body}, static_assets), widths=(1280,))
    assert any("wider than the page's column" in p for p in probs), probs
    assert any("a code cell needs horizontal scrolling" in p for p in probs), probs


def test_plotly_texts_that_overprint_fail(browser, static_assets, tmp_path):
    """A title dropped onto the y-axis title (what a wrapped provenance did in Chapter 0) is found."""
    fig = ('<div id="f1" class="plotly-graph-div" style="height:300px;width:500px"></div><script>Plotly.newPlot("f1",'
           ' [{"type": "bar", "x": [1, 2], "y": [3, 4]}], {"title": {"text": "A title placed on the axis title",'
           ' "x": 0, "xanchor": "left", "y": 0.5, "yref": "container"}, "yaxis": {"title": {"text": "bandwidth'
           ' (GB/s) of every copy"}}, "margin": {"l": 60}});</script>')
    site = _site(tmp_path, {"p.html": f"<main><article>{fig}</article></main>"}, static_assets)
    probs = _layout(browser, site, widths=(1280,))
    assert any("overprint each other" in p and "bandwidth" in p for p in probs), probs
    # at phone width the same crowding is a note, not a failure (plotly cannot wrap)
    server, base = sitecheck.serve(site)
    try:
        page = browser.new_page(allow=[base])
        page.goto(base + "p.html")
        notes: list[str] = []
        probs = sitecheck.check_layout(page, (390,), notes)
        page.close()
    finally:
        server.shutdown()
    assert not any("bandwidth" in p for p in probs) and any("bandwidth" in n for n in notes), (probs, notes)


def test_every_course_diagram_fits_at_every_width(browser, static_assets, tmp_path):
    """The chapters' own diagrams (tools/site/diagramgallery.py), measured in Chromium at 390, 1280 and 1920 px."""
    from tools.site import diagramgallery

    made = [(name, make()) for name, make in diagramgallery.course_diagrams()]
    site = tmp_path / "html"
    shutil.copytree(static_assets, site / "_static")
    (site / "p.html").write_text(diagramgallery.page(made))
    assert len(made) >= 15
    assert _layout(browser, site) == []


def test_axe_core_finds_a_planted_violation(browser, static_assets, tmp_path):
    site = _site(tmp_path, {"bad.html": '<main><h1>x</h1><img src="x.png"></main>',
                            "good.html": '<main><h1>x</h1><p>fine</p></main>'}, static_assets)
    (site / "x.png").write_bytes(b"")
    axe = sitecheck.axe_source(site)
    assert axe is not None
    server, base = sitecheck.serve(site)
    try:
        page = browser.new_page(allow=[base])
        try:
            probs, state = sitecheck.check_page(page, base, site, "bad.html", False, settle_s=5, widths=(), axe=axe)
            assert "image-alt" in state["axe"] and any("axe-core image-alt" in p for p in probs)
            probs, state = sitecheck.check_page(page, base, site, "good.html", False, settle_s=5, widths=(), axe=axe)
            assert "image-alt" not in state["axe"]
        finally:
            page.close()
    finally:
        server.shutdown()
