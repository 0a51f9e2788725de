"""A Python interpreter for the kernel lab's guest, as a second initramfs archive.

The VFIO part of the course (Chapter 2b, Chapter 4b, Lab 6) has the learner's Python drive a
PCI device inside the VM, so machines that ask for it (machines.Machine.python) boot with
Debian's own CPython appended to the bundle's initramfs: the kernel unpacks concatenated
cpio archives one over the other, so the DRM machines keep their small initramfs untouched.

Made like the bundle, from Debian packages of the same release (``apt-get download``, no
root): ``python3.11-minimal`` (the interpreter), ``libpython3.11-minimal`` and
``libpython3.11-stdlib`` (the standard library, without what a driver never imports: tests,
GUI, packaging, network servers), and the shared libraries they load (``libc6``, ``zlib1g``,
``libexpat1``, ``libffi8`` for ctypes). Written to ``python.cpio.gz`` in the cache folder,
with ``python.json`` saying what went in.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import io
import json
import lzma
import posixpath
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from helpers.core.errors import SkipExperiment
from helpers.measure.kernel_vm import bundle

PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
            "libc6", "zlib1g", "libexpat1", "libffi8")
INTERPRETER = "/usr/bin/python3.11"
FORMAT = 1
# standard-library folders a user-space driver never needs (the archive stays ~3 MiB)
SKIP_DIRS = ("test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "distutils", "pydoc_data",
             "unittest", "asyncio", "multiprocessing", "sqlite3", "xmlrpc", "wsgiref", "http", "urllib",
             "email", "xml", "html", "dbm", "curses", "venv", "site-packages", "dist-packages", "__pycache__")
SKIP_PREFIX = ("config-3.11",)
# compiled modules kept: the ones whose libraries are in the archive and a driver may use
DYNLOAD = ("_ctypes", "_json", "mmap", "resource", "_contextvars", "_queue", "_typing", "termios",
           "_posixshmem", "_struct", "select", "fcntl", "_random", "_bisect", "_heapq", "math")
LIBS = ("libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "libz.so.1", "libexpat.so.1", "libffi.so.8",
        "libpthread.so.0", "libdl.so.2", "libutil.so.1", "librt.so.1")


def archive_path() -> Path:
    return bundle.cache_dir() / "python.cpio.gz"


def existing() -> Path | None:
    """The archive when it was built in the current format, else None."""
    try:
        meta = json.loads((bundle.cache_dir() / "python.json").read_text())
    except (OSError, ValueError):
        return None
    return archive_path() if meta.get("format") == FORMAT and archive_path().is_file() else None


def ensure(log=print) -> Path:
    """The archive, built first when missing (~8 MB download, a few seconds)."""
    return existing() or build(log)


def wanted(path: str) -> str | None:
    """Where a file of the packages goes in the guest (None: left out)."""
    p = PurePosixPath(path.removeprefix("."))
    s = str(p)
    if s == INTERPRETER:
        return s
    if p.parent.name == "x86_64-linux-gnu" and p.name in LIBS:
        return f"/lib/x86_64-linux-gnu/{p.name}"
    if not s.startswith("/usr/lib/python3.11/"):
        return None
    rel = p.relative_to("/usr/lib/python3.11")
    if rel.parts and (rel.parts[0] in SKIP_DIRS or rel.parts[0].startswith(SKIP_PREFIX)
                      or any(part in SKIP_DIRS for part in rel.parts[:-1])):
        return None
    if rel.parts[0] == "lib-dynload":
        return s if p.name.split(".", 1)[0] in DYNLOAD else None
    return s if p.suffix == ".py" else None


def deb_files(deb: Path) -> dict[str, bytes]:
    """{guest path: bytes} of the wanted regular files and symlinks (a link becomes a copy)."""
    members = bundle.ar_members(deb.read_bytes())
    name = next((n for n in members if n.startswith("data.tar")), None)
    if name is None:
        raise SkipExperiment(f"{deb.name} has no data.tar member")
    raw = members[name]
    raw = lzma.decompress(raw) if name.endswith(".xz") else gzip.decompress(raw) if name.endswith(".gz") else raw
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        by_name = {posixpath.normpath(m.name.removeprefix(".")): m for m in tar.getmembers()}
        for m in tar.getmembers():
            target = wanted(m.name)
            if target is None:
                continue
            src = m
            for _ in range(8):  # a symlink (libz.so.1 -> libz.so.1.2.13) becomes a copy of its target
                if not src.issym():
                    break
                here = posixpath.dirname(posixpath.normpath(src.name.removeprefix(".")))
                src = by_name.get(posixpath.normpath(posixpath.join(here, src.linkname)), m)
            if src.isfile():
                f = tar.extractfile(src)
                out[target] = f.read() if f else b""
    return out


def build(log=print) -> Path:
    """Download the packages, pick the files, write python.cpio.gz and python.json."""
    if not shutil.which("apt-get"):
        raise SkipExperiment("cannot build the guest's Python here: it is made from Debian packages "
                             "(apt-get download); build it on Debian 12 and copy the cache folder")
    d = bundle.cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    log(f"kernel lab: fetching Debian's Python 3.11 ({', '.join(PACKAGES)}) into {d}")
    debs = {name: bundle._download(name, d) for name in PACKAGES}
    files: dict[str, bytes] = {}
    for deb in debs.values():
        files.update(deb_files(deb))
    missing = [x for x in (INTERPRETER, "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                           "/usr/lib/python3.11/ctypes/__init__.py") if x not in files]
    if missing:
        raise SkipExperiment(f"the Python packages lacked {missing}")
    files["/lib64/ld-linux-x86-64.so.2"] = files["/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"]
    dirs = sorted({str(parent) for f in files for parent in PurePosixPath(f).parents if str(parent) != "/"})
    entries = [(x.lstrip("/"), None, 0o755) for x in dirs]
    entries += [(f.lstrip("/"), data, 0o755 if f == INTERPRETER or ".so" in f else 0o644)
                for f, data in sorted(files.items())]
    archive_path().write_bytes(gzip.compress(bundle.cpio_newc(entries, chardevs=()), compresslevel=6, mtime=0))
    meta = {"format": FORMAT, "packages": sorted(p.name for p in debs.values()), "files": len(files),
            "bytes": archive_path().stat().st_size, "built": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    (d / "python.json").write_text(json.dumps(meta, indent=1) + "\n")
    for deb in debs.values():
        deb.unlink(missing_ok=True)
    log(f"kernel lab: guest Python ready, {len(files)} files, {meta['bytes'] / 2**20:.1f} MiB")
    return archive_path()
