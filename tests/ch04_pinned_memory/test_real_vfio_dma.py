"""Chapter 4, part 2 (VFIO and the IOMMU in the kernel lab's VM) from its recorded transcript:
the facts the page explains, the exercises' checks, bad input. The live boot is
tests/measure/test_edu_live.py."""

from __future__ import annotations

import pytest

from helpers.ch04_pinned_memory import real_exercises, real_vfio_dma
from helpers.core import experiments, transcript
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode


@pytest.fixture(scope="module")
def ev() -> Evidence:
    t = transcript.load(real_vfio_dma.EXPERIMENT)
    return Evidence(real_vfio_dma.EXPERIMENT, t.data, Mode.REPLAY, t.label, why="recorded transcript")


def test_the_recording_shows_what_the_page_explains(ev):
    f = real_vfio_dma.facts(ev)
    assert f["driver"] == "vfio-pci" and f["equal"] and f["bytes"] == real_vfio_dma.DEFAULT_PAYLOAD
    assert "fault addr 0x900000" in f["fault_line"] and "PTE Write access is not set" in f["fault_line"]
    assert f["mask_landed_low"] and not f["mask_landed_high"]
    assert f["unmap_still_running"] and f["unmap_buffer_untouched"] and "fault addr 0x200000" in f["unmap_fault_line"]
    assert f["vmlck_map_kib"] == 12 and f["root_vmlck"]["vmlck_mapped_kib"] - f["root_vmlck"]["vmlck_before_kib"] == 1024
    assert f["small_ok"] and f["big_errno"] == 12 and "RLIMIT_MEMLOCK (65536) exceeded" in f["memlock_line"]
    assert f["guard"]["refused"]


def test_the_steps_table_names_the_vm(ev):
    table = real_vfio_dma.steps_table(ev)
    assert "REPLAY" in table.caption and "QEMU" in table.caption and len(table.rows) == 14


def test_exercises_accept_the_kernel_and_refuse_wrong_answers(ev):
    assert real_exercises.unmapped_answer("b", ev) is True and real_exercises.unmapped_answer("a", ev) is False
    assert real_exercises.above_mask_answer(0x100000, ev) is True and real_exercises.above_mask_answer(0x10100000, ev) is False
    assert real_exercises.memlock_room_answer(48 * 1024, ev) is True and real_exercises.memlock_room_answer(64 * 1024, ev) is False
    assert real_exercises.pages_charged_answer(lambda off, size: (off + size + 4095) // 4096, ev) is True
    assert real_exercises.pages_charged_answer(lambda off, size: (size + 4095) // 4096, ev) is False  # forgets the offset


def test_parameters_are_checked_before_any_boot():
    exp = experiments.get(real_vfio_dma.EXPERIMENT)
    for bad in ({"payload": 4096}, {"payload": 0}, {"seed": -1}):
        with pytest.raises(InputError):
            exp.check_params(bad)
