"""What keeps a lab's grade honest: parts graded on their own, the learner's own work, hidden cases.

Three tools for the labs' graded cells (none of them holds an answer):

- `reference(lab)` imports the instructor-only module `instructor.labs.<lab>` (reference
  implementations and hidden cases). It exists only in the instructor's copy of the course: the
  labs call it between nbgrader's hidden-test markers, which the student versions do not
  contain, and `python -m helpers.problems --solve` calls it; elsewhere it raises
  `InstructorOnlyError`, which says so.
- `replaced(namespace, mapping)` puts the reference implementation of earlier parts in place of
  the learner's for one check (the learner's `makespan` then calls the reference `route_time`),
  so a bug in an early part costs that part only.
- `own_work(fn, forbidden)` runs one learner function with the course's own implementation of
  the same quantity switched off (`helpers.models.copy_cost.fit` for Lab 2's fit, say): a
  function that refers to one of them, directly or through a default argument, a closure or an
  alias, fails the check, and a call through any other route meets a tripwire.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from helpers.core import validate
from helpers.core.errors import CourseError

INSTRUCTOR_PACKAGE = "instructor"


class InstructorOnlyError(CourseError):
    """The instructor-only package is not here (a student's copy of the course)."""


class NotOwnWork(CourseError, AssertionError):
    """A learner's function used the course's implementation of the quantity it must compute."""


def _candidate_roots() -> Iterator[Path]:
    """Folders that may hold `instructor/`: the working directory and its parents, then the
    checkout this `helpers` package comes from."""
    here = Path.cwd().resolve()
    yield from (here, *here.parents)
    yield Path(__file__).resolve().parents[2]


def instructor_module(name: str) -> types.ModuleType:
    """The instructor-only module `instructor.<name>`; InstructorOnlyError where it is absent."""
    full = f"{INSTRUCTOR_PACKAGE}.{validate.text(name, 'instructor module')}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if not (exc.name == INSTRUCTOR_PACKAGE or full.startswith(f"{exc.name}.") or exc.name == full):
            raise
    for root in _candidate_roots():
        if (root / INSTRUCTOR_PACKAGE / "__init__.py").is_file():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            importlib.invalidate_caches()
            sys.modules.pop(INSTRUCTOR_PACKAGE, None)
            return importlib.import_module(full)
    raise InstructorOnlyError(
        f"{full} is not here: reference answers, hidden grading cases and the answers of per-learner problems "
        "belong to the instructor's copy of the course (its instructor/ folder), which the student distribution "
        "does not contain. Your instructor grades with them; the examples in the notebooks are for you.")


def reference(lab: str) -> types.ModuleType:
    """The instructor-only module of `lab` ("lab2" ... "lab5"): reference answers, hidden cases."""
    return instructor_module(f"labs.{validate.text(lab, 'lab (e.g. lab4)')}")


@contextmanager
def replaced(namespace: dict, mapping: Mapping[str, object]) -> Iterator[None]:
    """Within the block, names of `namespace` (a notebook's globals()) are bound to `mapping`'s values."""
    missing = object()
    saved = {k: namespace.get(k, missing) for k in mapping}
    namespace.update(mapping)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is missing:
                namespace.pop(k, None)
            else:
                namespace[k] = v


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _referenced(fn: Callable) -> Iterator[object]:
    """Objects a function can reach without a call: globals it names (and their named
    attributes), defaults, closure cells; for a method-bearing object, its functions too."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    names = {n for c in _code_objects(code) for n in c.co_names}
    glb = getattr(fn, "__globals__", {})
    for n in names:
        if n in glb:
            obj = glb[n]
            yield obj
            if isinstance(obj, types.ModuleType):
                yield from (getattr(obj, a) for a in names if hasattr(obj, a))
    yield from (getattr(fn, "__defaults__", None) or ())
    yield from ((getattr(fn, "__kwdefaults__", None) or {}).values())
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue


def uses(fn: Callable, forbidden: Iterable[Callable], depth: int = 2) -> list[str]:
    """Names of the `forbidden` functions that `fn` refers to (through helpers of its own too)."""
    bad = {id(f): f"{f.__module__}.{f.__qualname__}" for f in forbidden}
    found, seen, todo = [], set(), [(fn, 0)]
    while todo:
        f, d = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for obj in _referenced(f):
            if id(obj) in bad:
                found.append(bad[id(obj)])
            elif d < depth and isinstance(obj, (types.FunctionType, types.MethodType)):
                todo.append((obj, d + 1))
            elif d < depth and isinstance(obj, type) and obj.__module__ == getattr(fn, "__module__", None):
                todo += [(m, d + 1) for m in vars(obj).values() if isinstance(m, types.FunctionType)]
    return sorted(set(found))


@contextmanager
def own_work(what: str, fn: Callable, forbidden: Mapping[types.ModuleType, Iterable[str]]) -> Iterator[None]:
    """Refuse `fn` if it refers to a forbidden function, and trip any call to one in the block.

    `forbidden` maps a module to the names of its functions the learner must not call here
    (the course's own implementation of what `what` asks for).
    """
    funcs = [getattr(mod, n) for mod, names in forbidden.items() for n in names]
    found = uses(fn, funcs)
    if found:
        raise NotOwnWork(f"{what} must compute its result itself; it uses {', '.join(found)}, the course's own "
                         "implementation of it, which this check does not accept")

    def tripwire(name: str):
        def trip(*args, **kwargs):
            raise NotOwnWork(f"{what} called {name}, the course's own implementation of what it must compute; "
                             "this check does not accept that")
        return trip

    saved = []
    for mod, names in forbidden.items():
        for n in names:
            saved.append((mod, n, getattr(mod, n)))
            setattr(mod, n, tripwire(f"{mod.__name__}.{n}"))
    try:
        yield
    finally:
        for mod, n, orig in saved:
            setattr(mod, n, orig)
