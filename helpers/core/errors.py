"""Exceptions the helpers raise, each naming the problem in words a learner can act on."""


class CourseError(Exception):
    """Base class for every error the course's helpers raise on purpose."""


class NoGPUError(CourseError):
    """A live experiment was asked for, but no usable CUDA GPU is available."""


class ReferenceDataError(CourseError):
    """A reference-data file is missing, malformed, or fails its schema or checksum."""


class InputError(CourseError, ValueError):
    """A helper was given a value it cannot use (a size, a mode, a choice); the message names it."""


class InputTypeError(CourseError, TypeError):
    """A helper was given the wrong kind of value (text for a size, a float for a count)."""


class SystemInfoError(CourseError, RuntimeError):
    """This machine does not expose what a helper reads (a /proc or /sys entry, a tool)."""


class DeviceTimeoutError(CourseError, TimeoutError):
    """The GPU did not finish within the time the helper allows; nothing hangs forever."""


class SkipExperiment(CourseError):
    """Raised by an experiment that cannot run on this machine (a missing tool, one GPU
    where two are needed); the recorder notes why and goes on.

    It lives here, with the other errors, so that experiments and the recorder import one class.
    """
