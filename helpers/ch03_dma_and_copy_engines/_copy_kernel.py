"""The SM copy kernel that engine_vs_sm.time_kernel_copy times, compiled against numba.cuda itself.

A kernel must name the real `numba.cuda` module (Numba types it at compile time, and its CUDA
simulator swaps that module for a per-thread one while a kernel runs), so this module imports
numba.cuda at the top. It is imported only when the kernel is first launched, after course.start
has chosen the GPU or the simulator; the leading underscore keeps experiments.discover() from
importing it earlier. Defined once here, the kernel is compiled once per process: written inside
time_kernel_copy it was compiled again at every call. Chapter 3's page shows it in the cell that
tools.shown writes from this file.
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def sm_copy(dst, src):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = src[i]
