"""PyDotCompute's ``pydotcompute.ring_kernels`` module path."""

from ..lifecycle import RingKernel, RingKernelConfig
from ..messages import RingKernelMessage, message
from ..runtime import KernelState, RingKernelRuntime
from ..telemetry import GPUMonitor, RingKernelTelemetry

__all__ = ["RingKernelRuntime", "RingKernel", "RingKernelConfig", "KernelState",
           "RingKernelMessage", "message", "RingKernelTelemetry", "GPUMonitor"]
