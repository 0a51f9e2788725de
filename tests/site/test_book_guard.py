"""Issue 39, item 7: no way of building the book with the repository's config and toc publishes a
lab's solutions. The committed config loads book/_ext/student_labs.py, which stops a build that
found an instructor lab (or any page holding a solution or hidden-test region) before a page is
read, unless the toc is the one tools/site/booklabs.py wrote for a solution site."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from book._ext import student_labs
from tools.site import booklabs

ROOT = Path(__file__).resolve().parents[2]

LAB2 = ROOT / "labs" / "lab2_bandwidth_test.ipynb"


def _found(root: Path, docs: list[str]) -> dict[str, Path]:
    return {d: root / f"{d}.ipynb" if (root / f"{d}.ipynb").exists() else root / f"{d}.md" for d in docs}


def _committed_docs() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [str(e["file"]) for e in booklabs._entries(toc)] + [toc["root"]]


def test_the_committed_config_loads_the_guard():
    cfg = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert cfg["sphinx"]["local_extensions"]["student_labs"] == "_ext"
    assert cfg["only_build_toc_files"] is True


def test_the_committed_toc_built_as_it_is_is_refused():
    why = student_labs.refusal(_found(ROOT, _committed_docs()), "book/_toc.yml", ROOT)
    assert why and "would publish solutions" in why and "make book" in why
    for lab in sorted((ROOT / "labs").glob("lab*.ipynb")):
        assert f"labs/{lab.stem}" in why


def test_an_instructor_lab_found_by_any_road_is_refused(tmp_path):
    """A toc of one's own, or only_build_toc_files turned off: labs/ found at all is enough."""
    assert student_labs.refusal(_found(ROOT, ["book/intro", "labs/lab2_bandwidth_test"]), None, ROOT)
    copy = tmp_path / "notebooks" / "my_copy.ipynb"  # a lab renamed into the chapters' folder
    copy.parent.mkdir()
    shutil.copy(LAB2, copy)
    assert "notebooks/my_copy" in student_labs.refusal({"notebooks/my_copy": copy}, "x/_toc.yml", tmp_path)


def test_the_course_chapters_and_pages_are_not_taken_for_solutions():
    """No false refusal: every page of the committed toc but the labs passes (teaching.md names the
    markers in prose)."""
    docs = [d for d in _committed_docs() if not d.startswith("labs/")]
    assert "book/teaching" in docs and len(docs) > 20
    assert student_labs.refusal(_found(ROOT, docs), "book/_toc.yml", ROOT) is None


def test_the_toc_make_book_writes_is_built_and_a_solution_site_only_when_asked(tmp_path):
    """`make book`: tools/site/booklabs.py maps the labs to book/labs/ (nbgrader's student versions) and the
    guard lets that through; BOOK_LABS=solution writes a state that allows labs/; a student page that
    still holds a solution region is refused in both modes."""
    root = tmp_path / "course"
    (root / "labs").mkdir(parents=True)
    shutil.copy(LAB2, root / "labs" / LAB2.name)
    (root / "book").mkdir()
    toc = {"format": "jb-book", "root": "book/intro", "chapters": [{"file": "labs/lab2_bandwidth_test"}]}
    (root / "book" / "_toc.yml").write_text(yaml.safe_dump(toc))
    build = root / "book" / "_build"
    booklabs.prepare(root / "book" / "_toc.yml", build / "_toc.yml", "student", root=root)
    docs = [str(e["file"]) for e in booklabs._entries(yaml.safe_load((build / "_toc.yml").read_text()))]
    assert docs == ["book/labs/lab2_bandwidth_test"]
    assert student_labs.refusal(_found(root, docs), str(build / "_toc.yml"), root) is None
    booklabs.prepare(root / "book" / "_toc.yml", build / "_toc.yml", "solution", root=root)
    assert student_labs.refusal(_found(root, ["labs/lab2_bandwidth_test"]), str(build / "_toc.yml"), root) is None
    assert student_labs.refusal(_found(root, ["labs/lab2_bandwidth_test"]), str(root / "book" / "_toc.yml"), root)
    shutil.copy(LAB2, root / "book" / "labs" / LAB2.name)  # the instructor lab put where a student one goes
    for state in ("solution", "student"):
        (build / "booklabs.json").write_text(json.dumps({"mode": state}))
        why = student_labs.refusal(_found(root, docs), str(build / "_toc.yml"), root)
        assert why and "should be student versions" in why


def test_a_student_version_has_no_secret_but_its_lab_has(tmp_path):
    nb = nbformat.read(LAB2, as_version=4)
    assert student_labs.holds_secrets(LAB2)
    for c in nb.cells:  # what nbgrader's student version keeps: the stubs, not the regions
        c.source = "\n".join(ln for ln in c.source.splitlines() if "BEGIN" not in ln and "END" not in ln)
    nbformat.write(nb, tmp_path / "student.ipynb")
    assert not student_labs.holds_secrets(tmp_path / "student.ipynb")


def test_a_plain_jupyter_book_build_with_the_committed_config_and_toc_refuses(tmp_path):
    """The real thing: `jupyter-book build . --config book/_config.yml --toc book/_toc.yml`, as anyone
    might type it. It must stop (before executing a page) and write no lab page."""
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jb, "jupyter-book is part of the book extra"
    run = subprocess.run([jb, "build", ".", "--config", "book/_config.yml", "--toc", "book/_toc.yml",
                          "--path-output", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "COURSE_STATE_DIR": str(tmp_path / "state")})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "Lab solutions would be published" in out and "labs/lab2_bandwidth_test" in out
    pages = [p.relative_to(tmp_path) for p in tmp_path.rglob("*.html")]
    assert not [p for p in pages if "lab" in p.name], pages
    assert not list(tmp_path.rglob("jupyter_execute/**/*.ipynb"))  # nothing was executed either
    with pytest.raises(subprocess.CalledProcessError):  # and `jupyter-book build book/` builds nothing at all
        subprocess.run([jb, "build", "book/", "--path-output", str(tmp_path / "b")], cwd=ROOT, capture_output=True,
                       timeout=300, check=True)
    assert not list((tmp_path / "b").rglob("*.html"))


def test_the_site_copy_of_a_lab_links_the_book_pages_from_where_the_site_keeps_it():
    """labs/lab6.ipynb links ../book/bibliography.md (right in JupyterLab); the site serves the copy from
    book/labs/, where the same page is ../bibliography.md (the build failed on the unresolved link)."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lab 9\n\nsee ([NVIDIA, nv-mmap.c](../book/bibliography.md#cite-nv-mmap))"),
        nbformat.v4.new_code_cell("x = '](../book/'  # code is left alone")])
    out = booklabs.site_copy(nb, "Lab 9")
    assert "](../bibliography.md#cite-nv-mmap)" in out.cells[0].source and "../book/" not in out.cells[0].source
    assert out.cells[1].source == "x = '](../book/'  # code is left alone"
