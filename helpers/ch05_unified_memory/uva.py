"""Unified virtual addressing: one address space, and asking the driver what an address is.

With UVA (every 64-bit Linux CUDA system) the driver hands out device allocations, pinned
host buffers and managed ranges at addresses that never collide, so one number says which
memory it names. `cudaPointerGetAttributes` (runtime) and `cuPointerGetAttribute` (driver)
answer "what is this pointer?": its memory type, its device, the address each side must use.
A plain `malloc`'d (pageable) address is memory the driver knows nothing about.

The numbers do not mean "the CPU may dereference it": a device pointer is a GPU virtual
address, translated by the GPU's own MMU through page tables the driver keeps per context.
In the process's CPU address space that range is at most reserved — see `maps_entry`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from helpers.core import gpu, reference, validate
from helpers.core.errors import ReferenceDataError
from helpers.core.experiments import GPU, experiment
from helpers.measure import driver_api

RUNTIME_TYPES = {0: "unregistered (pageable)", 1: "host (pinned)", 2: "device", 3: "managed"}
DRIVER_TYPES = {1: "CU_MEMORYTYPE_HOST", 2: "CU_MEMORYTYPE_DEVICE", 3: "CU_MEMORYTYPE_ARRAY",
                4: "CU_MEMORYTYPE_UNIFIED"}
KINDS = ("device", "pinned", "mapped", "registered", "managed", "pageable",
         "numba managed_array", "numba mapped_array", "driver cuMemAlloc", "driver cuMemHostAlloc")
HOW = {
    "device": "cupy.cuda.runtime.malloc (cudaMalloc)",
    "pinned": "cudaHostAlloc(default)",
    "mapped": "cudaHostAlloc(cudaHostAllocMapped)",
    "registered": "mmap + cudaHostRegister(Mapped)",
    "managed": "cupy.cuda.malloc_managed (cudaMallocManaged)",
    "pageable": "numpy.empty (malloc/mmap by the C library)",
    "numba managed_array": "numba.cuda.managed_array",
    "numba mapped_array": "numba.cuda.mapped_array",
    "driver cuMemAlloc": "cuda.bindings.driver.cuMemAlloc",
    "driver cuMemHostAlloc": "cuda.bindings.driver.cuMemHostAlloc(PORTABLE)",
}
DEVICE_ATTRIBUTES = {  # cudaDeviceAttr value: what it says
    "unifiedAddressing": (41, "one virtual address space for host and device (UVA)"),
    "canMapHostMemory": (19, "pinned host memory can be mapped into the GPU's address space"),
    "managedMemory": (83, "cudaMallocManaged is supported"),
    "concurrentManagedAccess": (89, "CPU and GPU may touch managed memory at the same time; "
                                    "pages migrate on demand through GPU page faults"),
    "pageableMemoryAccess": (88, "the GPU may read ordinary malloc'd memory (HMM or ATS)"),
    "pageableMemoryAccessUsesHostPageTables": (100, "...through the CPU's own page tables (ATS, "
                                                    "e.g. Grace Hopper), rather than mirrored ones (HMM)"),
    "directManagedMemAccessFromHost": (101, "the CPU may access managed memory resident on the GPU "
                                            "without migrating it (coherent platforms)"),
    "canUseHostPointerForRegisteredMem": (91, "cudaHostRegister'ed memory has the same address on the GPU"),
    "hostNativeAtomicSupported": (86, "atomics between CPU and GPU work natively over the link"),
}
UVM_HMM_PARAM = "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"


def decode_runtime_type(code) -> str:
    """cudaMemoryType number -> words; unknown numbers are named, not guessed."""
    try:
        return RUNTIME_TYPES[int(code)]
    except (KeyError, TypeError, ValueError):
        return f"unknown type {code!r}"


def decode_driver_type(code) -> str:
    """CUmemorytype number (or a recorded error name) -> text."""
    if isinstance(code, str):
        return code  # a recorded error such as CUDA_ERROR_INVALID_VALUE
    try:
        return DRIVER_TYPES[int(code)]
    except (KeyError, TypeError, ValueError):
        return f"unknown type {code!r}"


def maps_entry(addr: int, maps_text: str | None = None) -> dict | None:
    """The /proc/self/maps line whose range holds `addr`: {start, end, perms, path}, or None.

    A device pointer normally lies in a range the CUDA driver reserved with no access rights
    ('---p'): the CPU may not touch it, which is why a host write through it ends in SIGSEGV.
    """
    addr = validate.whole_number(addr, "address", lo=0)
    if maps_text is None:
        with open("/proc/self/maps") as f:
            maps_text = f.read()
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if lo <= addr < hi:
            return {"start": lo, "end": hi, "perms": parts[1],
                    "path": parts[5].strip() if len(parts) > 5 else ""}
    return None


def runtime_attributes(ptr: int) -> dict:
    """cudaPointerGetAttributes(ptr) through CuPy: type, device, devicePointer, hostPointer."""
    cp = gpu.cupy()
    try:
        a = cp.cuda.runtime.pointerGetAttributes(ptr)
    except cp.cuda.runtime.CUDARuntimeError as exc:
        return {"error": str(exc)}
    return {"type": int(a.type), "device": int(a.device), "devicePointer": int(a.devicePointer),
            "hostPointer": int(a.hostPointer)}


@contextlib.contextmanager
def _allocations(n: int) -> Iterator[dict[str, int]]:
    """One buffer of every kind in KINDS (those that can be made here), freed on exit."""
    import mmap

    cp = gpu.cupy()
    rt = cp.cuda.runtime
    ptrs: dict[str, int] = {}
    keep: list = []
    undo: list = []
    try:
        d = rt.malloc(n)
        undo.append(lambda: rt.free(d))
        ptrs["device"] = d
        for kind, flags in (("pinned", 0), ("mapped", rt.hostAllocMapped)):
            h = rt.hostAlloc(n, flags)
            undo.append(lambda h=h: rt.freeHost(h))
            ptrs[kind] = h
        m = mmap.mmap(-1, n)
        view = np.frombuffer(m, dtype=np.uint8)
        rt.hostRegister(view.ctypes.data, n, 2)  # cudaHostRegisterMapped
        undo.append(lambda: rt.hostUnregister(view.ctypes.data))
        ptrs["registered"] = view.ctypes.data
        keep += [m, view]
        managed = cp.cuda.memory.ManagedMemory(n)
        keep.append(managed)
        ptrs["managed"] = managed.ptr
        pageable = np.ones(n, dtype=np.uint8)
        keep.append(pageable)
        ptrs["pageable"] = pageable.ctypes.data
        with contextlib.suppress(Exception):  # numba-cuda absent or too old: skip its rows
            from numba import cuda as ncuda

            for kind, make in (("numba managed_array", ncuda.managed_array),
                               ("numba mapped_array", ncuda.mapped_array)):
                arr = make(n, dtype=np.uint8)
                keep.append(arr)
                ptrs[kind] = arr.ctypes.data
        with contextlib.suppress(Exception):  # driver API bindings absent: skip its rows
            drv = driver_api.driver()
            dp = driver_api.check(drv.cuMemAlloc(n), "cuMemAlloc")
            undo.append(lambda: drv.cuMemFree(dp))
            ptrs["driver cuMemAlloc"] = driver_api.as_int(dp)
            hp = driver_api.check(drv.cuMemHostAlloc(n, driver_api.CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc")
            undo.append(lambda: drv.cuMemFreeHost(hp))
            ptrs["driver cuMemHostAlloc"] = driver_api.as_int(hp)
        yield ptrs
    finally:
        rt.deviceSynchronize()
        for fn in reversed(undo):
            with contextlib.suppress(Exception):
                fn()
        keep.clear()


def query_all(n: int = 1 << 20) -> list[dict]:
    """Allocate one buffer of each kind and ask the runtime, the driver and /proc about it."""
    rows = []
    with _allocations(n) as ptrs:
        for kind in KINDS:
            if kind not in ptrs:
                continue
            p = ptrs[kind]
            rows.append({"kind": kind, "how": HOW[kind], "ptr": p, "runtime": runtime_attributes(p),
                         "driver": driver_api.pointer_attributes(p), "maps": maps_entry(p)})
    return rows


@experiment("um.pointer_attributes", chapter=5, needs=(GPU,),
            title="UVA: pointer attributes of device, pinned, mapped, registered, managed and pageable memory")
def record_pointer_attributes(quick: bool) -> dict:
    return {"nbytes": 1 << 20, "pointers": query_all(1 << 20)}


def attribute_rows(data: dict) -> list[tuple]:
    """Table rows from recorded (or live) pointer data: what each address is, per runtime and driver."""
    ptrs = reference.recorded_list(data, "um.pointer_attributes", "pointers")
    rows = []
    for r in ptrs:
        rt, dr, mp = r.get("runtime", {}), r.get("driver", {}), r.get("maps")
        if "error" in rt:
            rtype, dev, same = f"error: {rt['error']}", "—", "—"
        else:
            rtype, dev = decode_runtime_type(rt.get("type")), rt.get("device")
            same = "yes" if rt.get("devicePointer") == r["ptr"] else (
                "no (device view elsewhere)" if rt.get("devicePointer") else "no GPU view")
        vma = f"{mp['perms']} {mp['path'] or '[anon]'}" if mp else "not mapped for the CPU"
        rows.append((r["kind"], f"{r['ptr']:#x}", rtype, dev, same,
                     decode_driver_type(dr.get("MEMORY_TYPE")), _flag(dr.get("IS_MANAGED")),
                     _flag(dr.get("MAPPED")), vma))
    return rows


ATTRIBUTE_HEADERS = ("kind", "address", "cudaPointerGetAttributes type", "device",
                     "GPU uses same address", "cuPointerGetAttribute MEMORY_TYPE", "IS_MANAGED",
                     "MAPPED", "CPU mapping (/proc/self/maps)")


def _flag(v) -> str:
    if isinstance(v, str):
        return v
    return "—" if v is None else ("yes" if v else "no")


def device_attributes(device: int = 0) -> dict:
    """The device attributes that decide what unified and pageable memory can do here."""
    cp = gpu.cupy()
    device = validate.whole_number(device, "device (a GPU index)", 0, cp.cuda.runtime.getDeviceCount() - 1)
    return {name: int(cp.cuda.runtime.deviceGetAttribute(code, device))
            for name, (code, _) in DEVICE_ATTRIBUTES.items()}


def uvm_hmm_parameter(path: str = UVM_HMM_PARAM) -> str | None:
    """nvidia_uvm's uvm_disable_hmm module parameter ('Y'/'N'), or None if not readable."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


HMM_KERNEL_OPTIONS = ("CONFIG_HMM_MIRROR", "CONFIG_DEVICE_PRIVATE", "CONFIG_ZONE_DEVICE")


def kernel_hmm_config(release: str | None = None) -> dict | None:
    """The kernel build options HMM needs, from /boot/config-<release> or /proc/config.gz.

    {option: 'y' | 'm' | 'not set'}, or None when neither file is readable (common in containers).
    """
    import gzip
    import platform

    release = release or platform.release()
    text = None
    for path, opener in ((f"/boot/config-{release}", open), ("/proc/config.gz", gzip.open)):
        try:
            with opener(path, "rt") as f:
                text = f.read()
            break
        except OSError:
            continue
    if text is None:
        return None
    return parse_kernel_config(text)


def parse_kernel_config(text: str) -> dict:
    """{option: value} for HMM_KERNEL_OPTIONS from a kernel .config text."""
    out = {o: "not set" for o in HMM_KERNEL_OPTIONS}
    for line in text.splitlines():
        key, _, val = line.partition("=")
        if key in out and val:
            out[key] = val.strip()
    return out


def addressing_mode() -> str | None:
    """'Addressing Mode' from `nvidia-smi -q` (HMM, ATS or None on recent drivers), if it says."""
    import subprocess

    try:
        text = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in text.splitlines():
        if line.strip().lower().startswith("addressing mode"):
            return line.split(":", 1)[1].strip()
    return None


@experiment("um.device_attributes", chapter=5, needs=(GPU,),
            title="Device attributes for managed memory, HMM and pageable memory access",
            params={"device": validate.count(0, 63)})
def record_device_attributes(quick: bool, device: int = 0) -> dict:
    import platform

    return {"attributes": device_attributes(device), "uvm_disable_hmm": uvm_hmm_parameter(),
            "kernel": platform.release(), "kernel_hmm_config": kernel_hmm_config(),
            "nvidia_smi_addressing_mode": addressing_mode()}


def why_no_hmm(attrs: dict, uvm_disable_hmm: str | None, kernel_config: dict | None) -> list[str]:
    """When the GPU cannot read pageable memory: the conditions nvidia-uvm checks, and what is known here.

    uvm_hmm_is_enabled_system_wide() (kernel-open/nvidia-uvm/uvm_hmm.c) needs the module parameter
    uvm_disable_hmm off, ATS and confidential computing off; UVM_IS_CONFIG_HMM()
    (kernel-open/nvidia-uvm/uvm_linux.h) needs the kernel built with CONFIG_HMM_MIRROR and
    CONFIG_DEVICE_PRIVATE.
    """
    if attrs.get("pageableMemoryAccess"):
        return []
    out = []
    if uvm_disable_hmm in ("Y", "1"):
        out.append("nvidia_uvm was loaded with uvm_disable_hmm=Y: HMM is switched off by module parameter.")
    elif uvm_disable_hmm in ("N", "0"):
        out.append("nvidia_uvm does not switch HMM off (uvm_disable_hmm=N), so another condition failed: "
                   "the kernel must be built with CONFIG_HMM_MIRROR and CONFIG_DEVICE_PRIVATE, the driver "
                   "build must have detected them, and ATS and confidential computing must be off.")
    else:
        out.append("nvidia_uvm's uvm_disable_hmm parameter could not be read here.")
    if kernel_config:
        missing = [k for k in ("CONFIG_HMM_MIRROR", "CONFIG_DEVICE_PRIVATE") if kernel_config.get(k) not in ("y", "m")]
        out.append("kernel config: " + ", ".join(f"{k}={v}" for k, v in kernel_config.items())
                   + (f" — missing {', '.join(missing)}: no HMM possible with this kernel." if missing else
                      " — the kernel supports HMM; the driver build or its ATS/confidential-computing "
                      "state is what rules it out."))
    else:
        out.append("the kernel's build configuration is not readable here (/boot/config-*, /proc/config.gz).")
    return out


def explain_attributes(attrs: dict) -> list[str]:
    """What this system lets a program do with managed and pageable memory, decided from `attrs`."""
    missing = [k for k in ("pageableMemoryAccess", "concurrentManagedAccess", "managedMemory") if k not in attrs]
    if missing:
        raise ReferenceDataError(f"device attributes lack {missing}: they come from experiment um.device_attributes "
                                 "(live, or its recording in data/reference/<machine>/)")
    out = []
    if not attrs["managedMemory"]:
        out.append("No managed memory on this device: cudaMallocManaged fails.")
    elif attrs["concurrentManagedAccess"]:
        out.append("Managed memory migrates page by page on demand: a GPU access to a page in host "
                   "memory raises a GPU page fault that nvidia-uvm services; CPU and GPU may use "
                   "the same allocation concurrently; prefetch and advice are honoured.")
    else:
        out.append("Managed memory without concurrent access: the whole allocation moves to the "
                   "GPU at each kernel launch, and the CPU must not touch it until the GPU is idle "
                   "(older GPUs, Windows, some virtual machines).")
    if attrs["pageableMemoryAccess"]:
        how = ("the CPU's own page tables (ATS)" if attrs.get("pageableMemoryAccessUsesHostPageTables")
               else "page tables mirrored by HMM (Linux heterogeneous memory management)")
        out.append(f"The GPU may dereference ordinary malloc'd memory, through {how}.")
    else:
        out.append("The GPU may NOT dereference ordinary malloc'd memory: no HMM or ATS here. "
                   "A kernel given a malloc'd pointer faults on an address no GPU page table maps, "
                   "and the context dies with an illegal-address error. Pin it (cudaHostRegister) "
                   "or copy it first.")
    if attrs.get("directManagedMemAccessFromHost"):
        out.append("The CPU can read managed pages that live on the GPU without migrating them.")
    return out


def attribute_rows_device(attrs: dict) -> list[tuple]:
    """(attribute, value, meaning) rows."""
    return [(k, attrs.get(k, "—"), DEVICE_ATTRIBUTES[k][1]) for k in DEVICE_ATTRIBUTES]

