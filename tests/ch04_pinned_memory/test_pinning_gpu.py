"""Chapter 4 on a real GPU (skipped with a reason elsewhere): pinning really pins and really
unpins, the driver's own answers to bad requests, and zero-copy results that are exact.
Behaviour only: timings live in the recorded data."""

import numpy as np
import pytest
from conftest import needs_gpu

from helpers.ch04_pinned_memory import memlock, pinning, write_combined, zero_copy
from helpers.ch04_pinned_memory.pinning import (
    PAGE,
    PinnedAlloc,
    PinningError,
    PinRequestError,
    Region,
    Registration,
)
from helpers.core import gpu

pytestmark = [needs_gpu, pytest.mark.gpu]


@pytest.mark.parametrize("flags", list(pinning.ALLOC_FLAGS))
def test_hostalloc_pins_and_frees(flags):
    with PinnedAlloc(1 << 20, flags, fill=7) as p:
        assert pinning.is_pinned(p.ptr) and int(p.array[::4096].sum()) == 7 * 256
        ptr = p.ptr
    assert p.ptr is None and not pinning.is_pinned(ptr)


def test_mapped_memory_has_a_device_pointer():
    with PinnedAlloc(1 << 20, "mapped") as p:
        assert pinning.device_pointer(p.ptr) == p.ptr  # unified addressing on 64-bit Linux
    with Region(1 << 20) as r, pytest.raises(PinRequestError, match="not pinned"):
        pinning.device_pointer(r.ptr)


@pytest.mark.parametrize("kind", pinning.REGION_KINDS)
def test_register_each_region_kind(kind):
    with Region(1 << 20, kind) as r:
        assert not pinning.is_pinned(r.ptr)
        try:
            reg = Registration(r.ptr, r.nbytes)
        except PinningError as exc:  # a filesystem may refuse long-term pins: the error must say so
            assert "cudaHostRegister" in str(exc)
            return
        with reg:
            assert pinning.is_pinned(r.ptr)
        assert not pinning.is_pinned(r.ptr)


def test_register_rejects_bad_pointers_before_the_driver():
    with Region(2 * PAGE) as r:
        with pytest.raises(PinRequestError, match="page-aligned"):
            Registration(r.ptr + 64, PAGE)
        with pytest.raises(PinRequestError, match="not mapped"):
            Registration(r.ptr, 1 << 40)


def test_driver_answers_are_cuda_error_names():
    ans = pinning.driver_answers(1 << 16)
    assert ans["the same region registered twice"].startswith("cudaError")
    assert ans["unregister of a region never registered"].startswith("cudaError")
    assert ans["unmapped (an mmap already munmap'ed)"] != "ok"


def test_pin_cost_is_positive_and_releases():
    before = pinning.pinned_bytes_of_process()
    r = pinning.pin_cost(1 << 20, reps=2)
    assert all(r[k] > 0 for k in ("alloc", "free", "register", "unregister", "touch"))
    assert pinning.pinned_bytes_of_process() == before


def test_memlock_probe_live():
    p = memlock.memlock_probe(1 << 20, 4 << 20, timeout_s=120)
    assert p["cuda"] == "ok" and p["hostAlloc"] and p["hostRegister"]


def test_time_copy_from_registered_region():
    with Region(4 << 20) as r, Registration(r.ptr, r.nbytes):
        assert pinning.time_copy(r.ptr, r.nbytes, "h2d", reps=2) > 0


def test_write_combined_measure():
    row = write_combined.measure(1 << 20, "write_combined")
    assert all(row[m] > 0 for m in write_combined.METRICS)


@pytest.mark.parametrize("framework", ["cupy", "numba"])
def test_zero_copy_results_are_checked(framework):
    fn = zero_copy.measure_cupy if framework == "cupy" else zero_copy.measure_numba
    rows = fn(1 << 20, reps=2)  # raises WrongResultError if any sum is off
    assert [r["pattern"] for r in rows] == list(zero_copy.PATTERNS)
    assert all(r["zero_copy_s"] > 0 and r["copy_then_compute_s"] > 0 for r in rows)
    gpu.release_pools()


def test_numba_check_live():
    assert set(zero_copy.numba_check()) == set(zero_copy.PATTERNS)


def test_nothing_stays_pinned():
    for kind in pinning.ALLOC_FLAGS:
        with PinnedAlloc(8 << 20, kind):
            pass
    cp = gpu.cupy()
    a = np.zeros(1, np.uint8)
    assert int(cp.cuda.runtime.pointerGetAttributes(a.ctypes.data).type) != int(cp.cuda.runtime.memoryTypeHost)
