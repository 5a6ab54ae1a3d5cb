from ..kernels import get_ring_kernel_meta, is_ring_kernel, ring_kernel  # noqa: F401
