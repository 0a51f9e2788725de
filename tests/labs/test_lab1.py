"""Lab 1's grading: randomised devices defeat constants, each part is graded on its own, and
nothing earns points without new code.

Submissions are planted as dictionaries of functions and scored in this process by the checks
of helpers.labs.lab1 (the checks the grader runs), with the instructor's reference for
every other part and its seeds. One test then grades a planted notebook through the grader
itself, as `make grade` does: devices in the grader, the learner's driver sandboxed.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import numpy as np
import pytest

from helpers.labs import grading, lab1
from helpers.models.toygpu import regs
from instructor.labs import lab1_driver as ref

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "labs" / "lab1_toy_driver.ipynb"
POINTS = {"identify_device": 2, "map_bar1": 3, "bring_up": 3, "submit_and_wait": 4, "dma_copies": 4,
          "compute": 2, "batching": 3, "recovery": 4}


def score(ns: dict, reference=ref) -> dict[str, int]:
    """Points per check for a submission (a notebook-like namespace), graded like autograde."""
    out = {}
    for check, fn in lab1.CHECK_FUNCTIONS.items():
        parts = lab1.Parts(ns, check, reference=reference)
        try:
            with grading.check(check) as c, parts.active():
                fn(c, parts)
            out[check] = POINTS[check]
        except grading.CheckFailed:
            out[check] = 0
    return out


NOTEBOOK_IMPORTS = """
import math, time
import numpy as np
from helpers.core.errors import DeviceTimeoutError
from helpers.labs.lab1 import LabDriver, vram_alloc
from helpers.models.toygpu import commands as cmd
from helpers.models.toygpu import regs
from helpers.models.toygpu.errors import RingFullError, ToyGPUError
PAGE = regs.PAGE_SIZE
"""
HELPERS = ("_u64", "_program_ring", "_check_length", "_dma")


def reference_source(names) -> str:
    import inspect

    return "\n\n".join(inspect.getsource(getattr(ref, n)) for n in names)


def notebook(**planted) -> dict:
    """The reference's code as a learner's notebook holds it, with `planted` functions in place
    of some: one namespace, in which each function calls the others by their global names
    (what Parts.active() swaps)."""
    ns: dict = {}
    exec(NOTEBOOK_IMPORTS + reference_source(HELPERS + lab1.FUNCTIONS), ns)  # noqa: S102 - our own reference
    ns.update(planted)
    return ns


def hard_coded_identify(dev) -> dict:
    """A 'solution' that learned the visible device's numbers instead of reading them."""
    if dev.read("ID") != regs.DEVICE_ID:
        raise lab1.ToyGPUError("not a toy GPU")
    p = lab1.params(lab1.VISIBLE_SEEDS[0])
    return {"id": regs.DEVICE_ID, "vram_bytes": p.vram_bytes, "sysmem_bytes": 4 << 20,
            "bar1_bytes": p.bar1_bytes, "reserved_bytes": p.reserved_bytes}


def map_bar1_off_by_one_page(dev, table, pages):
    """Maps every aperture page one VRAM page too far (and writes only the entries it maps)."""
    dev.write("VRAM_WINDOW", table, check=False)
    for p in pages:
        dev.write("VRAM_DATA", (p + regs.PAGE_SIZE) | regs.PTE_VALID | regs.PTE_WRITABLE, check=False)
    dev.write("BAR1_PT_BASE", table | regs.BAR1_PT_ENABLE, check=False)


def not_written(*args, **kwargs):
    raise NotImplementedError()  # what nbgrader leaves in a solution cell


@pytest.fixture(autouse=True)
def autograding(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # failed checks raise, as under nbgrader


@pytest.fixture(scope="module")
def planted():
    """Scores of the three planted submissions (computed once: each runs every check)."""
    import os

    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        return {
            "reference": score(notebook()),
            "hard-coded identify + buggy map_bar1": score(notebook(identify=hard_coded_identify,
                                                                  map_bar1=map_bar1_off_by_one_page)),
            "nothing written": score(notebook(**{n: not_written for n in lab1.FUNCTIONS})),
        }
    finally:
        os.environ.pop("NBGRADER_EXECUTION", None)


def test_scores_of_planted_submissions(planted, capsys):
    with capsys.disabled():  # the scores, as an instructor would read them
        for name, pts in planted.items():
            print(f"\n{name}: {sum(pts.values())}/{sum(POINTS.values())} " + ", ".join(f"{k} {v}" for k, v in pts.items()))
    assert planted["reference"] == POINTS
    bad = planted["hard-coded identify + buggy map_bar1"]
    assert bad == {**POINTS, "identify_device": 0, "map_bar1": 0}, "only the planted parts lose points"
    assert sum(planted["nothing written"].values()) == 0, "no points without new code"


def test_constants_pass_the_visible_device_only():
    """The hard-coded identify passes on the seed it was copied from and fails on the next one."""
    ns = notebook(identify=hard_coded_identify)
    first = lab1.Parts(ns, "identify_device")
    first.seeds = lab1.VISIBLE_SEEDS[:1]
    with grading.check("identify_device") as c:
        lab1.check_identify(c, first)
    with pytest.raises(grading.CheckFailed, match="seed"):
        with grading.check("identify_device") as c:
            lab1.check_identify(c, lab1.Parts(ns, "identify_device", reference=ref))


def test_visible_checks_use_stand_ins_so_one_bug_does_not_cascade():
    """Without the reference (the visible checks), the other parts are the course's stand-ins:
    a wrong map_bar1 fails map_bar1's check, not bring_up's."""
    ns = notebook(map_bar1=map_bar1_off_by_one_page)
    with grading.check("bring_up") as c, (parts := lab1.Parts(ns, "bring_up")).active():
        lab1.check_bring_up(c, parts)
    with pytest.raises(grading.CheckFailed):
        with grading.check("map_bar1") as c, (parts := lab1.Parts(ns, "map_bar1")).active():
            lab1.check_map_bar1(c, parts)


def test_devices_differ_from_seed_to_seed():
    drawn = {lab1.params(s) for s in range(40)}
    assert len({p.vram_bytes for p in drawn}) > 1 and len({p.bar1_bytes for p in drawn}) > 1
    assert len({p.reserved_bytes for p in drawn}) > 1 and len({p.ring_entries for p in drawn}) > 1
    assert lab1.params(7) == lab1.params(7)
    hidden = {s for seeds in ref.SEEDS.values() for s in seeds}
    assert not hidden & set(lab1.VISIBLE_SEEDS)


def test_parts_swap_the_namespace_and_put_it_back():
    mine = {n: (lambda *a, n=n: n) for n in lab1.FUNCTIONS}
    ns = dict(mine)
    parts = lab1.Parts(ns, "bring_up", reference=ref)
    with parts.active():
        assert ns["bring_up"] is mine["bring_up"] and ns["map_bar1"] is ref.map_bar1
        assert parts.map_bar1 is ref.map_bar1 and parts.bring_up is mine["bring_up"]
    assert ns == mine
    with pytest.raises(KeyError, match="no graded check"):
        lab1.Parts(ns, "telepathy")


def test_lab_devices_have_no_firmware():
    from helpers.models.toygpu import ToyGPUError

    with lab1.lab_device(11) as dev:
        with pytest.raises(ToyGPUError, match="no firmware"):
            dev.bring_up(8)
        assert dev.read("STATUS") == regs.Status.READY  # and nothing was set up behind the learner's back
        assert set(dev.aperture()[0:16].tolist()) == {0xFF}


def _submission(tmp_path: Path) -> Path:
    """The student version with every function written (the reference's code, as a learner would
    paste it), except a hard-coded identify and a map_bar1 off by one page."""
    from tools.grader import labgrade

    [student] = labgrade.make_student([LAB], tmp_path / "student")
    nb = nbformat.read(student, as_version=4)
    import inspect

    bodies = {"identify": inspect.getsource(hard_coded_identify),
              "map_bar1_code": inspect.getsource(map_bar1_off_by_one_page)}
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            names = tuple(ln.split("(")[0][4:] for ln in c.source.splitlines() if ln.startswith("def "))
            src = bodies.get(meta["grade_id"]) or reference_source(names)
            c.source = NOTEBOOK_IMPORTS + reference_source(HELPERS) + "\n\n" + src.replace("lab1.ToyGPUError",
                                                                                              "ToyGPUError")
    (tmp_path / "subs" / "planted").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "planted" / LAB.name)
    return tmp_path / "subs"


@pytest.mark.slow
def test_the_grader_grades_each_part_on_its_own(tmp_path):
    """Through the grader (as `make grade`): the devices run in the grader, the learner's driver
    in the sandboxed worker; unseen devices, the reference for the other parts; only the two
    planted parts lose their points."""
    pytest.importorskip("nbgrader")
    from tools.grader import labgrade

    report = labgrade.grade(_submission(tmp_path), labs=[LAB])
    got = {c.grade_id: c.score for c in report["planted"]}
    assert got == {**{k: float(v) for k, v in POINTS.items()}, "identify_device": 0.0, "map_bar1": 0.0}, report


def test_reference_map_bar1_maps_what_it_is_given():
    with lab1.lab_device(12) as dev:
        p = lab1.params(12)
        table = -(-p.reserved_bytes // lab1.PAGE) * lab1.PAGE
        pages = [p.vram_bytes - lab1.PAGE, p.vram_bytes // 2]
        ref.map_bar1(dev, table, pages)
        dev.vram_view[pages[1]:pages[1] + 4] = np.arange(4, dtype=np.uint8)
        assert list(dev.aperture()[lab1.PAGE:lab1.PAGE + 4]) == [0, 1, 2, 3]
