"""PyDotCompute's compute side: Accelerator (devices), MemoryPool, the
one-shot @kernel / @gpu_kernel decorators with their registry, and the
ComputeOrchestrator that launches such kernels and records each run.

Devices come from the C runtime: CUDA is "available" when the C library
can run its cuda backend here (a driver and a GPU); CuPy, Numba and
pynvml are not needed (``pip install ringkernel[cuda]`` adds them for
@gpu_kernel, device arrays and GPUMonitor).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import inspect
import os
import time
import uuid
from typing import Any, AsyncIterator, Callable, Optional, Union, overload

from . import _core
from .errors import InvalidConfigurationError, error
from ._device import KernelRegistry as KernelRegistry
from ._device import cuda_available as cuda_available
from ._device import get_kernel_registry as get_kernel_registry
from .oneshot import RawKernel, device_arg

def metal_available() -> bool:
    return False  # ringkernel has no Metal backend


class DeviceType(enum.Enum):
    CPU = enum.auto()
    CUDA = enum.auto()
    METAL = enum.auto()


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """A compute device (PyDotCompute's fields)."""

    device_id: int
    device_type: DeviceType
    name: str
    compute_capability: Optional[tuple[int, int]] = None
    total_memory: int = 0
    multiprocessor_count: int = 1
    max_threads_per_block: int = 1
    max_block_dims: tuple[int, ...] = (1, 1, 1)
    max_grid_dims: tuple[int, ...] = (1, 1, 1)
    warp_size: int = 1
    is_available: bool = True

    @property
    def compute_capability_str(self) -> str:
        cc = self.compute_capability
        return "N/A" if cc is None else f"{cc[0]}.{cc[1]}"

    @property
    def total_memory_gb(self) -> float:
        return self.total_memory / (1024 ** 3)


def _cpu_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


class Accelerator:
    """The devices this process can use (a singleton, as PyDotCompute's):
    the GPU when the C runtime can use one, else the CPU."""

    _instance: Optional["Accelerator"] = None
    _devices: list[DeviceProperties]
    _current: int

    def __new__(cls) -> "Accelerator":
        if cls._instance is None:
            inst = super().__new__(cls)
            inst._devices = []
            inst._current = 0
            inst._discover()
            cls._instance = inst
        return cls._instance

    def _discover(self) -> None:
        if cuda_available():
            self._devices.append(DeviceProperties(
                0, DeviceType.CUDA, "CUDA device 0", None, 0, 1, 1024,
                (1024, 1024, 64), (2 ** 31 - 1, 65535, 65535), 32, True))
        else:
            self._devices.append(DeviceProperties(
                0, DeviceType.CPU, "CPU", None, _cpu_memory(), os.cpu_count() or 1))

    @property
    def cuda_available(self) -> bool:
        return cuda_available()

    @property
    def metal_available(self) -> bool:
        return False

    @property
    def device_count(self) -> int:
        return len(self._devices)

    @property
    def current_device(self) -> DeviceProperties:
        return self._devices[self._current]

    @property
    def devices(self) -> list[DeviceProperties]:
        return list(self._devices)

    def get_device(self, device_id: int) -> DeviceProperties:
        if not isinstance(device_id, int) or not 0 <= device_id < len(self._devices):
            raise error("RK_EINVAL", f"Invalid device_id: {device_id!r}. Valid range: "
                        f"0-{len(self._devices) - 1}")
        return self._devices[device_id]

    def set_device(self, device_id: int) -> None:
        self.get_device(device_id)
        self._current = device_id

    def synchronize(self) -> None:
        """Nothing is queued asynchronously outside the C calls, which
        complete before they return."""

    def get_memory_info(self) -> dict[str, int]:
        total = self.current_device.total_memory
        return {"free": 0, "total": total if self.current_device.device_type ==
                DeviceType.CUDA else 0, "used": 0}

    def __repr__(self) -> str:
        return (f"Accelerator(devices={self.device_count}, cuda_available={self.cuda_available}, "
                f"metal_available=False, current_device={self.current_device.name})")


def get_accelerator() -> Accelerator:
    return Accelerator()


@dataclasses.dataclass
class PoolStatistics:
    used_bytes: int = 0
    total_bytes: int = 0
    n_free_blocks: int = 0

    @property
    def free_bytes(self) -> int:
        return self.total_bytes - self.used_bytes

    @property
    def utilization(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def used_mb(self) -> float:
        return self.used_bytes / (1024 * 1024)

    @property
    def total_mb(self) -> float:
        return self.total_bytes / (1024 * 1024)


class MemoryPool:
    """The device memory pool (a singleton, as PyDotCompute's). ringkernel's
    buffers and queues take their memory from the C library's pools
    (rk_pool, docs/memory.md); this object is the switch and the
    statistics PyDotCompute programs call."""

    _instance: Optional["MemoryPool"] = None

    def __new__(cls, *a: Any, **k: Any) -> "MemoryPool":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self, initial_size_mb: int = 0, max_size_mb: Optional[int] = None) -> None:
        if getattr(self, "_initialized", False):
            return
        self._enabled = False
        self._limit_mb = max_size_mb
        self._initialized = True

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    @property
    def enabled(self) -> bool:
        return self._enabled

    def get_stats(self) -> PoolStatistics:
        return PoolStatistics()

    def get_pinned_stats(self) -> PoolStatistics:
        return PoolStatistics()

    def free_all_blocks(self) -> None:
        pass

    def free_all_free(self) -> None:
        pass

    def set_limit(self, size_mb: Optional[int]) -> None:
        if size_mb is not None and (not isinstance(size_mb, int) or size_mb < 0):
            raise error("RK_EINVAL", f"set_limit: size_mb must be an int >= 0 or None, "
                        f"got {size_mb!r}")
        self._limit_mb = size_mb

    def __repr__(self) -> str:
        s = self.get_stats()
        return (f"MemoryPool(enabled={self._enabled}, used={s.used_mb:.2f}MB, "
                f"total={s.total_mb:.2f}MB, cuda={cuda_available()})")


def get_memory_pool() -> MemoryPool:
    return MemoryPool()


def configure_memory_pool(_initial_size_mb: int = 0, max_size_mb: Optional[int] = None,
                          enable: bool = True) -> MemoryPool:
    pool = MemoryPool()
    if max_size_mb is not None:
        pool.set_limit(max_size_mb)
    if enable:
        pool.enable()
    return pool


# ----------------------------------------------------- one-shot kernels


def _raw(func: Any, name: Optional[str], source: Optional[str], entry: Optional[str],
         device: Union[str, int], cooperative: bool, what: str) -> Any:
    """kernel(SOURCE, name=...) / @kernel(source=SOURCE): a RawKernel, with
    the decorated function as its host fallback."""
    if isinstance(func, str):
        if source is not None:
            raise error("RK_EINVAL", f"{what}: the source given twice (positionally and "
                        "as source=)", InvalidConfigurationError)
        if not name:
            raise error("RK_EINVAL", f"{what}(source): name= is needed (the kernel's "
                        "RK_DEV_ONESHOT entry, as CuPy's RawKernel(code, name))",
                        InvalidConfigurationError)
        return RawKernel(func, name, entry=entry, device=device, cooperative=cooperative)

    def wrap(fn: Callable[..., Any]) -> RawKernel:
        if not callable(fn):
            raise TypeError(f"{what}(source=...) decorates the host fallback, a function, "
                            f"not {type(fn).__name__}")
        k = RawKernel(source, name or fn.__name__, entry=entry, host=fn, device=device,
                      cooperative=cooperative)
        functools.update_wrapper(k, fn)
        return k

    return wrap(func) if func is not None else wrap


@overload
def kernel(func: str, /, *, name: str, device: Union[str, int] = "auto", entry: Optional[str] = None,
           cooperative: bool = False) -> RawKernel: ...
@overload
def kernel(*, source: str, name: Optional[str] = None, device: Union[str, int] = "auto",
           entry: Optional[str] = None,
           cooperative: bool = False) -> Callable[[Callable[..., Any]], RawKernel]: ...
@overload
def kernel(func: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None,
           device: Union[str, int] = "auto", fastmath: bool = True, cache: bool = True) -> Any: ...


def kernel(func: Optional[Union[Callable[..., Any], str]] = None, *,
           name: Optional[str] = None, device: Union[str, int] = "auto", fastmath: bool = True,
           cache: bool = True, source: Optional[str] = None, entry: Optional[str] = None,
           cooperative: bool = False) -> Any:
    """A one-shot compute kernel (PyDotCompute's @kernel): a function called
    with its arguments. On the CPU it runs as the Python function it is
    (``device="cuda"`` without a GPU falls back to it, as PyDotCompute's
    does); with Numba installed and a GPU, ``device="cuda"`` compiles it
    with numba.cuda. The kernel is registered under its name for
    ``ctx.execute_kernel``.

    Over CUDA C (ringkernel's, CuPy's RawKernel): ``kernel(SOURCE,
    name="entry")`` is a RawKernel (ringkernel/oneshot.py), and
    ``@kernel(source=SOURCE)`` makes one whose host fallback (the cpu
    backend's) is the decorated function; ``device`` is then the backend
    ("auto", "cuda", "cpu") or a CUDA device ordinal N (or "cuda:N": cuda
    on device N), and ``cooperative`` allows the grid barrier."""
    backend, _ = device_arg("@kernel", device)
    if isinstance(func, str) or source is not None:
        return _raw(func, name, source, entry, device, cooperative, "kernel")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"@kernel needs a function, not {type(fn).__name__}")
        kname: str = name or fn.__name__
        meta: dict[str, Any] = {"name": kname, "device": backend, "fastmath": fastmath,
                "cache": cache, "compiled": None}

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if meta["compiled"] is None:
                meta["compiled"] = _compile(fn, meta)
            return meta["compiled"](*args, **kwargs)

        wrapper._kernel_meta = meta  # type: ignore[attr-defined]
        wrapper._original_func = fn  # type: ignore[attr-defined]
        KernelRegistry().register(kname, wrapper, overwrite=True)
        return wrapper

    return wrap(func) if func is not None else wrap


def _compile(fn: Callable[..., Any], meta: dict[str, Any]) -> Callable[..., Any]:
    if meta["device"] == "cuda" and cuda_available():
        try:
            from numba import cuda as ncuda
            njit: Callable[..., Any] = ncuda.jit  # numba is untyped
            jitted: Callable[..., Any] = njit(fastmath=meta["fastmath"],
                                              cache=meta["cache"])(fn)
            return jitted
        except ImportError:
            pass
    return fn  # the CPU path: the function itself


def gpu_kernel(func: Optional[Union[Callable[..., Any], str]] = None, *,
               name: Optional[str] = None, signature: Optional[str] = None,
               fastmath: bool = True, debug: bool = False, cache: bool = True,
               source: Optional[str] = None, entry: Optional[str] = None,
               device: Union[str, int] = "auto", cooperative: bool = False) -> Any:
    """A Numba CUDA kernel (PyDotCompute's @gpu_kernel): needs numba
    (``pip install ringkernel[cuda]``); RuntimeError without it, as
    PyDotCompute. Over CUDA C, as ``kernel``: ``gpu_kernel(SOURCE,
    name=...)`` and ``@gpu_kernel(source=SOURCE)`` make a RawKernel (no
    Numba needed; typed as such through ``kernel``)."""
    if isinstance(func, str) or source is not None:
        device_arg("@gpu_kernel", device)
        return _raw(func, name, source, entry, device, cooperative, "gpu_kernel")

    def wrap(fn: Callable[..., Any]) -> Any:
        try:
            from numba import cuda as ncuda
        except ImportError as e:
            raise RuntimeError(f"CUDA not available for @gpu_kernel. Error: {e}") from e
        njit: Callable[..., Any] = ncuda.jit  # numba is untyped
        jit = njit(signature, fastmath=fastmath, debug=debug, cache=cache) if signature \
            else njit(fastmath=fastmath, debug=debug, cache=cache)
        compiled = jit(fn)
        compiled._kernel_meta = {"name": name or fn.__name__, "signature": signature,
                                 "device": "cuda", "fastmath": fastmath, "debug": debug}
        compiled._original_func = fn
        return compiled

    return wrap(func) if func is not None else wrap


def cuda_source(source: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attaches CUDA C source to a function (``__cuda_source__``)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__cuda_source__ = source  # type: ignore[attr-defined]
        return fn
    return wrap


# -------------------------------------------------------- orchestrator
@dataclasses.dataclass
class KernelLaunchConfig:
    """Grid, block, shared memory and stream of one launch."""

    # an int is taken as a 1-tuple (__post_init__)
    grid_size: tuple[int, ...] = (1,)
    block_size: tuple[int, ...] = (256,)
    shared_memory_bytes: int = 0
    stream: Any = None

    def __post_init__(self) -> None:
        for n in ("grid_size", "block_size"):
            v: Any = getattr(self, n)
            v = (v,) if isinstance(v, int) else tuple(v)
            if not 1 <= len(v) <= 3 or any(not isinstance(d, int) or d < 1 for d in v):
                raise error("RK_EINVAL", f"KernelLaunchConfig.{n} must be 1-3 ints >= 1, "
                            f"got {getattr(self, n)!r}", InvalidConfigurationError)
            setattr(self, n, v)


@dataclasses.dataclass
class KernelExecution:
    """One kernel run: its name, config, times and outcome."""

    execution_id: uuid.UUID = dataclasses.field(default_factory=uuid.uuid4)
    kernel_name: str = ""
    config: KernelLaunchConfig = dataclasses.field(default_factory=KernelLaunchConfig)
    start_time: float = 0.0
    end_time: float = 0.0
    success: bool = False
    error: Optional[Exception] = None
    result: Any = None

    @property
    def duration_ms(self) -> float:
        return (self.end_time - self.start_time) * 1000


class ComputeOrchestrator:
    """Launches one-shot compute kernels (functions, coroutines, @kernel or
    Numba kernels) and keeps a record of each run (PyDotCompute's)."""

    def __init__(self) -> None:
        self._accelerator: Optional[Accelerator] = None
        self._memory_pool: Optional[MemoryPool] = None
        self._registered_kernels: dict[str, Callable[..., Any]] = {}
        self._execution_history: list[KernelExecution] = []
        self._streams: list[Any] = []
        self._active = False

    async def __aenter__(self) -> "ComputeOrchestrator":
        await self.initialize()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def initialize(self) -> None:
        if self._active:
            return
        self._accelerator = get_accelerator()
        self._memory_pool = get_memory_pool()
        self._memory_pool.enable()
        self._active = True

    async def shutdown(self) -> None:
        if not self._active:
            return
        self._streams.clear()
        if self._memory_pool:
            self._memory_pool.free_all_blocks()
        self._active = False

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def accelerator(self) -> Optional[Accelerator]:
        return self._accelerator

    @property
    def memory_pool(self) -> Optional[MemoryPool]:
        return self._memory_pool

    def register_kernel(self, name: str, kernel_func: Callable[..., Any]) -> None:
        if not isinstance(name, str) or not callable(kernel_func):
            raise error("RK_EINVAL", f"register_kernel: needs a str name and a callable, got "
                        f"{name!r}, {type(kernel_func).__name__}")
        self._registered_kernels[name] = kernel_func

    def get_kernel(self, name: str) -> Optional[Callable[..., Any]]:
        return self._registered_kernels.get(name)

    async def launch_kernel(self, kernel: Any, config: KernelLaunchConfig, *args: Any,
                            **kwargs: Any) -> KernelExecution:
        """Runs the kernel (a function or a registered name) with args and
        returns the record of the run; a kernel's exception is recorded and
        raised again. ValueError for a name that is not registered."""
        fn: Any  # a function, or a Numba kernel (indexed by the launch config)
        if isinstance(kernel, str):
            fn = self._registered_kernels.get(kernel)
            if fn is None:
                raise ValueError(f"Kernel '{kernel}' not registered")
            kname = kernel
        elif callable(kernel):
            fn, kname = kernel, getattr(kernel, "__name__", "unknown")
        else:
            raise TypeError(f"launch_kernel: kernel must be a callable or a registered "
                            f"name, not {type(kernel).__name__}")
        if not isinstance(config, KernelLaunchConfig):
            raise TypeError(f"launch_kernel: config must be a KernelLaunchConfig, not "
                            f"{type(config).__name__}")
        ex = KernelExecution(kernel_name=kname, config=config, start_time=time.perf_counter())
        try:
            if isinstance(fn, RawKernel):  # CUDA C: the config is the launch's
                r = fn(config.grid_size, config.block_size, args)
            elif hasattr(fn, "forall"):  # a Numba CUDA kernel
                r = fn[config.grid_size, config.block_size](*args, **kwargs)
            else:
                r = fn(*args, **kwargs)
                if inspect.isawaitable(r):
                    r = await r
            ex.result = r
            ex.success = True
        except Exception as e:
            ex.error = e
            raise
        finally:
            ex.end_time = time.perf_counter()
            self._execution_history.append(ex)
        return ex

    def create_stream(self) -> Any:
        """A CUDA stream (CuPy's) when a GPU and CuPy are there, else None."""
        if not cuda_available():
            return None
        try:
            import cupy as cp
        except ImportError:
            return None
        s = cp.cuda.Stream()
        self._streams.append(s)
        return s

    def synchronize(self) -> None:
        if self._accelerator:
            self._accelerator.synchronize()

    def get_execution_history(self, limit: Optional[int] = None,
                              kernel_name: Optional[str] = None) -> list[KernelExecution]:
        h = self._execution_history
        if kernel_name:
            h = [e for e in h if e.kernel_name == kernel_name]
        if limit:
            h = h[-limit:]
        return list(h)

    def clear_execution_history(self) -> None:
        self._execution_history.clear()

    @contextlib.asynccontextmanager
    async def stream_context(self) -> AsyncIterator[Any]:
        s = self.create_stream()
        try:
            yield s
        finally:
            if s is not None:
                with contextlib.suppress(Exception):
                    s.synchronize()

    def __repr__(self) -> str:
        return (f"ComputeOrchestrator(active={self._active}, "
                f"kernels={len(self._registered_kernels)}, "
                f"executions={len(self._execution_history)})")
