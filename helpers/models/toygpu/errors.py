"""The toy GPU's errors as the driver reports them: one exception class per kind of device error
(ERROR_CODE, regs.ErrorCode), the device's ERROR_INFO in the message, and the driver's own
problems (a full ring, a lost device process)."""

from __future__ import annotations

from helpers.core.errors import CourseError
from helpers.models.toygpu import regs as R


class ToyGPUError(CourseError):
    """Base class of every toy-GPU problem the driver reports."""


class DeviceError(ToyGPUError):
    """The device set ERROR_CODE: bad programming was refused (the ring is halted)."""

    def __init__(self, code: R.ErrorCode, info: int, message: str | None = None):
        self.code, self.info = R.ErrorCode(code), int(info)
        where = ""
        if self.code in (R.ErrorCode.RO_WRITE, R.ErrorCode.BAD_REGISTER):
            reg = R.BY_OFFSET.get(self.info)
            where = f", register {reg.name}" if reg else ", no register there"
        super().__init__(message or (
            f"toy GPU error {self.code.name}: {R.ERROR_TEXT[self.code]} (ERROR_INFO={self.info:#x}{where}). "
            "The ring is halted: call gpu.recover() to reset and bring the device up again, "
            "or gpu.clear_error() to resume after the failed command."))


class RegisterError(DeviceError):
    """A register write the device refused (read-only, unmapped or misaligned register)."""


class RingError(DeviceError):
    """The ring was misprogrammed: bad ring registers or a bad doorbell."""


class CommandError(DeviceError):
    """A command was malformed: unknown opcode, misaligned, bad descriptor, IB too deep."""


class MemoryFaultError(DeviceError):
    """An address did not translate: outside system memory, unmapped DVA or BAR1 page, read-only page."""


class RingFullError(ToyGPUError):
    """The driver found no room in the ring (it never overwrites unexecuted commands)."""


class DeviceLostError(ToyGPUError):
    """The device process is gone (it exited or was killed)."""


_E = R.ErrorCode
ERROR_CLASS: dict[R.ErrorCode, type[DeviceError]] = {
    _E.RO_WRITE: RegisterError, _E.BAD_REGISTER: RegisterError,
    _E.RING_CONFIG: RingError, _E.RING_OFF: RingError, _E.EMPTY_DOORBELL: RingError,
    _E.RING_OVERFLOW: RingError, _E.BAD_DOORBELL: RingError,
    _E.BAD_OPCODE: CommandError, _E.MISALIGNED: CommandError, _E.BAD_DESCRIPTOR: CommandError,
    _E.IB_DEPTH: CommandError,
    _E.SYSMEM_RANGE: MemoryFaultError, _E.MMU_FAULT: MemoryFaultError,
    _E.MMU_WRITE_FAULT: MemoryFaultError, _E.PAGE_TABLE: MemoryFaultError,
    _E.BAR1_FAULT: MemoryFaultError, _E.VRAM_WINDOW: MemoryFaultError,
    _E.INTERNAL: DeviceError,
}
