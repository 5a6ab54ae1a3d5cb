from . import CpuBackend  # noqa: F401
