from ..compute import (KernelRegistry, cuda_source, get_kernel_registry,  # noqa: F401
                       gpu_kernel, kernel)
