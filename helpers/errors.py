"""Exceptions the helpers raise, each naming the problem in words a learner can act on."""


class CourseError(Exception):
    """Base class for every error the course's helpers raise on purpose."""


class NoGPUError(CourseError):
    """A live experiment was asked for, but no usable CUDA GPU is available."""


class ReferenceDataError(CourseError):
    """A reference-data file is missing, malformed, or fails its schema or checksum."""


class DeviceTimeoutError(CourseError, TimeoutError):
    """The GPU did not finish within the time the helper allows; nothing hangs forever."""
