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


def test_the_first_use_leaves_modules_loaded_lazily_unexecuted(tmp_path, monkeypatch):
    """Swapping in the real module must not execute a module importlib.util.LazyLoader left in
    sys.modules (CuPy's cupy.testing would import pytest, for nothing, on a page's first `cp.`)."""
    import importlib.util
    import sys
    import types

    src = tmp_path / "lazy_course_probe.py"
    src.write_text("import sys\nsys.modules[__name__].executed = True\n")
    spec = importlib.util.spec_from_file_location("lazy_course_probe", src)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    lazy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lazy_course_probe", lazy)
    spec.loader.exec_module(lazy)  # registers the lazy module: nothing has run yet
    proxy = gpu.LazyModule("json", needs_gpu=False)
    page = types.ModuleType("fake_page_lazy")
    page.json = proxy
    monkeypatch.setitem(sys.modules, "fake_page_lazy", page)

    assert proxy.dumps([1]) == "[1]"
    import json

    assert page.json is json  # the stand-in was swapped where it was imported
    assert "executed" not in object.__getattribute__(lazy, "__dict__")  # and the lazy module never ran
    assert lazy.executed is True  # (it still runs on its own first use)


def test_a_stand_in_out_of_reach_of_the_swap_still_works_without_sweeping_again(monkeypatch):
    """A namespace outside sys.modules keeps the stand-in; it forwards to the module found once."""
    proxy = gpu.LazyModule("json", needs_gpu=False)
    sweeps = []
    real = gpu.LazyModule._rebind
    monkeypatch.setattr(gpu.LazyModule, "_rebind", lambda self, m: (sweeps.append(m), real(self, m)))
    namespace = {"json": proxy}
    for _ in range(3):
        assert eval("json.loads('[2]')", namespace) == [2]
    assert len(sweeps) == 1


def test_starting_a_notebook_does_not_import_jsonschema():
    """jsonschema comes only when a reference file is validated: where Jupyter is installed it
    imports rfc3987_syntax, which builds a parser (~0.9 s) every kernel would pay at its first cell."""
    import os
    import subprocess
    import sys

    code = ("import sys; from helpers import course; course.start('x', quiet=True); "
            "print(sorted(m for m in ('jsonschema', 'rfc3987_syntax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COURSE_MODE": "replay"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
