"""Lab 1's graded parts, run by the grader (tools/grader) outside the learner's process.

The toy GPUs run here, started by the grader (each in its own device process, as always); the
learner's driver in the sandboxed worker reaches them through a stand-in bus
(helpers.labs.grading.remote.RemoteToyGPU): every register read and write, every load and store of
device-visible system memory, every BAR1 access is a question to this process, which performs
it on the real device. The checks are helpers.labs.lab1's, unchanged: they run here,
read the device's own state, and call each part through `RemoteParts`, which calls the
learner's function for the part under test (in the worker) and the reference for every other
part (here), so one bug costs one part. Device seeds are drawn from the part's seed.
"""

from __future__ import annotations

import builtins
from contextlib import contextmanager

import numpy as np

from helpers.labs import grading, lab1
from helpers.labs.grading import CheckFailed, remote, wire
from helpers.labs.lab1 import FakeBus, LabDriver
from helpers.models.toygpu.bus import Buffer
from helpers.models.toygpu.driver import ToyGPU
from instructor.labs import lab1_driver as ref
from tools.grader.api import Part, StudentRaised
from tools.grader.session import WorkerGone

SEEDS_PER_PART = 2


class DeviceService:
    """Answers one device's questions from the worker (the stand-in bus's operations)."""

    def __init__(self, dev: ToyGPU) -> None:
        self.dev = dev

    def _memory(self, addr: int, nbytes: int) -> np.ndarray:
        if not (0 <= addr and 0 <= nbytes and addr + nbytes <= self.dev.sys_view.size):
            raise ValueError(f"system memory [{addr:#x}, {addr + nbytes:#x}) is outside the device's")
        return self.dev.sys_view[addr:addr + nbytes]

    def __call__(self, op: str, *args):
        d = self.dev
        if op == "read":
            return d.read(args[0])
        if op == "write":
            return d.write(args[0], int(args[1]), check=bool(args[2]))
        if op == "check":
            return d.check()
        if op == "alloc_sys":
            b = d.alloc_sys(int(args[0]), int(args[1]))
            return {"addr": b.addr, "nbytes": b.nbytes}
        if op == "free_sys":
            return d.free_sys(Buffer(int(args[0]), 0, self._memory(0, 0)))
        if op == "mem_read":
            return self._memory(int(args[0]), int(args[1])).copy()
        if op == "mem_write":
            data = np.asarray(args[1], dtype=np.uint8).reshape(-1)
            self._memory(int(args[0]), data.size)[:] = data
            return None
        if op == "bar1_read":
            return np.asarray(d.bar1_read(int(args[0]), int(args[1]), width=int(args[2])))
        if op == "bar1_write":
            return d.bar1_write(int(args[0]), np.asarray(args[1]), mode=str(args[2]), width=int(args[3]))
        if op == "device_counters":
            return {k: int(v) for k, v in d.device_counters().items()}
        if op == "counters":
            c = d.counters
            return {k: getattr(c, k) for k in ("mmio_reads", "mmio_writes", "wc_bursts", "bar_bytes_read",
                                              "bar_bytes_written", "doorbells", "cpu_model_ns")}
        raise ValueError(f"the toy GPU has no operation {op!r}")


DRIVER_INTS = ("entries", "pt_base", "pages", "bar1_table", "first_dva", "wptr", "next_fence", "doorbells",
               "vram_next")


class RemoteParts:
    """lab1.Parts for the grader: the learner's functions of `check` run in the worker on a
    stand-in of the grader's device; every other part is the reference, run here."""

    def __init__(self, student, check: str, seed: int) -> None:
        self.student, self.own = student, lab1.CHECKS[check]
        rng = np.random.default_rng([30, seed])
        self.seeds = tuple(int(x) for x in rng.integers(1000, 1 << 30, SEEDS_PER_PART))
        self.devices: dict[str, ToyGPU] = {}

    @contextmanager
    def active(self):
        yield self

    def __getattr__(self, name: str):
        if name not in lab1.FUNCTIONS:
            raise AttributeError(name)
        if name not in self.own:
            return getattr(ref, name)
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    # -- crossing -------------------------------------------------------------------------
    def _dev_name(self, dev: ToyGPU) -> str:
        name = f"dev{id(dev)}"
        self.devices[name] = dev
        return name

    def _in(self, value):
        """A value from the worker, with its stand-ins replaced by the grader's own objects."""
        if isinstance(value, dict) and "__toygpu__" in value:
            return self.devices[value["__toygpu__"]]
        if isinstance(value, dict) and isinstance(value.get("__labdriver__"), dict):
            return self._driver_back(value, self.devices[value["__labdriver__"].get("dev")])
        if isinstance(value, list):
            return [self._in(v) for v in value]
        return value

    def _export(self, value):
        if isinstance(value, LabDriver):
            f = {k: getattr(value, k) for k in DRIVER_INTS}
            f |= {k: (getattr(value, k).addr, getattr(value, k).nbytes) for k in ("ring", "fence", "rptr")}
            f["dev"] = self._dev_name(value.dev)
            return {"__labdriver__": f}
        return value

    def _reference(self, name: str):
        """An earlier part, for the learner's code: the reference, run here on the real device."""
        def answer(*args, **kwargs):
            real = [self._in(a) for a in args]
            result = getattr(ref, name)(*real, **{k: self._in(v) for k, v in kwargs.items()})
            drv = next((a for a in real if isinstance(a, LabDriver)), None)
            return {"result": self._export(result),
                    "driver": None if drv is None else {k: getattr(drv, k) for k in DRIVER_INTS}}

        return answer

    def _out(self, value, callbacks: dict):
        if isinstance(value, ToyGPU):
            name = self._dev_name(value)
            callbacks[name] = DeviceService(value)
            return wire.remote("toygpu", name=name)
        if isinstance(value, LabDriver):
            name = self._dev_name(value.dev)
            callbacks[name] = DeviceService(value.dev)
            fields = {k: getattr(value, k) for k in DRIVER_INTS}
            fields |= {k: (getattr(value, k).addr, getattr(value, k).nbytes) for k in ("ring", "fence", "rptr")}
            return wire.remote("labdriver", name=name, fields=fields)
        if isinstance(value, FakeBus):
            return wire.remote("fakebus", values=dict(value.values))
        if isinstance(value, (list, tuple)):
            return type(value)(self._out(v, callbacks) for v in value)
        return value

    def _driver_back(self, data, dev: ToyGPU, into: LabDriver | None = None):
        """A LabDriver from the worker's data, on the grader's device (its buffers checked)."""
        if not (isinstance(data, dict) and isinstance(data.get("__labdriver__"), dict)):
            return data
        f = data["__labdriver__"]
        if f.get("dev") is not None and f["dev"] in self.devices:
            dev = self.devices[f["dev"]]
        bufs = {}
        for k in ("ring", "fence", "rptr"):
            addr, nbytes = (int(x) for x in f[k])
            if not (0 <= addr and 0 < nbytes and addr + nbytes <= dev.sys_view.size):
                raise wire.WireError(f"the driver's {k} buffer ({addr:#x}, {nbytes} bytes) is not system memory")
            bufs[k] = Buffer(addr, nbytes, dev.sys_view[addr:addr + nbytes])
        ints = {k: int(f[k]) for k in DRIVER_INTS}
        if into is None:
            return LabDriver(dev=dev, **bufs, **ints)
        for k, v in ints.items():
            setattr(into, k, v)
        return into

    def _call(self, name: str, args: tuple, kwargs: dict):
        callbacks: dict = {}
        sent = [self._out(a, callbacks) for a in args]
        drv_at = next((i for i, a in enumerate(args) if isinstance(a, LabDriver)), None)
        dev = next((a for a in args if isinstance(a, ToyGPU)), None) or (args[drv_at].dev if drv_at is not None
                                                                          else None)
        bind = {n: ("driver_callback", self._reference(n)) for n in lab1.FUNCTIONS if n not in self.own}
        try:
            got = self.student.call(name, *sent, callbacks=callbacks, sync=drv_at, kwargs=kwargs, bind=bind)
        except StudentRaised as exc:
            raise _as_raised(exc) from None
        value = got[0] if drv_at is not None else got
        if drv_at is not None:
            self._driver_back(got[1], args[drv_at].dev, into=args[drv_at])
        return self._driver_back(value, dev) if dev is not None else value


def _as_raised(exc: StudentRaised) -> Exception:
    """The learner's exception as the class the checks expect (the most specific known class)."""
    for name in exc.types:
        if name in remote.course_exceptions() or isinstance(getattr(builtins, name, None), type):
            if name in ("Exception", "BaseException"):
                break
            e = remote.rebuild(name, exc.message)
            if type(e).__name__ == name:
                e.learner = exc  # the feedback of an unexpected one keeps where it came from
                return e
    return exc


def _part(check: str):
    def run(c, student, seed: int) -> None:
        try:
            lab1.CHECK_FUNCTIONS[check](c, RemoteParts(student, check, seed))
        except (CheckFailed, StudentRaised, WorkerGone, wire.WireError):
            raise
        except Exception as exc:  # noqa: BLE001 - as grading.check does: the learner's part failed
            learner = getattr(exc, "learner", None)
            if learner is not None:
                raise learner from None
            raise CheckFailed(grading.explain(exc)) from None

    run.__name__ = check
    return run


GRADED = (
    Part("identify_device", 2, ("identify",), _part("identify_device")),
    Part("map_bar1", 3, ("map_bar1",), _part("map_bar1")),
    Part("bring_up", 3, ("bring_up",), _part("bring_up")),
    Part("submit_and_wait", 4, ("submit", "wait_fence"), _part("submit_and_wait")),
    Part("dma_copies", 4, ("copy_to_vram", "copy_from_vram"), _part("dma_copies")),
    Part("compute", 2, ("saxpy",), _part("compute")),
    Part("batching", 3, ("run_batched",), _part("batching")),
    Part("recovery", 4, ("recover",), _part("recovery")),
)
