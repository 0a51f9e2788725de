"""The chapter's Numba kernel, compiled against numba.cuda itself.

A kernel must name the real `numba.cuda` module (Numba types it at compile time, and its CUDA
simulator swaps that module for a per-thread one while a kernel runs), so this module imports
numba.cuda at the top. It is imported only when a kernel is launched, after course.start has
chosen the GPU or the simulator; the leading underscore keeps experiments.discover() from
importing it earlier. The chapter page shows this kernel in a cell
(tools.shown writes that cell from this file).
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def sum_into(x, out):
    """Each thread adds its strided share of x into out[0] (one atomic add per thread)."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    acc = 0.0
    for i in range(start, x.size, stride):
        acc += x[i]
    cuda.atomic.add(out, 0, acc)
