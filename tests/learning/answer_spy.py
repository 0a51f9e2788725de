"""A learner that does the work right and also looks for the answer in the frames above it.

A learner's function runs in the checker's process, so it can read every frame above it
(`sys._getframe(1).f_locals`). tests/learning/test_no_answer_in_frames.py wraps a correct solution
of every code exercise in a `Spy`. On each call the spy runs the solution, takes what it gave as
the right result, then walks every frame from its caller up to and including `checks.code`'s and
notes each value there that equals that result: the frames' locals (closure cells included), the
globals of their modules, and the items of any list, tuple, dict or set among them, two levels
down. Left out is what the learner was handed: an argument, an item of one, or a value equal to
one of those as they were before the call (an input the learner is meant to read, such as a copy
kernel's source, which is also its answer). A trial that computed its expected value before the
learner's code ran, and keeps it where a frame reaches it, is caught.

For a Numba kernel (`Spy.kernel`) the spy stands in for the kernel object: a launch runs the real
kernel, waits for it, and looks from the trial's launch line. On Numba's CUDA simulator a
kernel's code runs on Python threads of its own while the launching thread waits in that line, so
these are the frames such a kernel could read (through sys._current_frames()); on a GPU a kernel
cannot read the host's frames at all.
"""

from __future__ import annotations

import numbers
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from helpers.learning import checks

DEPTH = 2  # how far into the containers a frame holds the spy looks
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MODULE = globals()
_ABSENT = object()


def host(value):
    """A device array's contents as a NumPy array (numba's device arrays, the simulator's); else the value."""
    if hasattr(value, "copy_to_host") and hasattr(value, "shape"):
        try:
            return value.copy_to_host()
        except Exception:  # not readable now: compared as it is
            return value
    return value


def same(a, b) -> bool:
    """Equal as an answer: arrays by shape and contents, bools only to bools, numbers to numbers,
    strings and containers by type and ==, anything else by identity."""
    a, b = host(a), host(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and bool(np.array_equal(a, b)))
    if isinstance(a, bool | np.bool_) or isinstance(b, bool | np.bool_):
        return isinstance(a, bool | np.bool_) and isinstance(b, bool | np.bool_) and bool(a) == bool(b)
    if isinstance(a, numbers.Number) or isinstance(b, numbers.Number):
        return isinstance(a, numbers.Number) and isinstance(b, numbers.Number) and bool(a == b)
    if isinstance(a, (str, bytes, *_CONTAINERS)):
        try:
            return type(a) is type(b) and bool(a == b)
        except Exception:  # == of containers holding arrays
            return False
    return a is b


def _items(value) -> list:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, _CONTAINERS):
        return list(enumerate(value))
    return []


def _handed(args: tuple) -> list:
    """The arguments and the items of each (what the learner's code was given to read)."""
    return [*args, *(v for a in args for _, v in _items(a))]


def _snapshot(args: tuple) -> list:
    """What the learner was handed, as it was before the call (a kernel's output array is
    written by the call: its contents before are the input, its contents after the answer)."""
    return [np.array(host(h), copy=True) if isinstance(host(h), np.ndarray) else h for h in _handed(args)]


def _in_callers_globals(solution: Callable, frame) -> Callable:
    """`solution` seeing the names a trial swapped into the spy's globals (copy_standin and
    example2_trial run the learner's code with their own `cp`, `cupyx` or `cuda`)."""
    swapped = {k: v for k, v in frame.f_globals.items() if _MODULE.get(k, _ABSENT) is not v}
    if not swapped:
        return solution
    return types.FunctionType(solution.__code__, {**solution.__globals__, **swapped}, solution.__name__,
                              solution.__defaults__, solution.__closure__)


@dataclass
class Spy:
    """What the spy saw over one exercise's check. A true-or-false answer is one bit that many a
    value matches by chance (a flag argument, an earlier case's result), so for those a place
    counts as holding the answer only when it matched it on every call that found a bool there,
    calls whose answers were True and False both."""

    calls: int = 0
    blind: int = 0  # calls whose right result equals what the learner was handed: no frame can be told apart
    unreached: int = 0  # calls whose walk up the stack never met checks.code's frame
    leaks: list[str] = field(default_factory=list)
    bits: list[bool] = field(default_factory=list)  # the true-or-false answers, one per call
    bit_places: dict[str, list] = field(default_factory=dict)  # place that held a bool -> [answers, calls, matches]

    def function(self, solution: Callable, answers: Callable = lambda result: [result]) -> Callable:
        """A learner's function giving what `solution` gives; `answers(result)` are the forms of the
        right result to look for (a dict's values too, say)."""
        spy = self

        def learner(*args):
            given = _snapshot(args)
            result = _in_callers_globals(solution, sys._getframe())(*args)
            spy.look(answers(result), args, given, sys._getframe(1))
            return result

        return learner

    def kernel(self, kernel, output: Callable) -> _WatchedKernel:
        """A learner's kernel: launching it launches `kernel`; `output(args)` is the right result
        read from the launch's arguments once it finished."""
        return _WatchedKernel(self, kernel, output)

    def look(self, answers: list, args: tuple, given: list, frame) -> None:
        """Walk from `frame` up to checks.code's and note every value equal to one of `answers`."""
        self.calls += 1
        answers = [a for a in answers if not any(same(a, g) for g in given)]
        if not answers:
            self.blind += 1
            return
        bit = len(answers) == 1 and isinstance(answers[0], bool | np.bool_)
        if bit:
            self.bits.append(bool(answers[0]))
        handed = {id(h) for h in _handed(args)}
        while frame is not None:
            for where, value in _values(frame, handed, given):
                place = f"{frame.f_code.co_qualname}: {where}"
                if bit and isinstance(value, bool | np.bool_):
                    seen = self.bit_places.setdefault(place, [set(), 0, 0])
                    seen[0].add(self.bits[-1])
                    seen[1] += 1
                    seen[2] += bool(value) == self.bits[-1]
                elif not bit and any(same(value, a) for a in answers):
                    self.leaks.append(place)
            if frame.f_code is checks.code.__code__:
                return
            frame = frame.f_back
        self.unreached += 1

    def report(self) -> dict:
        """calls, blind (a true-or-false answer that never changed counts as blind: nothing tells a
        place that holds it from a constant), unreached, and the places that held an answer."""
        leaks = set(self.leaks)
        blind = self.blind
        if len(set(self.bits)) == 2:
            leaks |= {p for p, (answers, calls, matches) in self.bit_places.items()
                      if len(answers) == 2 and matches == calls}
        else:
            blind += len(self.bits)
        return {"calls": self.calls, "blind": blind, "unreached": self.unreached, "leaks": sorted(leaks)}


class _WatchedKernel:
    """Indexed like a Numba kernel (kernel[blocks, threads](*args)); see Spy.kernel."""

    def __init__(self, spy: Spy, kernel, output: Callable):
        self.spy, self.real, self.output = spy, kernel, output

    def __getitem__(self, config):
        def launch(*args):
            from numba import cuda

            given = _snapshot(args)
            self.real[config](*args)
            cuda.synchronize()
            self.spy.look([self.output(args)], args, given, sys._getframe(1))

        return launch

    def __call__(self, *args):  # a kernel object is callable (checks.code asks), launched only through [...]
        raise TypeError("launch a kernel as kernel[blocks, threads](...)")


def _values(frame, handed: set[int], given: list):
    """(where, value) for a frame's locals and its module's globals, and the items of containers
    among them down to DEPTH; what the learner was handed is left out, and not looked into."""
    module = frame.f_globals.get("__name__", "?")
    tops = [(name, v) for name, v in frame.f_locals.items()]
    tops += [(f"{module}.{name}", v) for name, v in frame.f_globals.items()
             if not name.startswith("__") and not isinstance(v, types.ModuleType) and not callable(v)]
    stack = [(where, v, 0) for where, v in tops]
    while stack:
        where, value, depth = stack.pop()
        if id(value) in handed or any(same(value, g) for g in given):
            continue
        yield where, value
        if depth < DEPTH:  # a dict's dunder entries are a namespace's machinery (its __builtins__)
            stack += [(f"{where}[{k!r}]", v, depth + 1) for k, v in _items(value)
                      if not (isinstance(k, str) and k.startswith("__"))]
