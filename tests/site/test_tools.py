"""The build tools: notebook hygiene, the wheelhouse's filtering, the venv inheritance."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools.checks import nbhygiene
from tools.env import wheelhouse

ROOT = Path(__file__).resolve().parents[2]


def _nb(tmp_path, first_code, outputs=False):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(first_code)
    if outputs:
        cell.outputs = [nbformat.v4.new_output("stream", text="hi")]
        cell.execution_count = 1
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    p = tmp_path / "n.ipynb"
    nbformat.write(nb, p)
    return str(p)


def test_hygiene_accepts_clean(tmp_path):
    assert nbhygiene.problems(_nb(tmp_path, "from helpers import course\ncourse.start('x')")) == []


def test_hygiene_rejects_outputs_and_missing_banner(tmp_path):
    assert any("committed outputs" in p for p in nbhygiene.problems(_nb(tmp_path, "course.start()", True)))
    assert any("course.start" in p for p in nbhygiene.problems(_nb(tmp_path, "print(1)")))


def test_hygiene_rejects_invalid_json(tmp_path):
    p = tmp_path / "bad.ipynb"
    p.write_text("{")
    assert "not a valid notebook" in nbhygiene.problems(str(p))[0]


def test_every_course_notebook_is_clean():
    paths = sorted(str(p) for p in [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("labs/*.ipynb")])
    assert paths and nbhygiene.main(paths) == 0


def test_wheelhouse_platform_tags():
    tags = wheelhouse.platforms("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux2014_x86_64" in tags and "any" in tags
    assert "manylinux_2_24_x86_64" not in wheelhouse.platforms("manylinux_2_17_x86_64")


def test_wheelhouse_installed_and_constraints(tmp_path):
    freeze = tmp_path / "f.txt"
    freeze.write_text("# comment\nNumPy==2.5.2\nllvmlite==0.50.0\nweird line\n")
    have = wheelhouse.installed(freeze)
    assert have == {("numpy", "2.5.2"), ("llvmlite", "0.50.0")}
    c = wheelhouse.node_constraints(have, ["numpy==2.4.6", "plotly==6.5.2"], tmp_path)
    assert c.read_text().split() == ["llvmlite==0.50.0"]  # the course's own numpy pin wins
    assert wheelhouse.wheel_key(Path("numba_cuda-0.30.4-py3-none-any.whl")) == ("numba-cuda", "0.30.4")


def test_wheelhouse_unknown_extra():
    with pytest.raises(SystemExit, match="unknown extra"):
        wheelhouse.requirements(["nope"])


def test_mkvenv_inherit(tmp_path):
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "tools.env.mkvenv", str(env), "--inherit"], check=True, cwd=ROOT,
                   capture_output=True, timeout=180)
    out = subprocess.run([str(env / "bin" / "python"), "-c", "import json, sys; print(json.dumps(sys.path))"],
                         check=True, capture_output=True, text=True).stdout
    paths = json.loads(out)
    parent = [p for p in sys.path if p.endswith("site-packages")]
    assert parent and parent[0] in paths, "the parent's packages must be importable"
    own = next(i for i, p in enumerate(paths) if p.startswith(str(env)))
    assert own < paths.index(parent[0]), "the new environment's own packages must come first"


def test_timesteps_stops_at_the_first_failing_step_and_reports_each(tmp_path, capsys):
    from tools.env import timesteps

    log = tmp_path / "ran"
    make = tmp_path / "make"
    make.write_text(f'#!/bin/sh\necho "$2" >> {log}\n[ "$2" != bad ]\n')
    make.chmod(0o755)
    assert timesteps.main(["--make", str(make), "one", "two"]) == 0
    assert "two" in capsys.readouterr().out
    assert timesteps.main(["--make", str(make), "one", "bad", "never"]) == 1
    out = capsys.readouterr().out
    assert log.read_text().split() == ["one", "two", "one", "bad"]
    assert "make test: bad took" in out and "never" not in out


def test_timesteps_runs_lanes_side_by_side_and_a_failure_stops_the_others(tmp_path, capsys, monkeypatch):
    """`//` splits the steps into lanes that run at the same time; the first failure stops the other lane's
    running step (its process group), and the exit status is the failing step's."""
    from tools.env import timesteps

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "ran"
    make = tmp_path / "make"
    # 'slow' waits for a file that only 'done' writes: both lanes pass only if they really overlap
    make.write_text(f'#!/bin/sh\necho "$2" >> {log}\n'
                    f'case "$2" in slow) for i in $(seq 100); do [ -e {tmp_path}/flag ] && exit 0; sleep 0.1; done; exit 9;;\n'
                    f'done) touch {tmp_path}/flag;; bad) exit 4;; hang) sleep 600;; esac\n')
    make.chmod(0o755)
    assert timesteps.main(["--make", str(make), "first", "//", "slow", "after", "//", "done"]) == 0
    out = capsys.readouterr().out
    assert log.read_text().split()[0] == "first" and sorted(log.read_text().split()) == ["after", "done", "first", "slow"]
    assert "every step passed" in out and "lane done" in out
    log.write_text("")
    assert timesteps.main(["--make", str(make), "//", "hang", "never", "//", "bad"]) == 4
    out = capsys.readouterr().out
    assert "never" not in log.read_text() and "make test: bad took" in out
    assert "stopped before the end: hang never" in out
