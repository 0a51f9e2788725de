"""The C/CUDA cross-check: an independent program that times what the course times (pinned
copies, small copies, a pointer chase over mapped host and device memory, SM copies) with the
CUDA runtime directly.

Its source (bwcheck.cu, chain.h) is package data, so an installed course builds it as a checkout
does: `binary()` compiles it with nvcc into build/bwcheck (`make bwcheck` builds the same file),
unless BWCHECK names a built one. Chapter 3's crosscheck module runs it beside the course's own
measurement.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.core import config
from helpers.core.errors import SkipExperiment

SOURCE = Path(__file__).with_name("bwcheck.cu")
HEADER = Path(__file__).with_name("chain.h")  # the chains gpu_chase also builds, in C
NVCC_TIMEOUT_S = 300


def binary() -> Path:
    """Path to the compiled bwcheck, building it with nvcc when it is missing or older than its
    source (BWCHECK overrides).

    Without nvcc and a built binary the recorder skips the experiment (SkipExperiment); a
    notebook never gets here, since the evidence contract checks the NVCC need first."""
    given = config.bwcheck_setting()
    if given:
        return given
    out = config.BWCHECK_BUILT
    newest = max(p.stat().st_mtime for p in (SOURCE, HEADER))
    if out.exists() and out.stat().st_mtime >= newest:
        return out
    nvcc = config.tool_on_path("nvcc")
    if not nvcc:
        raise SkipExperiment(f"nvcc not found and {out} not built (run `make bwcheck`)")
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([nvcc, "-O2", "-o", str(out), str(SOURCE)], check=True, timeout=NVCC_TIMEOUT_S)
    return out
