from . import CudaBackend  # noqa: F401
