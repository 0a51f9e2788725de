"""Equivalent representations of a value, and a grader session that runs the worker in this process.

`represent(value, rng)` returns a value equal to `value` in another Python type (a NumPy array or
scalar, a tuple, a namedtuple, a defaultdict, an OrderedDict, a read-only mapping ...), drawn from
`rng`; `InProcess` is the grader's `Session` with the worker (helpers.labs.grading.worker.Worker) in this
process: every request, reply and callback still crosses as JSON through helpers.labs.grading.wire, so a
check sees exactly what it would see from a sandboxed worker. tests/labs/test_representations.py
grades the worked solutions with every returned value re-represented and expects full marks.
"""

from __future__ import annotations

import collections
import json
import random
import types

import numpy as np

from helpers.labs.grading import remote, wire
from helpers.labs.grading.worker import Worker
from tools.grader import session as grader_session

_TUPLES: dict[int, type] = {}


def _namedtuple(n: int) -> type:
    if n not in _TUPLES:
        _TUPLES[n] = collections.namedtuple(f"Answer{n}", [f"f{i}" for i in range(n)])
    return _TUPLES[n]


def _numeric(seq) -> bool:
    return all(type(x) in (int, float) for x in seq) and len(seq) > 0


COUNT = collections.Counter()  # representation -> how many values were re-represented so


def represent(value, rng: random.Random, depth: int = 0):
    """`value` in an equivalent representation (plain data only; any other object unchanged)."""
    t = type(value)
    if depth > 6:
        return value
    if t is bool:
        how = rng.choice(["same", "numpy"])
        out = value if how == "same" else np.bool_(value)
    elif t in (int, float):
        how = rng.choice(["same", "numpy", "array0d"])
        out = value if how == "same" else (np.int64(value) if t is int else np.float64(value)) if how == "numpy" \
            else np.array(value)
    elif t is str:
        how = rng.choice(["same", "numpy"])
        out = value if how == "same" else np.str_(value)
    elif t in (list, tuple):
        items = [represent(v, rng, depth + 1) for v in value]
        choices = ["list", "tuple", "namedtuple"] if value else ["list", "tuple"]
        if _numeric(value) and len({type(x) for x in value}) == 1:
            choices.append("array")
        how = rng.choice(choices)
        out = (list(items) if how == "list" else tuple(items) if how == "tuple"
               else _namedtuple(len(items))(*items) if how == "namedtuple" else np.array(value))
    elif t is dict:
        items = {k: represent(v, rng, depth + 1) for k, v in value.items()}
        how = rng.choice(["dict", "defaultdict", "ordered", "proxy"])
        out = (items if how == "dict" else collections.defaultdict(list, items) if how == "defaultdict"
               else collections.OrderedDict(items) if how == "ordered" else types.MappingProxyType(items))
    elif t is np.ndarray:
        how = rng.choice(["same", "fortran", "strided"])
        out = value if how == "same" or value.ndim == 0 else (np.asfortranarray(value) if how == "fortran"
                                                               else np.repeat(value, 2, axis=0)[::2])
    else:
        return value
    COUNT[f"{t.__name__}->{how}"] += 1
    return out


def wrap(fn, rng: random.Random):
    """`fn` with its results re-represented (a result that is one of its arguments stays that object:
    a pick, as Lab 4's policies return)."""
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        if any(out is a for a in args) or any(out is a for arg in args if isinstance(arg, (list, tuple)) for a in arg):
            return out
        return represent(out, rng)
    wrapped.__wrapped__ = fn
    return wrapped


def wrap_class(cls: type, rng: random.Random) -> type:
    """A subclass of `cls` whose public methods' results are re-represented."""
    methods = {n: wrap(f, rng) for n, f in vars(cls).items() if callable(f) and not n.startswith("_")}
    return type(cls.__name__, (cls,), methods)


def wrap_factory(factory, rng: random.Random):
    def made(*args, **kwargs):
        return wrap(factory(*args, **kwargs), rng)
    return made


class InProcess:
    """A grader Session whose worker is this process's helpers.labs.grading.worker.Worker (JSON in between)."""

    alive = True

    def __init__(self, setup: list[str], cells: dict[str, str]) -> None:
        self.worker = Worker(None, None)
        self.errors = self.worker.load(setup, cells, wire.allowed_names())  # as the grader's load request
        self.callbacks: dict = {}
        self.worker.callback = self._callback

    def _callback(self, name: str, *args, **kwargs):
        msg = json.loads(wire.dumps({"op": "callback", "name": name,
                                     "args": wire.encode([remote.export(a) for a in args]),
                                     "kwargs": wire.encode({k: remote.export(v) for k, v in kwargs.items()})}))
        answer = json.loads(wire.dumps(grader_session._answer(msg, self.callbacks)))
        if answer.get("op") != "answer":
            if answer.get("error"):
                raise remote.rebuild(str(answer["error"]), str(answer.get("message", "")))
            raise RuntimeError(answer.get("message"))
        return self.worker.decode(answer.get("value"))

    def request(self, message: dict, timeout: float, callbacks: dict | None = None) -> dict:
        self.callbacks = callbacks or {}
        reply = self.worker.call(json.loads(wire.dumps(message)))
        return json.loads(wire.dumps(reply))

    def output(self, limit: int = 2000) -> str:
        return ""

    def close(self) -> None:
        self.alive = False
