"""The names a page's code uses (cp, cupyx, cuda) import lazily and fail clearly without CUDA."""

from __future__ import annotations

import pytest

from helpers import course
from helpers.core import gpu
from helpers.core.errors import NoGPUError


def test_cupy_without_a_gpu_raises_no_gpu_error_naming_the_reason(no_gpu):
    with pytest.raises(NoGPUError, match="hidden by the test"):
        course.cp.cuda.Event()
    with pytest.raises(NoGPUError):
        course.cupyx.empty_pinned((4,))


def test_the_proxies_do_not_import_on_dunder_lookups(no_gpu):
    assert not hasattr(gpu.cp, "__wrapped__") and "cupy" in repr(gpu.cp)


def test_numba_cuda_needs_no_gpu_to_be_named():
    assert callable(course.cuda.jit)
