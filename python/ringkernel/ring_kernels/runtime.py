from ..runtime import KernelState, RingKernelRuntime  # noqa: F401
from ..kernels import get_registered_kernel  # noqa: F401
