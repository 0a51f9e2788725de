"""Build the kernel lab's bundle: Debian's stock kernel plus a small initramfs, in a cache folder.

Nothing here is committed as a binary: the bundle is made from Debian's own packages, fetched
with ``apt-get download`` (no root needed) into the cache folder (COURSE_KERNEL_LAB_DIR,
default build/kernel_lab/ of the checkout, git-ignored):

* ``linux-image-<abi>-amd64`` (the package ``linux-image-amd64`` depends on): ``vmlinuz`` and
  the modules the lab's machines load (machines.py), with, per machine, their load order
  (``/machines/<name>.modules``, dependencies first, read from each module's ``.modinfo``
  ``depends=`` field, because the package ships no ``modules.dep``);
* ``busybox-static``: the initramfs's shell, mount, insmod, poweroff;
* the guest programs (machines.PROGRAMS: ``helpers/measure/kernel_vm/guest/<name>.c``), compiled here with
  ``gcc -static`` against libdrm-dev's headers (``drm.h``, ``drm_mode.h``) and the kernel's
  uapi headers (``linux/dma-buf.h``, ``linux/sync_file.h``).

The initramfs is a gzipped cpio (the kernel's "newc" format, written here, so no cpio tool is
needed). ``bundle.json`` beside it says what went in (package versions, sizes, source hashes);
a bundle whose probe or init script changed since is rebuilt.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helpers.core import config
from helpers.core.errors import SkipExperiment
from helpers.measure.kernel_vm import machines

SOURCES = Path(__file__).with_name("guest")  # the guest sources, package data (pyproject.toml)
KERNEL_META = "linux-image-amd64"  # Debian's metapackage: depends on the current linux-image-<abi>-amd64
BUSYBOX = "busybox-static"
# The parameters busybox insmod passes to a module (the machines name the modules).
MODULE_PARAMS = {"drm_kms_helper": "fbdev_emulation=0"}
APT_TIMEOUT_S = 600
GCC_TIMEOUT_S = 120


@dataclass(frozen=True)
class Bundle:
    """A built bundle: the kernel image, the initramfs, and what went into them."""

    kernel: Path
    initrd: Path
    manifest: dict

    @property
    def kernel_release(self) -> str:
        return self.manifest["kernel_release"]

    @property
    def probe(self) -> Path:
        """The probe as built for the initramfs (it also runs on a host that has /dev/dri)."""
        return self.program("probe")

    def program(self, name: str) -> Path:
        """A guest program (machines.PROGRAMS) as built for the initramfs."""
        return self.kernel.parent / name


def cache_dir() -> Path:
    """Where bundles are built and kept (COURSE_KERNEL_LAB_DIR, else build/kernel_lab)."""
    return config.kernel_lab_dir()


def source_files() -> list[Path]:
    """What the bundle is built from in helpers/measure/kernel_vm/guest/: init.sh, the programs' .c, every .h."""
    return [SOURCES / "init.sh", *(SOURCES / f"{p}.c" for p in machines.PROGRAMS), *sorted(SOURCES.glob("*.h"))]


def source_hash() -> str:
    """sha256 of the sources and of the machines' modules: a bundle built from others is stale."""
    h = hashlib.sha256()
    for path in source_files():
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(json.dumps([{m.name: m.modules for m in machines.MACHINES.values()}, MODULE_PARAMS]).encode())
    return h.hexdigest()[:16]


def existing() -> Bundle | None:
    """The bundle in the cache folder when it is complete and current, else None."""
    d = cache_dir()
    try:
        manifest = json.loads((d / "bundle.json").read_text())
    except (OSError, ValueError):
        return None
    kernel, initrd = d / "vmlinuz", d / "initrd.img"
    if manifest.get("source_hash") != source_hash() or not kernel.is_file() or not initrd.is_file():
        return None
    return Bundle(kernel, initrd, manifest)


def ensure(log=print) -> Bundle:
    """The current bundle, building it first when there is none (a minute; ~75 MB download).

    Raises SkipExperiment naming what to install when this machine cannot build it.
    """
    return existing() or build(log)


def missing_tools() -> list[str]:
    """What this machine lacks to build the bundle, as install hints (empty: it can)."""
    out = []
    if not shutil.which("apt-get"):
        out.append("Debian's apt-get (the bundle is made from Debian packages: build it on Debian 12 or in "
                   "a Debian container, then copy the cache folder)")
    if not shutil.which("gcc"):
        out.append("gcc (apt-get install gcc libc6-dev)")
    if not Path("/usr/include/libdrm/drm.h").is_file():
        out.append("the DRM headers (apt-get install libdrm-dev)")
    return out


def build(log=print) -> Bundle:
    """Fetch the packages, compile the probe, write vmlinuz + initrd.img + bundle.json."""
    lacking = missing_tools()
    if lacking:
        raise SkipExperiment("cannot build the kernel lab's bundle here; missing: " + "; ".join(lacking))
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    kernel_pkg = _kernel_package()
    log(f"kernel lab: fetching {kernel_pkg} and {BUSYBOX} from Debian's archive into {d}")
    debs = {name: _download(name, d) for name in (kernel_pkg, BUSYBOX)}
    with tempfile.TemporaryDirectory(prefix="kernel-lab-") as tmp:
        tmp = Path(tmp)
        files = extract_deb(debs[kernel_pkg], ("./boot/vmlinuz-", "./lib/modules/"), tmp / "kernel")
        vmlinuz = next(p for p in files if p.name.startswith("vmlinuz-"))
        release = vmlinuz.name.removeprefix("vmlinuz-")
        available = {p.name.removesuffix(".ko"): p for p in files if p.suffix == ".ko"}
        modules = module_order(available, machines.all_modules())
        orders = {m.name: module_order(available, m.modules) for m in machines.MACHINES.values()}
        busybox = next(p for p in extract_deb(debs[BUSYBOX], ("./bin/busybox",), tmp / "busybox"))
        programs = {}
        for name in machines.PROGRAMS:
            log(f"kernel lab: compiling helpers/measure/kernel_vm/guest/{name}.c (gcc -static)")
            programs[name] = compile_program(name, tmp / name)
        entries = [("bin", None, 0o755), ("dev", None, 0o755), ("proc", None, 0o755), ("sys", None, 0o755),
                   ("lib", None, 0o755), ("lib/modules", None, 0o755), ("machines", None, 0o755),
                   ("bin/busybox", busybox.read_bytes(), 0o755),
                   ("init", (SOURCES / "init.sh").read_bytes(), 0o755)]
        entries += [(name, p.read_bytes(), 0o755) for name, p in programs.items()]
        entries += [(f"machines/{name}.modules", load_order(order).encode(), 0o644) for name, order in orders.items()]
        entries += [(f"lib/modules/{m.name}", m.read_bytes(), 0o644) for m in modules]
        (d / "initrd.img").write_bytes(gzip.compress(cpio_newc(entries), compresslevel=6, mtime=0))
        shutil.copyfile(vmlinuz, d / "vmlinuz")
        for name, p in programs.items():
            shutil.copy2(p, d / name)
    manifest = {"kernel_package": kernel_pkg, "kernel_deb": debs[kernel_pkg].name,
                "busybox_deb": debs[BUSYBOX].name, "kernel_release": release,
                "modules": [m.name for m in modules], "programs": list(machines.PROGRAMS),
                "machines": {name: [m.name for m in order] for name, order in orders.items()},
                "source_hash": source_hash(),
                "vmlinuz_bytes": (d / "vmlinuz").stat().st_size, "initrd_bytes": (d / "initrd.img").stat().st_size,
                "built": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    (d / "bundle.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for deb in debs.values():
        deb.unlink(missing_ok=True)  # the bundle keeps what it needs; the 70 MB package goes
    log(f"kernel lab: bundle ready, Linux {release}, vmlinuz {manifest['vmlinuz_bytes'] / 2**20:.1f} MiB + "
        f"initramfs {manifest['initrd_bytes'] / 2**20:.1f} MiB")
    return Bundle(d / "vmlinuz", d / "initrd.img", manifest)


def _kernel_package() -> str:
    """COURSE_KERNEL_LAB_KERNEL, else the linux-image-<abi>-amd64 that linux-image-amd64 depends on."""
    want = config.kernel_lab_kernel_package()
    if want:
        return want
    out = _run(["apt-cache", "depends", "--important", KERNEL_META], 60)
    for line in out.splitlines():
        name = line.split(":", 1)[-1].strip()
        if line.strip().startswith("Depends:") and name.startswith("linux-image-") and name != KERNEL_META:
            return name
    raise SkipExperiment(f"apt-cache names no kernel package for {KERNEL_META} (run `apt-get update`, "
                         "or set COURSE_KERNEL_LAB_KERNEL to a linux-image-*-amd64 package)")


def _download(package: str, where: Path) -> Path:
    before = set(where.glob(f"{package}_*.deb"))
    _run(["apt-get", "download", "-q", package], APT_TIMEOUT_S, cwd=where)
    debs = sorted(set(where.glob(f"{package}_*.deb")) - before) or sorted(where.glob(f"{package}_*.deb"))
    if not debs:
        raise SkipExperiment(f"apt-get download {package} wrote no .deb in {where}")
    return debs[-1]


def _run(cmd: list[str], timeout: float, cwd: Path | None = None) -> str:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SkipExperiment(f"`{' '.join(cmd)}` did not finish in {timeout:.0f} s") from None
    if r.returncode != 0:
        raise SkipExperiment(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


def compile_program(name: str, out: Path) -> Path:
    """gcc -static helpers/measure/kernel_vm/guest/<name>.c (DRM headers from libdrm-dev, its .h files beside it)."""
    _run(["gcc", "-static", "-O2", "-Wall", "-I/usr/include/libdrm", f"-I{SOURCES}", "-o", str(out),
          str(SOURCES / f"{name}.c")], GCC_TIMEOUT_S)
    return out


def load_order(modules: list[Path]) -> str:
    """A machine's modules file for /init: one 'name [parameters]' line per module, in load order."""
    stems = [m.name.removesuffix(".ko") for m in modules]
    return "".join(f"{s} {MODULE_PARAMS.get(s, '')}".rstrip() + "\n" for s in stems)


# --------------------------------------------------------------------------------------------
# .deb (ar + tar) and cpio, in Python
# --------------------------------------------------------------------------------------------
def ar_members(data: bytes) -> dict[str, bytes]:
    """The members of a Unix ar archive (a .deb is one: debian-binary, control.tar.*, data.tar.*)."""
    if not data.startswith(b"!<arch>\n"):
        raise SkipExperiment("not a .deb (ar) archive")
    out, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        out[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
    return out


def extract_deb(deb: Path, prefixes: tuple[str, ...], dest: Path) -> list[Path]:
    """Extract the regular files of a .deb's data.tar.* whose path starts with one of prefixes."""
    members = ar_members(deb.read_bytes())
    name = next((n for n in members if n.startswith("data.tar")), None)
    if name is None:
        raise SkipExperiment(f"{deb.name} has no data.tar member")
    raw = members[name]
    if name.endswith(".xz"):
        raw = lzma.decompress(raw)
    elif name.endswith(".gz"):
        raw = gzip.decompress(raw)
    elif name.endswith(".zst"):
        raise SkipExperiment(f"{deb.name} is zstd-compressed; this builder reads Debian's xz/gz packages")
    out = []
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith(prefixes):
                target = dest / Path(m.name).name
                dest.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                target.write_bytes(src.read() if src else b"")
                out.append(target)
    return out


def module_depends(ko: bytes) -> list[str]:
    """The ``depends=`` list of a module's .modinfo (names with '-' as the files spell them)."""
    for field in ko.split(b"\0"):
        if field.startswith(b"depends="):
            return [d for d in field[8:].decode().split(",") if d]
    return []


def module_order(available: dict[str, Path], wanted: tuple[str, ...]) -> list[Path]:
    """``wanted`` and everything they depend on, each after its dependencies."""
    def key(name: str) -> str:
        return name.replace("-", "_")

    by_key = {key(n): p for n, p in available.items()}
    order: list[Path] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        k = key(name)
        if k in seen:
            return
        if k in chain:
            raise SkipExperiment(f"module dependency cycle: {' -> '.join(chain + (k,))}")
        if k not in by_key:
            raise SkipExperiment(f"module {name} is not in the kernel package")
        for dep in module_depends(by_key[k].read_bytes()):
            visit(dep, chain + (k,))
        seen.add(k)
        order.append(by_key[k])

    for w in wanted:
        visit(w, ())
    return order


def cpio_newc(entries: list[tuple[str, bytes | None, int]], chardevs: tuple = (("dev/console", 5, 1),)) -> bytes:
    """A cpio archive in the kernel's initramfs ("newc") format: (path, data or None for a
    directory, permission bits) each, the character devices (path, major, minor) the kernel
    needs before /init mounts devtmpfs (/dev/console), then the trailer."""
    buf = io.BytesIO()

    def put(name: str, mode: int, data: bytes, ino: int, rdev: tuple[int, int] = (0, 0)) -> None:
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nb), 0]
        buf.write(b"070701" + b"".join(f"{f:08x}".encode() for f in fields) + nb)
        buf.write(b"\0" * (-buf.tell() % 4))
        buf.write(data)
        buf.write(b"\0" * (-buf.tell() % 4))

    for ino, (name, data, perm) in enumerate(entries, 1):
        put(name, (0o040000 if data is None else 0o100000) | perm, data or b"", ino)
    for k, (name, major, minor) in enumerate(chardevs, len(entries) + 1):
        put(name, 0o020000 | 0o600, b"", k, (major, minor))
    put("TRAILER!!!", 0, b"", 0)
    return buf.getvalue()


def bundle_bytes(b: Bundle) -> int:
    """What booting needs on disk: vmlinuz + initramfs."""
    return os.path.getsize(b.kernel) + os.path.getsize(b.initrd)
