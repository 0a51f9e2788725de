"""Lab 6 graded for real: planted drivers run in the booted kernel (`make test-kernel-lab`).

Six boots of the edu machine, about 25-40 s each under TCG: the reference scores every part;
one bug costs only its own part; a driver with every part wrong fails every part; a driver
hard-coded to the published examples, never touching the device, scores nothing on its parts;
an empty driver scores nothing; a driver that reaches for the harness's plan (frames, gc, the
plan file) finds nothing to run.
"""

from __future__ import annotations

import pytest

from helpers.labs import lab6
from helpers.measure import kernel_vm
from instructor.labs import lab6 as ref

pytestmark = pytest.mark.kernel_vm
SEED = 424242


@pytest.fixture(autouse=True)
def _edu_here():
    hint = kernel_vm.missing("edu")
    assert hint is None, hint


def _with(**sources: str) -> dict:
    """The reference driver with some functions replaced by planted source."""
    code = ref.reference_code()
    code.update({name: {"source": src} for name, src in sources.items()})
    return code


def _passed(result: dict) -> dict:
    return {p: r["ok"] for p, r in result["parts"].items()}


WRONG = {  # one plausible mistake per part
    "open_device": '''
def open_device(bdf):
    container = os.open("/dev/vfio/vfio", os.O_RDWR)
    group = os.open(f"/dev/vfio/{edu.iommu_group(bdf)}", os.O_RDWR)
    edu.ioctl_ptr(group, edu.VFIO_GROUP_SET_CONTAINER, container.to_bytes(4, "little"))
    # forgot VFIO_SET_IOMMU: the kernel will not hand out the device
    device = edu.ioctl_ptr(group, edu.VFIO_GROUP_GET_DEVICE_FD, bdf.encode() + b"\\0")
    return edu.VfioDevice(container, group, device, None, config_offset=0)
''',
    "check_alive": '''
def check_alive(dev, value):
    return ~value & 0xFFFFFFFF      # what the device would answer, without asking it
''',
    "factorial": '''
def factorial(dev, n):
    return math.factorial(n)          # right number, but the device never computed it
''',
    "map_buffer": '''
def map_buffer(dev, iova, size):
    buf = mmap.mmap(-1, size)
    dev.buffers[iova] = buf
    dev.mappings[iova] = (edu.ctypes.addressof(edu.ctypes.c_char.from_buffer(buf)), size)
    return dev.mappings[iova][0]            # never told the IOMMU
''',
    "dma_from_device": '''
def dma_from_device(dev, iova, count):
    dev.bar.write64(edu.REG_DMA_SRC, edu.DMA_BUFFER)
    dev.bar.write64(edu.REG_DMA_DST, iova)
    dev.bar.write64(edu.REG_DMA_CNT, count)
    dev.bar.write64(edu.REG_DMA_CMD, edu.DMA_RUN | edu.DMA_TO_RAM)   # returns before edu's timer fires
''',
    "safe_dma": '''
def safe_dma(dev, iova, count, to_ram):
    if not 0 < count < edu.DMA_BUFFER_SIZE:
        raise ValueError("count")
    (dma_from_device if to_ram else dma_to_device)(dev, iova, count)   # never checks the mappings
''',
    "fault_addresses": '''
def fault_addresses(lines):
    return [int(w, 16) for line in lines for w in line.split() if w.startswith("0x")]   # every hex word
''',
}

HARD_CODED = {  # reproduces what the published examples expect, never touching the device
    "identify": "def identify(dev):\n    return 0x010000ED\n",
    "check_alive": ("def check_alive(dev, value):\n    return " + repr(
        {v: ~v & 0xFFFFFFFF for v in lab6.examples("identify")["values"] + [lab6.examples("open")["alive"]]})
        + ".get(value, 0)\n"),
    "factorial": "def factorial(dev, n):\n    return {0: 1, 1: 1, 2: 2, 3: 6, 4: 24, 5: 120, 6: 720, 7: 5040, 8: 40320, " +
                 "9: 362880, 10: 3628800, 11: 39916800, 12: 479001600}[n]\n",
    "map_buffer": "def map_buffer(dev, iova, size):\n    return 0x7f0000000000\n",
    "dma_to_device": "def dma_to_device(dev, iova, count):\n    return None\n",
    "dma_from_device": "def dma_from_device(dev, iova, count):\n    return None\n",
    "safe_dma": "def safe_dma(dev, iova, count, to_ram):\n    raise ValueError('refused')\n",
    "fault_addresses": "def fault_addresses(lines):\n    return " + repr(lab6.examples("faults")["iovas"]) + "\n",
}


def test_the_reference_scores_every_part():
    res = ref.grade(ref.reference_code(), seed=SEED)
    assert all(_passed(res).values()), res["parts"]


def test_one_bug_costs_its_own_part_only():
    res = ref.grade(_with(factorial=WRONG["factorial"]), seed=SEED)
    assert _passed(res) == {p: p != "factorial" for p in lab6.PARTS}, res["parts"]
    assert "register 0x08 does not hold the result" in res["parts"]["factorial"]["feedback"]


def test_a_wrong_driver_fails_every_part():
    res = ref.grade(_with(**WRONG), seed=SEED)
    assert not any(_passed(res).values()), res["parts"]


def test_a_hard_coded_driver_scores_nothing_on_its_parts():
    res = ref.grade(_with(**HARD_CODED), seed=SEED)
    hard = {p for p, fns in lab6.PART_FUNCTIONS.items() if set(fns) & set(HARD_CODED)}
    assert hard == set(lab6.PARTS) - {"open"}
    assert not any(ok for p, ok in _passed(res).items() if p in hard), res["parts"]


FRAMES = '''
def factorial(dev, n):
    import gc, sys
    plan = None
    f = sys._getframe(1)
    while f is not None and plan is None:
        plan = next((v for v in f.f_locals.values() if isinstance(v, dict) and "reference" in v), None)
        f = f.f_back
    if plan is None:
        plan = next((o for o in gc.get_objects() if isinstance(o, dict) and "reference" in o), None)
    if plan is None:
        try:
            import json
            plan = json.load(open("/work/plan.json"))
        except OSError:
            return -1
    exec(plan["reference"]["factorial"]["source"], globals())
    return globals()["factorial"](dev, n)
'''


def test_an_empty_driver_scores_nothing_in_the_vm():
    res = ref.grade({}, seed=SEED)
    assert not any(_passed(res).values()), res["parts"]
    assert "not defined" in res["parts"]["factorial"]["feedback"]


def test_the_harness_frames_and_plan_are_out_of_reach():
    res = ref.grade(_with(factorial=FRAMES), seed=SEED)
    assert _passed(res) == {p: p != "factorial" for p in lab6.PARTS}, res["parts"]
