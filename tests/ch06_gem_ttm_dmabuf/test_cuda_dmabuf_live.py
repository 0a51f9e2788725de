"""Live dma-buf export of CUDA device memory (GPU machine only; skipped with a reason
elsewhere). They check what the export must satisfy whatever the driver decides about
mmap: the dma-buf's size is the range asked for, its fdinfo names it, nothing leaks."""

import pytest
from conftest import needs_gpu

from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf
from helpers.core import gpu

pytestmark = needs_gpu


def test_export_reports_attributes_and_a_consistent_dmabuf():
    nbytes = 4 << 20
    r = cuda_dmabuf.export_device_memory(nbytes)
    assert r["nbytes"] == nbytes and r["dma_buf_supported"] in (0, 1)
    if not r["dma_buf_supported"]:
        assert r["export"].startswith("not attempted")
        pytest.skip("this GPU/driver reports no dma-buf support; the export path cannot run")
    assert r["export"] == "ok", r["export"]
    assert r["lseek_end"] == nbytes
    assert int(r["fdinfo"]["size"]) == nbytes
    assert r["fdinfo"].get("exp_name"), r["fdinfo"]
    assert r["proc_fd_link"].startswith("/dmabuf:") or "dmabuf" in r["proc_fd_link"]
    mm = r["mmap"]
    assert mm["ok"] in (True, False) and (mm["ok"] or mm["errno"])
    rows = dict(cuda_dmabuf.summary_rows(r))
    assert rows["cuMemGetHandleForAddressRange(DMA_BUF_FD)"] == "ok"


def test_export_frees_what_it_takes():
    cp = gpu.cupy()
    cp.get_default_memory_pool().free_all_blocks()
    before = cp.cuda.runtime.memGetInfo()[0]
    for _ in range(3):
        cuda_dmabuf.export_device_memory(16 << 20)
    assert abs(cp.cuda.runtime.memGetInfo()[0] - before) < (8 << 20)


def test_bad_sizes_are_refused_before_touching_the_gpu():
    for bad in (0, -4096, 4097, 1.5):
        with pytest.raises((ValueError, TypeError)):
            cuda_dmabuf.export_device_memory(bad)
