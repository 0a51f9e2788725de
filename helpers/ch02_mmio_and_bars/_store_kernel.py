"""The posted-store kernel that gpu_reads.store_ns_per_write times, compiled against numba.cuda itself.

A kernel must name the real `numba.cuda` module (Numba types it at compile time, and its CUDA
simulator swaps that module for a per-thread one while a kernel runs), so this module imports
numba.cuda at the top. It is imported only when the kernel is first launched, after course.start
has chosen the GPU or the simulator; the leading underscore keeps experiments.discover() from
importing it earlier. Defined once here, the kernel is compiled once per process. Chapter 2's page
shows it in the cell that tools.shown writes from this file.
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def store(dst, n):
    for i in range(n):
        dst[(i * 32) % dst.size] = i
