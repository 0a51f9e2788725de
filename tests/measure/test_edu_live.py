"""The edu machine for real: Chapters 2b and 4b's experiments boot Linux under QEMU
(`make test-kernel-lab`; marked kernel_vm). Two boots, 10-40 s each under TCG."""

from __future__ import annotations

import pytest

from helpers.ch02_mmio_and_bars import real_bar
from helpers.ch04_pinned_memory import real_vfio_dma
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.measure import kernel_vm

pytestmark = pytest.mark.kernel_vm


@pytest.fixture(autouse=True)
def _edu_here():
    hint = kernel_vm.missing("edu")
    assert hint is None, hint


def test_edu_answers_through_a_user_space_mapping_live():
    data = real_bar.edu_bar(quick=True, factorials=[0, 7, 13])
    ev = Evidence(real_bar.EXPERIMENT, data, Mode.LIVE, "this machine", why="live")
    f = real_bar.facts(ev)
    assert f["id"] == 0x010000ED and f["inverted"]
    assert f["factorials"] == {0: 1, 7: 5040, 13: 6227020800 % 2**32}
    assert data["vm"]["machine"] == "edu" and data["config"]["bars"][0]["size"] == 1 << 20


def test_dma_goes_through_the_iommu_live():
    data = real_vfio_dma.edu_dma(quick=True, payload=3000, seed=9)
    f = real_vfio_dma.facts(Evidence(real_vfio_dma.EXPERIMENT, data, Mode.LIVE, "this machine", why="live"))
    assert f["driver"] == "vfio-pci" and f["equal"] and f["bytes"] == 3000
    assert "fault addr 0x900000" in f["fault_line"] and f["mask_landed_low"]
    assert f["big_errno"] == 12 and "RLIMIT_MEMLOCK" in f["memlock_line"] and f["small_ok"]
