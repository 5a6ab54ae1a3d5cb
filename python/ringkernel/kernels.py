"""@ring_kernel: Python actors that run inside the C runtime.

A decorated function becomes an actor-style C kernel (rk_kernel_def with
the extension's trampoline as its actor): the runtime starts a thread for
it at launch, and the function runs there with the GIL, once per
activation, with the same lifecycle, supervision, telemetry, routes and
topics as a C kernel. Both forms of the seeds work:

* ``def actor(ctx)`` with blocking ``ctx.receive(timeout)``;
* ``async def actor(ctx)`` with ``await ctx.receive()``; it runs on an
  event loop private to the kernel's thread.

Every blocking context call releases the GIL while it waits in C.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
from typing import Any, Callable, Optional, TypeVar, overload

from . import _core
from .errors import ClosedError
from .messages import msgtype_of

log = logging.getLogger("ringkernel")

_BACKPRESSURE = {"block": 0, "reject": 1, "drop_oldest": 2, "drop_new": 3}
_RESTART = {None: 0, "stop": 0, "restart": 1}
_WHEN_INACTIVE = {"queue": 0, "reject": 1}

#: Default largest payload of a Python kernel's queue slots (bytes).
DEFAULT_MAX_PAYLOAD = 4096


def _ns(seconds: Optional[float]) -> int:
    return -1 if seconds is None else max(0, int(seconds * 1e9))


@dataclasses.dataclass
class KernelSpec:
    """Everything @ring_kernel recorded about one Python kernel."""

    kernel_id: str
    func: Callable[..., Any]
    input_type: Optional[type] = None
    output_type: Optional[type] = None
    input_queue_size: int = 1024
    output_queue_size: int = 1024
    backpressure: str = "block"
    max_payload: int = DEFAULT_MAX_PAYLOAD
    when_inactive: str = "queue"
    restart: Optional[str] = None
    max_restarts: int = 0
    priority_bands: bool = False
    grid_size: int = 1
    block_size: int = 256
    spin: int = 0

    def register(self, core_rt: _core.Runtime) -> None:
        if self.backpressure not in _BACKPRESSURE:
            raise ValueError(f"backpressure must be one of {sorted(_BACKPRESSURE)}")
        core_rt.register_actor(
            self.kernel_id, _runner(self),
            in_mt=msgtype_of(self.input_type), out_mt=msgtype_of(self.output_type),
            input_capacity=self.input_queue_size,
            output_capacity=self.output_queue_size,
            max_payload=self.max_payload,
            backpressure=_BACKPRESSURE[self.backpressure],
            when_inactive=_WHEN_INACTIVE[self.when_inactive],
            restart=_RESTART[self.restart], max_restarts=self.max_restarts,
            priority_bands=self.priority_bands, spin=self.spin)


class KernelContext:
    """The context of a ``def`` actor: blocking calls."""

    __slots__ = ("_c", "_spec")

    def __init__(self, core_ctx: _core.Ctx, spec: KernelSpec):
        self._c = core_ctx
        self._spec = spec

    @property
    def kernel_id(self) -> str:
        return self._c.kernel_id

    @property
    def should_terminate(self) -> bool:
        """True once terminate was asked and the input is drained. A safe
        point: while deactivated the kernel waits here (GIL released)."""
        return self._c.should_terminate()

    def receive(self, timeout: Optional[float] = None) -> Any:
        """The next input message, decoded as the kernel's input_type
        (bytes if it has none). QueueTimeoutError after timeout seconds."""
        return self._c.recv() if timeout is None else self._c.recv(_ns(timeout))

    def receive_raw(self, timeout: Optional[float] = None) -> tuple[bytes, dict[str, Any]]:
        """(payload bytes, envelope dict) of the next input message."""
        raw: tuple[bytes, dict[str, Any]] = self._c.recv(_ns(timeout), raw=True)
        return raw

    def send(self, message: Any) -> None:
        """To this kernel's output: its connected kernel, or the host. A
        message whose correlation_id is the last received message's id is
        sent as a reply (what RingKernelRuntime.request waits for)."""
        self._c.send(message)

    def send_and_receive(self, message: Any, timeout: Optional[float] = None) -> Any:
        """send(message), then receive(timeout), with the GIL released once
        for both: the host that waits for this output gets the GIL without
        a handoff. A request/reply loop written with it,
        ``m = ctx.receive()`` then ``m = ctx.send_and_receive(reply(m))``
        in a loop, answers faster than send + should_terminate + receive
        (it ends by ClosedError at terminate, which ends the actor)."""
        return self._c.send_recv(message, msgtype_of(message), _ns(timeout))

    def send_to(self, kernel_id: str, message: Any) -> None:
        """Straight into another kernel's input."""
        self._c.send_to(kernel_id, message, msgtype_of(message))

    def publish(self, topic: str, message: Any) -> None:
        self._c.publish(topic, message, msgtype_of(message))


class AsyncKernelContext(KernelContext):
    """The context of an ``async def`` actor (the seeds' form). The
    coroutine runs alone on its kernel thread's loop, so awaiting a receive
    waits in C with the GIL released instead of polling."""

    __slots__ = ()

    async def receive(self, timeout: Optional[float] = None) -> Any:
        return self._c.recv() if timeout is None else self._c.recv(_ns(timeout))

    async def receive_raw(self, timeout: Optional[float] = None) -> tuple[bytes, dict[str, Any]]:  # type: ignore[override]
        raw: tuple[bytes, dict[str, Any]] = self._c.recv(_ns(timeout), raw=True)
        return raw

    async def send(self, message: Any) -> None:  # type: ignore[override]
        self._c.send(message)

    async def send_and_receive(self, message: Any, timeout: Optional[float] = None) -> Any:
        return self._c.send_recv(message, msgtype_of(message), _ns(timeout))

    async def send_to(self, kernel_id: str, message: Any) -> None:  # type: ignore[override]
        self._c.send_to(kernel_id, message, msgtype_of(message))

    async def publish(self, topic: str, message: Any) -> None:  # type: ignore[override]
        self._c.publish(topic, message, msgtype_of(message))


def _runner(spec: KernelSpec) -> Callable[[_core.Ctx], int]:
    """The callable the C trampoline calls on the kernel thread."""
    is_async = inspect.iscoroutinefunction(spec.func)

    def run(core_ctx: _core.Ctx) -> int:
        try:
            if is_async:
                loop = asyncio.new_event_loop()
                try:
                    loop.run_until_complete(spec.func(AsyncKernelContext(core_ctx, spec)))
                finally:
                    loop.close()
            else:
                spec.func(KernelContext(core_ctx, spec))
        except ClosedError:
            return 0  # terminated while waiting for input: a clean end
        except BaseException:
            log.exception("ring kernel %r failed", spec.kernel_id)
            raise
        return 0

    return run


_registry: dict[str, KernelSpec] = {}


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def ring_kernel(func: _F, /) -> _F: ...
@overload
def ring_kernel(*, kernel_id: Optional[str] = None,
                input_type: Optional[type] = None, output_type: Optional[type] = None,
                queue_size: int = 1024, input_queue_size: Optional[int] = None,
                output_queue_size: Optional[int] = None, grid_size: int = 1,
                block_size: int = 256, backpressure: str = "block",
                max_payload: int = DEFAULT_MAX_PAYLOAD, when_inactive: str = "queue",
                restart: Optional[str] = None, max_restarts: int = 0,
                priority_bands: bool = False, spin: int = 0,
                auto_register: bool = True) -> Callable[[_F], _F]: ...


def ring_kernel(func: Optional[Callable[..., Any]] = None, *, kernel_id: Optional[str] = None,
                input_type: Optional[type] = None, output_type: Optional[type] = None,
                queue_size: int = 1024, input_queue_size: Optional[int] = None,
                output_queue_size: Optional[int] = None, grid_size: int = 1,
                block_size: int = 256, backpressure: str = "block",
                max_payload: int = DEFAULT_MAX_PAYLOAD, when_inactive: str = "queue",
                restart: Optional[str] = None, max_restarts: int = 0,
                priority_bands: bool = False, spin: int = 0,
                auto_register: bool = True) -> Any:
    """Declares a Python ring kernel (the seeds' decorator, same keywords,
    plus max_payload, when_inactive, restart/max_restarts, priority_bands and
    spin: receive spins before parking, 0 = the C default).
    Runtimes register it when it is first launched."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if backpressure not in _BACKPRESSURE:
            raise ValueError(f"backpressure must be one of {sorted(_BACKPRESSURE)}")
        spec = KernelSpec(
            kernel_id=kernel_id or fn.__name__, func=fn, input_type=input_type,
            output_type=output_type,
            input_queue_size=input_queue_size or queue_size,
            output_queue_size=output_queue_size or queue_size,
            backpressure=backpressure, max_payload=max_payload,
            when_inactive=when_inactive, restart=restart,
            max_restarts=max_restarts, priority_bands=priority_bands,
            grid_size=grid_size, block_size=block_size, spin=spin)
        if auto_register:
            _registry[spec.kernel_id] = spec

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        wrapper._ring_kernel_meta = {  # type: ignore[attr-defined]
            "kernel_id": spec.kernel_id, "input_type": input_type,
            "output_type": output_type, "spec": spec}
        wrapper._original_func = fn  # type: ignore[attr-defined]
        return wrapper

    return wrap(func) if func is not None else wrap


def get_registered_kernel(kernel_id: str) -> Optional[KernelSpec]:
    return _registry.get(kernel_id)
