"""The book's build tools: launch-button config, asset verification, the banner reader, the toc,
and which version of the labs the site shows (tools/site/booklabs.py)."""

import html
import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml

from book._ext import course_modes
from tools.env import npm
from tools.site import bookassets, bookconfig, booklabs, sitecheck

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("remote, url", [
    ("git@github.com:org/course.git", "https://github.com/org/course"),
    ("https://github.com/org/course.git", "https://github.com/org/course"),
    ("https://user:tok@gitlab.example.edu/grp/course/", "https://gitlab.example.edu/grp/course"),
    ("ssh://git@github.com/org/course.git", "https://github.com/org/course"),
    ("/srv/git/course", None),
])
def test_https_url(remote, url):
    assert bookconfig.https_url(remote) == url


def _config():
    return yaml.safe_load((ROOT / "book" / "_config.yml").read_text())


def test_no_repository_means_no_launch_buttons():
    cfg, note = bookconfig.derive(_config(), {}, None, ROOT / "book")
    assert "launch_buttons" not in cfg and "url" not in cfg["repository"]
    assert "COURSE_REPO_URL" in note


def test_repository_and_hub_from_environment():
    env = {"COURSE_REPO_URL": "git@github.com:uni/gpu-course.git", "COURSE_JUPYTERHUB_URL": "https://hub.uni.edu/",
           "COURSE_REPO_BRANCH": "fall"}
    cfg, note = bookconfig.derive(_config(), env, "https://github.com/other/origin", ROOT / "book",
                                  colab_repo="https://github.com/uni/gpu-course")
    assert cfg["repository"] == {"branch": "fall", "url": "https://github.com/uni/gpu-course"}
    lb = cfg["launch_buttons"]
    assert lb["jupyterhub_url"] == "https://hub.uni.edu" and lb["binderhub_url"] and lb["colab_url"]
    assert lb["notebook_interface"] == "jupyterlab"
    assert "jupyterhub" in note and "https://github.com/uni/gpu-course" in note
    # local extensions are made absolute: the written config lives in book/_build
    assert all(Path(p).is_absolute() for p in cfg["sphinx"]["local_extensions"].values())


@pytest.mark.parametrize("colab_repo", [None, "https://github.com/someone/else"])
def test_no_colab_button_unless_the_notebooks_install_from_this_repository(colab_repo):
    cfg, note = bookconfig.derive(_config(), {"COURSE_REPO_URL": "https://github.com/uni/gpu-course"}, None,
                                  ROOT / "book", colab_repo=colab_repo)
    assert "colab_url" not in cfg["launch_buttons"] and cfg["launch_buttons"]["binderhub_url"]
    assert "no Colab button" in note and "python -m tools.site.colabcell --repo https://github.com/uni/gpu-course" in note


def test_colab_only_for_github():
    cfg, note = bookconfig.derive(_config(), {"COURSE_REPO_URL": "https://gitlab.uni.edu/grp/course"}, None,
                                  ROOT / "book")
    assert "colab_url" not in cfg["launch_buttons"] and cfg["launch_buttons"]["binderhub_url"]
    assert "no Colab button" in note
    assert cfg["sphinx"]["config"]["html_theme_options"]["repository_provider"] == "gitlab"
    assert cfg["sphinx"]["config"]["nb_ipywidgets_js"]  # the rest of the Sphinx settings stay


def test_origin_is_the_fallback():
    cfg, _ = bookconfig.derive(_config(), {}, "https://github.com/org/from-origin", ROOT / "book")
    assert cfg["repository"]["url"] == "https://github.com/org/from-origin"


def test_npm_assets_are_pinned_exactly_and_locked_with_their_hashes():
    pins = npm.pins()
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == pins
    assert {a.name for a in bookassets.ASSETS} | {"configurable-http-proxy"} == set(pins)
    for path, entry in lock["packages"].items():
        if path:
            assert entry["integrity"].startswith("sha512-"), path
            assert entry.get("resolved", "https://registry.npmjs.org/").startswith("https://registry.npmjs.org/"), path
            assert not entry.get("link"), path  # nothing from outside the registry
    for name, version in pins.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_a_loose_pin_or_another_installed_version_is_refused(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"dependencies": {"mathjax": "^3.2.2"}}))
    with pytest.raises(npm.NpmError, match="exact versions"):
        npm.pins(tmp_path)
    pkg = tmp_path / "node_modules" / "mathjax"
    (pkg / "es5").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"version": "3.0.0"}))
    with pytest.raises(bookassets.AssetError, match="pins 3.2.2"):
        bookassets.install(tmp_path / "static", tmp_path / "node_modules", bookassets.MATHJAX, "3.2.2")
    assert not (tmp_path / "static" / "mathjax").exists()


def _lock(root: Path) -> dict:
    for name in ("package.json", "package-lock.json"):
        (root / name).write_text((ROOT / name).read_text())
    return json.loads((ROOT / "package-lock.json").read_text())


def test_npm_ci_is_skipped_when_node_modules_is_the_lockfile_s(tmp_path, monkeypatch):
    lock = _lock(tmp_path)
    (tmp_path / "node_modules").mkdir()
    hidden = {"packages": {k: v for k, v in lock["packages"].items() if k}}
    (tmp_path / "node_modules" / ".package-lock.json").write_text(json.dumps(hidden))
    assert not npm.installed_is_locked(tmp_path)  # the record alone: nothing is installed
    for path, entry in hidden["packages"].items():
        (tmp_path / path).mkdir(parents=True, exist_ok=True)
        (tmp_path / path / "package.json").write_text(json.dumps({"version": entry["version"]}))
    monkeypatch.setattr(npm.subprocess, "run", lambda *a, **k: pytest.fail(f"npm ran: {a}"))
    assert npm.npm_ci([], tmp_path) == tmp_path / "node_modules"
    (tmp_path / "node_modules" / "mathjax" / "package.json").write_text(json.dumps({"version": "3.0.0"}))
    assert not npm.installed_is_locked(tmp_path)


def test_npm_ci_installs_offline_from_a_wheelhouse_cache(tmp_path, monkeypatch):
    _lock(tmp_path)
    (tmp_path / "wh" / npm.CACHE).mkdir(parents=True)
    ran = []
    monkeypatch.setattr(npm.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(npm.subprocess, "run",
                        lambda cmd, **kw: ran.append((cmd, kw["cwd"])) or SimpleNamespace(returncode=0))
    npm.npm_ci([tmp_path / "nothing", tmp_path / "wh"], tmp_path)
    ((cmd, cwd),) = ran
    assert cmd[1] == "ci" and cwd == tmp_path
    assert cmd[cmd.index("--cache") + 1] == str(tmp_path / "wh" / npm.CACHE) and "--offline" in cmd


def test_banner_fields():
    text = ("======== Chapter 3 ========\nmode      : REPLAY: numbers below were recorded\n"
            "why       : no GPU\nGPU here  : no GPU\nreference : h100-pcie\n")
    assert course_modes.banner_fields(text) == {"mode": "REPLAY", "GPU here": "no GPU",
                                                "reference": "h100-pcie"}
    assert course_modes.banner_fields("mode: whatever\n") is None
    assert course_modes.banner_fields("nothing") is None


def test_every_notebook_and_lab_is_in_the_toc():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    def entries(items):  # a chapter's parts are `sections:` under it
        for e in items:
            yield e
            yield from entries(e.get("sections", []))

    files = {e["file"] for part in yaml.safe_load(toc)["parts"] for e in entries(part["chapters"])}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "labs").glob("*.ipynb")):
        assert nb.relative_to(ROOT).with_suffix("").as_posix() in files, f"{nb.name} missing from book/_toc.yml"
    assert "book/teaching" in files and "book/status" in files


def test_repo2docker_reads_environment_and_postbuild():
    """repo2docker uses the root's environment.yml and postBuild unless a binder/ folder exists."""
    assert not (ROOT / "binder").exists() and not (ROOT / ".binder").exists()
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert any(str(d).startswith("python=") for d in env["dependencies"])
    post = ROOT / "postBuild"
    assert post.stat().st_mode & 0o111, "postBuild must be executable"
    assert "pip install --no-deps -e ." in post.read_text()


def _doctree(*outputs):
    from docutils import nodes
    from docutils.utils import new_document

    doc = new_document("x")
    for text in outputs:
        doc += nodes.literal_block(text, text, classes=["output", "stream"])
    return doc


def test_course_page_without_banner_is_a_build_warning(monkeypatch):
    from types import SimpleNamespace

    warnings = []
    monkeypatch.setattr(course_modes.LOGGER, "warning", lambda msg, **kw: warnings.append(msg))
    env = SimpleNamespace(docname="notebooks/03_dma")
    app = SimpleNamespace(env=env)
    course_modes.read_banner(app, _doctree("hello"))
    assert warnings and "no mode banner" in warnings[0]
    warnings.clear()
    course_modes.read_banner(app, _doctree("mode      : LIVE: measured now\nGPU here  : NVIDIA H100\n"))
    assert not warnings and env.course_modes["notebooks/03_dma"]["mode"] == "LIVE"
    env.docname = "book/labs/lab2_bandwidth_test"  # a lab's student version needs one too
    course_modes.read_banner(app, _doctree("no banner"))
    assert warnings and "no mode banner" in warnings[0]
    warnings.clear()
    env.docname = "book/intro"  # pages outside notebooks/ and labs/ need no banner
    course_modes.read_banner(app, _doctree("no banner"))
    assert not warnings


# --------------------------------------------------------------------------- labs on the site

LAB2 = ROOT / "labs" / "lab2_bandwidth_test.ipynb"


def test_labs_mode_is_student_unless_solutions_are_asked_for():
    assert booklabs.choose_mode(None, {}) == "student"
    assert booklabs.choose_mode(None, {"COURSE_BOOK_LABS": "solution"}) == "solution"
    assert booklabs.choose_mode("student", {"COURSE_BOOK_LABS": "solution"}) == "student"
    with pytest.raises(SystemExit, match="solutions"):
        booklabs.choose_mode(None, {"COURSE_BOOK_LABS": "solutions"})


def test_generated_toc_maps_every_lab_and_nothing_else():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    toc["parts"][1]["chapters"].append({"file": "labs/lab9_new", "sections": [{"file": "labs/lab10_deep"}]})
    labs = booklabs.lab_entries(toc)
    assert {f"labs/{p.stem}" for p in (ROOT / "labs").glob("lab*.ipynb")} <= set(labs)
    assert labs[-2:] == ["labs/lab9_new", "labs/lab10_deep"]  # nested sections are found too
    mapped = booklabs.map_toc(toc, {e: f"book/labs/{e[5:]}" for e in labs})
    before = [e["file"] for e in booklabs._entries(toc)]
    after = [e["file"] for e in booklabs._entries(mapped)]
    assert len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        assert a == (f"book/labs/{b[5:]}" if b in labs else b)
    assert toc["parts"][1]["chapters"][0]["file"].startswith("labs/")  # the source toc is untouched


def _tree(tmp_path: Path, labs: list[Path]) -> Path:
    """A copy of the course's book layout with only `labs`, and a stale build of both modes."""
    root = tmp_path / "course"
    (root / "labs").mkdir(parents=True)
    for lab in labs:
        (root / "labs" / lab.name).write_bytes(lab.read_bytes())
    toc = {"format": "jb-book", "root": "book/intro",
           "parts": [{"caption": "Labs", "chapters": [{"file": f"labs/{p.stem}"} for p in labs]}]}
    (root / "book").mkdir()
    (root / "book" / "_toc.yml").write_text(yaml.safe_dump(toc))
    for d in ("html/labs", "html/_sources/labs", "html/book/labs", "jupyter_execute/labs"):
        (root / "book" / "_build" / d).mkdir(parents=True)
        (root / "book" / "_build" / d / "x.html").write_text("stale")
    return root


def test_student_site_labs_have_no_solution_and_say_so(tmp_path):
    root = _tree(tmp_path, [LAB2])
    (root / "book" / "labs").mkdir()
    (root / "book" / "labs" / "lab7_gone.ipynb").write_text("{}")  # a lab since removed from the toc
    build = root / "book" / "_build"
    state = booklabs.prepare(root / "book" / "_toc.yml", build / "_toc.yml", "student", root=root)
    assert state == {"mode": "student", "labs": {"labs/lab2_bandwidth_test": "book/labs/lab2_bandwidth_test"}}
    assert booklabs.read_state(build) == state
    assert "book/labs/lab2_bandwidth_test" in (build / "_toc.yml").read_text()
    assert sorted(p.name for p in (root / "book" / "labs").iterdir()) == [LAB2.name]
    text = (root / "book" / "labs" / LAB2.name).read_text()
    nb = nbformat.read(root / "book" / "labs" / LAB2.name, as_version=4)
    title, note, rest = nb.cells[0].source.split("\n\n", 2)  # the note sits under the title
    assert title.startswith("# Lab 2") and "Student version" in note and "hidden cases" in note
    assert "labs/" not in note and "solution" not in note.lower()  # a student page does not say where solutions are
    assert rest.startswith("Chapter 0")
    assert len(nb.cells) == len(nbformat.read(LAB2, as_version=4).cells)
    assert "YOUR CODE HERE" in text
    hidden = booklabs.solution_lines(LAB2)
    assert len(hidden) >= 5 and not [ln for ln in hidden if ln in text]
    # a solution page of an earlier BOOK_LABS=solution build is gone; the student pages stay
    assert not (build / "html" / "labs").exists() and not (build / "html" / "_sources" / "labs").exists()
    assert not (build / "jupyter_execute" / "labs").exists() and (build / "html" / "book" / "labs").exists()


def test_solution_site_publishes_labs_as_they_are(tmp_path):
    root = _tree(tmp_path, [LAB2])
    build = root / "book" / "_build"
    state = booklabs.prepare(root / "book" / "_toc.yml", build / "_toc.yml", "solution", root=root)
    assert state["mode"] == "solution" and state["labs"] == {"labs/lab2_bandwidth_test": "labs/lab2_bandwidth_test"}
    assert not (root / "book" / "labs").exists() and not (build / "html" / "book" / "labs").exists()
    assert (build / "html" / "labs").exists()


def test_toc_naming_a_missing_lab_is_refused(tmp_path):
    root = _tree(tmp_path, [LAB2])
    (root / "labs" / LAB2.name).unlink()
    with pytest.raises(SystemExit, match="lab2_bandwidth_test"):
        booklabs.prepare(root / "book" / "_toc.yml", root / "book" / "_build" / "_toc.yml", "solution", root=root)


def test_a_solution_line_in_a_page_is_found_through_highlighting(tmp_path):
    """The leak check reads pages as a reader sees them: tags stripped, entities decoded."""
    site = tmp_path / "html"
    (site / "book" / "labs").mkdir(parents=True)
    (site / "_static").mkdir()
    line = sorted(booklabs.solution_lines(LAB2), key=len)[-1]
    nb = nbformat.read(LAB2, as_version=4)
    lab_text = "\n".join(c.source for c in nb.cells)
    outside = "\n".join(ln for c in nb.cells for ln in booklabs._regions(c.source)[1])
    (site / "book" / "labs" / "lab2.html").write_text(f"<pre>{html.escape(outside)}</pre>")
    (site / "_static" / "lib.js").write_text(lab_text)  # copied libraries are not pages
    assert booklabs.solution_leaks(site, [LAB2]) == []
    highlighted = "".join(f'<span class="n">{html.escape(tok)}</span>' for tok in line.split(" "))
    (site / "book" / "labs" / "lab2.html").write_text(f"<pre>{highlighted.replace('</span><span', '</span> <span')}</pre>")
    nbformat.write(nb, site / "lab2_copy.ipynb")
    leaks = booklabs.solution_leaks(site, [LAB2])
    assert [leak.split(":")[0] for leak in leaks] == ["book/labs/lab2.html", "lab2_copy.ipynb"]
    assert LAB2.name in leaks[0]


@pytest.mark.built_site
def test_default_build_shows_no_solutions():
    """Run by `make book` after the build: the site in book/_build shows the labs of its mode."""
    build = ROOT / "book" / "_build"
    site = build / "html"
    state = booklabs.read_state(build)
    assert state and site.is_dir(), "no site built by `make book` in book/_build"
    labs = sorted((ROOT / "labs").glob("lab*.ipynb"))
    leaks = booklabs.solution_leaks(site, labs)
    for src, doc in state["labs"].items():
        page = site / f"{doc}.html"
        text = booklabs.page_text(page)
        assert sitecheck.expected_for(site, f"{doc}.html", ROOT).notebook, f"{doc}: executed notebook not found"
        if state["mode"] == "student":
            assert doc == f"book/labs/{Path(src).name}" and "Student version" in text
            assert "YOUR CODE HERE" in text and ": FAIL — not written yet" in text, doc
        else:
            assert doc == src and "Student version" not in text
    if state["mode"] == "student":
        assert leaks == [] and not (site / "labs").exists()
    else:  # the check sees the solutions that this build published on purpose
        assert len(leaks) >= len(state["labs"])


def test_a_line_the_course_code_already_shows_is_no_leak(tmp_path):
    """Lab 6's `container = os.open("/dev/vfio/vfio", ...)` stands inside the guest program that
    Chapter 4b prints: no secret. A solution line found nowhere in the course code still leaks."""
    lab6 = ROOT / "labs" / "lab6_vfio_driver.ipynb"
    public = booklabs.public_lines(ROOT)
    lines = booklabs.solution_lines(lab6)
    shown = [ln for ln in lines if booklabs.taught(ln, public)]
    secret = sorted((ln for ln in lines if not booklabs.taught(ln, public)), key=len)
    assert 'container = os.open("/dev/vfio/vfio", os.O_RDWR)' in shown and secret
    site = tmp_path / "html"
    site.mkdir()
    (site / "page.html").write_text("<pre>" + html.escape("\n".join(shown)) + "</pre>")
    assert booklabs.solution_leaks(site, [lab6]) == []
    (site / "page.html").write_text("<pre>" + html.escape(secret[-1]) + "</pre>")
    assert len(booklabs.solution_leaks(site, [lab6])) == 1
