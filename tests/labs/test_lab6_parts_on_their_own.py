"""Lab 6's visible checks, part by part (issue 37, item 5), run the way a learner meets them.

The notebook is run cell by cell as its student version has it (hidden tests removed, every
solution region replaced by `raise NotImplementedError()`), except the solution cell(s) of ONE
part, kept as the instructor wrote them; the check cells boot the VM (one boot per version of
the code) and run the driver there. That part's check must pass although every other part is a
stub: the checks of Parts 2-6 use the course's stand-ins (helpers/measure/kernel_vm/guest/lab6_standins.py) for
the parts they build on, lent a device the root harness opened. With every part stubbed, each
check names its own part's function. Then, graded, a driver that calls or copies the stand-ins
gets nothing for those parts: the harness lends a graded child nothing.
"""

from __future__ import annotations

import pytest
from test_lab_parts_on_their_own import run_student

from helpers.labs import lab6
from helpers.measure import kernel_vm
from instructor.labs import lab6 as ref

pytestmark = pytest.mark.kernel_vm
LAB = "lab6_vfio_driver"
#: solution cell -> (the part it is, the check that must then pass on its own)
CELLS = {"open_device": "open", "identify": "identify", "factorial": "factorial", "map_buffer": "map",
         "dma_to_device": "dma", "safe_dma": "refuse", "fault_addresses": "faults"}


@pytest.fixture(autouse=True)
def _edu_here(monkeypatch):
    hint = kernel_vm.missing("edu")
    assert hint is None, hint
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")  # a failed check raises CheckFailed
    monkeypatch.setenv("COURSE_MODE", "replay")


@pytest.mark.parametrize("cell", CELLS)
def test_a_part_alone_passes_its_check_with_every_other_part_stubbed(cell):
    got = run_student(LAB, (cell,))
    check = f"check_{CELLS[cell]}"
    assert got[check] == "", got
    assert all(got[c] for c in got if c != check), f"a stubbed part passed: {got}"  # the stubs fail their checks


def test_with_everything_stubbed_each_check_names_its_own_function():
    got = run_student(LAB, ())
    assert set(got) == {f"check_{p}" for p in lab6.PARTS}, "a check is not listed"
    for part, functions in lab6.PART_FUNCTIONS.items():
        msg = got[f"check_{part}"]
        assert "not written yet" in msg, (part, msg)
        assert any(f"{fn} raises NotImplementedError" in msg for fn in functions), (part, msg)
        others = set(lab6.DRIVER_FUNCTIONS) - set(functions)
        assert not any(f"{fn} raises" in msg for fn in others), (part, msg)


COPIED = {  # a submission that leans on the course's stand-ins instead of doing the part
    "open_device": "def open_device(bdf):\n    import lab6_standins\n    return lab6_standins.open_device(bdf)\n",
    "map_buffer": ("def map_buffer(dev, iova, size):\n    import lab6_standins\n"
                   "    lab6_standins.lend({'buffers': [[iova, size, dev.container]]})\n"
                   "    return lab6_standins.map_buffer(dev, iova, size)\n"),
    "dma_to_device": ("def dma_to_device(dev, iova, count):\n    import lab6_standins\n"
                      "    lab6_standins.lend({'resource0': os.open('/sys/bus/pci/devices/' + edu.find_edu() + "
                      "'/resource0', os.O_RDWR)})\n    lab6_standins.dma_to_device(dev, iova, count)\n"),
    "dma_from_device": ("def dma_from_device(dev, iova, count):\n    import lab6_standins\n"
                        "    lab6_standins.dma_from_device(dev, iova, count)\n"),
}


def test_graded_the_stand_ins_answer_nothing():
    code = ref.reference_code()
    code.update({name: {"source": src} for name, src in COPIED.items()})
    res = ref.grade(code, seed=31337)["parts"]
    leaning = {"open", "map", "dma"}
    assert {p: r["ok"] for p, r in res.items()} == {p: p not in leaning for p in lab6.PARTS}, res
    assert "stand-in" in res["open"]["feedback"] and "PermissionError" in res["dma"]["feedback"], res


NO_COUNT_CHECK = '''
def safe_dma(dev, iova, count, to_ram):
    if not any(start <= iova and iova + count <= start + size for start, (_, size) in dev.mappings.items()):
        raise ValueError("not inside a mapping")
    (dma_from_device if to_ram else dma_to_device)(dev, iova, count)   # lets 0 and 4096 bytes through
'''


def test_a_stand_in_dma_never_refuses_for_the_learner():
    """The stand-in DMA refuses what edu must never see with an error that is not a ValueError, so
    a safe_dma that passes a 4096-byte or empty transfer on does not pass Part 6's check."""
    lab6._CACHE.clear()
    res = lab6.run({"refuse": lab6.examples("refuse")}, {"safe_dma": {"source": NO_COUNT_CHECK}})["parts"]["refuse"]
    assert not res["ok"] and "StandInRefused" in res["feedback"] and "instead of refusing" in res["feedback"], res
