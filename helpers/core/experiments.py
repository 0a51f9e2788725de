"""The registry of experiments: what each one measures, what it needs, which parameters it takes.

A chapter package adds an experiment by decorating a function:

    @experiment("pinning.cost_vs_size", chapter=4, title="...", needs=(GPU,),
                params={"frames": validate.count(1, 1000)})
    def cost_vs_size(quick: bool, frames: int = 200) -> dict: ...

The function runs live and returns JSON-serialisable data; the recorder stores that dict in its
own file, data/reference/<machine>/<id>.json, and replay reads it back. Notebooks never call the function directly: they
ask the context, `ctx.get("pinning.cost_vs_size", frames=200)`, and the evidence contract
(core.evidence) checks the parameters, decides live or replay from `needs`, and says why.
`discover()` imports every chapter package so their decorators run.

An experiment whose measuring code the notebook shows takes that code as a parameter named
`code`, whose default is the function on the page:

    def time_copies(nbytes: int, repeats: int) -> list[float]: ...   # the page shows this text

    @experiment("copy.events", chapter=3, title="...")
    def events(quick: bool, nbytes: int = 4096, code=time_copies) -> dict:
        return {"times_s": code(nbytes, 20 if quick else 200)}

The recorder runs the default, so the page's code is the recorder's code: the page's cell is
written from this function's text by `python -m tools.shown` (one source, the package; `make
test` fails when a cell is not what it would write). A learner who edits the function on the
page passes it with `ctx.get("copy.events", code=time_copies)` and runs their version live (core.evidence).

A chapter can also register a check the recorder runs on what it recorded (the course-vs-C
cross-check does): `@recording_check` on `fn(data_by_id) -> list[str]`, one line per
reason the run is not fit to commit (empty: fine).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field

from helpers.core import validate
from helpers.core.errors import CourseError, InputError
from helpers.core.validate import Validator

# What an experiment can need to run live (anything missing: replay, saying which).
GPU = "gpu"  # one usable CUDA GPU, and the course in live mode
TWO_GPUS = "two_gpus"  # two or more CUDA GPUs
STRACE = "strace"  # the strace binary (COURSE_STRACE or PATH)
NVCC = "nvcc"  # nvcc, or a built helpers/measure/bwcheck (BWCHECK)
QEMU = "qemu"  # qemu-system-x86_64 (COURSE_QEMU or PATH): the kernel lab boots Linux in it
NEEDS = (GPU, TWO_GPUS, STRACE, NVCC, QEMU)

# Which reference machine holds an experiment's recording (data/reference/<machine>/<id>.json).
DEFAULT_REFERENCE = "default"  # COURSE_REFERENCE, else h100-pcie
P2P_REFERENCE = "p2p"  # COURSE_P2P_REFERENCE, else config.DEFAULT_P2P_REFERENCE
# not a GPU recording: a transcript of a run in the kernel lab's VM, data/kernel_lab/<id>.json,
# written by `python -m helpers.measure.kernel_vm record` (the GPU recorder leaves these out)
KERNEL_LAB_REFERENCE = "kernel_lab"
REFERENCES = (DEFAULT_REFERENCE, P2P_REFERENCE, KERNEL_LAB_REFERENCE)

_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
_REGISTRY: dict[str, Experiment] = {}
_CHECKS: dict[str, Callable[[dict], list[str]]] = {}


class RegistryError(CourseError):
    """An experiment was declared wrongly (a course author's mistake, found at import time)."""


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: its id, chapter, title, runner, needs, parameters and recording."""

    id: str
    chapter: int
    title: str
    run: Callable[..., dict]  # run(quick, **params) -> JSON-serialisable data
    _: KW_ONLY
    needs: tuple[str, ...] = (GPU,)
    reference: str = DEFAULT_REFERENCE
    params: Mapping[str, Validator] = field(default_factory=dict)
    # checks that need several parameters at once (lo <= hi): fn(params) raises InputError
    params_check: Callable[[dict], None] | None = None
    # when the recording is part of another experiment's: that experiment's id, and `from_recording`
    # takes this one's data out of it (fn(that data) -> data). The recorder does not run it on its own.
    recorded_in: str | None = None
    from_recording: Callable[[dict], dict] | None = None
    # the reference machines (DEFAULT_REFERENCE, P2P_REFERENCE) where a recording may be absent: declared
    # once here, so a page replays "not recorded on that machine" instead of failing, and the coverage
    # test (tests/core/test_recording_coverage.py) does not require the file
    optional_on: tuple[str, ...] = ()

    @property
    def shown(self) -> Callable | None:
        """The measuring function the notebook shows (the default of the `code` parameter), or None."""
        param = inspect.signature(self.run).parameters.get("code")
        return None if param is None else param.default

    @property
    def where(self) -> str:
        """'helpers/chNN_.../module.py:function', for `record --list` and error messages."""
        mod = self.run.__module__.replace(".", "/") + ".py"
        return f"{mod}:{self.run.__name__}"

    def check_params(self, given: Mapping[str, object]) -> dict:
        """The learner's parameters, each checked by its declared validator; unknown names refused."""
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            takes = ", ".join(self.params) or "no parameters"
            raise InputError(f"experiment {self.id!r} takes {takes}; not {', '.join(unknown)}")
        checked = {name: self.params[name](value, f"{self.id}: {name}") for name, value in given.items()}
        if self.params_check is not None:
            self.params_check(checked)
        return checked


def experiment(id: str, *, chapter: int, title: str, needs: tuple[str, ...] = (GPU,),
               reference: str = DEFAULT_REFERENCE, params: Mapping[str, Validator] | None = None,
               params_check: Callable[[dict], None] | None = None,
               recorded_in: str | None = None, from_recording: Callable[[dict], dict] | None = None,
               optional_on: tuple[str, ...] = ()):
    """Register the decorated function as experiment `id` (see the module docstring).

    optional_on: the reference machines where its recording may be missing (see Experiment).

    needs=() declares an experiment that needs only a CPU: it runs live in every mode but a
    forced replay (COURSE_MODE=replay)."""
    if not isinstance(id, str) or not _ID.match(id):
        raise RegistryError(f"experiment id must be dotted lower-case words, got {id!r}")
    bad = [n for n in needs if n not in NEEDS]
    if bad or reference not in REFERENCES:
        raise RegistryError(f"experiment {id!r}: needs must be from {NEEDS} and reference from {REFERENCES}; "
                            f"got needs={needs!r}, reference={reference!r}")
    if (recorded_in is None) != (from_recording is None) or any(r not in REFERENCES for r in optional_on):
        raise RegistryError(f"experiment {id!r}: recorded_in and from_recording go together, and optional_on "
                            f"names machines from {REFERENCES}; got {recorded_in!r}, {from_recording!r}, {optional_on!r}")
    params = dict(params or {})
    silent = [n for n, v in params.items() if validate.describe(v) is None]
    if silent:
        raise RegistryError(f"experiment {id!r}: the validators of {silent} cannot say what they accept "
                            "(use a helpers.core.validate rule, or give the function a docstring)")

    def wrap(fn: Callable[..., dict]) -> Callable[..., dict]:
        sig = inspect.signature(fn)
        missing = [p for p in params if p not in sig.parameters]
        if missing or "quick" not in sig.parameters:
            raise RegistryError(f"experiment {id!r}: {fn.__qualname__} must take quick and its declared "
                                f"parameters; lacks {['quick', *missing] if 'quick' not in sig.parameters else missing}")
        code = sig.parameters.get("code")
        if code is not None and not callable(code.default):
            raise RegistryError(f"experiment {id!r}: its `code` parameter must default to the function the "
                                f"notebook shows, got {code.default!r}")
        existing = _REGISTRY.get(id)
        if existing and existing.run.__qualname__ != fn.__qualname__:
            raise RegistryError(f"experiment {id!r} is registered twice")
        _REGISTRY[id] = Experiment(id, chapter, title, fn, needs=tuple(needs), reference=reference,
                                   params=params, params_check=params_check, recorded_in=recorded_in,
                                   from_recording=from_recording, optional_on=tuple(optional_on))
        return fn

    return wrap


def recording_check(fn: Callable[[dict], list[str]]) -> Callable[[dict], list[str]]:
    """Register `fn(data_by_id) -> problems` to run on every recording (see the module docstring).

    `data_by_id` maps each experiment recorded in the run to the data it returned; the check
    ignores the ids it does not know. The function is returned unchanged.
    """
    _CHECKS[f"{fn.__module__}.{fn.__qualname__}"] = fn
    return fn


def recording_checks() -> list[Callable[[dict], list[str]]]:
    """The registered recording checks (after `discover()` has imported the chapters)."""
    return list(_CHECKS.values())


def discover() -> dict[str, Experiment]:
    """Import every chapter package's modules (so their experiments register); return the registry."""
    import helpers

    for mod in pkgutil.walk_packages(helpers.__path__, "helpers."):
        leaf = mod.name.rsplit(".", 1)[-1]
        if mod.name.startswith("helpers.ch") and not leaf.startswith("_"):
            importlib.import_module(mod.name)
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].chapter, kv[0])))


def get(experiment_id: str) -> Experiment:
    """The registered experiment, or an InputError listing the ids there are."""
    registry = discover()
    if experiment_id not in registry:
        raise InputError(f"no experiment {experiment_id!r} is registered; "
                         f"`python -m helpers.record --list` shows them ({', '.join(registry)})")
    return registry[experiment_id]
