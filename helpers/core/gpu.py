"""Lazy access to CuPy and the CUDA device, and the probe that decides whether it is usable.

Nothing here imports CuPy at module import time: a learner without CUDA can import every
helper. `probe()` answers "can CuPy create a context on a CUDA device?" without raising,
and `cupy()` gives the module to live code after checking the answer.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from types import ModuleType

from helpers.core import config
from helpers.core.errors import NoGPUError


@dataclass(frozen=True)
class GPUProbe:
    """The outcome of trying to use CUDA from this process."""

    usable: bool
    reason: str  # why not, or a short description of the device when usable
    _: KW_ONLY
    device_count: int = 0
    name: str | None = None
    pci_bus_id: str | None = None
    cupy_version: str | None = None
    cuda_runtime: int | None = None  # e.g. 13000 for CUDA 13.0
    cuda_driver: int | None = None  # the newest CUDA version the driver supports


@functools.lru_cache(maxsize=1)
def probe() -> GPUProbe:
    """Try to import CuPy and create a context on device 0; never raises.

    Cached for the process: a context, once made, lives until the process ends, and the
    answer cannot change without a restart of the kernel.
    """
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA library underneath
        return GPUProbe(False, f"CuPy is not importable ({type(exc).__name__}: {exc})")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return GPUProbe(False, f"no CUDA driver or device ({_short(exc)})",
                        cupy_version=cupy.__version__)
    if count < 1:
        return GPUProbe(False, "CUDA reports no devices (CUDA_VISIBLE_DEVICES empty?)",
                        cupy_version=cupy.__version__)
    try:
        with cupy.cuda.Device(0):
            cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(256))  # forces a context
            props = cupy.cuda.runtime.getDeviceProperties(0)
            bus_id = f"{props['pciDomainID']:04x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0"
        runtime = cupy.cuda.runtime.runtimeGetVersion()
        driver = cupy.cuda.runtime.driverGetVersion()
    except Exception as exc:
        return GPUProbe(False, f"a CUDA context could not be created ({_short(exc)})",
                        device_count=count, cupy_version=cupy.__version__)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return GPUProbe(True, name, device_count=count, name=name, pci_bus_id=bus_id.lower(),
                    cupy_version=cupy.__version__, cuda_runtime=runtime, cuda_driver=driver)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


def cupy() -> ModuleType:
    """Return the CuPy module, or raise NoGPUError saying why live work is impossible here."""
    p = probe()
    if not p.usable:
        raise NoGPUError(f"This needs a usable CUDA GPU, and there is none here: {p.reason}. "
                         "Run the notebook in replay mode instead (it is chosen automatically).")
    import cupy as cp

    return cp


def version_string(v: int | None) -> str | None:
    """CUDA's integer versions (13020) as text ("13.2")."""
    if v is None:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def free_device_bytes() -> int:
    """Free device memory on the current device, in bytes, as the driver reports it now."""
    return int(cupy().cuda.runtime.memGetInfo()[0])


def release_pools() -> None:
    """Return CuPy's cached device and pinned blocks to the driver.

    CuPy keeps freed blocks in pools for reuse; measuring "memory in use" or leaving a
    notebook clean needs them handed back explicitly.
    """
    if not probe().usable:
        return
    import cupy as cp

    cp.cuda.runtime.deviceSynchronize()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()
    _flush_numba()


def _flush_numba() -> None:
    """Free what Numba has queued for freeing. Numba releases device, pinned and mapped memory
    lazily: a dropped array only joins its context's pending deallocations, which are freed in
    batches. A notebook that has finished must not look as if it still held them."""
    import sys

    numba_cuda = sys.modules.get("numba.cuda")
    if numba_cuda is None or config.numba_simulator_on():
        return
    try:
        ctx = numba_cuda.current_context()
        queues = [ctx.deallocations, getattr(ctx.memory_manager, "deallocations", None)]  # arrays use the latter
    except Exception:  # noqa: BLE001 - a Numba without these queues, or no context: nothing is pending
        return
    for q in queues:
        if q is not None:
            q.clear()


def _performance_warnings() -> list[type[Warning]]:
    """Numba's performance-advice classes: numba's own and numba-cuda's, which is a separate class
    (numba.cuda.core.errors, not a subclass), and the one a real GPU's launches raise."""
    found = []
    for module in ("numba.core.errors", "numba.cuda.core.errors"):
        try:
            found.append(importlib.import_module(module).NumbaPerformanceWarning)
        except (ImportError, AttributeError):  # pragma: no cover - older or newer Numba layouts
            continue
    return found


@contextmanager
def deliberate_launch() -> Iterator[None]:
    """Silence Numba's performance advice (NumbaPerformanceWarning) for the launches inside: a
    one-thread chase, a single-thread store loop, an exercise check's small grid or host arrays.
    Their shape is the experiment's design, so the advice ("Grid size 1 will likely result in GPU
    under-utilization", "Host array used in CUDA kernel") would only mislead the learner. Only
    that warning class, only within the block: everything else still warns."""
    with warnings.catch_warnings():
        for category in _performance_warnings():
            warnings.simplefilter("ignore", category)
        yield


class LazyModule:
    """A module imported on first use, so code on a notebook page can name `cp.cuda.Event` and
    `cuda.jit` while the page still imports (and replays) on a machine without CUDA. On first
    use the real module replaces the stand-in wherever it was imported (see _rebind).

    `cp` and `cupyx` need a usable GPU: touching them without one raises NoGPUError saying why
    (not an ImportError deep inside CuPy). `cuda` (numba.cuda) imports on first use, after
    course.start has chosen Numba's CUDA simulator where there is no GPU, so a Numba kernel on
    the page also runs, on the CPU, for correctness only.
    """

    def __init__(self, name: str, *, needs_gpu: bool):
        self._name, self._needs_gpu = name, needs_gpu
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        """The real module; the first call imports it and swaps it in (later calls, from a
        stand-in kept where _rebind cannot reach, such as a namespace outside sys.modules, only
        look it up: a sweep of every module costs ~10 ms, once per name is enough)."""
        if self._module is None:
            if self._needs_gpu:
                cupy()  # NoGPUError with the reason when CUDA is not usable here
            self._module = importlib.import_module(self._name)
            self._rebind(self._module)
        return self._module

    def _rebind(self, module: ModuleType) -> None:
        """Put the real module where this stand-in was imported (helpers' modules, the notebook's
        namespace). Numba types a kernel's globals when it compiles it: `cuda.grid` inside a
        kernel must find numba.cuda itself, not this object. The first use (`@cuda.jit`, before
        any kernel compiles) is the moment to swap."""
        import sys

        for mod in list(sys.modules.values()):
            try:  # not getattr(mod, "__dict__"): a module importlib.util.LazyLoader left in sys.modules would
                # execute itself to answer, and one not yet executed holds no stand-in. CuPy 14.2's cupy.testing
                # (which imports pytest) and cupyx were such modules: 0.3-0.8 s of a page's first `cp.` on the H100
                namespace = object.__getattribute__(mod, "__dict__")
            except (AttributeError, TypeError):
                continue
            if not isinstance(namespace, dict):
                continue
            for name, value in list(namespace.items()):
                if value is self:
                    namespace[name] = module

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # keep copy/pickle/inspect from importing the module
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


class KernelOnFirstUse:
    """`kernel[grid, block](...)` for a Numba kernel defined at the top of `module`, a module that
    imports numba.cuda itself (a kernel is typed against the real module, and the simulator swaps
    it while a kernel runs). The module is imported at the first launch, after course.start has
    chosen the GPU or the simulator, and its kernel is compiled once per process and argument
    types: a kernel written inside a function is a new one, compiled again, at every call."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def kernel(self):
        """The module's Numba kernel itself (importing the module the first time)."""
        return getattr(importlib.import_module(self.module), self.name)

    def __getitem__(self, config):
        return self.kernel()[config]


cp = LazyModule("cupy", needs_gpu=True)  # CuPy, as every page and experiment names it
cupyx = LazyModule("cupyx", needs_gpu=True)  # cupyx.empty_pinned and friends
cuda = LazyModule("numba.cuda", needs_gpu=False)  # Numba's CUDA target (its simulator without a GPU)


@functools.lru_cache(maxsize=8)
def _compute_apps(minute_slot: int, smi: str) -> tuple[int, ...] | None:
    import subprocess

    try:
        out = subprocess.run([smi, "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return tuple(int(t) for t in out.stdout.split() if t.strip().isdigit())


def other_processes() -> int | None:
    """How many other processes hold a CUDA context on this machine's GPUs now (nvidia-smi's
    compute apps, this process left out), or None when that cannot be known here.

    A live number measured while others share the GPU is contended: time-slicing hands the
    engines to each context in turn, so bandwidths and latencies come out lower and noisier.
    Asked at most once per 10 seconds (nvidia-smi takes a moment)."""
    import os
    import shutil
    import time

    from helpers.core import config

    smi = config.nvidia_smi() or shutil.which("nvidia-smi")
    if not smi:
        return None
    pids = _compute_apps(int(time.monotonic() // 10), smi)
    if pids is None:
        return None
    return len(set(pids) - {os.getpid()})


def contention_note(n: int | None) -> str:
    """'' for an unshared GPU or an unknown count, else 'contended: N other process(es)'."""
    if not n:
        return ""
    return f"contended: {n} other process{'es' if n != 1 else ''}"
