"""Exceptions: one class per RK_E* code, grouped by family.

Every exception raised by the C layer carries the C error name (``name``,
e.g. ``"RK_ENOTFOUND"``), the numeric ``code``, the C message and the
detail text the C call left (``detail``, ``rk_errdetail()``), e.g. the list
of kernels that exist for a :class:`KernelNotFoundError`.

The families follow ``include/ringkernel/error.h``; class names follow
PyDotCompute's where it has one (``KernelNotFoundError``,
``KernelStateError``, ``QueueFullError``, ``QueueTimeoutError``).
"""

from __future__ import annotations

from typing import Optional

from . import _core


class RingKernelError(Exception):
    """Base of every ringkernel error."""

    code: int = -1
    name: str = "RK_E?"

    def __init__(self, code: int, name: str, message: str, detail: str = ""):
        self.code = code
        self.name = name
        self.message = message
        self.detail = detail
        text = f"{name}: {message}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)

    def __reduce__(self) -> tuple[type[RingKernelError], tuple[int, str, str, str]]:
        return (type(self), (self.code, self.name, self.message, self.detail))


# ------------------------------------------------------------- families
class GeneralError(RingKernelError):
    """RK_EINVAL ... RK_EINTERNAL."""


class QueueError(RingKernelError):
    """Queue family: full, empty, rejected, dropped, closed, size."""


class MessageError(RingKernelError):
    """Message family: decode/encode and field errors (detail names the
    type and field)."""


class KernelError(RingKernelError):
    """Runtime family: kernels, ids and lifecycle states."""


class DeviceError(RingKernelError):
    """Device family: no device, CUDA, NVRTC, NVML, memory limit."""


# PyDotCompute's names for the two directions of the codec: every codec
# error is one of them (a field error can happen either way, so it is
# both), so code written for PyDotCompute catches ours.
class MessageSerializationError(MessageError):
    """A message could not be encoded (PyDotCompute's name)."""


class MessageDeserializationError(MessageError):
    """Bytes could not be decoded into a message (PyDotCompute's name)."""


# --------------------------------------------------------- per code
class InvalidArgumentError(GeneralError, ValueError): pass
class OutOfMemoryError(GeneralError, MemoryError): pass
class QueueTimeoutError(GeneralError, TimeoutError): pass
class NotSupportedError(GeneralError): pass
class BusyError(GeneralError): pass
class InternalError(GeneralError): pass

class QueueFullError(QueueError): pass
class QueueEmptyError(QueueError): pass
class MessageRejectedError(QueueError): pass
class MessageDroppedError(QueueError): pass
class ClosedError(QueueError): pass
class MessageSizeError(QueueError): pass

class DecodeError(MessageDeserializationError): pass
class TruncatedError(MessageDeserializationError): pass
class FieldMissingError(MessageSerializationError, MessageDeserializationError): pass
class FieldTypeError(MessageSerializationError, MessageDeserializationError, TypeError): pass
class FieldUnknownError(MessageSerializationError, MessageDeserializationError): pass
class TooBigError(MessageSerializationError, MessageDeserializationError): pass
class MessageTypeError(MessageDeserializationError, TypeError): pass
class EncodeError(MessageSerializationError): pass

class KernelNotFoundError(KernelError, LookupError): pass
class KernelAlreadyExistsError(KernelError): pass
class StaleHandleError(KernelError): pass
class KernelStateError(KernelError): pass
class KernelNotLaunchedError(KernelStateError): pass
class KernelAlreadyInStateError(KernelStateError): pass
class KernelNotActiveError(KernelStateError): pass
class KernelTerminatedError(KernelStateError): pass
class KernelFailedError(KernelStateError): pass

class NoDeviceError(DeviceError): pass
class CudaError(DeviceError): pass
class NvrtcError(DeviceError): pass
class NvmlError(DeviceError): pass
class MemoryLimitError(DeviceError): pass
class CompileError(DeviceError): pass

# Errors with no C code of their own (raised by the Python layer, with the
# C code that fits: name and detail as for every other error).
class UnifiedBufferError(RingKernelError):
    """UnifiedBuffer errors (PyDotCompute's ``BufferError``)."""


class BufferNotAllocatedError(UnifiedBufferError, KernelStateError):
    """The buffer has no memory yet: call allocate() (RK_ESTATE)."""


class DLPackError(UnifiedBufferError, BufferError):
    """A DLPack export that cannot be made: another device than the
    buffer's, a stream that does not fit, copy=True, a dtype DLPack has no
    code for (the C code that fits: RK_ENODEV, RK_EINVAL, RK_ENOTSUP)."""


class InvalidConfigurationError(InvalidArgumentError):
    """A bad decorator or kernel setting (PyDotCompute's name; RK_EINVAL)."""


_BY_NAME = {
    "RK_EINVAL": InvalidArgumentError,
    "RK_ENOMEM": OutOfMemoryError,
    "RK_ETIMEDOUT": QueueTimeoutError,
    "RK_ENOTSUP": NotSupportedError,
    "RK_EBUSY": BusyError,
    "RK_EINTERNAL": InternalError,
    "RK_EFULL": QueueFullError,
    "RK_EEMPTY": QueueEmptyError,
    "RK_EREJECTED": MessageRejectedError,
    "RK_EDROPPED": MessageDroppedError,
    "RK_ECLOSED": ClosedError,
    "RK_EMSGSIZE": MessageSizeError,
    "RK_EDECODE": DecodeError,
    "RK_ETRUNCATED": TruncatedError,
    "RK_EFIELDMISSING": FieldMissingError,
    "RK_EFIELDTYPE": FieldTypeError,
    "RK_EFIELDUNKNOWN": FieldUnknownError,
    "RK_ETOOBIG": TooBigError,
    "RK_ETYPE": MessageTypeError,
    "RK_EENCODE": EncodeError,
    "RK_ENOTFOUND": KernelNotFoundError,
    "RK_EEXIST": KernelAlreadyExistsError,
    "RK_ESTALE": StaleHandleError,
    "RK_ESTATE": KernelStateError,
    "RK_ENOTLAUNCHED": KernelNotLaunchedError,
    "RK_EALREADY": KernelAlreadyInStateError,
    "RK_ENOTACTIVE": KernelNotActiveError,
    "RK_ETERMINATED": KernelTerminatedError,
    "RK_EFAILED": KernelFailedError,
    "RK_ENODEV": NoDeviceError,
    "RK_ECUDA": CudaError,
    "RK_ENVRTC": NvrtcError,
    "RK_ENVML": NvmlError,
    "RK_ELIMIT": MemoryLimitError,
    "RK_ECOMPILE": CompileError,
}

#: {code: class} for every code the C library defines.
ERROR_CLASSES: dict[int, type[RingKernelError]] = {}
for _code, (_name, _msg) in _core.err_names().items():
    if _code == 0:
        continue
    # A code added to the C list later still gets a class of its own.
    _cls: type[RingKernelError] | None = _BY_NAME.get(_name)
    if _cls is None:
        _cls = type(_name[4:].title() + "Error", (RingKernelError,), {})
        assert _cls is not None
    _cls.code, _cls.name = _code, _name
    ERROR_CLASSES[_code] = _cls


def _make(code: int, name: str, message: str, detail: str) -> RingKernelError:
    return ERROR_CLASSES.get(code, RingKernelError)(code, name, message, detail)


def error(code_name: str, detail: str = "",
          cls: Optional[type[RingKernelError]] = None) -> RingKernelError:
    """A ringkernel exception for a C error name, built in Python (cls: a
    class of the Python layer to raise instead of the code's own)."""
    for code, c in ERROR_CLASSES.items():
        if c.name == code_name:
            return (cls or c)(code, code_name, _core.err_names()[code][1], detail)
    raise KeyError(code_name)


_core._set_error_factory(_make)
