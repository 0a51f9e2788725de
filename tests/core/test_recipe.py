"""CONTRIBUTING.md's recipe for a new recorded experiment shown in one chapter, walked end to end
with a throwaway experiment: registered in a module of its own (in a temporary folder), recorded
by the recorder on the stand-in GPU (tests/fake_cupy.py) into a temporary machine folder, never
data/reference; its file, manifest and checksum checked; read back through ctx.get in replay; and
the coverage check shown to flag the file once it is gone. The recipe itself touches at most 4 files."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from pathlib import Path

import fake_cupy
import numpy as np
import pytest

from helpers import course
from helpers.core import coverage, experiments, reference
from helpers.core.errors import ReferenceDataError
from helpers.core.mode import Mode
from helpers.recording import recorder

ROOT = Path(__file__).resolve().parents[2]
EID = "recipe.copy_demo"

# Step 1 of the recipe: the chapter module with the registered experiment and its shown function.
CHAPTER_MODULE = '''
from helpers.core import validate
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp


def time_copy(nbytes: int, repeats: int) -> list[float]:
    """Milliseconds per pinned host->device copy, timed with CUDA events."""
    host = cp.cuda.alloc_pinned_memory(nbytes)
    dev = cp.empty((nbytes,), cp.uint8)
    out = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        cp.cuda.runtime.memcpyAsync(dev.data.ptr, host.ptr, nbytes, cp.cuda.runtime.memcpyHostToDevice, 0)
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop))
    return out


@experiment("recipe.copy_demo", chapter=4, title="A throwaway: one copy size, timed", needs=(GPU,),
            params={"nbytes": validate.size(4, 1 << 20)})
def copy_demo(quick: bool, nbytes: int = 4096, code=time_copy) -> dict:
    return {"nbytes": nbytes, "ms": code(nbytes, 3 if quick else 10)}
'''


@pytest.fixture
def chapter(stand_in_recorder, tmp_path, monkeypatch):
    """The throwaway chapter module, imported (so its experiment registers) with CuPy's stand-in."""
    stand_in_recorder({})  # a registry of nothing but what registers below
    pkg = tmp_path / "recipe_chapter"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A throwaway chapter for the recipe test."""\n')
    (pkg / "copy_demo.py").write_text(textwrap.dedent(CHAPTER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("recipe_chapter.copy_demo")
    for name in ("recipe_chapter", "recipe_chapter.copy_demo"):
        monkeypatch.setitem(sys.modules, name, sys.modules[name])  # removed again after the test
    cp = fake_cupy.make()
    cp.uint8 = np.uint8
    monkeypatch.setattr(module, "cp", cp)
    return module


def test_the_recipe_end_to_end(chapter, tmp_path, monkeypatch):
    assert EID in experiments.discover()
    data_dir = tmp_path / "reference"
    folder = data_dir / "h100-pcie"
    # Step 3: the recording file, written by the recorder (here on the stand-in GPU)
    assert recorder.main(["--only", EID, "--out", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", f"{EID}.json"]
    ref = reference.load(folder)  # the manifest validates (schema, checksum, its name)
    rec = ref.recording(EID)  # the recording validates (schema, checksum, id, machine, GPU)
    assert rec.doc["checksum"] == reference.checksum(rec.doc)
    assert rec.data["nbytes"] == 4096 and len(rec.data["ms"]) == 10 and all(t >= 0 for t in rec.data["ms"])
    assert rec.provenance["command_line"] == ["python", "-m", "helpers.record", "--only", EID, "--out", str(folder)]
    # Step 2: the notebook cell, replayed (no GPU) through ctx.get
    monkeypatch.setenv("COURSE_DATA_DIR", str(data_dir))
    ctx = course.Context(Mode.REPLAY, "no GPU here", gpu_name=None, reference_name="h100-pcie")
    ev = ctx.get(EID, code=chapter.time_copy)
    assert ev.mode is Mode.REPLAY and ev.data == rec.data and ev.source == rec.label
    assert f"REPLAY: recorded on {rec.label}" in ev.caption("copy") and rec.provenance["driver"] in rec.label
    # Step 4's guard: the coverage check passes with the file and flags it once it is gone
    registry = {EID: experiments.discover()[EID]}
    assert coverage.gaps(registry, lambda role: reference.load(folder)) == []
    (folder / f"{EID}.json").unlink()
    gaps = coverage.gaps(registry, lambda role: reference.load(folder))
    assert len(gaps) == 1 and gaps[0].startswith(f"{EID}: ") and f"--only {EID}" in gaps[0]
    with pytest.raises(ReferenceDataError, match=f"no recording of '{EID}'.*--only {EID}"):
        ctx.get(EID)  # the page fails loudly; it never says "pending" on its own


def test_contributings_recipe_touches_at_most_four_files():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    recipe = text.split("## Adding an experiment", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\*\*(\d)\. ([^*]+)\*\* \(`([^`]+)`", recipe, re.M)
    assert [int(n) for n, _, _ in steps] == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= 4, steps
    files = [f for _, _, f in steps]
    assert len(set(files)) == len(files) and any(f.startswith("data/reference/") for f in files), files
