"""The kernel lab for real: boot Linux under QEMU (`make test-kernel-lab`; marked kernel_vm).

Three boots, about 10-25 s each under TCG on a 2-core machine (more when it is busy). Without
QEMU these tests fail and say what to install: `make test` runs them only where the kernel
lab is installed (KERNEL_LAB_TESTS=0 leaves them out, and says so).
"""

from __future__ import annotations

import pytest

from helpers.ch06_gem_ttm_dmabuf import real_drm, real_exercises, real_fences, real_ttm
from helpers.core import config

pytestmark = pytest.mark.kernel_vm


@pytest.fixture(autouse=True)
def _qemu_here():
    hint = config.qemu_missing()
    assert hint is None, hint


def test_gem_walkthrough_runs_in_the_vm():
    data = real_drm.gem_prime(quick=True)
    assert data["vm"]["accel"] in ("TCG", "KVM")
    for dev in data["devices"]:
        f = real_drm.facts(dev)
        assert f["handles"] == [1, 2] and f["import_same_handle"] and f["second_close"] == "Invalid argument"


def test_the_model_evicts_what_the_kernel_evicts_live():
    flips = [[0, 1, 2, 3, 4, 5, 2, 6, 0, 7, 1]]
    data = real_ttm.eviction(quick=True, buffers=8, flips=flips)
    run = data["runs"][0]
    assert run["flips"] == flips[0]
    assert sum(len(t["evicted"]) for t in real_ttm.timeline(run)) >= 4
    assert real_ttm.compare(run) == []
    assert real_ttm.intact(run)


def test_fences_block_until_signalled_live():
    data = real_fences.implicit_sync(quick=True, delay_ms=150, never_signalled=False)
    f = real_fences.facts(data)
    assert data["vm"]["machine"] == "fences" and "never" not in f
    assert f["write_fence_blocks_readers"] and f["write_fence_blocks_writers"] and f["write_sync_file_blocks"]
    assert not f["read_fence_blocks_readers"] and f["read_fence_blocks_writers"]
    assert f["after_read_ready"] and f["after_write_ready"] and f["import_ready_after_signal"]
    assert all(w["woke"] for w in f["wakeups"]) and f["syncobj_create"] == "EOPNOTSUPP"
    assert real_exercises.check_rule(real_fences.kernel_rule, data) == []
