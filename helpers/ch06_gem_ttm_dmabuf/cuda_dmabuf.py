"""Export CUDA device memory as a dma-buf (live), or show a recorded export (replay).

NVIDIA's CUDA stack does not use GEM or TTM: device memory belongs to the proprietary
resource manager inside nvidia.ko, reached through ioctls on /dev/nvidiactl and
/dev/nvidia0. nvidia-drm.ko is a DRM driver for the graphics stack (a render node, GEM objects,
PRIME import/export, and display when loaded with modeset=1), but CUDA memory never becomes one of
its GEM objects. What
CUDA *does* offer to the rest of the kernel is dma-buf: ``cuMemGetHandleForAddressRange``
with ``CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`` returns a file descriptor another driver (an
RDMA NIC, an NVMe driver, a second GPU) can import with ``dma_buf_attach``. The exporter is
kernel-open/nvidia/nv-dmabuf.c in NVIDIA/open-gpu-kernel-modules; its ``nv_dma_buf_mmap``
returns -ENOTSUPP unless ``priv->map_attrs.can_mmap`` is set. From the 580 releases on,
``rm_dma_buf_dup_mem_handle`` (src/nvidia/arch/nvalloc/unix/src/osapi.c) sets it only on
GPUs without dedicated framebuffer memory (``PDB_PROP_GPU_ZERO_FB``), and ``nv_dma_buf_create``
clears it unless the exporting client asked for mmap (``bAllowMmap``); releases up to 575
return -ENOTSUPP unconditionally. ENOTSUPP (524) is a kernel-internal errno
(include/linux/errno.h) that leaks to user space with no name there.

``export_dmabuf`` is the measuring code the page shows (the default of the experiment's
``code`` parameter); ``export_device_memory`` wraps it with the device's attributes and is
registered as experiment ``dmabuf.cuda_export`` so the course's recorder captures it on a GPU. A notebook asks for it with
``ctx.get("dmabuf.cuda_export")``: live on a GPU, else the recording; ``table`` and ``report``
show whichever it is, and invent nothing when a machine has no recording of it.
"""

from __future__ import annotations

import errno
import mmap
import os

from helpers.ch06_gem_ttm_dmabuf.drm import read_fdinfo
from helpers.core import gpu, validate
from helpers.core.errors import InputError, InputTypeError, SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp
from helpers.measure import driver_api
from helpers.presentation import figures

EXPERIMENT_ID = "dmabuf.cuda_export"
EXPORT_BYTES = 2 << 20
MAX_EXPORT_BYTES = 1 << 30


# Kernel-internal errnos (include/linux/errno.h, "should never be seen by user programs");
# user-space libc has no name or message for them.
KERNEL_ERRNOS = {512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND", 515: "ENOIOCTLCMD",
                 516: "ERESTART_RESTARTBLOCK", 521: "EBADHANDLE", 522: "ENOTSYNC", 523: "EBADCOOKIE",
                 524: "ENOTSUPP", 525: "ETOOSMALL", 526: "ESERVERFAULT", 527: "EBADTYPE"}


def _errname(code: int | None) -> str:
    """errno's symbolic name, including the kernel-internal ones libc does not know."""
    if code in errno.errorcode:
        return errno.errorcode[code]
    return KERNEL_ERRNOS.get(code, f"errno {code}")


def whole_pages(nbytes, what: str = "nbytes") -> int:
    """A size in bytes from one page to 1 GiB that is a whole number of pages (a dma-buf is
    made of pages): the value, or InputTypeError / InputError naming it."""
    n = validate.byte_size(nbytes, what, mmap.PAGESIZE, MAX_EXPORT_BYTES)
    if n % mmap.PAGESIZE:
        raise InputError(f"{what} must be a positive multiple of the page size ({mmap.PAGESIZE}), got {n}")
    return n


def look_at_fd(fd: int, nbytes: int, fill: int) -> dict:
    """What a dma-buf fd is: its size (lseek), its /proc fdinfo and link, and whether mmap works."""
    out: dict = {"lseek_end": os.lseek(fd, 0, os.SEEK_END)}
    os.lseek(fd, 0, os.SEEK_SET)
    out["fdinfo"] = read_fdinfo(fd)
    out["proc_fd_link"] = os.readlink(f"/proc/self/fd/{fd}")
    try:
        m = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError as exc:
        out["mmap"] = {"ok": False, "errno": exc.errno, "errname": _errname(exc.errno),
                       "message": os.strerror(exc.errno) if exc.errno else str(exc)}
    else:
        try:
            head = m[:4096]
            out["mmap"] = {"ok": True, "matches_fill": head == bytes([fill]) * len(head)}
        finally:
            m.close()
    return out


def export_dmabuf(nbytes: int, fill: int) -> dict:
    """Fill nbytes of cudaMalloc'd device memory, export them as a dma-buf fd, look at the fd."""
    cu = driver_api.driver()                        # cuda.bindings.driver: the CUDA driver API
    ptr = cp.cuda.runtime.malloc(nbytes)            # device memory, page-aligned
    try:
        cp.cuda.runtime.memset(ptr, fill, nbytes)
        cp.cuda.runtime.deviceSynchronize()
        err, fd = cu.cuMemGetHandleForAddressRange(
            ptr, nbytes, cu.CUmemRangeHandleType.CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return {"export": f"cuMemGetHandleForAddressRange failed: {err.name}"}
        try:
            return {"export": "ok", "aligned": ptr % 4096 == 0, **look_at_fd(int(fd), nbytes, fill)}
        finally:
            os.close(int(fd))
    finally:
        cp.cuda.runtime.free(ptr)


def device_attributes() -> dict:
    """The device's DMA_BUF_SUPPORTED and DMA_BUF_MMAP_SUPPORTED attributes (None + an error
    name where the driver or the bindings do not know one)."""
    cu = driver_api.driver()
    cp.cuda.runtime.free(cp.cuda.runtime.malloc(256))  # a current primary context
    dev = driver_api.check(cu.cuDeviceGet(cp.cuda.Device().id), "cuDeviceGet")
    out: dict = {}
    for key, attr in (("dma_buf_supported", "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED"),
                      ("dma_buf_mmap_supported", "CU_DEVICE_ATTRIBUTE_DMA_BUF_MMAP_SUPPORTED")):
        if not hasattr(cu.CUdevice_attribute, attr):
            out[key], out[key + "_error"] = None, "attribute unknown to this cuda-bindings"
            continue
        err, val = cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, attr), dev)
        if err != cu.CUresult.CUDA_SUCCESS:
            out[key], out[key + "_error"] = None, err.name  # e.g. a driver that does not know it
        else:
            out[key] = int(val)
    return out


def export_device_memory(nbytes: int = EXPORT_BYTES, fill: int = 0x5A, code=export_dmabuf) -> dict:
    """The device's dma-buf attributes, then `code` (export_dmabuf) when the device supports it.

    Returns a JSON-ready dict: DMA_BUF_SUPPORTED / DMA_BUF_MMAP_SUPPORTED, the export's
    result, the dma-buf's size (lseek) and /proc/self/fdinfo lines, and what ``mmap`` of the
    fd did (errno and message, or whether the bytes read through the mapping match the fill).
    Raises NoGPUError without a usable GPU, and SkipExperiment without the cuda-bindings
    package (the course then replays the recording).
    """
    nbytes = whole_pages(nbytes)
    fill = validate.whole_number(fill, "fill (a byte value)", 0, 255)
    gpu.cupy()  # NoGPUError, saying why, without a usable GPU
    try:
        from cuda.bindings import driver  # noqa: F401
    except ImportError as exc:
        raise SkipExperiment(f"the dma-buf export needs the cuda-bindings package (pip install "
                             f"cuda-bindings): {exc}") from None
    out: dict = {"nbytes": nbytes, "page_size": mmap.PAGESIZE, **device_attributes()}
    if not out["dma_buf_supported"]:
        out["export"] = "not attempted: the device reports no dma-buf support"
        return out
    out.update(code(nbytes, fill))
    return out


@experiment(EXPERIMENT_ID, chapter=6, title="dma-buf export of CUDA device memory: fdinfo and mmap",
            needs=(GPU,), params={"nbytes": validate.Rule(whole_pages, "a byte size from one page to 1 GiB, a whole number of pages"), "fill": validate.count(0, 255)})
def record_export(quick: bool, nbytes: int = EXPORT_BYTES, fill: int = 0x5A, code=export_dmabuf) -> dict:
    return export_device_memory(nbytes, fill, code)


def table(ev: Evidence) -> figures.Table:
    """The export's outcome (live or recorded) with its provenance in the caption; without a
    recording, a table that says so and how to make one (nothing is invented in its place)."""
    if not ev.ok:
        return figures.Table([("outcome", "none: no live GPU run and no recording, so nothing is shown"),
                              ("why not live", ev.why), ("to record it", ev.missing)], ("item", "value"),
                             caption="no dma-buf export of device memory to show")
    size = f"{ev.data['nbytes'] / 2**20:g} MiB" if "nbytes" in ev.data else "device memory"
    return figures.Table(summary_rows(ev.data), ("item", "value"),
                         caption=ev.caption(f"dma-buf export of {size} of device memory"))


def report(ev: Evidence) -> str:
    """One paragraph: where the outcome comes from and what it means, or that there is none."""
    if not ev.ok:
        return "neither a live GPU nor a recording here, so no outcome to report."
    return f"{ev.caption('the export')}: {explain(ev.data)}"


def summary_rows(result: dict) -> list[tuple[str, str]]:
    """(item, value) rows for a Table, from export_device_memory's (or a recording's) dict."""
    if not isinstance(result, dict):
        raise InputTypeError(f"result must be a dict, got {type(result).__name__}")
    rows = [("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED", str(result.get("dma_buf_supported"))),
            ("CU_DEVICE_ATTRIBUTE_DMA_BUF_MMAP_SUPPORTED",
             f"not answered: {result['dma_buf_mmap_supported_error']} (this driver does not accept the attribute)"
             if result.get("dma_buf_mmap_supported_error") else str(result.get("dma_buf_mmap_supported"))),
            ("cuMemGetHandleForAddressRange(DMA_BUF_FD)", str(result.get("export")))]
    if "lseek_end" in result:
        rows.append(("lseek(fd, 0, SEEK_END)", f"{result['lseek_end']} bytes"))
    if "proc_fd_link" in result:
        rows.append(("/proc/self/fd/N ->", result["proc_fd_link"]))
    for k, v in (result.get("fdinfo") or {}).items():
        rows.append((f"fdinfo {k}", v))
    mm = result.get("mmap")
    if mm:
        rows.append(("mmap(fd)", "mapped; bytes match the fill" if mm.get("ok") and mm.get("matches_fill")
                     else "mapped; bytes differ" if mm.get("ok")
                     else f"refused: {_errname(mm.get('errno'))} (errno {mm.get('errno')}; strerror: {mm.get('message')})"))
    return rows


def explain(result: dict) -> str:
    """What the export's outcome means, decided from the result (live or recorded)."""
    if not isinstance(result, dict):
        raise InputTypeError(f"result must be a dict, got {type(result).__name__}")
    if not result.get("dma_buf_supported"):
        return ("The device reports no dma-buf support (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = "
                f"{result.get('dma_buf_supported')}), so no export was attempted.")
    if result.get("export") != "ok":
        return f"The device reports dma-buf support, but the export failed: {result.get('export')}."
    fdinfo = result.get("fdinfo") or {}
    name = fdinfo.get("exp_name", "?")
    text = (f"The export worked: a {result.get('lseek_end')}-byte dma-buf whose exporter is '{name}'"
            + (" (the name nv_dma_buf_create in nv-dmabuf.c gives it). " if name == "nv_dmabuf" else ". "))
    mm = result.get("mmap") or {}
    if mm.get("ok"):
        same = "hold" if mm.get("matches_fill") else "do NOT hold"
        return text + f"mmap of the fd succeeded, and the mapped bytes {same} the pattern written by the GPU."
    code = mm.get("errno")
    if code == 524:
        return text + ("mmap of the fd was refused with errno 524, the kernel-internal ENOTSUPP that "
                       "nv_dma_buf_mmap returns when the export does not allow CPU mapping (can_mmap is "
                       "false): the GPU has dedicated framebuffer memory, or the exporter did not ask for "
                       "mmap. The fd is for other devices to import, not for the CPU to read.")
    return text + f"mmap of the fd was refused with {_errname(code)} (errno {code}): {mm.get('message')}."
