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
from .errors import ClosedError, InvalidConfigurationError, KernelNotFoundError, error
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
    backend: str = "auto"
    device_source: Optional[str] = None  # a device actor's CUDA C handler
    device_entry: Optional[str] = None
    #: a Python handler compiled for the GPU (numba_device.DeviceHandler)
    device_handler: Any = None
    #: the CUDA device ordinal a device actor runs on (0: RK_CUDA_DEVICE's)
    device: int = 0
    #: the named barrier in device memory its blocks share with other
    #: kernels' (rk_kernel_config.device_barrier), and its parties
    device_barrier: Optional[str] = None
    device_barrier_parties: int = 0

    def _device(self, runtime_backend: Optional[str]) -> dict[str, Any]:
        """A device actor's register_actor keywords: its source, entry and
        backend, and grid and block where it will run on cuda (the cpu
        backend takes neither)."""
        h = self.device_handler
        where = dict(device=self.device, device_barrier=self.device_barrier,
                     device_barrier_parties=self.device_barrier_parties)
        if h is not None:  # a Numba handler: linked into the loop, cuda only
            return dict(device_source=h.source, device_entry=h.entry,
                        device_source_name=f"{self.kernel_id}.cu",
                        device_link_ptx=h.ptx, backend="cuda",
                        grid_size=self.grid_size, block_size=self.block_size, **where)
        if self.device_source is None:
            return dict(device=self.device)
        b = self.backend if self.backend != "auto" else (runtime_backend or "auto")
        from .compute import cuda_available
        on_cuda = b == "cuda" or (b == "auto" and cuda_available())
        return dict(device_source=self.device_source,
                    device_entry=self.device_entry or self.kernel_id,
                    device_source_name=f"{self.kernel_id}.cu",
                    backend=None if self.backend == "auto" else self.backend,
                    grid_size=self.grid_size if on_cuda else 0,
                    block_size=self.block_size if on_cuda else 0, **where)

    def register(self, core_rt: _core.Runtime, telemetry_off: bool = False,
                 runtime_backend: Optional[str] = None) -> None:
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
            priority_bands=self.priority_bands, spin=self.spin,
            telemetry_off=telemetry_off, **self._device(runtime_backend))
        # grid_size / block_size stay with the spec (ctx.grid_size, the
        # RingKernel's config): a Python actor is one kernel thread, and the
        # C cpu backend takes no grid; they size the actor's GPU work.


class KernelContext:
    """The context of a ``def`` actor: blocking calls."""

    __slots__ = ("_c", "_spec")

    def __init__(self, core_ctx: _core.Ctx, spec: KernelSpec):
        self._c = core_ctx
        self._spec = spec

    @property
    def kernel_id(self) -> str:
        return self._c.kernel_id

    def __class_getitem__(cls, params: Any) -> type:
        return cls  # KernelContext[In, Out] in annotations (PyDotCompute's)

    @property
    def should_terminate(self) -> bool:
        """True once terminate was asked and the input is drained. A safe
        point: while deactivated the kernel waits here (GIL released)."""
        return self._c.should_terminate()

    @property
    def is_active(self) -> bool:
        """True: the actor's code runs only while the kernel is active (a
        deactivated kernel is parked at its safe points, receive and
        should_terminate, until reactivated)."""
        return True

    def wait_active(self) -> None:
        """Returns once the kernel is active (a safe point)."""
        self._c.should_terminate()

    @property
    def grid_size(self) -> int:
        """The kernel's grid_size setting (for its GPU compute kernels)."""
        return self._spec.grid_size

    @property
    def block_size(self) -> int:
        return self._spec.block_size

    @property
    def device(self) -> int:
        """The kernel's CUDA device ordinal setting (``device=``; 0: the
        default device, RK_CUDA_DEVICE's)."""
        return self._spec.device

    @property
    def backend(self) -> str:
        """Where this kernel's compute kernels and buffers go: "cuda" when
        it asked for it (or "auto") and a GPU is usable, else "cpu"."""
        return _resolve_backend(self._spec.backend)

    def execute_kernel(self, name: Any, args: Any = (),
                       kwargs: Optional[dict[str, Any]] = None, *, grid: Any = None,
                       block: Any = None, wait: bool = True) -> Any:
        """Runs a compute kernel (a function registered with @kernel(name=)
        or register_kernel) with args, and returns its result.

        A one-shot kernel of CUDA C (a RawKernel, or the name it is
        registered under) runs through rk_ctx_execute_kernel over grid x
        block (default: this kernel's grid_size and block_size): wait=True
        runs it to completion (None), wait=False starts it and returns a
        KernelLaunch to wait on (or await)."""
        from .compute import get_kernel_registry
        from .oneshot import RawKernel
        fn = name if isinstance(name, RawKernel) else get_kernel_registry().get(name)
        if fn is None:
            raise error("RK_ENOTFOUND", f"execute_kernel: no compute kernel named {name!r} "
                        f"(registered: {get_kernel_registry().list()})", KernelNotFoundError)
        if isinstance(fn, RawKernel):
            if kwargs:
                raise TypeError(f"execute_kernel: one-shot kernel {fn.name!r} takes no "
                                "keyword arguments")
            return fn._launch(self._c, self._spec.grid_size if grid is None else grid,
                              self._spec.block_size if block is None else block,
                              list(args), wait)
        return fn(*args, **(kwargs or {}))

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

    async def wait_active(self) -> None:  # type: ignore[override]
        self._c.should_terminate()

    async def execute_kernel(self, name: Any, args: Any = (),
                             kwargs: Optional[dict[str, Any]] = None, *, grid: Any = None,
                             block: Any = None, wait: bool = True) -> Any:
        r = KernelContext.execute_kernel(self, name, args, kwargs, grid=grid, block=block,
                                         wait=wait)
        if wait and inspect.isawaitable(r):
            r = await r
        return r


def _resolve_backend(b: str) -> str:
    if b == "cpu":
        return "cpu"
    from .compute import cuda_available
    return "cuda" if cuda_available() else "cpu"


def _backend_name(backend: Any) -> str:
    if backend is None:
        return "auto"
    name: Any = backend if isinstance(backend, str) else getattr(backend, "name", None)
    if name not in ("cpu", "cuda", "auto"):
        raise error("RK_EINVAL", f"backend must be 'cpu', 'cuda', 'auto' or a backend "
                    f"class from ringkernel.backends, not {backend!r}", InvalidConfigurationError)
    return str(name)


def _check_type(what: str, kernel_id: str, t: Any) -> None:
    if t is not None and not (isinstance(t, type) and hasattr(t, "__rk_msgtype__")):
        raise TypeError(f"@ring_kernel {kernel_id!r}: {what} {getattr(t, '__name__', t)!r} "
                        "must be a @message decorated class (or a RingKernelMessage "
                        "subclass)")


def _check_size(kernel_id: str, name: str, v: Any) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise error("RK_EINVAL", f"@ring_kernel {kernel_id!r}: {name} must be an int >= 1, "
                    f"got {v!r}", InvalidConfigurationError)


def _check_device(kid: str, device: Any, barrier: Any, parties: Any,
                  device_code: bool) -> None:
    """device: an ordinal >= 0; a named barrier: device code, a name and
    parties >= 1 (each checked before the kernel is made)."""
    if not isinstance(device, int) or isinstance(device, bool) or device < 0:
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device must be a CUDA device "
                    f"ordinal (an int >= 0), got {device!r}", InvalidConfigurationError)
    if barrier is None:
        if parties is not None:
            raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_barrier_parties "
                        "without device_barrier", InvalidConfigurationError)
        return
    if not isinstance(barrier, str) or not barrier:
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_barrier must be a "
                    f"non-empty name, got {barrier!r}", InvalidConfigurationError)
    if not device_code:
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_barrier {barrier!r} is "
                    "waited at by device code: give device_source (or device_handler)",
                    InvalidConfigurationError)
    if not isinstance(parties, int) or isinstance(parties, bool) or parties < 1:
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_barrier {barrier!r} needs "
                    "device_barrier_parties, the blocks that wait at it (an int >= 1), "
                    f"got {parties!r}", InvalidConfigurationError)


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
                auto_register: bool = True, backend: Any = None,
                device_source: Optional[str] = None,
                device_entry: Optional[str] = None,
                device_handler: Any = None, device: int = 0,
                device_barrier: Optional[str] = None,
                device_barrier_parties: Optional[int] = None) -> Callable[[_F], _F]: ...


def ring_kernel(func: Optional[Callable[..., Any]] = None, *, kernel_id: Optional[str] = None,
                input_type: Optional[type] = None, output_type: Optional[type] = None,
                queue_size: int = 1024, input_queue_size: Optional[int] = None,
                output_queue_size: Optional[int] = None, grid_size: int = 1,
                block_size: int = 256, backpressure: str = "block",
                max_payload: int = DEFAULT_MAX_PAYLOAD, when_inactive: str = "queue",
                restart: Optional[str] = None, max_restarts: int = 0,
                priority_bands: bool = False, spin: int = 0,
                auto_register: bool = True, backend: Any = None,
                device_source: Optional[str] = None,
                device_entry: Optional[str] = None,
                device_handler: Any = None, device: int = 0,
                device_barrier: Optional[str] = None,
                device_barrier_parties: Optional[int] = None) -> Any:
    """Declares a Python ring kernel (the seeds' decorator, same keywords,
    plus max_payload, when_inactive, restart/max_restarts, priority_bands and
    spin: receive spins before parking, 0 = the C default; backend: "cpu",
    "cuda", "auto" or a class from ringkernel.backends, where the actor's
    compute kernels and buffers go; the actor itself runs on a kernel
    thread). queue_size is the C queues' capacity, as given.
    Runtimes register it when it is first launched.

    device_source (CUDA C, an RK_DEV_KERNEL named device_entry, default
    the kernel id) makes a device actor: on the cuda backend its handler
    runs resident on the GPU over grid_size x block_size, with the same
    queues, lifecycle and telemetry; where cuda is not used (backend
    "cpu", or "auto" without a GPU) the decorated function runs as its
    host twin.

    device_handler: a Python function ``fn(req, resp)`` (or True: the
    decorated function itself) compiled by Numba for the GPU and run
    resident in the persistent loop on the cuda backend instead of the
    actor (docs/python.md, "Device handlers in Python"); needs
    backend="cuda" and fixed-layout input and output types (output_type
    defaults to input_type). Compiled here: a function Numba cannot
    compile raises NumbaCompileError naming it and Numba's reason.

    device: the CUDA device ordinal a device actor runs on (0: the default,
    RK_CUDA_DEVICE's, else device 0); one the driver does not have fails
    the launch with NoDeviceError naming the ordinal and the device count.
    device_barrier / device_barrier_parties: a named barrier in device
    memory that the device code of every kernel naming it waits at with
    ``rk_dev_kernel_barrier`` (the parties: the blocks that wait there,
    across those kernels; each gives the same number)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        kid: str = kernel_id or getattr(fn, "__name__", None) or repr(fn)
        if not callable(fn):
            raise TypeError(f"@ring_kernel needs a function, not {type(fn).__name__}")
        if backpressure not in _BACKPRESSURE:
            raise error("RK_EINVAL", f"@ring_kernel {kid!r}: backpressure must be one of "
                        f"{sorted(_BACKPRESSURE)}, got {backpressure!r}",
                        InvalidConfigurationError)
        if device_source is not None and not isinstance(device_source, str):
            raise TypeError(f"@ring_kernel {kid!r}: device_source must be a str of CUDA C, "
                            f"not {type(device_source).__name__}")
        _check_device(kid, device, device_barrier, device_barrier_parties,
                      device_source is not None or device_handler not in (None, False))
        _check_type("input_type", kid, input_type)
        _check_type("output_type", kid, output_type)
        for name, v in (("queue_size", queue_size), ("grid_size", grid_size),
                        ("block_size", block_size)):
            _check_size(kid, name, v)
        for name, opt in (("input_queue_size", input_queue_size),
                          ("output_queue_size", output_queue_size)):
            if opt is not None:
                _check_size(kid, name, opt)
        spec = KernelSpec(
            kernel_id=kid, func=fn, input_type=input_type,
            output_type=output_type,
            input_queue_size=input_queue_size or queue_size,
            output_queue_size=output_queue_size or queue_size,
            backpressure=backpressure, max_payload=max_payload,
            when_inactive=when_inactive, restart=restart,
            max_restarts=max_restarts, priority_bands=priority_bands,
            grid_size=grid_size, block_size=block_size, spin=spin,
            backend=_backend_name(backend), device_source=device_source,
            device_entry=device_entry, device=device, device_barrier=device_barrier,
            device_barrier_parties=device_barrier_parties or 0)
        if device_handler is not None and device_handler is not False:
            spec = _with_device_handler(
                spec, fn if device_handler is True else device_handler)
        if auto_register:
            _registry[spec.kernel_id] = spec

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        wrapper._ring_kernel_meta = {  # type: ignore[attr-defined]
            "kernel_id": spec.kernel_id, "input_type": input_type,
            "output_type": output_type, "spec": spec,
            "config": {"input_queue_size": spec.input_queue_size,
                       "output_queue_size": spec.output_queue_size,
                       "grid_size": grid_size, "block_size": block_size,
                       "backpressure_strategy": backpressure}}
        wrapper._original_func = fn  # type: ignore[attr-defined]
        return wrapper

    return wrap(func) if func is not None else wrap


def _with_device_handler(spec: KernelSpec, handler: Any) -> KernelSpec:
    """spec with its device handler compiled (numba_device.py)."""
    kid = spec.kernel_id
    if spec.backend != "cuda":
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_handler runs on the "
                    f"GPU: give backend='cuda' (not {spec.backend!r})",
                    InvalidConfigurationError)
    if spec.input_type is None:
        raise error("RK_EINVAL", f"@ring_kernel {kid!r}: device_handler needs an "
                    "input_type with a fixed layout", InvalidConfigurationError)
    from .numba_device import compile_device_handler
    out = spec.output_type or spec.input_type
    dh = compile_device_handler(handler, spec.input_type, out)
    return dataclasses.replace(spec, output_type=out, device_handler=dh)


def get_registered_kernel(kernel_id: str) -> Optional[KernelSpec]:
    return _registry.get(kernel_id)


def get_ring_kernel_meta(func: Callable[..., Any]) -> Optional[dict[str, Any]]:
    """The metadata @ring_kernel attached to func, or None."""
    meta: Optional[dict[str, Any]] = getattr(func, "_ring_kernel_meta", None)
    return meta


def is_ring_kernel(func: Callable[..., Any]) -> bool:
    return get_ring_kernel_meta(func) is not None
