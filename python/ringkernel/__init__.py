"""ringkernel: GPU-native actors (ring kernels) over a C11 runtime.

The seeds' (PyDotCompute's) API over the C library: ``@message``,
``@ring_kernel`` and ``RingKernelRuntime``. See docs/python.md.
"""

from __future__ import annotations

import os as _os

from . import _core
from .buffers import BufferState, UnifiedBuffer
from .errors import *  # noqa: F401,F403 - the exception classes
from .errors import RingKernelError, ERROR_CLASSES
from .kernels import AsyncKernelContext, KernelContext, get_registered_kernel, ring_kernel
from .messages import (RingKernelMessage, array, blob, bool_, deserialize_message,
                       float32, float64, get_message_type,
                       int8, int16, int32, int64, message, string, uint8,
                       uint16, uint32, uint64, vla)
from .messages import TypedMessage
from .compute import (Accelerator, ComputeOrchestrator, KernelExecution,
                      KernelLaunchConfig, MemoryPool, gpu_kernel, kernel)
from .oneshot import KernelLaunch, RawKernel
from .lifecycle import RingKernel, RingKernelConfig
from .runtime import BlockingRuntime, KernelState, RingKernelRuntime, load_library
from .telemetry import GPUMonitor, RingKernelTelemetry

__version__ = _core.version()

_HERE = _os.path.dirname(__file__)


def get_include() -> str:
    """The directory holding ringkernel/*.h, for building C kernels."""
    return _os.path.join(_HERE, "include")


def get_library() -> str:
    """The path of the libringkernel shared library this package uses (link
    C kernel libraries against it so they share one runtime)."""
    for name in sorted(_os.listdir(_HERE)):
        if name.startswith("libringkernel.so"):
            return _os.path.join(_HERE, name)
    raise FileNotFoundError("libringkernel.so is not installed beside ringkernel")


__all__ = [
    # PyDotCompute's top-level names
    "Accelerator", "UnifiedBuffer", "BufferState", "MemoryPool",
    "ComputeOrchestrator", "RingKernelRuntime", "RingKernelMessage", "kernel",
    "gpu_kernel", "ring_kernel", "message",
    # ringkernel's own
    "RingKernel", "RingKernelConfig", "RingKernelTelemetry", "GPUMonitor",
    "KernelLaunchConfig", "KernelExecution", "deserialize_message",
    "RingKernelRuntime", "BlockingRuntime", "UnifiedBuffer", "BufferState", "KernelState", "KernelContext",
    "AsyncKernelContext", "ring_kernel", "message", "get_message_type",
    "get_registered_kernel", "load_library", "get_include", "get_library",
    "RingKernelError", "ERROR_CLASSES", "array", "vla", "string", "blob",
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float32", "float64",
]
__all__ += ["TypedMessage", "RawKernel", "KernelLaunch"]
