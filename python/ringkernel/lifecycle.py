"""PyDotCompute's lifecycle objects: RingKernelConfig (a kernel's settings)
and RingKernel (what ``launch`` returns: a handle on a kernel of a
runtime, whose state is the C runtime's)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional


class KernelState(enum.IntEnum):
    """rk_kernel_state (the seeds' KernelState plus FAILED)."""

    CREATED = 0
    LAUNCHED = 1
    ACTIVE = 2
    DEACTIVATED = 3
    TERMINATING = 4
    TERMINATED = 5
    FAILED = 6


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
    runtime's, by id; ``state`` is read from the C runtime each time. The
    runtime that launches it hands it its calls (``ops``: the blocking
    ones; ``async_ops``: the class whose ``receive`` awaits), so this
    module never reaches back into the runtime's."""

    def __init__(self, runtime: Any, kernel_id: str, config: Optional[RingKernelConfig] = None,
                 input_type: Optional[type] = None, output_type: Optional[type] = None,
                 *, ops: Any = None, async_ops: Any = None) -> None:
        self._rt = runtime
        self._ops = ops if ops is not None else type(runtime)
        self._async_ops = async_ops
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

    def _blocking(self) -> Any:
        return self._ops

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
        a = self._async_ops
        if a is not None and isinstance(self._rt, a) and not self._rt._sync_mode:
            return await a.receive(self._rt, self.kernel_id, timeout)
        return self._blocking().receive(self._rt, self.kernel_id, timeout)

    def __repr__(self) -> str:
        try:
            st = self.state.name
        except Exception:  # the runtime is closed
            st = "CLOSED"
        return f"RingKernel(id={self.kernel_id!r}, state={st})"
