"""PyDotCompute's exception module path (``pydotcompute.exceptions``).

The classes are ringkernel's (ringkernel.errors): one per RK_E* code,
each carrying the C name and detail; the PyDotCompute names below are
those classes or their bases, so ``except KernelNotFoundError`` and the
like work unchanged.
"""

from .errors import *  # noqa: F401,F403
from .errors import (BufferNotAllocatedError, InvalidConfigurationError,
                     KernelAlreadyExistsError, KernelError, KernelNotFoundError,
                     KernelStateError, MessageDeserializationError, MessageError,
                     MessageSerializationError, QueueError, QueueFullError,
                     QueueTimeoutError, RingKernelError, UnifiedBufferError,
                     NoDeviceError, CudaError, DeviceError)

#: PyDotCompute's base class of every error.
PyDotComputeError = RingKernelError
#: PyDotCompute's name for buffer errors.
BufferError = UnifiedBufferError  # noqa: A001 - PyDotCompute's name
BufferSyncError = UnifiedBufferError
BackendError = DeviceError
BackendNotAvailableError = NoDeviceError
CUDAError = CudaError
ValidationError = InvalidConfigurationError
