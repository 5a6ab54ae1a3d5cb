"""PyDotCompute's ``pydotcompute.ring_kernels`` module path."""

from ..lifecycle import RingKernel, RingKernelConfig
from ..messages import RingKernelMessage, message
from ..runtime import KernelState, RingKernelRuntime
from ..telemetry import GPUMonitor, RingKernelTelemetry
from ..eventloop import (create_optimized_loop, get_loop_info, install_eager_task_factory,
                         install_uvloop, is_eager_tasks_installed, is_uvloop_available,
                         is_uvloop_installed, optimize_current_loop)

__all__ = ["RingKernelRuntime", "RingKernel", "RingKernelConfig", "KernelState",
           "RingKernelMessage", "message", "RingKernelTelemetry", "GPUMonitor",
           "install_uvloop", "install_eager_task_factory", "is_uvloop_available",
           "is_uvloop_installed", "is_eager_tasks_installed", "get_loop_info",
           "create_optimized_loop", "optimize_current_loop"]
