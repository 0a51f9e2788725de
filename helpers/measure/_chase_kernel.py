"""The pointer chase's kernel (helpers.measure.gpu_chase), compiled against numba.cuda itself.

A kernel must name the real `numba.cuda` module (Numba types it at compile time, and its CUDA
simulator swaps that module for a per-thread one while a kernel runs), so this module imports
numba.cuda at the top. gpu_chase imports it only when the chase is first launched, after
course.start has chosen the GPU or the simulator. Chapter 2's page shows `chase` in the cell
that tools.shown writes from this file.
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def chase(nxt, j, n, out, sm):
    if cuda.blockIdx.x == sm:  # one block per SM; only block `sm` reads
        for _ in range(n):
            j = nxt[j]  # the next address is the value just read: nothing can overlap
        out[0] = j


@cuda.jit
def gate(ns):
    """Keep the GPU busy for about `ns` nanoseconds (one thread), so that work launched from
    Python behind it is already queued when it ends: what follows is then timed without the
    interpreter's launch cost (tens of microseconds), as a launch from C nearly is."""
    for _ in range(ns // 1000):
        cuda.nanosleep(1000)
