"""What a lab's graded parts are written against: `Part`, `Student`, `StudentRaised`, `own`.

labs/README.md ("The authoring API: what the grader loads") is its one description: a lab's
`instructor/labs/labN_checks.py` defines `GRADED` (a tuple of `Part`) and, if its calls pass course
dataclasses, `WIRE_TYPES`; each part's `run(c, student, seed)` judges through `c` (a
`helpers.labs.grading.check`) what `student` (a `Student`: the learner's functions, called in the
sandboxed worker with data, helpers.labs.grading.wire) returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from helpers.labs.grading import wire
from tools.grader.session import Session


@dataclass(frozen=True)
class Part:
    """One graded check: its notebook grade_id, points, the learner functions it grades,
    `run(c, student, seed)`, which raises CheckFailed (through `c`) when the part is wrong, and
    the course functions its worker must not hold (`own_work`)."""

    grade_id: str
    points: float
    functions: tuple[str, ...]
    run: Callable
    _: KW_ONLY
    #: ((module, (function, ...)), ...): the course's own implementation of what this part must
    #: compute; the part runs in a worker whose copy of those modules has them redacted (tools/grader/ownwork.py)
    own_work: tuple[tuple[str, tuple[str, ...]], ...] = ()


def own(forbid: dict[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A `forbid` mapping ({module: names}) as a Part's `own_work`."""
    return tuple(sorted((m, tuple(names)) for m, names in forbid.items()))


class StudentRaised(Exception):  # noqa: N818 - the learner's code raised
    """The learner's function raised: the built-in classes it is an instance of, its message."""

    def __init__(self, info: dict) -> None:
        self.types = [str(t) for t in info.get("types", [])]
        self.name = str(info.get("name", "Exception"))
        self.message = str(info.get("message", ""))[:500]
        self.where = str(info.get("where", ""))[:200]
        super().__init__(f"{self.name}: {self.message}")

    def isa(self, name: str) -> bool:
        """True when the learner's exception is an instance of the built-in class `name`."""
        return name in self.types

    def feedback(self) -> str:
        where = f" ({self.where})" if self.where else ""
        if self.isa("NotImplementedError"):
            return (f"not written yet: a `raise NotImplementedError()` stub was reached{where}. "
                    "Replace the `# YOUR CODE HERE` part of that function with your code.")
        if self.isa("OSError") and "File too large" in self.message:
            return (f"your code's output (or a file it wrote) went over the grader's size limit{where}: "
                    "print less")
        return f"your code raised {self.name}: {self.message}{where}"


class PartTimeout(Exception):  # noqa: N818 - the event
    """A part's calls together took longer than the part may (Limits.part_s)."""


class Remote:
    """An object the learner's code made that stays in the worker (`keep=True`): call its methods."""

    def __init__(self, student: Student, handle: int) -> None:
        self._student, self._handle = student, handle

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._student.call({"handle": self._handle}, *args, attr=name, kwargs=kwargs)

    def __call__(self, *args, pick: int | None = None, **kwargs):
        return self._student.call({"handle": self._handle}, *args, pick=pick, kwargs=kwargs)


class Student:
    """The learner's functions in the worker; each call returns data or raises StudentRaised."""

    def __init__(self, session: Session, call_s: float, deadline: float | None = None, *,
                 lab_seed: int | None = None, lab_deadline: float | None = None) -> None:
        """`deadline`: the part's (monotonic clock); `lab_deadline`: the whole lab's, which no call
        outlives; `lab_seed`: the submission's seed (a lab that checks every part in one run, Lab 6)."""
        self.session, self.call_s, self.deadline = session, call_s, deadline
        self.lab_seed, self.lab_deadline = lab_seed, lab_deadline

    def time_left(self, timeout: float) -> float:
        """`timeout`, cut to what is left of the part's and the lab's time; PartTimeout when none is."""
        now = time.monotonic()
        left = min([timeout] + [d - now for d in (self.deadline, self.lab_deadline) if d is not None])
        if left <= 0:
            raise PartTimeout("this part's calls of your code took too long altogether (very slow code?)")
        return left

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, kwargs=kwargs)

    def call(self, target, *args, attr: str | None = None, bind: dict[str, Callable] | None = None,
             keep: bool = False, pick: int | None = None, forbid: dict[str, tuple[str, ...]] | None = None,
             callbacks: dict[str, Callable] | None = None, timeout: float | None = None, sync: int | None = None,
             keep_arrays: bool = False, kwargs: dict | None = None):
        """Call learner function `target` (or a kept object's method `attr`) in the worker, with
        positional `args` and keyword arguments `kwargs` (a dict: the options below are the grader's).

        bind: global names of the learner's namespace answered, during this call, by these
          grader-side functions (the reference of earlier parts: one bug costs one part); a value
          (kind, fn) uses stand-in `kind` of helpers.labs.grading.remote (Lab 1: "driver_callback").
        keep: leave the result in the worker and return a `Remote` to it.
        pick: the result is one of argument `pick`'s items; return its index (or None).
        forbid: {module: names} the call must not use: integrity.own_work in the worker, for its message
          only (the learner's process can patch it); the rule rests on the Part's `own_work` (ownwork.py).
        callbacks: grader-side answers for stand-ins passed as arguments (wire.remote).
        sync: also return argument `sync` as the call left it: (result, that argument), as data.
        keep_arrays: arrays in the result stay arrays (else every array and tuple reads as a list:
          helpers.labs.grading.wire.plain; a check compares values, not types).
        """
        left = self.time_left(timeout or self.call_s)
        cbs = dict(callbacks or {})
        names = {}
        for name, fn in (bind or {}).items():  # fn, or (stand-in kind, fn): helpers.labs.grading.remote
            kind, fn = fn if isinstance(fn, tuple) else ("callback", fn)
            names[name] = {"kind": kind, "cb": f"bind:{name}"}
            cbs[names[name]["cb"]] = fn
        reply = self.session.request(
            {"op": "call", "target": target, "attr": attr, "args": wire.encode(list(args)),
             "kwargs": wire.encode(dict(kwargs or {})), "bind": names, "keep": keep, "pick": pick,
             "forbid": forbid, "what": target if isinstance(target, str) else attr, "sync": sync},
            left, cbs)
        op = reply.get("op")
        if op == "raised":
            raise StudentRaised(reply)
        if op != "return":
            raise wire.WireError(f"the worker answered {op!r}")
        if keep:
            h = reply.get("handle")
            if type(h) is not int:
                raise wire.WireError("the worker kept no object")
            return Remote(self, h)
        if pick is not None:
            i = reply.get("index")
            return i if type(i) is int else None
        try:
            value = wire.plain(wire.decode(reply.get("value")), keep_arrays)  # values, not types: helpers.labs.grading.wire.plain
            return value if sync is None else (value, wire.decode(reply.get("synced")))
        except Exception as exc:  # noqa: BLE001 - whatever the worker sent, it is not a result
            raise wire.WireError(f"your function's result could not be read as data ({exc})") from None
