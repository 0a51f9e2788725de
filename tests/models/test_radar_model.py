"""The radar model (helpers.models.radar) as a layer: it imports no chapter, Lab 3, its grading, the
problem generator and the instructor's code import it rather than Chapter 9, and its records are built
with keywords only (a positional MachineParams of nine floats is refused)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from helpers.core.errors import InputError
from helpers.models.radar import metrics, pipeline, ring, simulator

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "helpers.ch09_radar_pipeline"


def _imports(source: str) -> set[str]:
    """Every module an import statement in `source` names (`from a import b` gives a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def _code_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"
                         and not "".join(c["source"]).lstrip().startswith(("%", "!")))
    return path.read_text()


def test_the_model_imports_no_chapter():
    files = sorted((ROOT / "helpers" / "models" / "radar").glob("*.py"))
    assert len(files) >= 8
    bad = {f.name: sorted(m for m in _imports(f.read_text()) if m.startswith("helpers.ch")) for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


@pytest.mark.parametrize("where", ["helpers/labs/*.py", "helpers/problems/*.py", "instructor/**/*.py",
                                   "labs/*.ipynb"])
def test_labs_problems_and_instructor_code_do_not_import_chapter_9(where):
    files = sorted(ROOT.glob(where))
    assert files, f"nothing matches {where}"
    bad = {str(f.relative_to(ROOT)): sorted(m for m in _imports(_code_of(f)) if m.startswith(CHAPTER))
           for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_checker_sees_an_import_of_the_chapter():
    assert _imports("from helpers.ch09_radar_pipeline import diagrams\n") >= {CHAPTER}
    assert _imports("import helpers.ch09_radar_pipeline.breaking as b\n") == {f"{CHAPTER}.breaking"}


def test_records_with_many_fields_take_keywords_only():
    with pytest.raises(TypeError):
        simulator.MachineParams(20e-6, 3.2e9, 20e-6, 1.8e9, 10e6, 2e-10, 50e-6, 100e-6, "2009")
    with pytest.raises(TypeError):
        metrics.RunResult("cpu", 1 << 20, 8e-3, 4, 1, 2, [1, 2], [0, 1], 0, 0.1, 1.0)
    with pytest.raises(TypeError):
        pipeline.PipelineConfig("registered", 4 << 20, 8e-3, 10)
    with pytest.raises(TypeError):
        ring.CaptureCard(1 << 20, 8e-3)


def test_lab3_machines_are_the_published_numbers_by_name():
    from helpers.labs import lab3

    old = lab3.MACHINES["a 2009-era machine"]
    assert (old.pinned_t0_s, old.pinned_Bps, old.pageable_Bps, old.memcpy_Bps, old.overhead_s, old.source) == (
        20e-6, 3.2e9, 1.8e9, 10e6, 100e-6, "2009")
    assert lab3.MACHINES["a slow GPU"].kernel_s_per_byte == 4e-10


@pytest.mark.parametrize("bad, exc", [({"design": "cpu"}, InputError), ({"design": "zerocopy"}, InputError),
                                      ({"sync": "sleepy"}, InputError), ({"check_every": -1}, InputError),
                                      ({"frames": 0}, InputError), ({"buffers": 9}, InputError),
                                      ({"frame_bytes": 12345}, InputError), ({"period_s": 0}, InputError)])
def test_a_pipeline_config_refuses_bad_input_when_made(bad, exc):
    with pytest.raises(exc):
        pipeline.PipelineConfig(**bad)


def test_run_pipeline_takes_a_config():
    with pytest.raises(InputError, match="PipelineConfig"):
        pipeline.run_pipeline({"design": "registered"})


def test_a_config_fills_in_what_the_design_implies():
    assert pipeline.PipelineConfig(design="pipelined").buffers == 3
    assert pipeline.PipelineConfig(design="staged").buffers == 1
    cfg = pipeline.PipelineConfig(check_every=0)
    assert cfg.variants == 1 and pipeline.PipelineConfig().variants == 4
