"""PyDotCompute's lifecycle objects: RingKernelConfig (a kernel's settings)
and RingKernel (what ``launch`` returns: a handle on a kernel of a
runtime, whose state is the C runtime's)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from .runtime import BlockingRuntime, KernelState


@dataclasses.dataclass
class RingKernelConfig:
    """A kernel's settings, as PyDotCompute's (``launch(..., config=)``).
    Queue sizes are the C queues' capacities."""

    kernel_id: str = ""
    grid_size: int = 1
    block_size: int = 256
    input_queue_size: int = 1024
    output_queue_size: int = 1024
    backpressure_strategy: str = "block"
    use_fast_queue: bool = True

    def __post_init__(self) -> None:
        from .errors import InvalidConfigurationError, error
        for name in ("grid_size", "block_size", "input_queue_size", "output_queue_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise error("RK_EINVAL", f"kernel {self.kernel_id!r}: {name} must be an int "
                            f">= 1, got {v!r}", InvalidConfigurationError)

    def as_kwargs(self) -> dict[str, Any]:
        return {"input_queue_size": self.input_queue_size,
                "output_queue_size": self.output_queue_size,
                "grid_size": self.grid_size, "block_size": self.block_size,
                "backpressure": self.backpressure_strategy}


class RingKernel:
    """A launched kernel (what ``runtime.launch`` returns). Its calls are the
    runtime's, by id; ``state`` is read from the C runtime each time."""

    def __init__(self, runtime: Any, kernel_id: str, config: Optional[RingKernelConfig] = None,
                 input_type: Optional[type] = None, output_type: Optional[type] = None) -> None:
        self._rt = runtime
        self.kernel_id = kernel_id
        self._config = config or RingKernelConfig(kernel_id=kernel_id)
        self.input_type = input_type
        self.output_type = output_type

    @property
    def state(self) -> KernelState:
        st: KernelState = self._rt.get_kernel_state(self.kernel_id)
        return st

    @property
    def config(self) -> RingKernelConfig:
        return self._config

    def _blocking(self) -> type[BlockingRuntime]:
        from .runtime import BlockingRuntime
        return BlockingRuntime

    async def activate(self) -> None:
        self._blocking().activate(self._rt, self.kernel_id)

    async def deactivate(self) -> None:
        self._blocking().deactivate(self._rt, self.kernel_id)

    async def reactivate(self) -> None:
        self._blocking().reactivate(self._rt, self.kernel_id)

    async def terminate(self, timeout: float = 5.0) -> None:
        self._blocking().terminate(self._rt, self.kernel_id, timeout)

    async def send(self, message: Any, timeout: Optional[float] = None) -> None:
        self._blocking().send(self._rt, self.kernel_id, message, timeout=timeout)

    async def receive(self, timeout: Optional[float] = None) -> Any:
        from .runtime import RingKernelRuntime
        if isinstance(self._rt, RingKernelRuntime) and not self._rt._sync_mode:
            return await RingKernelRuntime.receive(self._rt, self.kernel_id, timeout)
        return self._blocking().receive(self._rt, self.kernel_id, timeout)

    def __repr__(self) -> str:
        try:
            st = self.state.name
        except Exception:  # the runtime is closed
            st = "CLOSED"
        return f"RingKernel(id={self.kernel_id!r}, state={st})"
