"""What the device-facing modules share, below all of them (buffers.py,
oneshot.py and compute.py import it; it imports none of them): whether the
cuda backend runs here, and the registry of compute kernels by name.
compute.py re-exports both under PyDotCompute's module paths."""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import _core
from .errors import InvalidConfigurationError, error

_cuda: Optional[bool] = None


def cuda_available() -> bool:
    """True when the C runtime's cuda backend can run here (checked once)."""
    global _cuda
    if _cuda is None:
        try:
            _core.Runtime(backend="cuda", no_static_kernels=True).close()
            _cuda = True
        except Exception:  # NoDeviceError: no driver, no GPU, not built in
            _cuda = False
    return _cuda


class KernelRegistry:
    """Compute kernels by name (a singleton): @kernel(name=...) and
    ComputeOrchestrator.register_kernel put them here, and a ring kernel's
    ``ctx.execute_kernel(name, args)`` runs them."""

    _instance: Optional["KernelRegistry"] = None
    _kernels: dict[str, Callable[..., Any]]

    def __new__(cls) -> "KernelRegistry":
        if cls._instance is None:
            inst = super().__new__(cls)
            inst._kernels = {}
            cls._instance = inst
        return cls._instance

    def register(self, name: str, func: Callable[..., Any], *, overwrite: bool = False) -> None:
        if name in self._kernels and not overwrite:
            raise error("RK_EEXIST", f"kernel {name!r} is already registered "
                        "(overwrite=True replaces it)", InvalidConfigurationError)
        self._kernels[name] = func

    def get(self, name: str) -> Optional[Callable[..., Any]]:
        return self._kernels.get(name)

    def list(self) -> list[str]:
        return list(self._kernels)

    def clear(self) -> None:
        self._kernels.clear()


def get_kernel_registry() -> KernelRegistry:
    return KernelRegistry()
