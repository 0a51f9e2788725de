"""What keeps a lab's grade honest: parts graded on their own, the learner's own work, hidden cases.

Three tools for the labs' graded cells (none of them holds an answer):

- `reference(lab)` imports the instructor-only module `instructor.labs.<lab>` (reference
  implementations and hidden cases) from the instructor's checkout, found only explicitly
  (`instructor_module(name, root)`: the folder given, or the checkout this package comes from;
  never the working directory's parents). `python -m helpers.problems --solve` uses it;
  elsewhere it raises `InstructorOnlyError`, which says so. Grading does not: the grader
  (tools/grader) imports the instructor's modules in its own process, never in the learner's.
- `replaced(namespace, mapping)` puts the reference implementation of earlier parts in place of
  the learner's for one check (the learner's `makespan` then calls the reference `route_time`),
  so a bug in an early part costs that part only.
- `own_work(fn, forbidden)` runs one learner function with the course's own implementation of
  the same quantity switched off (`helpers.models.copy_cost.fit` for Lab 2's fit, say): a
  function that refers to one of them, directly or through a default argument, a closure or an
  alias, fails the check, and a call through the module's attribute meets a tripwire. It runs in
  the learner's process, so it explains, it does not enforce: learner code can patch it or clone
  a function's code before it runs. The grader enforces the rule outside that process, by giving
  the part's worker modules with those functions redacted (tools/grader/ownwork.py).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
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


def course_root() -> Path:
    """The checkout this `helpers` package comes from (a student copy has no instructor/ in it)."""
    return Path(__file__).resolve().parents[3]


def instructor_module(name: str, root: str | os.PathLike | None = None) -> types.ModuleType:
    """The instructor-only module `instructor.<name>`, from exactly one place: the folder `root`
    (an instructor's checkout, given explicitly: `--instructor DIR`), or else the checkout this
    `helpers` package comes from. Never from the working directory or the folders above it: a
    student copy unpacked inside an instructor's checkout finds nothing. InstructorOnlyError
    where it is absent."""
    full = f"{INSTRUCTOR_PACKAGE}.{validate.text(name, 'instructor module')}"
    where = Path(root).resolve() if root is not None else course_root()
    package = where / INSTRUCTOR_PACKAGE
    if not (package / "__init__.py").is_file():
        raise InstructorOnlyError(
            f"{full} is not here ({where} has no {INSTRUCTOR_PACKAGE}/ folder): reference answers, hidden grading "
            "cases and the answers of per-learner problems belong to the instructor's copy of the course, which the "
            "student distribution does not contain. Your instructor grades with them; the examples in the notebooks "
            "are for you. (Instructors: pass your checkout explicitly, --instructor DIR.)")
    loaded = sys.modules.get(INSTRUCTOR_PACKAGE)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve().parent != package:
        for key in [k for k in sys.modules if k == INSTRUCTOR_PACKAGE or k.startswith(INSTRUCTOR_PACKAGE + ".")]:
            sys.modules.pop(key)
    if INSTRUCTOR_PACKAGE not in sys.modules:
        _load_package(INSTRUCTOR_PACKAGE, package)
    importlib.invalidate_caches()
    module = importlib.import_module(full)
    if not Path(module.__file__).resolve().is_relative_to(package):
        raise InstructorOnlyError(f"{full} came from {module.__file__}, not from {package}")
    return module


def _load_package(name: str, folder: Path) -> types.ModuleType:
    """The package `name` imported from exactly `folder` (its submodules then come from there too, through the
    package's __path__), without putting anything on sys.path."""
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


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


def _inside(obj: object, depth: int = 3, budget: list | None = None) -> Iterator[object]:
    """`obj`, and what it holds when it is a container (list, tuple, set, dict keys and values,
    a SimpleNamespace or a partial's function and arguments), a few levels deep."""
    budget = [2000] if budget is None else budget
    yield obj
    if depth <= 0 or budget[0] <= 0:
        return
    if isinstance(obj, dict):
        items = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    elif isinstance(obj, types.SimpleNamespace):
        items = list(vars(obj).values())
    elif isinstance(obj, functools.partial):
        items = [obj.func, *obj.args, *obj.keywords.values()]
    else:
        return
    for item in items[:budget[0]]:
        budget[0] -= 1
        yield from _inside(item, depth - 1, budget)


def _referenced(fn: Callable) -> Iterator[object]:
    """Objects a function can reach without a call: globals it names (and their named
    attributes), defaults, closure cells, and what any of them holds as a container (a course
    function kept in a list, a dict or a tuple is found too)."""
    fn = getattr(fn, "__func__", fn)
    if isinstance(fn, functools.partial):
        yield from _inside(fn)
        fn = fn.func
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    names = {n for c in _code_objects(code) for n in c.co_names}
    glb = getattr(fn, "__globals__", {})
    for n in names:
        if n in glb:
            obj = glb[n]
            yield from _inside(obj)
            if isinstance(obj, types.ModuleType):
                yield from (getattr(obj, a) for a in names if hasattr(obj, a))
    for obj in (*(getattr(fn, "__defaults__", None) or ()), *((getattr(fn, "__kwdefaults__", None) or {}).values())):
        yield from _inside(obj)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            yield from _inside(cell.cell_contents)
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
