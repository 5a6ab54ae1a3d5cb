"""RingKernelRuntime: the seeds' runtime over the C rk_runtime.

``async with RingKernelRuntime() as rt`` gives the seeds' async API
(``await rt.launch(...)``, ``await rt.receive(...)``).
``with RingKernelRuntime() as rt`` gives the same methods, blocking
(:class:`BlockingRuntime`). Either way the kernels, queues and lifecycle
are the C runtime's; this module only converts.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import functools
import os
import time
import weakref
from typing import Any, AsyncIterator, Callable, Iterator, Optional

from . import _core, eventloop
from .errors import (ClosedError, KernelAlreadyExistsError, KernelNotFoundError,
                     KernelStateError, KernelTerminatedError, RingKernelError, error)
from .kernels import KernelSpec, _ns, _registry, get_registered_kernel
from .lifecycle import KernelState as KernelState  # re-exported: its public path
from .lifecycle import RingKernel, RingKernelConfig
from .messages import msgtype_of
from .telemetry import RingKernelTelemetry


_live: "weakref.WeakSet[BlockingRuntime]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # Kernel threads need the interpreter: stop them before it finalises.
    for rt in list(_live):
        rt.close()


def load_library(path: str) -> None:
    """Loads a shared library of C kernels (RK_RING_KERNEL definitions
    linked against this package's libringkernel, see docs/python.md).
    Runtimes created afterwards can launch them by id."""
    _core.load_library(os.fspath(path))


class BlockingRuntime:
    """The runtime's blocking API (what ``with RingKernelRuntime()`` gives).

    Timeouts are seconds (None: wait forever). Messages are @message
    instances or, for untyped kernels, bytes-like objects.
    """

    def __init__(self, *, enable_telemetry: bool = True, use_uvloop: bool = True,
                 use_eager_tasks: bool = True, max_kernels: int = 0,
                 dead_letter_capacity: int = 0,
                 terminate_timeout: float = 5.0, host_spin_us: Optional[float] = None,
                 load_static_kernels: bool = True,
                 backend: Any = None, accept_before_activate: bool = False) -> None:
        """enable_telemetry, use_uvloop, use_eager_tasks: PyDotCompute's
        (telemetry off: get_telemetry returns None; the C counters run
        anyway). accept_before_activate: sends to a launched kernel that
        was never activated are queued (ringkernel's behaviour) instead of
        raising KernelStateError (PyDotCompute's)."""
        if hasattr(backend, "name") and not isinstance(backend, str):
            backend = backend.name  # a backend class (ringkernel.backends)
        self._core_args: dict[str, Any] = dict(
            max_kernels=max_kernels, dead_letter_capacity=dead_letter_capacity,
            terminate_timeout_ns=_ns(terminate_timeout),
            host_spin_ns=-1 if host_spin_us is not None and host_spin_us < 0
            else int((host_spin_us or 0) * 1000),
            no_static_kernels=not load_static_kernels, backend=backend)
        self._core = _core.Runtime(**self._core_args)
        self._pid = os.getpid()
        self._registered: set[str] = set()
        self._specs: dict[str, KernelSpec] = {}
        self._types: dict[str, tuple[Optional[type], Optional[type]]] = {}
        # kernel id -> its output's MsgType (or None): receive's lookup.
        self._out_mt: dict[str, Any] = {}
        # Kernels launched and not terminated, in launch order (kernel_ids).
        self._kernels: dict[str, RingKernel] = {}
        # Launched but never activated: sends and receives are refused
        # there, as PyDotCompute does (unless accept_before_activate).
        self._unactivated: set[str] = set()
        self._strict_activate = not accept_before_activate
        self._enable_telemetry = enable_telemetry
        self._use_uvloop = use_uvloop
        self._use_eager_tasks = use_eager_tasks
        self._start_time = time.time()
        self._active = True
        _live.add(self)

    # ----------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Terminates every kernel and frees the runtime (idempotent)."""
        if os.getpid() != self._pid:
            return
        self._core.close()
        self._kernels.clear()
        self._unactivated.clear()
        self._active = False

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def kernel_ids(self) -> list[str]:
        """Kernels launched through this object and not terminated, in
        launch order (PyDotCompute's)."""
        return list(self._kernels)

    @property
    def is_active(self) -> bool:
        return self._active and not self.closed

    def _not_found(self, kernel_id: str, op: str) -> Exception:
        try:
            was = f" (it is {KernelState(self._core.state(kernel_id)).name})"
        except Exception:
            was = ""
        return error("RK_ENOTFOUND", f"{op}: kernel {kernel_id!r} is not running in this "
                     f"runtime{was}; running: {self.kernel_ids}; launch it first",
                     KernelNotFoundError)

    def _inactive(self, kernel_id: str, op: str) -> Exception:
        return error("RK_ESTATE", f"cannot {op} kernel {kernel_id!r} from state 'LAUNCHED': "
                     "activate it first", KernelStateError)

    def register(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None, *,
                 input_type: Optional[type] = None, output_type: Optional[type] = None,
                 **config: Any) -> None:
        """Registers a Python kernel (from the @ring_kernel registry, or
        kernel_func with the given config) without launching it."""
        if kernel_id in self._registered:
            return
        if kernel_func is not None:
            meta = getattr(kernel_func, "_ring_kernel_meta", None)
            if meta is not None:
                spec = meta["spec"]
            else:
                qs = config.pop("queue_size", None)
                if qs is not None:
                    config.setdefault("input_queue_size", qs)
                    config.setdefault("output_queue_size", qs)
                spec = KernelSpec(kernel_id=kernel_id, func=kernel_func, **config)
            spec = KernelSpec(**{**spec.__dict__, "kernel_id": kernel_id,
                                 "input_type": input_type or spec.input_type,
                                 "output_type": output_type or spec.output_type})
        else:
            spec = get_registered_kernel(kernel_id)
            if spec is None:
                return  # maybe a C kernel: the C runtime will say
        spec.register(self._core, telemetry_off=not self._enable_telemetry,
                      runtime_backend=self._core_args["backend"])
        self._registered.add(kernel_id)
        self._specs[kernel_id] = spec
        self._set_types(kernel_id, spec.input_type, spec.output_type)

    def _register_known(self) -> None:
        for kid in list(_registry):
            if kid not in self._registered:
                try:
                    self.register(kid)
                except Exception:
                    pass  # e.g. the same id defined in C: the C one stays

    def launch(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None, *,
               input_type: Optional[type] = None, output_type: Optional[type] = None,
               config: Optional[RingKernelConfig] = None, **kw: Any) -> RingKernel:
        """Phase 1: the kernel's queues and thread (it waits for activate).
        kernel_id may name a @ring_kernel, kernel_func a function to run as
        one, or a C kernel (types then say how to decode its messages).
        Returns a RingKernel handle. KernelAlreadyExistsError when the id
        is launched and not terminated; KernelNotFoundError when nothing
        has that id."""
        if not isinstance(kernel_id, str):
            raise error("RK_EINVAL", f"launch: kernel id must be a str, not "
                        f"{type(kernel_id).__name__}")
        if kernel_id in self._kernels:
            raise error("RK_EEXIST", f"launch: kernel {kernel_id!r} is already launched "
                        "(terminate it first)", KernelAlreadyExistsError)
        if config is not None:
            kw = {**config.as_kwargs(), **kw}
        self._launch(kernel_id, kernel_func, input_type=input_type,
                     output_type=output_type, **kw)
        it, ot = self._types.get(kernel_id, (None, None))
        spec = self._specs.get(kernel_id)
        if config is None and spec is not None:
            config = RingKernelConfig(
                kernel_id=kernel_id, grid_size=spec.grid_size, block_size=spec.block_size,
                input_queue_size=spec.input_queue_size,
                output_queue_size=spec.output_queue_size,
                backpressure_strategy=spec.backpressure)
        k = self._kernels[kernel_id] = RingKernel(
            self, kernel_id, config or RingKernelConfig(kernel_id=kernel_id), it, ot,
            ops=BlockingRuntime, async_ops=RingKernelRuntime)
        if self._strict_activate:
            self._unactivated.add(kernel_id)
        return k

    def _launch(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None, *,
                input_type: Optional[type] = None, output_type: Optional[type] = None,
                **config: Any) -> None:
        if kernel_func is not None:
            self.register(kernel_id, kernel_func, input_type=input_type,
                          output_type=output_type, **config)
        elif kernel_id in _registry and kernel_id not in self._registered:
            self.register(kernel_id)  # its errors are this call's
        # The others too, so that an unknown id's error lists every kernel.
        self._register_known()
        if input_type or output_type or kernel_id not in self._types:
            old = self._types.get(kernel_id, (None, None))
            self._set_types(kernel_id, input_type or old[0], output_type or old[1])
        self._core.launch(kernel_id)

    def activate(self, kernel_id: str) -> None:
        self._core.activate(kernel_id)
        self._unactivated.discard(kernel_id)

    def deactivate(self, kernel_id: str) -> None:
        """Pauses the kernel at its next safe point (returns once it has)."""
        self._core.deactivate(kernel_id)

    def reactivate(self, kernel_id: str) -> None:
        """Resumes a deactivated kernel."""
        if self.get_kernel_state(kernel_id) != KernelState.DEACTIVATED:
            raise error("RK_EALREADY" if self.get_kernel_state(kernel_id)
                        == KernelState.ACTIVE else "RK_ENOTACTIVE",
                        f"reactivate {kernel_id!r}: kernel is "
                        f"{self.get_kernel_state(kernel_id).name}, not DEACTIVATED")
        self._core.activate(kernel_id)

    def terminate(self, kernel_id: str, timeout: float = 5.0) -> None:
        """Graceful stop: queued input is still processed, then the actor
        ends. QueueTimeoutError if it did not end within timeout. The
        kernel leaves kernel_ids (the C runtime keeps it registered: it can
        be launched again)."""
        if kernel_id not in self._kernels:
            if self.closed:
                raise error("RK_ECLOSED", f"terminate {kernel_id!r}: the runtime is closed")
            raise self._not_found(kernel_id, "terminate")
        self._core.terminate(kernel_id, _ns(timeout))
        self._kernels.pop(kernel_id, None)
        self._unactivated.discard(kernel_id)

    def wait(self, kernel_id: str, timeout: Optional[float] = None) -> None:
        """Waits until the kernel's instance has ended."""
        self._core.wait(kernel_id, _ns(timeout))

    def get_kernel_state(self, kernel_id: str) -> KernelState:
        return KernelState(self._core.state(kernel_id))

    def get_kernel_backend(self, kernel_id: str) -> str:
        """The backend that runs the kernel: "cpu", or "cuda" for a C
        kernel with device code when a GPU is usable (backend "auto")."""
        return self._core.backend(kernel_id)

    # ------------------------------------------------------------ messages
    def _set_types(self, kernel_id: str, input_type: Optional[type],
                   output_type: Optional[type]) -> None:
        self._types[kernel_id] = (input_type, output_type)
        self._out_mt[kernel_id] = msgtype_of(output_type)

    def _out_type(self, kernel_id: str, message_type: Optional[type]) -> Any:
        if message_type is not None:
            return msgtype_of(message_type)
        return self._out_mt.get(kernel_id)

    def send(self, kernel_id: str, message: Any, *, timeout: Optional[float] = None,
             priority: Optional[int] = None, type_id: int = 0) -> None:
        """Into the kernel's input. A @message goes as its msgpack form
        (C codec); bytes-like data goes as is, with type_id. Waits (GIL
        released) only while the input is full under BLOCK backpressure."""
        if kernel_id in self._unactivated:
            raise self._inactive(kernel_id, "send message to")
        try:
            if timeout is None and priority is None and not type_id:
                self._core.send(kernel_id, message)  # the message's own type
            else:
                self._core.send(kernel_id, message, msgtype_of(message),
                                -1 if priority is None else priority, _ns(timeout), type_id)
        except KernelStateError:
            if kernel_id not in self._kernels and not self.closed:
                raise self._not_found(kernel_id, "send") from None
            raise
        except TypeError as e:
            if isinstance(e, RingKernelError):
                raise
            raise _bad_message(kernel_id, message, e) from None

    def send_fixed(self, kernel_id: str, message: Any, *,
                   timeout: Optional[float] = None) -> None:
        """A fixed-layout @message as its C struct bytes (what a C or GPU
        kernel reads in place)."""
        mt = msgtype_of(message)
        self._core.send(kernel_id, message.to_fixed(), None, message.priority,
                        _ns(timeout), mt.type_id)

    def send_batch(self, kernel_id: str, records: Any, *, type_id: int = 0,
                   message_type: Optional[type] = None, itemsize: Optional[int] = None,
                   priority: int = 128, timeout: Optional[float] = None) -> int:
        """Sends every record of a numpy structured array (a fixed-layout
        type's ``records(n)``) as one message each, in one call: no copy
        in Python, one wake-up. Returns how many went in."""
        if message_type is not None:
            type_id = msgtype_of(message_type).type_id
        size = itemsize or records.dtype.itemsize
        return self._core.send_batch(kernel_id, records, size, type_id, priority,
                                     _ns(timeout))

    def receive(self, kernel_id: str, timeout: Optional[float] = None, *,
                message_type: Optional[type] = None) -> Any:
        """The kernel's next output, decoded as its output_type (or
        message_type; bytes when neither is known). Waits in C with the GIL
        released, in slices, so Ctrl-C raises KeyboardInterrupt."""
        if kernel_id in self._unactivated:
            raise self._inactive(kernel_id, "receive message from")
        live = kernel_id in self._kernels
        try:
            return self._core.recv(kernel_id, self._out_mt.get(kernel_id)
                                   if message_type is None else msgtype_of(message_type),
                                   -1 if timeout is None else _ns(timeout))
        except KernelStateError:
            # Terminated before this call (not while it waited): gone, as
            # PyDotCompute forgets it.
            if not live and not self.closed:
                raise self._not_found(kernel_id, "receive") from None
            raise

    def receive_raw(self, kernel_id: str, timeout: Optional[float] = None) -> tuple[bytes, dict[str, Any]]:
        """(payload bytes, envelope dict) of the next output."""
        return self._core.recv_raw(kernel_id, None, _ns(timeout))

    def request(self, kernel_id: str, message: Any, timeout: Optional[float] = None, *,
                message_type: Optional[type] = None) -> Any:
        """Sends message and waits for the output whose correlation id is
        its id (rk_request); other output stays queued for receive()."""
        return self._core.request(kernel_id, message, msgtype_of(message),
                                  self._out_type(kernel_id, message_type), _ns(timeout))

    def send_and_receive(self, kernel_id: str, message: Any,
                         timeout: Optional[float] = None) -> Any:
        """send then receive (the next output, correlated or not), with
        the GIL released once across both."""
        return self._core.send_recv(kernel_id, message, msgtype_of(message),
                                    self._out_type(kernel_id, None), _ns(timeout))

    # -------------------------------------------------- routes and topics
    def connect(self, from_id: str, to_id: str) -> None:
        """Routes from_id's output into to_id's input (kernel to kernel)."""
        self._core.connect(from_id, to_id)

    def disconnect(self, from_id: str) -> None:
        self._core.disconnect(from_id)

    def subscribe(self, kernel_id: str, topic: str) -> None:
        self._core.subscribe(kernel_id, topic)

    def unsubscribe(self, kernel_id: str, topic: str) -> None:
        self._core.unsubscribe(kernel_id, topic)

    def publish(self, topic: str, message: Any, *, timeout: Optional[float] = None) -> int:
        """A copy to every subscriber; returns how many took it."""
        return self._core.publish(topic, message, msgtype_of(message), -1, _ns(timeout))

    def dead_letter(self, timeout: float = 0) -> Optional[dict[str, Any]]:
        """The oldest dead letter as a dict, or None."""
        return self._core.dead_letter(_ns(timeout))

    # ----------------------------------------------------------- telemetry
    def get_telemetry(self, kernel_id: str) -> Optional[RingKernelTelemetry]:
        """The kernel's RingKernelTelemetry (PyDotCompute's object, from the
        C counters; ``t["processed"]`` reads the rk_kernel_stats dict), or
        None when the runtime was made with enable_telemetry=False."""
        if not self._enable_telemetry:
            return None
        return RingKernelTelemetry.from_stats(kernel_id, self._core.stats(kernel_id))

    def get_kernel_stats(self, kernel_id: str) -> dict[str, Any]:
        """rk_kernel_stats as a dict (state, counters, latency p50/p99...),
        whatever enable_telemetry says."""
        return self._core.stats(kernel_id)

    def get_all_telemetry(self) -> dict[str, RingKernelTelemetry]:
        """{kernel id: telemetry} of the running kernels ({} when off)."""
        if not self._enable_telemetry:
            return {}
        return {k: RingKernelTelemetry.from_stats(k, self._core.stats(k)) for k in self._kernels}

    def get_summary(self) -> dict[str, Any]:
        """Totals over the running kernels (PyDotCompute's keys)."""
        tel = [RingKernelTelemetry.from_stats(k, self._core.stats(k)) for k in self._kernels]
        out: dict[str, Any] = {"kernel_count": len(self._kernels),
               "total_messages_processed": sum(t.messages_processed for t in tel),
               "total_messages_dropped": sum(t.messages_dropped for t in tel),
               "total_errors": sum(t.error_count for t in tel)}
        if self._enable_telemetry:
            out["uptime_seconds"] = time.time() - self._start_time
            out["gpu_utilization"] = None
        return out

    @contextlib.contextmanager
    def kernel_scope(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None,
                     **kw: Any) -> Iterator[RingKernel]:
        """Launches and activates the kernel; terminates it on leaving."""
        k = self.launch(kernel_id, kernel_func, **kw)
        try:
            self.activate(kernel_id)
            yield k
        finally:
            self.terminate(kernel_id)

    def get_stats_snapshot(self, kernel_id: str) -> dict[str, Any]:
        """The telemetry snapshot (counters by descriptor name and the
        latency summary), as rk_stats_format_json would print it."""
        return self._core.telemetry(kernel_id)

    # ---------------------------------------------------- context manager
    def __enter__(self) -> "BlockingRuntime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(active={self.is_active}, kernels={len(self._kernels)}, "
                f"telemetry={self._enable_telemetry}, closed={self.closed})")


class _AsyncReceiver:
    """One kernel's async receive on one event loop, without a thread: the
    kernel output's eventfd (rk_kernel_output_arm) is watched with
    loop.add_reader, and outputs are taken with non-blocking receives on
    the loop's own thread. Waiting coroutines are served in order; the
    eventfd is armed only while one waits, so an idle kernel costs
    nothing (the loop sits in its select)."""

    def __init__(self, rt: BlockingRuntime, kernel_id: str, loop: asyncio.AbstractEventLoop):
        self._rt = rt
        self._kid = kernel_id
        self._loop = loop
        self._fd: Optional[int] = None
        self._waiters: collections.deque[asyncio.Future[tuple[bool, Any]]] = collections.deque()
        # Outputs taken for a coroutine that was cancelled before it could
        # have them: the next receive gets them first (nothing is dropped).
        self._stash: collections.deque[tuple[bool, Any]] = collections.deque()

    def close(self) -> None:
        def detach() -> None:
            if self._fd is not None:
                self._loop.remove_reader(self._fd)
                self._fd = None
            while self._waiters:
                f = self._waiters.popleft()
                if not f.done():
                    f.set_result((False, error("RK_ECLOSED", "the runtime was closed")))

        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop or self._loop.is_closed():
            detach()
        else:
            self._loop.call_soon_threadsafe(detach)  # the loop's own thread

    def _watch(self, fd: int) -> None:
        # A relaunched kernel has a new instance and a new eventfd.
        if fd != self._fd:
            if self._fd is not None:
                self._loop.remove_reader(self._fd)
            self._fd = fd
            self._loop.add_reader(fd, self._ready)

    def _ready(self) -> None:
        try:
            os.read(self._fd, 8) if self._fd is not None else None  # resets the eventfd
        except (BlockingIOError, TypeError):
            pass
        self._serve()

    def _serve(self) -> None:
        """Hands queued outputs to the waiting coroutines, in order; arms
        the eventfd when one still waits and the output is empty."""
        core, kid = self._rt._core, self._kid
        while self._waiters:
            f = self._waiters[0]
            if f.done():  # cancelled or timed out
                self._waiters.popleft()
                continue
            try:
                v = core.recv(kid, self._rt._out_mt.get(kid), 0, True)
                if v is None:
                    fd = core.output_arm(kid)
                    if fd is None:
                        continue  # output came meanwhile (or the kernel ended)
                    self._watch(fd)
                    return
                item = (True, v)
            except Exception as e:  # delivered to the waiting coroutine
                item = (False, e)
            self._waiters.popleft()
            f.set_result(item)

    async def get(self, timeout: Optional[float]) -> Any:
        if self._stash:
            ok, v = self._stash.popleft()
        else:
            fut = self._loop.create_future()
            self._waiters.append(fut)
            if len(self._waiters) == 1:
                self._serve()  # takes an output, or arms and waits
            try:
                if timeout is None:
                    ok, v = await fut
                else:
                    ok, v = await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise error("RK_ETIMEDOUT", f"no output from {self._kid!r} in {timeout} s") from None
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._stash.appendleft(fut.result())  # taken: keep it
                raise
        if not ok:
            raise v
        return v


class RingKernelRuntime(BlockingRuntime):
    """The seeds' runtime: ``async with RingKernelRuntime() as rt`` and
    ``await`` every call; or ``with RingKernelRuntime() as rt`` for the
    blocking forms of the same calls."""

    def __init__(self, *, async_spin_us: float = 20.0, **kw: Any):
        """async_spin_us: how long an async receive first waits in C (the
        event loop blocked, GIL released) for an answer that is about to
        come, before it parks on the eventfd; 0 never blocks the loop."""
        super().__init__(**kw)
        # kernel id -> its async receiver (bound to one event loop)
        self._receivers: dict[str, _AsyncReceiver] = {}
        self._spin_ns = max(0, int(async_spin_us * 1000))
        self._active = False  # until start() (PyDotCompute's)
        self._sync_mode = False
        # uvloop's policy when uvloop is installed, as PyDotCompute does
        # (``pip install ringkernel[fast]``; RINGKERNEL_NO_UVLOOP=1: off).
        self._uvloop_installed = bool(self._use_uvloop and eventloop.install_uvloop())
        self._eager_installed = False

    def __enter__(self) -> "RingKernelRuntime":
        """``with rt:`` and ``with RingKernelRuntime() as rt:`` alike: inside
        the block this object's calls are the blocking ones (they return
        results, not coroutines)."""
        self._sync_mode = True
        for name in _BLOCKING_NAMES:
            self.__dict__[name] = getattr(BlockingRuntime, name).__get__(self)
        self.__dict__["start"] = self._start_sync
        self.__dict__["shutdown"] = lambda timeout=10.0: self.close()
        self._start_sync()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.close()
        finally:  # the object's calls are the awaitable ones again
            for name in _BLOCKING_NAMES + ("start", "shutdown"):
                self.__dict__.pop(name, None)
            self._sync_mode = False

    def _start_sync(self) -> None:
        if self.closed:  # started again after a shutdown: a new C runtime
            self._core = _core.Runtime(**self._core_args)
            self._registered.clear()
        self._active = True
        self._start_time = time.time()

    async def __aenter__(self) -> "RingKernelRuntime":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Marks the runtime active (PyDotCompute's); after a shutdown it
        starts with a new C runtime."""
        if self._use_eager_tasks:
            self._eager_installed = eventloop.install_eager_task_factory()
        self._start_sync()

    def get_loop_info(self) -> dict[str, Any]:
        """The event loop's configuration (PyDotCompute's keys)."""
        info = eventloop.get_loop_info()
        info["runtime_uvloop_installed"] = self._uvloop_installed
        info["runtime_eager_tasks_installed"] = self._eager_installed
        return info

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the runtime: pending receives fail with ClosedError, then
        every kernel is terminated (off the event loop's thread)."""
        self._close_receivers()  # on the loop's own thread
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.close)

    def _close_receivers(self) -> None:
        for r in list(getattr(self, "_receivers", {}).values()):
            r.close()
        if hasattr(self, "_receivers"):
            self._receivers.clear()

    def close(self) -> None:
        self._close_receivers()
        super().close()

    async def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))

    async def launch(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None,  # type: ignore[override]
                     **kw: Any) -> RingKernel:
        return BlockingRuntime.launch(self, kernel_id, kernel_func, **kw)

    async def activate(self, kernel_id: str) -> None:  # type: ignore[override]
        BlockingRuntime.activate(self, kernel_id)

    @contextlib.asynccontextmanager
    async def kernel_scope(self, kernel_id: str, kernel_func: Optional[Callable[..., Any]] = None,  # type: ignore[override]
                           **kw: Any) -> AsyncIterator[RingKernel]:
        """Launches and activates the kernel; terminates it on leaving."""
        k = await self.launch(kernel_id, kernel_func, **kw)
        try:
            await self.activate(kernel_id)
            yield k
        finally:
            await self.terminate(kernel_id)

    async def deactivate(self, kernel_id: str) -> None:  # type: ignore[override]
        await self._call(BlockingRuntime.deactivate, self, kernel_id)

    async def reactivate(self, kernel_id: str) -> None:  # type: ignore[override]
        BlockingRuntime.reactivate(self, kernel_id)

    async def terminate(self, kernel_id: str, timeout: float = 5.0) -> None:  # type: ignore[override]
        await self._call(BlockingRuntime.terminate, self, kernel_id, timeout)

    async def wait(self, kernel_id: str, timeout: Optional[float] = None) -> None:  # type: ignore[override]
        await self._call(BlockingRuntime.wait, self, kernel_id, timeout)

    async def send(self, kernel_id: str, message: Any, *,  # type: ignore[override]
                   timeout: Optional[float] = None, priority: Optional[int] = None,
                   type_id: int = 0) -> None:
        # A send waits only while the input is full (BLOCK backpressure),
        # with the GIL released.
        if timeout is None and priority is None and not type_id and \
                kernel_id not in self._unactivated:
            try:
                self._core.send(kernel_id, message)  # the message's own type
                return
            except (KernelStateError, TypeError):
                pass  # the full path below names the error
        BlockingRuntime.send(self, kernel_id, message, timeout=timeout,
                             priority=priority, type_id=type_id)

    async def send_batch(self, kernel_id: str, records: Any, **kw: Any) -> int:  # type: ignore[override]
        return BlockingRuntime.send_batch(self, kernel_id, records, **kw)

    def _receiver(self, kernel_id: str) -> _AsyncReceiver:
        loop = asyncio.get_running_loop()
        r = self._receivers.get(kernel_id)
        if r is None or r._loop is not loop:
            if r is not None:
                if r._waiters and not r._loop.is_closed():
                    # One eventfd wake-up per arm: two loops waiting on one
                    # output could take each other's.
                    raise error("RK_EBUSY", f"the output of {kernel_id!r} is awaited "
                                "on another event loop")
                r.close()
            r = self._receivers[kernel_id] = _AsyncReceiver(self, kernel_id, loop)
        return r

    async def receive(self, kernel_id: str, timeout: Optional[float] = None, *,
                      message_type: Optional[type] = None) -> Any:
        """The next output without blocking the event loop: taken at once
        if one is queued (or comes within async_spin_us), else the loop
        waits on the kernel output's eventfd."""
        if message_type is not None:
            self._set_types(kernel_id, self._types.get(kernel_id, (None, None))[0],
                            message_type)
        if kernel_id in self._unactivated:
            raise self._inactive(kernel_id, "receive message from")
        r = self._receivers.get(kernel_id)
        if r is None or not (r._stash or r._waiters):
            # Nobody is ahead in line: take it directly.
            try:
                v = self._core.recv(kernel_id, self._out_mt.get(kernel_id), self._spin_ns, True)
            except KernelStateError:
                # Terminated before this call: gone, as PyDotCompute forgets it
                # (a receive that was waiting gets KernelTerminatedError).
                if kernel_id not in self._kernels and not self.closed:
                    raise self._not_found(kernel_id, "receive") from None
                raise
            if v is not None:
                return v
        return await self._receiver(kernel_id).get(timeout)

    async def request(self, kernel_id: str, message: Any, timeout: Optional[float] = None, **kw: Any) -> Any:
        return await self._call(BlockingRuntime.request, self, kernel_id, message, timeout, **kw)

    async def send_and_receive(self, kernel_id: str, message: Any,
                               timeout: Optional[float] = None) -> Any:
        """send, then the next output: one GIL release for the send and
        the first async_spin_us of the wait, then the eventfd path."""
        r = self._receivers.get(kernel_id)
        if r is not None and (r._stash or r._waiters):
            await self.send(kernel_id, message, timeout=timeout)
            return await self.receive(kernel_id, timeout)
        out = self._core.send_recv(kernel_id, message, msgtype_of(message),
                                   self._out_mt.get(kernel_id), _ns(timeout),
                                   self._spin_ns, True)
        if out is not None:
            return out
        return await self.receive(kernel_id, timeout)

    async def receive_stream(self, kernel_id: str, timeout: Optional[float] = None) -> AsyncIterator[Any]:
        """Every output of the kernel as it comes, until the kernel ends
        or the runtime closes (or timeout seconds pass with none)."""
        while True:
            try:
                yield await self.receive(kernel_id, timeout)
            except (ClosedError, KernelTerminatedError):
                return


def _bad_message(kernel_id: str, message: Any, e: Exception) -> Exception:
    return error("RK_ETYPE", f"send to {kernel_id!r}: a message is a @message instance "
                 f"or bytes-like data, not {type(message).__name__} ({e})")


# The calls a plain ``with rt:`` turns blocking on the object itself.
_BLOCKING_NAMES = ("launch", "activate", "deactivate", "reactivate", "terminate", "wait",
                   "send", "send_batch", "receive", "request", "send_and_receive",
                   "kernel_scope")




class BlockingView(BlockingRuntime):
    """``with RingKernelRuntime() as rt``: the blocking API on the same C
    runtime (closing it closes the runtime)."""

    def __init__(self, owner: RingKernelRuntime):  # noqa: D107 - shares state
        self.__dict__ = owner.__dict__
        self._owner = owner

    def close(self) -> None:
        self._owner.close()
