"""Chapter 5 on a real GPU: pointer attributes, managed migration, the sandboxed crashes and the
right ways. Skipped with a reason without a GPU; they check behaviour, not speed."""

import signal

import numpy as np
import pytest
from conftest import needs_gpu

from helpers.ch05_unified_memory import managed, pointer_access, uva
from helpers.core import gpu
from helpers.measure import driver_api

pytestmark = [needs_gpu, pytest.mark.gpu]


def test_pointer_attributes_name_each_kind():
    rows = {r["kind"]: r for r in uva.query_all(1 << 16)}
    assert rows["device"]["runtime"]["type"] == 2
    assert rows["pinned"]["runtime"]["type"] == 1
    assert rows["managed"]["runtime"]["type"] == 3
    assert rows["pageable"]["runtime"]["type"] == 0
    assert rows["managed"]["driver"]["IS_MANAGED"] == 1
    assert rows["device"]["driver"]["MEMORY_TYPE"] == 2
    # the CPU may not access a device allocation: no mapping, or one without read rights
    m = rows["device"]["maps"]
    assert m is None or "r" not in m["perms"]
    assert uva.attribute_rows({"pointers": list(rows.values())})


def test_device_attributes_are_read():
    attrs = uva.device_attributes(0)
    assert attrs["unifiedAddressing"] == 1 and attrs["managedMemory"] == 1
    assert uva.explain_attributes(attrs)


@pytest.mark.parametrize("mode", managed.MODES)
def test_each_migration_mode_delivers_the_data(mode):
    n = 16 << 20
    r = managed.measure_one(n, mode)
    assert r["bad_words"] == 0, "the GPU read words the CPU had not written"
    assert r["host_checksum"] == n // 4096, "the CPU read back something else"
    assert r["kernel_first_s"] > 0 and r["kernel_second_s"] > 0
    assert managed.rates(r)["to_gpu_gbps"] is None or managed.rates(r)["to_gpu_gbps"] > 0


def test_prefetch_and_advise_calls_work():
    cp = gpu.cupy()
    m = cp.cuda.memory.ManagedMemory(1 << 20)
    used = managed.prefetch(m.ptr, 1 << 20, 0)
    managed.advise(m.ptr, 1 << 20, "read_mostly", 0)
    managed.prefetch(m.ptr, 1 << 20, managed.CPU)
    cp.cuda.runtime.deviceSynchronize()
    assert "Prefetch" in used or "memPrefetchAsync" in used


def test_oversubscription_is_refused_live():
    free = gpu.free_device_bytes()
    with pytest.raises(managed.OversubscriptionError, match="refused"):
        managed.check_managed_nbytes(free)


def test_host_write_through_device_pointer_is_a_sigsegv():
    o = pointer_access.host_write_through_device_pointer()
    assert o.status == "signal" and o.signal_number == signal.SIGSEGV, o.stderr_tail
    assert "device_ptr" in o.results
    assert pointer_access.parent_context_ok()


def test_gpu_read_of_malloc_pointer():
    o = pointer_access.gpu_reads_malloc_pointer()
    assert o.status != "timeout"
    if o.results.get("pageableMemoryAccess") == 0:
        assert "illegal" in (o.results.get("error") or "").lower(), o.results
    else:
        assert o.results.get("value") == 84
    assert pointer_access.parent_context_ok(), "the child's fault must not touch the parent's context"


def test_correct_ways_all_work():
    ways = pointer_access.correct_ways(1 << 16)
    errors = [w for w in ways if "error" in w]
    assert not errors, errors
    for w in ways:
        if "gpu_sum" in w:
            assert w["gpu_sum"] == w["expected_sum"], w
        assert w.get("cpu_sees_gpu_writes", w.get("intact")) is True, w


def test_driver_api_examples():
    for fn in (driver_api.example1_device_roundtrip, driver_api.example3_pinned, driver_api.example2_done_right):
        r = fn(1024)
        assert r["intact"] and r["first16"] == list(range(16))
    assert np.isfinite(driver_api.bindings_major())
