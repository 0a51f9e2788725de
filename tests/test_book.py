"""The book's build tools: launch-button config, asset verification, the banner reader, the toc."""

import sys
from pathlib import Path

import pytest
import yaml

from tools import bookassets, bookconfig

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_modes  # noqa: E402


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
    cfg, note = bookconfig.derive(_config(), env, "https://github.com/other/origin", ROOT / "book")
    assert cfg["repository"] == {"branch": "fall", "url": "https://github.com/uni/gpu-course"}
    lb = cfg["launch_buttons"]
    assert lb["jupyterhub_url"] == "https://hub.uni.edu" and lb["binderhub_url"] and lb["colab_url"]
    assert lb["notebook_interface"] == "jupyterlab"
    assert "jupyterhub" in note and "https://github.com/uni/gpu-course" in note
    # local extensions are made absolute: the written config lives in book/_build
    assert all(Path(p).is_absolute() for p in cfg["sphinx"]["local_extensions"].values())


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


def test_tampered_widget_tarball_is_refused(tmp_path):
    (tmp_path / bookassets.TARBALL).write_bytes(b"not the package")
    with pytest.raises(bookassets.AssetError, match="integrity"):
        bookassets.install_widgets(tmp_path / "static", [tmp_path])


def test_banner_fields():
    text = ("======== Chapter 3 ========\nmode      : REPLAY: numbers below were recorded\n"
            "why       : no GPU\nGPU here  : no GPU\nreference : h100-pcie\n")
    assert course_modes.banner_fields(text) == {"mode": "REPLAY", "GPU here": "no GPU",
                                                "reference": "h100-pcie"}
    assert course_modes.banner_fields("mode: whatever\n") is None
    assert course_modes.banner_fields("nothing") is None


def test_every_notebook_and_lab_is_in_the_toc():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    files = {e["file"] for part in yaml.safe_load(toc)["parts"] for e in part["chapters"]}
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
    env.docname = "book/intro"  # pages outside notebooks/ and labs/ need no banner
    course_modes.read_banner(app, _doctree("no banner"))
    assert not warnings
