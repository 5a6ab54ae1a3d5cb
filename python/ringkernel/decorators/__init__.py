"""PyDotCompute's ``pydotcompute.decorators`` module path."""

from ..compute import gpu_kernel, kernel
from ..kernels import ring_kernel

__all__ = ["kernel", "gpu_kernel", "ring_kernel"]
