"""DRM ioctl numbers and UAPI struct layouts, checked against values computed from the headers.

The expected numbers below were computed by compiling the kernel's own macros
(include/uapi/asm-generic/ioctl.h) over the structures of include/uapi/drm/drm.h and
drm_mode.h with gcc on x86-64; they are the values libdrm passes to ioctl(2). No DRM
device exists on the course's machines, so the only ioctls really issued here go to
/dev/null and to a pipe, and each test says what that does and does not show.
"""

from __future__ import annotations

import ctypes
import errno
import os

import pytest

from helpers.ch06_gem_ttm_dmabuf import drm

is_64 = ctypes.sizeof(ctypes.c_void_p) == 8
generic = drm._generic_ioctl_arch()

# x86-64 values, computed with gcc from the kernel headers.
EXPECTED_64 = {
    "DRM_IOCTL_VERSION": 0xC0406400,
    "DRM_IOCTL_GEM_CLOSE": 0x40086409,
    "DRM_IOCTL_GET_CAP": 0xC010640C,
    "DRM_IOCTL_PRIME_HANDLE_TO_FD": 0xC00C642D,
    "DRM_IOCTL_PRIME_FD_TO_HANDLE": 0xC00C642E,
    "DRM_IOCTL_MODE_CREATE_DUMB": 0xC02064B2,
    "DRM_IOCTL_MODE_MAP_DUMB": 0xC01064B3,
    "DRM_IOCTL_MODE_DESTROY_DUMB": 0xC00464B4,
    "DMA_BUF_IOCTL_SYNC": 0x40086200,
}


@pytest.mark.skipif(not (is_64 and generic), reason="expected values are for a 64-bit asm-generic ABI")
@pytest.mark.parametrize("name", sorted(EXPECTED_64))
def test_request_numbers_match_the_headers(name):
    assert drm.REQUESTS[name] == EXPECTED_64[name], f"{name} = {drm.REQUESTS[name]:#x}"


def test_ioc_field_positions():
    # one field at a time, so a swapped shift shows up as a specific failure
    assert drm._IOC(0, 0, 1, 0) == 0x1
    assert drm._IOC(0, 1, 0, 0) == 0x100
    assert drm._IOC(0, 0, 0, 1) == 0x10000
    assert drm._IOC(1, 0, 0, 0) == 0x40000000
    assert drm._IOC(2, 0, 0, 0) == 0x80000000
    assert drm._IO("d", 0x1E) == 0x641E  # DRM_IOCTL_SET_MASTER
    assert drm._IOR("d", 0x02, ctypes.c_uint) == 0x80046402  # DRM_IOCTL_GET_MAGIC


def test_decode_round_trips():
    for name, req in drm.REQUESTS.items():
        f = drm.decode_ioctl(req)
        dirs = {"none": 0, "write": 1, "read": 2, "read|write": 3}
        assert drm._IOC(dirs[f["direction"]], f["type"], f["nr"], f["size"]) == req, name


@pytest.mark.parametrize("args, exc", [
    ((4, "d", 0, 0), ValueError),        # direction has 2 bits
    ((3, "d", 256, 0), ValueError),      # nr has 8 bits
    ((3, "d", 0, 1 << 14), ValueError),  # size has 14 bits
    ((3, "dd", 0, 0), ValueError),       # type is one character
    ((3, 1.5, 0, 0), TypeError),
    ((3, "d", -1, 0), ValueError),
])
def test_ioc_rejects_fields_that_do_not_fit(args, exc):
    with pytest.raises(exc):
        drm._IOC(*args)


@pytest.mark.skipif(not is_64, reason="layout of the 64-bit ABI")
@pytest.mark.parametrize("struct, size, offsets", [
    (drm.DrmVersion, 64, {"version_major": 0, "version_patchlevel": 8, "name_len": 16, "name": 24,
                          "date_len": 32, "date": 40, "desc_len": 48, "desc": 56}),
    (drm.DrmGetCap, 16, {"capability": 0, "value": 8}),
    (drm.DrmGemClose, 8, {"handle": 0, "pad": 4}),
    (drm.DrmPrimeHandle, 12, {"handle": 0, "flags": 4, "fd": 8}),
    (drm.DrmModeCreateDumb, 32, {"height": 0, "width": 4, "bpp": 8, "flags": 12, "handle": 16,
                                 "pitch": 20, "size": 24}),
    (drm.DrmModeMapDumb, 16, {"handle": 0, "pad": 4, "offset": 8}),
    (drm.DrmModeDestroyDumb, 4, {"handle": 0}),
])
def test_struct_layouts(struct, size, offsets):
    assert ctypes.sizeof(struct) == size
    for field, off in offsets.items():
        assert getattr(struct, field).offset == off, field


def test_request_size_field_equals_struct_size():
    # the size bits are what the kernel uses to copy the argument in and out (drm_ioctl)
    pairs = [(drm.DRM_IOCTL_VERSION, drm.DrmVersion), (drm.DRM_IOCTL_GET_CAP, drm.DrmGetCap),
             (drm.DRM_IOCTL_MODE_CREATE_DUMB, drm.DrmModeCreateDumb),
             (drm.DRM_IOCTL_MODE_MAP_DUMB, drm.DrmModeMapDumb),
             (drm.DRM_IOCTL_PRIME_HANDLE_TO_FD, drm.DrmPrimeHandle)]
    for req, st in pairs:
        assert drm.decode_ioctl(req)["size"] == ctypes.sizeof(st)


@pytest.mark.skipif(not generic, reason="asm-generic ioctl encoding only")
def test_drm_request_reaches_the_kernel_and_a_non_drm_file_refuses_it():
    """Shows only that Python accepts the >2**31 request number and the kernel answers for
    /dev/null with ENOTTY, which the helper turns into a DRMError naming the call. It does
    not show that any DRM driver would accept the call: none exists on this machine."""
    fd = os.open("/dev/null", os.O_RDWR)
    try:
        with pytest.raises(drm.DRMError) as info:
            drm.ioctl(fd, drm.DRM_IOCTL_VERSION, drm.DrmVersion(), "DRM_IOCTL_VERSION")
        assert info.value.errno == errno.ENOTTY
        assert "DRM_IOCTL_VERSION" in str(info.value) and "ENOTTY" in str(info.value)
    finally:
        os.close(fd)


def test_ioctl_wrapper_copies_the_kernels_answer_back():
    """FIONREAD on a pipe (a real ioctl that writes an int back) exercises the wrapper's
    in/out path: the struct passed in must hold the kernel's answer afterwards."""
    fionread = 0x541B  # asm-generic/ioctls.h; a legacy number with no size field

    class Int(ctypes.Structure):
        _fields_ = [("value", ctypes.c_int)]

    r, w = os.pipe()
    try:
        os.write(w, b"12345")
        assert drm.ioctl(r, fionread, Int(), "FIONREAD").value == 5
    finally:
        os.close(r)
        os.close(w)


def test_ioctl_checks_argument_size_against_request():
    size = ctypes.sizeof(drm.DrmVersion)
    with pytest.raises(ValueError, match=f"encodes a {size}-byte argument"):
        drm.ioctl(0, drm.DRM_IOCTL_VERSION, drm.DrmGetCap(), "x")
    with pytest.raises(TypeError):
        drm.ioctl(0, drm.DRM_IOCTL_VERSION, b"\0" * 64)
    with pytest.raises(ValueError):
        drm.ioctl(-1, drm.DRM_IOCTL_VERSION, drm.DrmVersion())


def test_missing_device_is_a_clear_error(tmp_path):
    with pytest.raises(drm.NoDRMDeviceError):
        drm.DRMDevice(str(tmp_path / "card9"))
    p = drm.probe(str(tmp_path / "nodri"))
    assert not p.available and "does not exist" in p.reason


def test_regular_file_is_not_a_drm_device(tmp_path):
    f = tmp_path / "card0"
    f.write_bytes(b"")
    with drm.DRMDevice(str(f)) as dev:
        with pytest.raises(drm.DRMError) as info:
            dev.version()
        assert info.value.errno == errno.ENOTTY
    assert dev.fd == -1  # closed by the context manager
    with pytest.raises(ValueError, match="closed"):
        dev.get_cap(drm.DRM_CAP_DUMB_BUFFER)


def test_fake_dri_dir_lists_nodes_without_opening_them(tmp_path):
    d = tmp_path / "dri"
    d.mkdir()
    (d / "card1").write_bytes(b"")
    (d / "renderD128").write_bytes(b"")
    nodes = drm.list_nodes(str(d), str(tmp_path / "sys"))
    assert [(os.path.basename(n.path), n.kind) for n in nodes] == [("card1", "primary"), ("renderD128", "render")]


def test_fdinfo_parser_on_a_real_fd():
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        info = drm.read_fdinfo(fd)
    finally:
        os.close(fd)
    assert info["pos"] == "0" and "flags" in info
    assert drm.parse_fdinfo("size:\t4096\nexp_name:\tx\n\n") == {"size": "4096", "exp_name": "x"}


def test_prime_flags_and_pattern_validation():
    assert drm.DRM_CLOEXEC == os.O_CLOEXEC and drm.DRM_RDWR == os.O_RDWR
    p = drm.pattern(600)
    assert len(p) == 600 and p[0] == 0x5A and p[1] == (31 + 0x5A) & 0xFF and len(set(p)) == 256
    with pytest.raises(ValueError):
        drm.pattern(-1)
    with pytest.raises(ValueError):
        drm.dma_buf_sync(0, 0)


def test_cuda_dmabuf_rows_and_input_checks():
    """The NVIDIA export itself needs a GPU (never run on this machine); here only the
    argument checks and the table built from a result dict are tested."""
    from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf

    with pytest.raises(ValueError):
        cuda_dmabuf.export_device_memory(1000)
    rows = dict(cuda_dmabuf.summary_rows({"dma_buf_supported": 0, "dma_buf_mmap_supported": None,
                                          "dma_buf_mmap_supported_error": "CUDA_ERROR_INVALID_VALUE",
                                          "export": "not attempted"}))
    assert rows["CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED"] == "0"
    assert "CUDA_ERROR_INVALID_VALUE" in rows["CU_DEVICE_ATTRIBUTE_DMA_BUF_MMAP_SUPPORTED"]
    with pytest.raises(TypeError):
        cuda_dmabuf.summary_rows([])


def test_cuda_dmabuf_explains_outcomes_from_the_data():
    """The verdict text follows the result: a refused mmap with the kernel-internal errno
    524 is named ENOTSUPP (libc has no name for it), other outcomes read differently."""
    from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf

    base = {"dma_buf_supported": 1, "export": "ok", "lseek_end": 4096,
            "fdinfo": {"exp_name": "nv_dmabuf", "size": "4096"}}
    refused = dict(base, mmap={"ok": False, "errno": 524, "message": "Unknown error 524"})
    text = cuda_dmabuf.explain(refused)
    assert "ENOTSUPP" in text and "nv_dma_buf_mmap" in text and "4096-byte" in text
    assert "ENOTSUPP" in dict(cuda_dmabuf.summary_rows(refused))["mmap(fd)"]
    other = dict(base, mmap={"ok": False, "errno": 1, "message": "Operation not permitted"})
    assert "EPERM" in cuda_dmabuf.explain(other) and "ENOTSUPP" not in cuda_dmabuf.explain(other)
    mapped = dict(base, mmap={"ok": True, "matches_fill": False})
    assert "do NOT hold" in cuda_dmabuf.explain(mapped)
    assert "no export was attempted" in cuda_dmabuf.explain({"dma_buf_supported": 0})
    failed = dict(base, export="cuMemGetHandleForAddressRange failed: CUDA_ERROR_NOT_SUPPORTED")
    assert "CUDA_ERROR_NOT_SUPPORTED" in cuda_dmabuf.explain(failed)


def test_cuda_dmabuf_views_take_evidence_and_say_when_there_is_none(tmp_path, monkeypatch):
    """Replay of the committed recording shows a table captioned with its machine; a machine
    without the recording raises naming the fix, or, where the experiment is declared optional
    there, gives a table and a report that say so."""
    from conftest import declare_optional, write_reference

    from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf
    from helpers.core.errors import ReferenceDataError
    from helpers.core.mode import Mode
    from helpers.course import Context

    ev = Context(Mode.REPLAY, "no GPU here", gpu_name=None, reference_name="h100-pcie").get("dmabuf.cuda_export")
    assert ev.ok and "REPLAY: recorded on" in cuda_dmabuf.table(ev).caption
    assert cuda_dmabuf.report(ev).startswith("the export (REPLAY: recorded on")
    write_reference(tmp_path, "no-dmabuf", drop=("dmabuf.cuda_export",))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(ReferenceDataError, match="--only dmabuf.cuda_export"):
        Context(Mode.REPLAY, "no GPU here", gpu_name=None, reference_name="no-dmabuf").get("dmabuf.cuda_export")
    declare_optional(monkeypatch, "dmabuf.cuda_export")
    none = Context(Mode.REPLAY, "no GPU here", gpu_name=None, reference_name="no-dmabuf").get("dmabuf.cuda_export")
    assert not none.ok
    rows = dict(cuda_dmabuf.table(none).rows)
    assert rows["outcome"].startswith("none") and "helpers.record --only dmabuf.cuda_export" in rows["to record it"]
    assert rows["why not live"] == "no GPU here"
    assert cuda_dmabuf.report(none).startswith("neither a live GPU nor a recording here")


def test_cuda_dmabuf_without_bindings_falls_back_to_the_recording(monkeypatch):
    """Live, a missing cuda-bindings package skips the export, and the recording is shown saying why."""
    import builtins

    from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf
    from helpers.core import gpu
    from helpers.core.mode import Mode
    from helpers.course import Context

    real_import = builtins.__import__

    def no_bindings(name, *a, **kw):
        if name.startswith("cuda.bindings"):  # `from cuda.bindings import driver`
            raise ImportError("No module named 'cuda.bindings'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(gpu, "cupy", lambda: object())
    monkeypatch.setattr(gpu, "release_pools", lambda: None)
    monkeypatch.setattr(builtins, "__import__", no_bindings)
    ev = Context(Mode.LIVE, "test", gpu_name="Stand-in GPU",
                 reference_name="h100-pcie").get("dmabuf.cuda_export", nbytes=4096)
    assert ev.mode is Mode.REPLAY and "cuda-bindings" in ev.why and ev.ok
    assert "REPLAY" in cuda_dmabuf.table(ev).caption
