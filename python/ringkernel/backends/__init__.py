"""Backend names for ``@ring_kernel(backend=...)`` and
``RingKernelRuntime(backend=...)`` (PyDotCompute's module path): each
class stands for one C backend by its ``name``."""


class Backend:
    name = "auto"


class CpuBackend(Backend):
    """Kernel threads on the CPU."""
    name = "cpu"


class CudaBackend(Backend):
    """The cuda backend: C kernels with device code run on the GPU; a
    Python actor's compute kernels and buffers go to the GPU when one is
    usable, else to the CPU (PyDotCompute's CPU fallback)."""
    name = "cuda"


__all__ = ["Backend", "CpuBackend", "CudaBackend"]
