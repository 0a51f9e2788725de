"""A stand-in for cupti-python's `cupti.cupti` module: the enums and the Activity API calls the
course uses, delivering prepared activity objects on flush the way CUPTI's thread would."""

from __future__ import annotations

import enum
from types import SimpleNamespace


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    CONCURRENT_KERNEL = 10


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    HTOA = 3
    DTOD = 8
    HTOH = 9
    PTOP = 10


class Result(enum.IntEnum):
    SUCCESS = 0
    ERROR_NOT_INITIALIZED = 15
    ERROR_INSUFFICIENT_PRIVILEGES = 35


class cuptiError(Exception):  # noqa: N801 - cupti-python's own name
    """cupti-python's error: only the status number in its args."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class ChannelType(enum.IntEnum):
    INVALID = 0
    COMPUTE = 1
    ASYNC_MEMCPY = 2


def memcpy(copy, start, end, *, stream=13, channel=10, ctype=2, nbytes=64 << 20, corr=1):
    return SimpleNamespace(kind=int(ActivityKind.MEMCPY), copy_kind=int(copy), bytes=nbytes,
                           start=start, end=end, stream_id=stream, channel_id=channel,
                           channel_type=ctype, correlation_id=corr, device_id=0)


def kernel(name, start, end, *, stream=13, channel=1, ctype=1, corr=2):
    return SimpleNamespace(kind=int(ActivityKind.CONCURRENT_KERNEL), name=name, start=start,
                           end=end, stream_id=stream, channel_id=channel, channel_type=ctype,
                           correlation_id=corr, device_id=0)


class FakeCupti:
    """Module-like object: `pending` activities are delivered to the completed callback on
    flush, only for kinds enabled; `refuse` makes activity_enable raise like a refusing driver."""

    ActivityKind = ActivityKind
    ActivityMemcpyKind = ActivityMemcpyKind
    ChannelType = ChannelType
    Result = Result

    def __init__(self, pending=(), refuse=None, clock: int = 1_000):
        self.pending = list(pending)
        self.refuse = refuse
        self.clock = clock
        self.enabled: set[int] = set()
        self.calls: list[str] = []
        self.requested = self.completed = None

    def activity_register_callbacks(self, requested, completed):
        self.calls.append("register")
        self.requested, self.completed = requested, completed

    def activity_enable(self, kind):
        if isinstance(self.refuse, BaseException):
            raise self.refuse
        if self.refuse:
            raise RuntimeError(self.refuse)
        self.calls.append(f"enable {ActivityKind(kind).name}")
        self.enabled.add(int(kind))

    def activity_disable(self, kind):
        self.calls.append(f"disable {ActivityKind(kind).name}")
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag):
        self.calls.append(f"flush {flag}")
        size, limit = self.requested()
        assert size > 0 and limit == 0
        ready = [a for a in self.pending if a.kind in self.enabled
                 or (a.kind == ActivityKind.CONCURRENT_KERNEL and a.kind in self.enabled)]
        self.pending = [a for a in self.pending if a not in ready]
        if ready:
            self.completed(ready)

    def get_timestamp(self):
        return self.clock
