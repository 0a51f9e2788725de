"""Chapter 1's experiments live on a real GPU (skipped with a reason elsewhere). They check
what the mechanisms guarantee, not speeds: timing figures live in recorded data."""

import pytest
from conftest import needs_gpu

from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, syscalls

pytestmark = [needs_gpu, pytest.mark.gpu]


def test_cuda_start_up_maps_the_driver_nodes():
    data = driver_maps.record(4 << 20)
    first, init = data["stages"][0], data["stages"][1]
    assert driver_maps.nvidia_mappings(first["lines"]) == []  # import alone opens no node
    roles = driver_maps.summary(driver_maps.nvidia_mappings(init["lines"]))
    assert "control" in roles and "device" in roles
    for m in driver_maps.nvidia_mappings(init["lines"]):
        assert m.shared  # MAP_SHARED: the GPU and the process see the same pages
        if m.role in ("control", "device"):
            assert m.offset == 0  # nvidia_mmap_helper refuses any other page offset


def test_pinned_and_managed_allocations_grow_the_address_space():
    n = 64 << 20  # the size the recorded experiment uses
    data = driver_maps.record(n)
    init, pinned, managed = data["stages"][1:4]
    assert pinned["mapped_bytes"] - init["mapped_bytes"] >= n
    new = driver_maps.new_mappings(pinned["lines"], managed["lines"])
    assert any(m.role == "uvm" and m.size >= n and m.offset == m.start for m in new), new


@pytest.mark.skipif(not syscalls.strace_available(), reason="strace missing: " + syscalls.INSTALL_HINT)
def test_census_gpu_round_trips_need_no_driver_syscalls():
    data = syscalls.census((5, 50), progress=False)
    assert all(r["child"]["data_ok"] for r in data["runs"])
    for name in ("ioctl", "read", "write", "mmap"):
        assert not syscalls.growth(data, name).grows, syscalls.table_rows(data, (name,))


def test_blocking_sync_flag_is_accepted():
    data = cpu_time.measure(8 << 20, 2, "blocking")
    assert data["set_flags_rc"] == 0 and len(data["runs"]) == 4
    for r in data["runs"]:
        assert r["wall"] > 0 and r["user"] >= 0 and r["sys"] >= 0


@pytest.mark.skipif(not syscalls.strace_available(), reason="strace missing: " + syscalls.INSTALL_HINT)
def test_no_driver_ioctl_during_the_copy_loop():
    from helpers.ch01_path_of_a_copy import ioctls

    data = ioctls.trace_census(20)
    assert data["markers"] == 2
    assert ioctls.phase_total(data, "start-up") > 0
    loop = [r for r in data["phases"]["during the loop"] if r[0].startswith("/dev/nvidia")]
    assert loop == []
