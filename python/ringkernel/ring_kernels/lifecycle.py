from ..kernels import AsyncKernelContext as KernelContext  # noqa: F401
from ..lifecycle import RingKernel, RingKernelConfig  # noqa: F401
from ..runtime import KernelState  # noqa: F401
