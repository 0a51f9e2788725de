"""Sizes are validated with errors that name the problem; buffers free deterministically."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.core.errors import NoGPUError
from helpers.measure import host_memory
from helpers.measure.host_memory import HostBuffer, check_nbytes


@given(st.integers(max_value=0))
def test_non_positive_sizes_rejected(n):
    with pytest.raises(ValueError, match="positive number of bytes"):
        check_nbytes(n, "probe")


@given(st.one_of(st.floats(), st.text(max_size=4), st.booleans(), st.none(), st.just(np.float64(4.0))))
def test_non_integers_rejected(n):
    with pytest.raises(TypeError, match="whole number of bytes"):
        check_nbytes(n, "probe")


def test_huge_size_names_available_memory():
    avail = host_memory.available_host_bytes()
    with pytest.raises(ValueError, match="more than 50% of this machine's available memory"):
        check_nbytes(avail, "huge buffer")


def test_numpy_integers_accepted():
    assert check_nbytes(np.int64(4096)) == 4096


def test_pageable_buffer_without_gpu():
    with HostBuffer(1 << 16, "pageable", fill=7) as b:
        assert b.array.shape == (1 << 16,) and b.array.dtype == np.uint8
        assert int(b.array.sum()) == 7 << 16
        assert "pageable" in repr(b)
    assert b.array is None and "closed" in repr(b)
    b.close()  # idempotent


@pytest.mark.parametrize("kind", ["pinned", "registered"])
def test_pinned_kinds_need_gpu(no_gpu, kind):
    with pytest.raises(NoGPUError, match="needs a usable CUDA GPU"):
        HostBuffer(4096, kind)


def test_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of"):
        HostBuffer(4096, "wired")


def test_meminfo_without_line(tmp_path):
    p = tmp_path / "meminfo"
    p.write_text("MemTotal: 1 kB\n")
    with pytest.raises(RuntimeError, match="no MemAvailable"):
        host_memory.available_host_bytes(str(p))


def test_locked_bytes_of_this_process_is_a_number():
    assert host_memory.pinned_bytes_of_process() >= 0
