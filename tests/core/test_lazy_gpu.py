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


def test_a_kernel_using_cuda_grid_compiles_after_the_first_use_swaps_the_module(monkeypatch):
    """Numba types `cuda.grid` from the kernel's globals: after first use they hold numba.cuda."""
    import sys
    import types

    import numpy as np

    proxy = gpu.LazyModule("numba.cuda", needs_gpu=False)
    page = types.ModuleType("fake_page")
    page.cuda = proxy
    monkeypatch.setitem(sys.modules, "fake_page", page)
    exec("@cuda.jit\ndef double(x):\n    i = cuda.grid(1)\n    if i < x.size:\n        x[i] *= 2\n", page.__dict__)
    import numba.cuda

    assert page.cuda is numba.cuda
    if numba.cuda.is_available() or numba.config.ENABLE_CUDASIM:
        x = np.arange(8.0)
        page.double[1, 8](x)
        assert list(x) == [2.0 * i for i in range(8)]
