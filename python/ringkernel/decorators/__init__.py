"""PyDotCompute's ``pydotcompute.decorators`` module path."""

from ..compute import gpu_kernel, kernel
from ..kernels import ring_kernel
from ..validators import validate_config, validate_message

__all__ = ["kernel", "gpu_kernel", "ring_kernel", "validate_message", "validate_config"]
