"""Every error the helpers define is a CourseError, and every bad-input error an InputError.

The rule, applied to every exception class defined in a module under helpers/ (each module
imported with pkgutil.walk_packages):

1. It derives from helpers.core.errors.CourseError: the course raised it on purpose, and a
   notebook can catch the course's errors as one family. ALLOWED_OUTSIDE lists the few that
   must not, each with its reason.
2. A bad-input class derives from InputError or InputTypeError. A class is a bad-input class
   when it derives from ValueError or TypeError (Python's own words for "a value / a kind of
   value this function cannot use") or its name says Input or Format (input the caller
   gave, text the caller handed over to parse). NOT_INPUT lists exceptions to this, each
   with its reason.

Errors that are not about the caller's input (a device timeout, a missing tool, reference
data, the toy GPU's faults) keep their own classes under CourseError.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import helpers
from helpers.core.errors import CourseError, InputError, InputTypeError

ALLOWED_OUTSIDE = {
    "helpers.models.toygpu.device.Fault":
        "the toy device's internal signal, turned into an error code in its own registers inside "
        "the device process; never raised to a caller",
    "helpers.labs.lab2.NotReadyError":
        "stands in for CuPy's CUDARuntimeError (cudaErrorNotReady) in the simulated CUDA Lab 2's "
        "learner code runs against: it must look like the library's error, not the course's",
}
NOT_INPUT: dict[str, str] = {
    "helpers.ch01_path_of_a_copy.driver_maps.MapsFormatError":
        "/proc/PID/maps text the kernel wrote (live) or the recorder stored: not the caller's input",
    "helpers.ch01_path_of_a_copy.syscalls.StraceOutputError":
        "strace's own output that the census parses: not the caller's input",
}


def exception_classes() -> dict[str, type]:
    """{'module.Class': class} for every exception class defined in a module under helpers/
    (a package's __main__ is left out: importing it runs the program)."""
    found = {}
    for info in pkgutil.walk_packages(helpers.__path__, "helpers."):
        if info.name.endswith(".__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == mod.__name__:
                found[f"{mod.__name__}.{name}"] = obj
    return found


def is_bad_input_class(cls: type) -> bool:
    """Rule 2's test: derives from ValueError/TypeError, or named for input or a format."""
    return issubclass(cls, (ValueError, TypeError)) or "Input" in cls.__name__ or "Format" in cls.__name__


def test_the_scan_finds_the_course_errors():
    found = exception_classes()
    for name in ("helpers.core.errors.InputError", "helpers.core.errors.DeviceTimeoutError",
                 "helpers.models.radar.designs.RadarInputError", "helpers.core.experiments.RegistryError"):
        assert name in found
    assert all(name in found for name in ALLOWED_OUTSIDE | NOT_INPUT), "an allow-list names a class that is gone"


def test_the_rule_tells_input_errors_apart():
    class Parse(CourseError, ValueError):
        pass

    class MapsFormatError(CourseError):
        pass

    class Timeout(CourseError, TimeoutError):
        pass

    assert is_bad_input_class(Parse) and is_bad_input_class(MapsFormatError)
    assert not is_bad_input_class(Timeout) and is_bad_input_class(InputTypeError)


def test_every_error_is_a_course_error():
    outside = sorted(name for name, cls in exception_classes().items()
                     if not issubclass(cls, CourseError) and name not in ALLOWED_OUTSIDE)
    assert not outside, f"derive these from helpers.core.errors.CourseError (or a subclass): {outside}"


def test_every_bad_input_error_is_an_input_error():
    wrong = sorted(f"{name}{tuple(b.__name__ for b in cls.__bases__)}" for name, cls in exception_classes().items()
                   if is_bad_input_class(cls) and not issubclass(cls, (InputError, InputTypeError))
                   and name not in NOT_INPUT)
    assert not wrong, ("bad-input classes must derive from helpers.core.errors.InputError "
                       f"(or InputTypeError for the wrong kind of value): {wrong}")
