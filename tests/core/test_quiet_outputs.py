"""The fresh-run quiet rule (tools/checks/quiet.py) that nbval (notebooks/conftest.py) and the book's
executed chapters (tests/site/test_executed_notebooks.py) apply to every chapter cell:
it must flag each kind of noise issue 38 names, and pass quiet output."""

from __future__ import annotations

import pytest

from tools.checks import quiet


def stream(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def result(text: str) -> dict:
    return {"output_type": "execute_result", "data": {"text/plain": text}}


@pytest.mark.parametrize("out,kind", [
    (stream("✘ 1.5 a pinned copy loop: not yet. the host buffers are still pageable\n"), "✘"),
    (result("False"), "stray False"),
    (result("True"), "stray True"),
    (stream("/x/numba/cuda/dispatcher.py:536: NumbaPerformanceWarning: \x1b[1mGrid size 1 will likely result in "
            "GPU under-utilization\x1b[0m\n", "stderr"), "warning text"),
    (stream("RuntimeWarning: overflow encountered in scalar add\n", "stderr"), "warning text"),
    (stream("\x1b[1mbold\x1b[0m\n"), "ANSI"),
])
def test_noise_is_found(out, kind):
    found = quiet.noise([out])
    assert any(kind in f for f in found), found


def test_quiet_output_passes():
    outs = [stream("… 1.5 a pinned copy loop: not answered yet — write your code in the cell above, then run it\n"),
            stream("✔ 2.1 ns per 4-byte load: correct\n"), result("Table(…)"), result("0.5"),
            {"output_type": "display_data", "data": {"text/plain": "<Figure>"}}]
    assert quiet.noise(outs) == []


def test_deliberate_launch_silences_only_numbas_performance_advice():
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    from helpers.core import gpu

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with gpu.deliberate_launch():
            warnings.warn("Grid size 1 will likely result in GPU under-utilization", NumbaPerformanceWarning, stacklevel=1)
            warnings.warn("something else", RuntimeWarning, stacklevel=1)
        warnings.warn("Host array used in CUDA kernel", NumbaPerformanceWarning, stacklevel=1)  # outside: still warns
    assert [type(w.message) for w in seen] == [RuntimeWarning, NumbaPerformanceWarning]


def test_deliberate_launch_silences_numba_cudas_own_warning_class():
    """On a real GPU the launch advice comes from numba-cuda's dispatcher as
    numba.cuda.core.errors.NumbaPerformanceWarning, a class of its own (not numba.core's, nor a
    subclass of it): the H100 runs of 2026-11-28 printed it in seven exercise cells."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning as CoreWarning
    from numba.cuda.core.errors import NumbaPerformanceWarning as CudaWarning

    from helpers.core import gpu

    assert not issubclass(CudaWarning, CoreWarning)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with gpu.deliberate_launch():
            warnings.warn("Grid size 2 will likely result in GPU under-utilization", CudaWarning, stacklevel=1)
        warnings.warn("Grid size 2 will likely result in GPU under-utilization", CudaWarning, stacklevel=1)
    assert [type(w.message) for w in seen] == [CudaWarning]
