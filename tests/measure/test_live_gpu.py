"""Live checks on a real GPU (run by `make test` on the GPU machine; skipped with a reason
elsewhere). They check behaviour, not speed: timing claims live in recorded data."""

import numpy as np
import pytest
from conftest import needs_gpu

from helpers import course
from helpers.ch00_your_machine import first_copy
from helpers.core import gpu
from helpers.measure import host_memory, transfers
from helpers.measure.host_memory import HostBuffer

pytestmark = needs_gpu


@pytest.mark.parametrize("kind", host_memory.HOST_KINDS)
@pytest.mark.parametrize("direction", transfers.DIRECTIONS)
def test_copy_moves_the_bytes_and_times_them(kind, direction):
    cp = gpu.cupy()
    n = 1 << 20
    r = transfers.measure_copy(n, direction, kind, reps=3, warmup=1)
    assert len(r.times_s) == 3 and all(t > 0 for t in r.times_s)
    with HostBuffer(n, kind, fill=0x5A) as h:  # and the data really arrives
        d = cp.empty(n, dtype=cp.uint8)
        cp.cuda.runtime.memcpy(d.data.ptr, h.ptr, n, 1)
        assert int((d == 0x5A).sum()) == n


def test_device_size_limit_is_checked():
    free = gpu.free_device_bytes()
    with pytest.raises(ValueError, match="GPU's free memory"):
        host_memory.check_nbytes(free, "too big", host=False, device=True)


def test_pinned_memory_is_released():
    before = gpu.cupy().cuda.runtime.memGetInfo()[0]
    for kind in ("pinned", "registered"):
        with HostBuffer(64 << 20, kind):
            pass
    stats = course.finish(quiet=True)
    assert stats["device_used_bytes"] == 0 and stats["locked_host_bytes"] == 0
    assert abs(gpu.cupy().cuda.runtime.memGetInfo()[0] - before) < (8 << 20)


def test_first_copy_measures_all_four():
    ev = course.start("test", quiet=True).get("transfers.pinned_vs_pageable", lo=4 << 20, hi=4 << 20)
    assert ev.live
    size, bw = first_copy.bandwidths(ev, 4 << 20)
    assert size == 4 << 20 and len(bw) == 4 and all(np.isfinite(v) and v > 0 for v in bw.values())
