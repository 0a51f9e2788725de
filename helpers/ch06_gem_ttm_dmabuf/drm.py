"""Real DRM ioctls from Python: version, capabilities, dumb buffers, fake-offset mmap, PRIME.

Every GPU driver in the kernel's DRM subsystem (amdgpu, i915/xe, nouveau, virtio-gpu,
simpledrm, vkms, nvidia-drm, ...) exposes device nodes under ``/dev/dri``: ``card*``
(the primary node, with modesetting) and ``renderD*`` (render nodes, no modesetting).
User space talks to them with ``ioctl(2)``; this module makes those calls with
``fcntl.ioctl`` and ``ctypes`` structures laid out exactly like the kernel's UAPI headers:

* ``include/uapi/drm/drm.h``      struct drm_version, drm_get_cap, drm_gem_close, drm_prime_handle
* ``include/uapi/drm/drm_mode.h`` struct drm_mode_create_dumb, drm_mode_map_dumb, drm_mode_destroy_dumb
* ``include/uapi/asm-generic/ioctl.h`` the _IOC encoding of request numbers

The kernel side of each call: ``drm_version`` and ``drm_getcap`` (drivers/gpu/drm/drm_ioctl.c),
``drm_mode_create_dumb_ioctl`` / ``drm_mode_mmap_dumb_ioctl`` (drivers/gpu/drm/drm_dumb_buffers.c),
``drm_gem_close_ioctl`` (drivers/gpu/drm/drm_gem.c), ``drm_prime_handle_to_fd_ioctl``
(drivers/gpu/drm/drm_prime.c), and the fake mmap offset from ``drm_gem_create_mmap_offset``
(drm_gem.c) through the ``drm_vma_offset_manager`` (drivers/gpu/drm/drm_vma_manager.c).

Nothing here is simulated: on a machine without ``/dev/dri`` (the course's CI and its GPU
machine, whose NVIDIA driver creates no DRM node for CUDA) the calls raise
:class:`NoDRMDeviceError` and the notebook says so. Every resource (fd, GEM handle, mapping,
dma-buf fd) is released by a context manager, also when a step fails.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import glob
import mmap
import os
import platform
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from helpers.core.errors import CourseError, InputError, InputTypeError

# --------------------------------------------------------------------------------------------
# The _IOC encoding (include/uapi/asm-generic/ioctl.h). x86, arm64, riscv and most other
# architectures use it; powerpc, mips, sparc and alpha use 13 size bits and 3 direction bits
# (arch/*/include/uapi/asm/ioctl.h), so numbers computed here would be wrong there.
# --------------------------------------------------------------------------------------------
IOC_NRBITS = 8
IOC_TYPEBITS = 8
IOC_SIZEBITS = 14
IOC_DIRBITS = 2
IOC_NRSHIFT = 0
IOC_TYPESHIFT = IOC_NRSHIFT + IOC_NRBITS  # 8
IOC_SIZESHIFT = IOC_TYPESHIFT + IOC_TYPEBITS  # 16
IOC_DIRSHIFT = IOC_SIZESHIFT + IOC_SIZEBITS  # 30
IOC_NONE = 0
IOC_WRITE = 1  # user space writes the argument, the kernel reads it
IOC_READ = 2  # the kernel writes the argument back

_GENERIC_IOCTL_ARCHES = ("x86_64", "i386", "i686", "aarch64", "arm64", "armv7l", "armv6l",
                         "riscv64", "s390x", "loongarch64")


def _type_code(type_: int | str) -> int:
    if isinstance(type_, str):
        if len(type_) != 1:
            raise InputError(f"ioctl type must be one character (like 'd' for DRM), got {type_!r}")
        type_ = ord(type_)
    if not isinstance(type_, int) or isinstance(type_, bool):
        raise InputTypeError(f"ioctl type must be an int or a 1-char str, got {type(type_).__name__}")
    return type_


def _IOC(direction: int, type_: int | str, nr: int, size: int) -> int:
    """The request number the kernel's ``_IOC(dir, type, nr, size)`` macro computes.

    Bits 0-7 hold the command number, 8-15 the driver's type letter, 16-29 the size of the
    argument structure and 30-31 the direction (which way the kernel copies the argument).
    Every field is range-checked, because a silently truncated field is a different ioctl.
    """
    t = _type_code(type_)
    for name, value, bits in (("direction", direction, IOC_DIRBITS), ("type", t, IOC_TYPEBITS),
                              ("nr", nr, IOC_NRBITS), ("size", size, IOC_SIZEBITS)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputTypeError(f"_IOC {name} must be an int, got {type(value).__name__}")
        if not 0 <= value < (1 << bits):
            raise InputError(f"_IOC {name}={value} does not fit in {bits} bits")
    return (direction << IOC_DIRSHIFT) | (t << IOC_TYPESHIFT) | (nr << IOC_NRSHIFT) | (size << IOC_SIZESHIFT)


def _size_of(argtype) -> int:
    if isinstance(argtype, int) and not isinstance(argtype, bool):
        return argtype
    try:
        return ctypes.sizeof(argtype)
    except TypeError:
        raise InputTypeError(f"ioctl argument type must be a ctypes type or a size in bytes, got {argtype!r}") from None


def _IO(type_: int | str, nr: int) -> int:
    """``_IO``: an ioctl with no argument."""
    return _IOC(IOC_NONE, type_, nr, 0)


def _IOR(type_: int | str, nr: int, argtype) -> int:
    """``_IOR``: the kernel writes a ``argtype`` back to user space."""
    return _IOC(IOC_READ, type_, nr, _size_of(argtype))


def _IOW(type_: int | str, nr: int, argtype) -> int:
    """``_IOW``: user space passes a ``argtype`` in; nothing is copied back."""
    return _IOC(IOC_WRITE, type_, nr, _size_of(argtype))


def _IOWR(type_: int | str, nr: int, argtype) -> int:
    """``_IOWR``: the argument is copied in, and the kernel's answer copied back out."""
    return _IOC(IOC_READ | IOC_WRITE, type_, nr, _size_of(argtype))


def decode_ioctl(request: int) -> dict:
    """Split a request number into its fields: direction, type, nr, size (for teaching)."""
    if not isinstance(request, int) or isinstance(request, bool):
        raise InputTypeError(f"request must be an int, got {type(request).__name__}")
    if not 0 <= request < (1 << 32):
        raise InputError(f"request {request:#x} is not a 32-bit ioctl number")
    d = (request >> IOC_DIRSHIFT) & ((1 << IOC_DIRBITS) - 1)
    names = {0: "none", 1: "write", 2: "read", 3: "read|write"}
    t = (request >> IOC_TYPESHIFT) & 0xFF
    return {"direction": names[d], "type": chr(t) if 32 <= t < 127 else t,
            "nr": (request >> IOC_NRSHIFT) & 0xFF, "size": (request >> IOC_SIZESHIFT) & ((1 << IOC_SIZEBITS) - 1)}


# --------------------------------------------------------------------------------------------
# UAPI structures (field for field as in include/uapi/drm/drm.h and drm_mode.h).
# ctypes lays them out with the platform's C ABI, so pointer and size_t fields of
# struct drm_version come out 8 bytes wide on 64-bit machines, 4 on 32-bit ones, as in C.
# --------------------------------------------------------------------------------------------
class DrmVersion(ctypes.Structure):
    """struct drm_version: driver version numbers and three user buffers the kernel fills."""

    _fields_ = [("version_major", ctypes.c_int), ("version_minor", ctypes.c_int),
                ("version_patchlevel", ctypes.c_int),
                ("name_len", ctypes.c_size_t), ("name", ctypes.c_void_p),
                ("date_len", ctypes.c_size_t), ("date", ctypes.c_void_p),
                ("desc_len", ctypes.c_size_t), ("desc", ctypes.c_void_p)]


class DrmGemClose(ctypes.Structure):
    """struct drm_gem_close: the GEM handle to drop from this file's handle table."""

    _fields_ = [("handle", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class DrmGetCap(ctypes.Structure):
    """struct drm_get_cap: a DRM_CAP_* number in, its value out."""

    _fields_ = [("capability", ctypes.c_uint64), ("value", ctypes.c_uint64)]


class DrmPrimeHandle(ctypes.Structure):
    """struct drm_prime_handle: GEM handle and flags in, dma-buf file descriptor out."""

    _fields_ = [("handle", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("fd", ctypes.c_int32)]


class DrmModeCreateDumb(ctypes.Structure):
    """struct drm_mode_create_dumb: height, width, bpp, flags in; handle, pitch, size out."""

    _fields_ = [("height", ctypes.c_uint32), ("width", ctypes.c_uint32), ("bpp", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("handle", ctypes.c_uint32), ("pitch", ctypes.c_uint32),
                ("size", ctypes.c_uint64)]


class DrmModeMapDumb(ctypes.Structure):
    """struct drm_mode_map_dumb: a handle in, the fake mmap offset out."""

    _fields_ = [("handle", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("offset", ctypes.c_uint64)]


class DrmModeDestroyDumb(ctypes.Structure):
    """struct drm_mode_destroy_dumb: the handle of the dumb buffer to destroy."""

    _fields_ = [("handle", ctypes.c_uint32)]


class DmaBufSync(ctypes.Structure):
    """struct dma_buf_sync (include/uapi/linux/dma-buf.h): bracket CPU access to a dma-buf."""

    _fields_ = [("flags", ctypes.c_uint64)]


DRM_IOCTL_BASE = "d"
DRM_IOCTL_VERSION = _IOWR(DRM_IOCTL_BASE, 0x00, DrmVersion)
DRM_IOCTL_GEM_CLOSE = _IOW(DRM_IOCTL_BASE, 0x09, DrmGemClose)
DRM_IOCTL_GET_CAP = _IOWR(DRM_IOCTL_BASE, 0x0C, DrmGetCap)
DRM_IOCTL_PRIME_HANDLE_TO_FD = _IOWR(DRM_IOCTL_BASE, 0x2D, DrmPrimeHandle)
DRM_IOCTL_PRIME_FD_TO_HANDLE = _IOWR(DRM_IOCTL_BASE, 0x2E, DrmPrimeHandle)
DRM_IOCTL_MODE_CREATE_DUMB = _IOWR(DRM_IOCTL_BASE, 0xB2, DrmModeCreateDumb)
DRM_IOCTL_MODE_MAP_DUMB = _IOWR(DRM_IOCTL_BASE, 0xB3, DrmModeMapDumb)
DRM_IOCTL_MODE_DESTROY_DUMB = _IOWR(DRM_IOCTL_BASE, 0xB4, DrmModeDestroyDumb)
DMA_BUF_IOCTL_SYNC = _IOW("b", 0, DmaBufSync)

DRM_CAP_DUMB_BUFFER = 0x1
DRM_CAP_DUMB_PREFERRED_DEPTH = 0x3
DRM_CAP_DUMB_PREFER_SHADOW = 0x4
DRM_CAP_PRIME = 0x5
DRM_PRIME_CAP_IMPORT = 0x1
DRM_PRIME_CAP_EXPORT = 0x2
DRM_CLOEXEC = os.O_CLOEXEC  # drm.h: #define DRM_CLOEXEC O_CLOEXEC
DRM_RDWR = os.O_RDWR  # drm.h: #define DRM_RDWR O_RDWR
DMA_BUF_SYNC_READ = 1 << 0
DMA_BUF_SYNC_WRITE = 2 << 0
DMA_BUF_SYNC_RW = DMA_BUF_SYNC_READ | DMA_BUF_SYNC_WRITE
DMA_BUF_SYNC_START = 0 << 2
DMA_BUF_SYNC_END = 1 << 2

#: name -> request number, for tables in the notebook and the encoding tests.
REQUESTS = {
    "DRM_IOCTL_VERSION": DRM_IOCTL_VERSION,
    "DRM_IOCTL_GEM_CLOSE": DRM_IOCTL_GEM_CLOSE,
    "DRM_IOCTL_GET_CAP": DRM_IOCTL_GET_CAP,
    "DRM_IOCTL_PRIME_HANDLE_TO_FD": DRM_IOCTL_PRIME_HANDLE_TO_FD,
    "DRM_IOCTL_PRIME_FD_TO_HANDLE": DRM_IOCTL_PRIME_FD_TO_HANDLE,
    "DRM_IOCTL_MODE_CREATE_DUMB": DRM_IOCTL_MODE_CREATE_DUMB,
    "DRM_IOCTL_MODE_MAP_DUMB": DRM_IOCTL_MODE_MAP_DUMB,
    "DRM_IOCTL_MODE_DESTROY_DUMB": DRM_IOCTL_MODE_DESTROY_DUMB,
    "DMA_BUF_IOCTL_SYNC": DMA_BUF_IOCTL_SYNC,
}


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
class DRMError(CourseError):
    """A DRM ioctl failed; the message names the call, the errno and what it usually means."""

    def __init__(self, message: str, errno_: int | None = None):
        super().__init__(message)
        self.errno = errno_


class NoDRMDeviceError(DRMError):
    """This machine has no /dev/dri node (no DRM driver bound to any device)."""


class DRMPermissionError(DRMError):
    """A /dev/dri node exists but this user may not open it (or may not make this call)."""


_HINTS = {
    errno.EACCES: "permission denied: on a card* node some calls need DRM master or an "
                  "authenticated client; render nodes (renderD*) refuse modesetting calls such "
                  "as dumb buffers (drm_ioctl_permit in drivers/gpu/drm/drm_ioctl.c)",
    errno.EPERM: "operation not permitted for this client",
    errno.EINVAL: "the driver rejected an argument (or does not implement this call)",
    errno.ENOSYS: "the driver does not implement this call",
    errno.EOPNOTSUPP: "the driver does not support this call (for example, no dumb buffers "
                      "on a render-only driver)",
    errno.ENOTTY: "this file is not a DRM device (the ioctl number is unknown to its driver)",
    errno.ENOMEM: "the driver could not allocate memory for the buffer",
    errno.ENOENT: "no such GEM handle in this file's handle table",
    errno.EBADF: "the file descriptor is closed",
}


def _fail(call: str, exc: OSError) -> DRMError:
    hint = _HINTS.get(exc.errno or 0, "")
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    cls = DRMPermissionError if exc.errno in (errno.EACCES, errno.EPERM) else DRMError
    return cls(f"{call} failed: {name} ({os.strerror(exc.errno or 0)}){'; ' + hint if hint else ''}",
               exc.errno)


def ioctl(fd: int, request: int, arg: ctypes.Structure, call: str = "ioctl") -> ctypes.Structure:
    """Issue one ioctl with a ctypes structure as its in/out argument; return the structure.

    ``fcntl.ioctl`` passes a pointer to a copy of the structure's bytes and copies the
    kernel's answer back into ``arg`` (mutate flag). Errors become :class:`DRMError` with
    the errno's usual meaning for DRM.
    """
    if not isinstance(fd, int) or isinstance(fd, bool) or fd < 0:
        raise InputError(f"fd must be an open file descriptor (int >= 0), got {fd!r}")
    if not isinstance(request, int) or isinstance(request, bool):
        raise InputTypeError(f"request must be an int (an ioctl number), got {type(request).__name__}")
    if not isinstance(arg, ctypes.Structure):
        raise InputTypeError(f"arg must be a ctypes.Structure instance, got {type(arg).__name__}")
    expected = (request >> IOC_SIZESHIFT) & ((1 << IOC_SIZEBITS) - 1)
    if expected and expected != ctypes.sizeof(arg):
        raise InputError(f"{call}: request {request:#x} encodes a {expected}-byte argument, "
                         f"but {type(arg).__name__} is {ctypes.sizeof(arg)} bytes")
    try:
        fcntl.ioctl(fd, request, arg, True)
    except OSError as exc:
        raise _fail(call, exc) from None
    return arg


# --------------------------------------------------------------------------------------------
# Finding devices (reads /dev and /sys only; opens nothing)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class DRMNode:
    """One /dev/dri node and what sysfs says about it."""

    path: str
    kind: str  # "primary" (card*) or "render" (renderD*)
    driver: str | None  # the kernel driver bound to the parent device, e.g. "amdgpu"
    pci_id: str | None  # vendor:device, when the parent is a PCI device
    readable: bool  # os.access(R_OK|W_OK) for this user


@dataclass(frozen=True)
class DRMProbe:
    """Whether real DRM calls can run here, and why not when they cannot."""

    available: bool
    reason: str
    nodes: tuple[DRMNode, ...] = field(default_factory=tuple)


def list_nodes(dev_dir: str = "/dev/dri", sys_dir: str = "/sys/class/drm") -> list[DRMNode]:
    """All card*/renderD* nodes under ``dev_dir``, with their driver from ``sys_dir``."""
    out = []
    for path in sorted(glob.glob(os.path.join(dev_dir, "card*")) + glob.glob(os.path.join(dev_dir, "renderD*"))):
        name = os.path.basename(path)
        dev = Path(sys_dir) / name / "device"
        driver = None
        try:
            driver = os.path.basename(os.readlink(dev / "driver"))
        except OSError:
            pass
        pci = None
        try:
            vendor = (dev / "vendor").read_text().strip().removeprefix("0x")
            device = (dev / "device").read_text().strip().removeprefix("0x")
            pci = f"{vendor}:{device}"
        except OSError:
            pass
        out.append(DRMNode(path=path, kind="render" if name.startswith("renderD") else "primary",
                           driver=driver, pci_id=pci, readable=os.access(path, os.R_OK | os.W_OK)))
    return out


def probe(dev_dir: str = "/dev/dri") -> DRMProbe:
    """Can this process make DRM calls? Never raises; the reason is written for the learner."""
    if not _generic_ioctl_arch():
        return DRMProbe(False, f"this CPU architecture ({platform.machine()}) encodes ioctl "
                               "numbers differently; the helpers only know the asm-generic encoding")
    if not os.path.isdir(dev_dir):
        return DRMProbe(False, f"{dev_dir} does not exist: no DRM driver is bound to any device on "
                               "this machine (true of the course's CI and of its NVIDIA GPU machine)")
    nodes = tuple(list_nodes(dev_dir))
    if not nodes:
        return DRMProbe(False, f"{dev_dir} exists but holds no card*/renderD* nodes")
    usable = [n for n in nodes if n.readable]
    if not usable:
        return DRMProbe(False, "DRM nodes exist but this user cannot open any of them read-write "
                               "(add the user to the 'video'/'render' group)", nodes)
    return DRMProbe(True, f"{len(usable)} usable node(s): " + ", ".join(n.path for n in usable), nodes)


def _generic_ioctl_arch() -> bool:
    return platform.machine() in _GENERIC_IOCTL_ARCHES


def default_node(prefer: str = "primary") -> str:
    """The first usable node, primary (card*) by default since dumb buffers need one."""
    if prefer not in ("primary", "render"):
        raise InputError(f"prefer must be 'primary' or 'render', got {prefer!r}")
    p = probe()
    if not p.available:
        raise NoDRMDeviceError(p.reason)
    usable = [n for n in p.nodes if n.readable]
    usable.sort(key=lambda n: n.kind != prefer)
    return usable[0].path


# --------------------------------------------------------------------------------------------
# The device
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Version:
    """What DRM_IOCTL_VERSION returns."""

    major: int
    minor: int
    patchlevel: int
    name: str
    date: str
    desc: str


@dataclass(kw_only=True)
class DumbBuffer:
    """A dumb buffer object: its GEM handle in one DRM file, its pitch and size."""

    handle: int
    width: int
    height: int
    bpp: int
    pitch: int
    size: int


class DRMDevice:
    """An open DRM node. Use as a context manager; :meth:`close` releases everything.

    ``with DRMDevice("/dev/dri/card0") as dev: print(dev.version())``
    """

    def __init__(self, path: str | None = None):
        if path is None:
            path = default_node()
        if not isinstance(path, (str, os.PathLike)):
            raise InputTypeError(f"path must be a str or path, got {type(path).__name__}")
        self.path = os.fspath(path)
        if not _generic_ioctl_arch():
            raise DRMError(f"unsupported ioctl encoding on {platform.machine()}")
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NoDRMDeviceError(f"{self.path}: no such device node ({probe().reason})") from None
        except PermissionError:
            raise DRMPermissionError(f"{self.path}: permission denied; this user needs to be in the "
                                     "group that owns the node (ls -l /dev/dri)") from None
        self._handles: set[int] = set()

    # lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the DRM file; the kernel drops every GEM handle still open in it."""
        if self.fd >= 0:
            for h in list(self._handles):
                try:
                    self.gem_close(h)
                except DRMError:
                    pass
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DRMDevice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> int:
        if self.fd < 0:
            raise InputError(f"{self.path}: the device is closed")
        return self.fd

    # queries ---------------------------------------------------------------------------
    def version(self) -> Version:
        """DRM_IOCTL_VERSION, called twice as libdrm's drmGetVersion does: lengths, then strings."""
        fd = self._check_open()
        v = ioctl(fd, DRM_IOCTL_VERSION, DrmVersion(), "DRM_IOCTL_VERSION")
        bufs = [ctypes.create_string_buffer(max(1, n) + 1) for n in (v.name_len, v.date_len, v.desc_len)]
        v2 = DrmVersion(name_len=v.name_len, date_len=v.date_len, desc_len=v.desc_len,
                        name=ctypes.cast(bufs[0], ctypes.c_void_p).value,
                        date=ctypes.cast(bufs[1], ctypes.c_void_p).value,
                        desc=ctypes.cast(bufs[2], ctypes.c_void_p).value)
        ioctl(fd, DRM_IOCTL_VERSION, v2, "DRM_IOCTL_VERSION")
        text = [b.raw[:n].decode(errors="replace") for b, n in zip(bufs, (v.name_len, v.date_len, v.desc_len), strict=True)]
        return Version(v2.version_major, v2.version_minor, v2.version_patchlevel, *text)

    def get_cap(self, capability: int) -> int:
        """DRM_IOCTL_GET_CAP: the value of one DRM_CAP_* capability."""
        if not isinstance(capability, int) or isinstance(capability, bool) or capability < 0:
            raise InputError(f"capability must be a DRM_CAP_* number, got {capability!r}")
        return int(ioctl(self._check_open(), DRM_IOCTL_GET_CAP, DrmGetCap(capability=capability),
                         f"DRM_IOCTL_GET_CAP({capability:#x})").value)

    # dumb buffers ----------------------------------------------------------------------
    def create_dumb(self, width: int, height: int, bpp: int = 32) -> DumbBuffer:
        """DRM_IOCTL_MODE_CREATE_DUMB: a linear, CPU-mappable buffer; returns its handle."""
        for name, v in (("width", width), ("height", height), ("bpp", bpp)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 1 << 16:
                raise InputError(f"{name} must be an int in 1..65535, got {v!r}")
        a = ioctl(self._check_open(), DRM_IOCTL_MODE_CREATE_DUMB,
                  DrmModeCreateDumb(height=height, width=width, bpp=bpp), "DRM_IOCTL_MODE_CREATE_DUMB")
        self._handles.add(a.handle)
        return DumbBuffer(handle=a.handle, width=width, height=height, bpp=bpp, pitch=a.pitch, size=a.size)

    def map_dumb(self, handle: int) -> int:
        """DRM_IOCTL_MODE_MAP_DUMB: the *fake offset* to pass to mmap(2) on this fd.

        It is not a physical or device address: drm_gem_create_mmap_offset reserves a range
        in the device's drm_vma_offset_manager, and drm_gem_mmap later looks the object up
        by ``vma->vm_pgoff``.
        """
        return int(ioctl(self._check_open(), DRM_IOCTL_MODE_MAP_DUMB, DrmModeMapDumb(handle=handle),
                         "DRM_IOCTL_MODE_MAP_DUMB").offset)

    @contextmanager
    def mapped(self, buf: DumbBuffer) -> Iterator[mmap.mmap]:
        """mmap a dumb buffer through its fake offset; unmapped when the block ends."""
        offset = self.map_dumb(buf.handle)
        try:
            m = mmap.mmap(self._check_open(), buf.size, mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        except OSError as exc:
            raise _fail(f"mmap(fd, offset={offset:#x})", exc) from None
        try:
            yield m
        finally:
            m.close()

    def destroy_dumb(self, handle: int) -> None:
        """DRM_IOCTL_MODE_DESTROY_DUMB: drop the handle (the object dies with its last reference)."""
        ioctl(self._check_open(), DRM_IOCTL_MODE_DESTROY_DUMB, DrmModeDestroyDumb(handle=handle),
              "DRM_IOCTL_MODE_DESTROY_DUMB")
        self._handles.discard(handle)

    def gem_close(self, handle: int) -> None:
        """DRM_IOCTL_GEM_CLOSE: remove ``handle`` from this file's handle table (drm_gem.c)."""
        ioctl(self._check_open(), DRM_IOCTL_GEM_CLOSE, DrmGemClose(handle=handle), "DRM_IOCTL_GEM_CLOSE")
        self._handles.discard(handle)

    @contextmanager
    def dumb_buffer(self, width: int, height: int, bpp: int = 32) -> Iterator[DumbBuffer]:
        """create_dumb ... destroy_dumb as a block."""
        buf = self.create_dumb(width, height, bpp)
        try:
            yield buf
        finally:
            if buf.handle in self._handles and self.fd >= 0:
                self.destroy_dumb(buf.handle)

    # PRIME -----------------------------------------------------------------------------
    def prime_handle_to_fd(self, handle: int, flags: int = DRM_CLOEXEC | DRM_RDWR) -> int:
        """DRM_IOCTL_PRIME_HANDLE_TO_FD: export a GEM object as a dma-buf file descriptor.

        The caller owns the returned fd and must close it (or use :meth:`exported`).
        """
        if flags & ~(DRM_CLOEXEC | DRM_RDWR):
            raise InputError(f"flags may only combine DRM_CLOEXEC and DRM_RDWR, got {flags:#x}")
        return int(ioctl(self._check_open(), DRM_IOCTL_PRIME_HANDLE_TO_FD,
                         DrmPrimeHandle(handle=handle, flags=flags, fd=-1), "DRM_IOCTL_PRIME_HANDLE_TO_FD").fd)

    @contextmanager
    def exported(self, buf: DumbBuffer, flags: int = DRM_CLOEXEC | DRM_RDWR) -> Iterator[int]:
        """The dma-buf fd of ``buf`` for the duration of a block."""
        fd = self.prime_handle_to_fd(buf.handle, flags)
        try:
            yield fd
        finally:
            os.close(fd)


# --------------------------------------------------------------------------------------------
# dma-buf helpers
# --------------------------------------------------------------------------------------------
def read_fdinfo(fd: int, pid: str | int = "self") -> dict[str, str]:
    """/proc/<pid>/fdinfo/<fd> as a dict. For a dma-buf, dma_buf_show_fdinfo
    (drivers/dma-buf/dma-buf.c) adds size, count, exp_name and name to the generic lines."""
    if not isinstance(fd, int) or isinstance(fd, bool) or fd < 0:
        raise InputError(f"fd must be an int >= 0, got {fd!r}")
    return parse_fdinfo(Path(f"/proc/{pid}/fdinfo/{fd}").read_text())


def parse_fdinfo(text: str) -> dict[str, str]:
    """'key:\\tvalue' lines to a dict (later duplicates win); blank lines ignored."""
    if not isinstance(text, str):
        raise InputTypeError(f"text must be str, got {type(text).__name__}")
    out = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def dma_buf_sync(fd: int, flags: int) -> None:
    """DMA_BUF_IOCTL_SYNC: tell the exporter a CPU access starts or ends (cache maintenance)."""
    if not isinstance(flags, int) or isinstance(flags, bool):
        raise InputTypeError(f"flags must be an int (DMA_BUF_SYNC_*), got {type(flags).__name__}")
    if flags & ~(DMA_BUF_SYNC_RW | DMA_BUF_SYNC_END) or not flags & DMA_BUF_SYNC_RW:
        raise InputError(f"flags must be READ and/or WRITE, optionally with END; got {flags:#x}")
    ioctl(fd, DMA_BUF_IOCTL_SYNC, DmaBufSync(flags=flags), "DMA_BUF_IOCTL_SYNC")


def pattern(nbytes: int, seed: int = 0x5A) -> bytes:
    """A recognisable byte pattern (i * 31 + seed mod 256) to write and read back."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= 1 << 30:
        raise InputError(f"nbytes must be an int from 0 to 1 GiB, got {nbytes!r}")
    return bytes((i * 31 + seed) & 0xFF for i in range(nbytes))


# --------------------------------------------------------------------------------------------
# The whole tour, as the notebook runs it
# --------------------------------------------------------------------------------------------
@dataclass
class Step:
    """One call of the tour: what was called, what came back, or why it failed."""

    call: str
    result: str
    ok: bool = True


def tour(path: str | None = None, width: int = 256, height: int = 64, bpp: int = 32) -> list[Step]:
    """Run the chapter's sequence on a real node and return what each call returned.

    VERSION, GET_CAP(DUMB_BUFFER, PRIME), CREATE_DUMB, MAP_DUMB, mmap + write + read back,
    PRIME_HANDLE_TO_FD, fdinfo of the dma-buf, mmap of the dma-buf itself, DESTROY_DUMB.
    A failing step is recorded (ok=False) and later steps that need it are skipped; every
    resource is released on the way out. Raises NoDRMDeviceError when there is no node.
    """
    steps: list[Step] = []
    with ExitStack() as stack:
        dev = stack.enter_context(DRMDevice(path))
        steps.append(Step("open", f"{dev.path} (fd {dev.fd})"))
        caps = _version_and_caps(dev, steps)
        if not caps.get("DRM_CAP_DUMB_BUFFER"):
            steps.append(Step("DRM_IOCTL_MODE_CREATE_DUMB", "skipped: the driver reports no dumb buffers", False))
            return steps
        try:
            buf = stack.enter_context(dev.dumb_buffer(width, height, bpp))
        except DRMError as e:
            steps.append(Step("DRM_IOCTL_MODE_CREATE_DUMB", str(e), False))
            return steps
        steps.append(Step("DRM_IOCTL_MODE_CREATE_DUMB",
                          f"handle {buf.handle}, pitch {buf.pitch} B, size {buf.size} B for {width}x{height}x{bpp}"))
        data = pattern(buf.size)
        try:
            offset = dev.map_dumb(buf.handle)
            steps.append(Step("DRM_IOCTL_MODE_MAP_DUMB", f"fake offset {offset:#x} (page {offset >> 12:#x})"))
            with dev.mapped(buf) as m:
                m[:] = data
                same = m[:] == data
            steps.append(Step("mmap(fd, fake offset), write, read back",
                              f"{buf.size} B written; read back {'identical' if same else 'DIFFERENT'}", same))
        except DRMError as e:
            steps.append(Step("map + mmap", str(e), False))
        if not caps.get("DRM_CAP_PRIME", 0) & DRM_PRIME_CAP_EXPORT:
            steps.append(Step("DRM_IOCTL_PRIME_HANDLE_TO_FD", "skipped: the driver cannot export", False))
        else:
            steps += _export(dev, buf, data, stack)
    steps.append(Step("DRM_IOCTL_MODE_DESTROY_DUMB + close", "handle destroyed, dma-buf and DRM fds closed"))
    return steps


def _version_and_caps(dev: DRMDevice, steps: list[Step]) -> dict[str, int]:
    """VERSION and GET_CAP(DUMB_BUFFER, PRIME), each a step; the capabilities the node answered."""
    try:
        v = dev.version()
        steps.append(Step("DRM_IOCTL_VERSION", f"{v.name} {v.major}.{v.minor}.{v.patchlevel} ({v.desc})"))
    except DRMError as e:
        steps.append(Step("DRM_IOCTL_VERSION", str(e), False))
    caps = {}
    for name, cap in (("DRM_CAP_DUMB_BUFFER", DRM_CAP_DUMB_BUFFER), ("DRM_CAP_PRIME", DRM_CAP_PRIME)):
        try:
            caps[name] = dev.get_cap(cap)
            extra = ""
            if cap == DRM_CAP_PRIME:
                extra = (f" (import={bool(caps[name] & DRM_PRIME_CAP_IMPORT)}, "
                         f"export={bool(caps[name] & DRM_PRIME_CAP_EXPORT)})")
            steps.append(Step(f"DRM_IOCTL_GET_CAP {name}", f"{caps[name]}{extra}"))
        except DRMError as e:
            steps.append(Step(f"DRM_IOCTL_GET_CAP {name}", str(e), False))
    return caps


def _export(dev: DRMDevice, buf: DumbBuffer, data: bytes, stack: ExitStack) -> list[Step]:
    """PRIME_HANDLE_TO_FD, the dma-buf's fdinfo and an mmap of the dma-buf itself (closed by `stack`)."""
    try:
        dfd = stack.enter_context(dev.exported(buf))
    except DRMError as e:
        return [Step("DRM_IOCTL_PRIME_HANDLE_TO_FD", str(e), False)]
    steps = [Step("DRM_IOCTL_PRIME_HANDLE_TO_FD", f"dma-buf fd {dfd}")]
    try:
        info = read_fdinfo(dfd)
        keep = {k: info[k] for k in ("size", "count", "exp_name", "name", "flags") if k in info}
        steps.append(Step(f"/proc/self/fdinfo/{dfd}", ", ".join(f"{k}={v}" for k, v in keep.items())))
        steps.append(_mmap_dmabuf(dfd, buf.size, data))
    except DRMError as e:
        steps.append(Step("DRM_IOCTL_PRIME_HANDLE_TO_FD", str(e), False))
    return steps


def _mmap_dmabuf(dfd: int, size: int, expected: bytes) -> Step:
    """mmap the dma-buf fd itself (dma_buf_mmap_internal -> the exporter's mmap op)."""
    try:
        m = mmap.mmap(dfd, size, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError as exc:
        return Step("mmap(dma-buf fd)", f"refused: {errno.errorcode.get(exc.errno, exc.errno)} "
                                        "(the exporter has no CPU mmap for this buffer)", False)
    try:
        try:
            dma_buf_sync(dfd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ)
        except DRMError:
            pass
        same = m[:] == expected
        try:
            dma_buf_sync(dfd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ)
        except DRMError:
            pass
    finally:
        m.close()
    return Step("mmap(dma-buf fd), read", "the same bytes as through the GEM mapping" if same
                else "bytes DIFFER from the GEM mapping", same)
