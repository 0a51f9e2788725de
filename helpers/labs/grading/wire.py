"""What crosses between the lab grader and a submission's worker: plain data, as JSON.

The grader (tools/grader) calls a learner's functions in another process, a sandboxed worker
(helpers.labs.grading.worker), and the two speak one JSON object per line. This module turns the
values a lab passes and returns into that JSON and back:

- JSON's own types, plus tuples, dicts with non-string keys, non-finite floats, NumPy arrays
  of numeric dtypes (bytes in base64) and NumPy scalars; a subclass of int, float or str (an
  IntEnum, a learner's float with a lying `__eq__`) crosses as its plain value;
- the course's dataclasses the lab being graded hands to learner code, rebuilt from their fields:
  the lab declares them (`WIRE_TYPES` beside `GRADED` in its checks module, labs/README.md), the
  grader allows exactly those (`allow`) and names them to the worker (`allow_named`); this module
  knows no chapter, model or lab;
- tagged placeholders the worker turns into stand-ins (`{"__remote__": kind, ...}`, see
  helpers.labs.grading.remote).

Decoding builds only those: dicts, lists, numbers, strings, arrays of numbers and the listed
dataclasses. What the grader reads back from a worker is therefore data whose comparison it
controls; an object whose `__eq__` the learner wrote cannot cross (the course design's
"assume an adversary").
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import math
from collections.abc import Callable, Mapping

import numpy as np

from helpers.core.errors import CourseError

#: dtypes an array may have on the wire (never object)
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")
MAX_DEPTH = 32


class WireError(CourseError):
    """A value that cannot cross between grader and worker (not plain data)."""


#: the dataclasses that may cross now, by "module:qualname" (set by `allow` / `allow_named`)
_allowed: dict[str, type] = {}
COURSE_PACKAGE = "helpers."  # a dataclass named on the wire must come from the course's package


def type_name(cls: type) -> str:
    """How a dataclass is named on the wire: 'helpers.models.routes:LinkMatrix'."""
    return f"{cls.__module__}:{cls.__qualname__}"


def allow(classes) -> None:
    """Let exactly these course dataclasses cross (the grader, for the lab it grades now)."""
    for cls in classes:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__.startswith(COURSE_PACKAGE)):
            raise WireError(f"{cls!r} is not a dataclass of the course's package: it cannot cross")
    _allowed.clear()
    _allowed.update({type_name(c): c for c in classes})


def allowed_names() -> list[str]:
    """The names of the dataclasses allowed now (what the grader sends the worker)."""
    return sorted(_allowed)


def allow_named(names) -> None:
    """Let the dataclasses the grader names cross (the worker); only the course's own modules are imported."""
    classes = []
    for name in names:
        module, _, qualname = str(name).partition(":")
        if not module.startswith(COURSE_PACKAGE) or not qualname.isidentifier():
            raise WireError(f"{name!r} is not a course dataclass")
        classes.append(getattr(importlib.import_module(module), qualname, None))
    allow(classes)


def _float(x: float):
    return x if math.isfinite(x) else {"__float__": repr(x)}


def encode(value, depth: int = 0):
    """`value` as JSON-ready data; WireError for anything that is not plain data."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return _float(value)
    if isinstance(value, (int, float, str)) and not isinstance(value, np.generic):
        # a subclass (an IntEnum, or a learner's float whose __eq__ lies) crosses as its plain
        # value, read through the base type's own slot: whatever it overrides stays behind
        base = int if isinstance(value, int) else float if isinstance(value, float) else str
        plain = {int: int.__int__, float: float.__float__, str: str.__str__}[base](value)
        return encode(plain, depth + 1)
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return encode(value.item(), depth + 1)
    # a list, tuple or mapping of any class (a namedtuple, a defaultdict, an OrderedDict) crosses as
    # its plain value: what it holds, read through the base type (the grader compares values, not types)
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, depth + 1) for v in tuple.__iter__(value)]}
    if isinstance(value, dict) or (isinstance(value, Mapping) and not isinstance(value, np.ndarray)):
        items = list(dict.items(value) if isinstance(value, dict) else value.items())
        if all(type(k) is str and not k.startswith("__") for k, _ in items):
            return {k: encode(v, depth + 1) for k, v in items}
        return {"__items__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]}
    if isinstance(value, np.ndarray):
        value = np.asarray(value)  # a subclass (a matrix, a masked array) as its plain array
        if value.dtype == object:
            return encode(value.tolist(), depth + 1)
        if value.dtype.name not in DTYPES:
            raise WireError(f"an array of dtype {value.dtype} cannot be sent (numbers only)")
        a = np.array(value, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        return {"__nd__": [a.dtype.name, list(a.shape), base64.b64encode(a.tobytes()).decode()]}
    if t is Remote:
        return {"__remote__": value.kind, **{k: encode(v, depth + 1) for k, v in value.fields.items()}}
    name = type_name(t)
    if dataclasses.is_dataclass(value) and _allowed.get(name) is t:
        return {"__dc__": name, "v": {f.name: encode(getattr(value, f.name), depth + 1)
                                     for f in dataclasses.fields(value)}}
    raise WireError(f"a {t.__name__} is not plain data (numbers, strings, lists, dicts, NumPy arrays)")


@dataclasses.dataclass(frozen=True)
class Remote:
    """A placeholder the worker replaces with a stand-in of `kind` (helpers.labs.grading.remote)."""

    kind: str
    fields: dict


def remote(kind: str, **fields) -> Remote:
    """A placeholder the worker replaces with a stand-in of `kind` (helpers.labs.grading.remote)."""
    return Remote(kind, fields)


def decode(data, remote_maker: Callable[[dict], object] | None = None, depth: int = 0):
    """The value `data` (JSON-decoded) stands for; placeholders go to `remote_maker`."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if isinstance(data, list):
        return [decode(v, remote_maker, depth + 1) for v in data]
    if not isinstance(data, dict):
        return data
    if "__float__" in data:
        return float(data["__float__"])
    if "__tuple__" in data:
        return tuple(decode(v, remote_maker, depth + 1) for v in data["__tuple__"])
    if "__items__" in data:
        return {_key(decode(k, remote_maker, depth + 1)): decode(v, remote_maker, depth + 1)
                for k, v in data["__items__"]}
    if "__nd__" in data:
        return _array(data["__nd__"])
    if "__dc__" in data:
        cls = _allowed.get(data["__dc__"]) if isinstance(data["__dc__"], str) else None
        if cls is None:
            raise WireError(f"unknown type {data['__dc__']!r} on the wire")
        try:
            return cls(**{k: decode(v, remote_maker, depth + 1) for k, v in data["v"].items()})
        except (TypeError, ValueError, AttributeError) as exc:  # the course's own validation (an InputError too)
            raise WireError(f"a malformed {data['__dc__']} on the wire ({exc})") from None
    if "__remote__" in data:
        if remote_maker is None:
            raise WireError("a stand-in placeholder where only data may come")
        return remote_maker(data)
    return {k: decode(v, remote_maker, depth + 1) for k, v in data.items()}


def _key(k):
    if isinstance(k, (list, dict)):
        raise WireError("a dict key must be a number, a string or a tuple")
    return k


def _array(spec) -> np.ndarray:
    dtype, shape, b64 = spec
    if dtype not in DTYPES:
        raise WireError(f"an array of dtype {dtype!r} on the wire")
    try:
        shape = tuple(int(s) for s in shape)
        a = np.frombuffer(base64.b64decode(b64, validate=True), dtype=dtype)
    except (ValueError, TypeError) as exc:  # binascii.Error is a ValueError
        raise WireError(f"a malformed array on the wire ({exc})") from None
    if a.size != math.prod(shape):
        raise WireError(f"an array of shape {shape} with {a.size} elements")
    return a.reshape(shape).copy()


def plain(value, keep_arrays: bool = False, depth: int = 0):
    """A decoded result in one canonical form, so that a check compares values, never types:
    every array and tuple becomes a list (an array of 0 dimensions, its number), a mapping a
    dict with plain keys (a tuple key stays a tuple, of plain values). A correct answer returned
    as a NumPy array, a tuple, a namedtuple, a defaultdict or a NumPy scalar reads as the list,
    dict or number it stands for. `keep_arrays`: an array of 1 or more dimensions stays an array
    (a check of a dtype the lab asks for: Lab 3's float32 map)."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if isinstance(value, np.ndarray):
        return value if keep_arrays and value.ndim else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v, keep_arrays, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_plain_key(k, depth + 1): plain(v, keep_arrays, depth + 1) for k, v in value.items()}
    return value


def _plain_key(k, depth: int):
    if isinstance(k, tuple):
        return tuple(_plain_key(x, depth + 1) for x in k)
    return plain(k, False, depth)


def dumps(message: dict) -> bytes:
    """One protocol line."""
    return (json.dumps(message, allow_nan=False, separators=(",", ":")) + "\n").encode()
