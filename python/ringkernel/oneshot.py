"""One-shot kernels over CUDA C source, in the spirit of CuPy's RawKernel.

``RawKernel(code, name)`` is the C library's ``rk_oneshot``
(ringkernel/oneshot.h): the source (written with ``RK_DEV_ONESHOT``,
docs/cuda-programming.md) is compiled once through the NVRTC path and the
kernel cache when the kernel is made, and each call launches it over a
grid::

    vadd = RawKernel(SRC, "vadd")                 # or ringkernel.kernel(SRC, name="vadd")
    vadd(64, 256, (x, y, z, np.uint32(n)))        # synchronous
    done = vadd.start(64, 256, (x, y, z, np.uint32(n)))
    done.wait()                                   # or: await done

Arguments, in order: UnifiedBuffers (also their ``device`` arrays and
numpy arrays, which travel through a temporary buffer and are copied
back) and other libraries' CUDA arrays (CuPy, PyTorch, Numba: anything
with ``__cuda_array_interface__`` or DLPack on kDLCUDA, used in place
without a copy, ringkernel/_foreign.py) become the kernel's buffers
(``rk_dev_oneshot_buf(a, i)``, in the order they come); scalars are packed, each at its natural alignment, into
the by-value argument struct the kernel reads with ``rk_dev_oneshot_arg``:
numpy scalars as their dtype, and, as CuPy does, ``int`` as int64,
``float`` as double, ``bool`` as a one-byte bool; ``bytes`` as they are.

The C runtime decides where a kernel runs (``device="auto"``: cuda where a
GPU, its driver and NVRTC are usable, else the cpu backend); ``device=N``
or ``"cuda:N"`` runs it on CUDA device N (a device the driver lacks:
NoDeviceError naming N and the device count), whose memory its buffers
must be. On the cpu
backend the host fallback runs, a Python function given as ``host=`` (or
the function ``@kernel(source=...)`` decorates), called with the launch's
Python arguments, on the thread the launch runs on; a kernel without one
is refused when it is made (``NoDeviceError`` / ``NotSupportedError``
naming the kernel). CUDA cannot load code while a persistent kernel is
resident, so make one-shot kernels before launching ring kernels on cuda
(else ``BusyError``, RK_EBUSY, never a hang).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import functools
import inspect
import itertools
import threading
import weakref
from typing import Any, Callable, Generator, Optional, Sequence, Union

import numpy as np

from . import _core, _foreign
from ._device import get_kernel_registry
from .buffers import DeviceArray, UnifiedBuffer
from .errors import (InternalError, InvalidArgumentError, InvalidConfigurationError,
                     QueueTimeoutError, RingKernelError, error)

_Dim = Union[int, Sequence[int]]
_MAX_BUFS = 8  # RK_ONESHOT_MAX_BUFS


@dataclasses.dataclass
class _Pending:
    """A launch's Python arguments, for its host fallback, and what the
    fallback raised."""

    args: tuple[Any, ...]
    exc: Optional[BaseException] = None


_pending: dict[int, _Pending] = {}
_tokens = itertools.count(1)
_lock = threading.Lock()


def _run_host(fallback: Callable[..., Any], token: int, grid: int, block: int) -> int:
    """What the C trampoline calls on the cpu backend: the fallback with
    the launch's arguments; an exception is kept for the launch's caller
    (and its code returned to C)."""
    with _lock:
        rec = _pending.get(token)
    if rec is None:
        return InternalError.code
    try:
        r = fallback(*rec.args)
        if inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(f"the host fallback {getattr(fallback, '__name__', fallback)!r} "
                            "returned an awaitable: it runs on the launch's thread and must "
                            "be a plain function")
    except BaseException as e:  # kept for the caller, never lost in C
        rec.exc = e
        return e.code if isinstance(e, RingKernelError) and e.code > 0 else InternalError.code
    return 0


def _dim(kname: str, what: str, v: _Dim) -> int:
    """A 1-D grid or block size (a tuple may add dimensions of 1)."""
    dims = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if (not dims or any(not isinstance(d, (int, np.integer)) or isinstance(d, bool)
                        for d in dims) or dims[0] < 0 or any(d != 1 for d in dims[1:])):
        raise error("RK_EINVAL", f"one-shot kernel {kname!r}: {what} must be an int >= 1 "
                    f"(or a tuple whose other dimensions are 1), got {v!r}",
                    InvalidArgumentError)
    return int(dims[0])


class _Packed:
    """A launch's C form: the argument bytes, the buffers, and the numpy
    arrays that travel through temporary buffers (copied back after)."""

    def __init__(self) -> None:
        self.args = bytearray()
        self.align = 1
        self.bufs: list[_core.Buffer] = []
        self.back: list[tuple[np.ndarray[Any, Any], UnifiedBuffer[Any]]] = []

    def scalar(self, raw: bytes, align: int) -> None:
        self.args += b"\0" * (-len(self.args) % align)
        self.args += raw
        self.align = max(self.align, align)

    def finish(self) -> bytes:
        self.args += b"\0" * (-len(self.args) % self.align)
        return bytes(self.args)

    def copy_back(self) -> None:
        for arr, tmp in self.back:
            if arr.flags.writeable:
                np.copyto(arr, tmp.host_readonly.reshape(arr.shape))


def device_arg(what: str, device: Any) -> tuple[str, int]:
    """(backend, CUDA device ordinal) of a kernel's ``device``: "auto",
    "cuda", "cpu" (ordinal 0: the default device), an int N >= 0 or
    "cuda:N" (cuda on device N)."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):
        n: Any = int(device)
    elif isinstance(device, str) and device.startswith("cuda:"):
        n = int(device[5:]) if device[5:].isdigit() else None
    elif device in ("auto", "cuda", "cpu"):
        return str(device), 0
    else:
        n = None
    if n is None or n < 0:
        raise error("RK_EINVAL", f"{what}: device must be 'auto', 'cuda', 'cpu', a CUDA "
                    f"device ordinal >= 0 or 'cuda:N', got {device!r}",
                    InvalidConfigurationError)
    return "cuda", n


def _pack(kname: str, args: Sequence[Any], ordinal: int) -> _Packed:
    """Checks and converts the launch's arguments (ordinal: the CUDA
    device of a device kernel; -1 for the cpu backend, where only the
    buffers are taken, to be made current on the host)."""
    p = _Packed()
    device = ordinal >= 0
    for i, a in enumerate(args):
        if not isinstance(a, (UnifiedBuffer, DeviceArray, _core.Buffer, np.ndarray,
                              np.generic, int, float, bytes, bytearray, memoryview)) \
                and _foreign.is_foreign(a):
            host = _foreign.host_view(a)
            if host is None and not device:
                raise error("RK_EINVAL", f"one-shot kernel {kname!r}: argument {i} "
                            f"({type(a).__name__}) is CUDA device memory, but the kernel "
                            "runs on the cpu backend (its host fallback)",
                            InvalidArgumentError)
            if host is None:
                p.bufs.append(_foreign.wrap(kname, i, a, ordinal))
                continue
            a = host  # a host array: as a numpy array (a view, no copy)
        if isinstance(a, UnifiedBuffer):
            p.bufs.append(a._buf())
        elif isinstance(a, DeviceArray):
            p.bufs.append(a._owner)
        elif isinstance(a, _core.Buffer):
            p.bufs.append(a)
        elif isinstance(a, np.ndarray):
            if device:
                tmp: UnifiedBuffer[Any] = UnifiedBuffer(a.shape or (1,), a.dtype,
                                                        f"cuda:{ordinal}")
                tmp.copy_from(a)
                p.bufs.append(tmp._buf())
                p.back.append((a, tmp))
        elif isinstance(a, (bool, np.bool_)):
            p.scalar(bytes([bool(a)]), 1)
        elif isinstance(a, (int, float, np.number)):
            if isinstance(a, int):
                s: np.generic = np.int64(a)
            elif isinstance(a, float):
                s = np.float64(a)
            else:
                s = a
            p.scalar(s.tobytes(), s.dtype.alignment)
        elif isinstance(a, (bytes, bytearray, memoryview)):
            p.scalar(bytes(a), 1)
        else:
            raise TypeError(f"one-shot kernel {kname!r}: argument {i} is a "
                            f"{type(a).__name__}; a launch takes UnifiedBuffers (or their "
                            "device arrays), numpy arrays, CUDA arrays (CUDA Array "
                            "Interface, DLPack), numpy scalars, int, float, bool and bytes")
    if len(p.bufs) > _MAX_BUFS:
        raise error("RK_EINVAL", f"one-shot kernel {kname!r}: {len(p.bufs)} buffers (at most "
                    f"{_MAX_BUFS})", InvalidArgumentError)
    return p


_live: "weakref.WeakSet[KernelLaunch]" = weakref.WeakSet()


class KernelLaunch:
    """A started launch (``RawKernel.start``, ``ctx.execute_kernel(...,
    wait=False)``): ``wait(timeout)`` returns once it has run (raising its
    error, or the host fallback's exception), ``done`` says whether it
    has, and it can be awaited."""

    def __init__(self, kname: str, launch: _core.Launch, token: int, packed: _Packed) -> None:
        self.kernel_name = kname
        self._l = launch
        self._token = token
        self._packed = packed
        self._outcome: Optional[tuple[Optional[BaseException]]] = None
        _live.add(self)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits at most timeout seconds (None: until it has run);
        QueueTimeoutError (a TimeoutError) while it still runs."""
        if self._outcome is None:
            ns = None if timeout is None else max(0, int(timeout * 1e9))
            exc: Optional[BaseException] = None
            try:
                _core.oneshot_wait(self._l, ns)
            except QueueTimeoutError:
                raise
            except RingKernelError as e:
                exc = e
            self._outcome = (_finish(self._token, self._packed, exc),)
        if self._outcome[0] is not None:
            raise self._outcome[0]

    @property
    def done(self) -> bool:
        """True once the launch has run (its result is then ready)."""
        if self._outcome is not None:
            return True
        try:
            _core.oneshot_wait(self._l, 0)
        except QueueTimeoutError:
            return False
        except RingKernelError:
            pass
        return True

    def __del__(self) -> None:
        # Dropped unwaited: it still runs to its end (its fallback needs the
        # launch's arguments until then), and nothing is kept after.
        if self._outcome is None:
            try:
                self.wait()
            except BaseException:
                pass

    def __await__(self) -> Generator[Any, None, None]:
        """Waits on a worker thread of the running loop (GIL released)."""
        return asyncio.get_running_loop().run_in_executor(None, self.wait).__await__()


def _finish(token: int, packed: _Packed, exc: Optional[BaseException]) -> Optional[BaseException]:
    """After a launch: its Python arguments are dropped, numpy arrays get
    their data back; the exception to raise (the fallback's first)."""
    with _lock:
        rec = _pending.pop(token, None)
    if exc is None:
        packed.copy_back()
    return rec.exc if rec is not None and rec.exc is not None else exc


@atexit.register
def _wait_all() -> None:
    # A started launch whose host fallback is still to run needs the
    # interpreter: let each finish before it goes away.
    for launch in list(_live):
        try:
            launch.wait()
        except BaseException:
            pass


class RawKernel:
    """A one-shot kernel of CUDA C (CuPy's RawKernel(code, name), over
    rk_oneshot). ``name`` is the ``RK_DEV_ONESHOT`` entry unless ``entry``
    names another; ``host`` the fallback for the cpu backend; ``device``
    "auto", "cuda" or "cpu", or a CUDA device ordinal N (or "cuda:N"):
    cuda on device N; ``cooperative``: launched co-resident, so the
    kernel may use the grid barrier ``rk_dev_sync_grid``. Compiled (on
    cuda) when made; registered under its name for ``ctx.execute_kernel``
    unless ``register=False``."""

    def __init__(self, code: Optional[str], name: str, *, entry: Optional[str] = None,
                 host: Optional[Callable[..., Any]] = None,
                 device: Union[str, int] = "auto",
                 cooperative: bool = False, source_name: Optional[str] = None,
                 register: bool = True) -> None:
        if not isinstance(name, str) or not name:
            raise error("RK_EINVAL", f"RawKernel: a kernel needs a name, got {name!r}",
                        InvalidConfigurationError)
        backend, ordinal = device_arg(f"one-shot kernel {name!r}", device)
        if code is not None and not isinstance(code, str):
            raise TypeError(f"one-shot kernel {name!r}: code must be a str of CUDA C, "
                            f"not {type(code).__name__}")
        if host is not None and not callable(host):
            raise TypeError(f"one-shot kernel {name!r}: host must be a function, not "
                            f"{type(host).__name__}")
        self.name, self.code, self.entry = name, code, entry or name
        self.host_fallback = host
        self.cooperative = cooperative
        self._k = _core.OneShot(
            name, source=code, entry=entry, source_name=source_name,
            host=functools.partial(_run_host, host) if host is not None else None,
            backend=backend, cooperative=cooperative, device=ordinal)
        if register:
            get_kernel_registry().register(name, self, overwrite=True)

    @property
    def backend(self) -> str:
        """Where it runs: "cuda", or "cpu" (its host fallback)."""
        return _core.oneshot_backend(self._k)

    @property
    def ordinal(self) -> int:
        """The CUDA device that runs it (``device=``, the default device
        for 0), whose memory its buffers must be; -1 on the cpu backend."""
        return _core.oneshot_device(self._k)

    def _prepare(self, args: Sequence[Any]) -> tuple[int, bytes, _Packed]:
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"one-shot kernel {self.name!r}: args must be a tuple or list, "
                            f"not {type(args).__name__}")
        ordinal = self.ordinal
        packed = _pack(self.name, args, ordinal)
        token = next(_tokens)
        if ordinal >= 0:
            raw = packed.finish()
        else:  # the cpu backend passes the token to the fallback (oneshot.c)
            raw = token.to_bytes(8, "little")
            with _lock:
                _pending[token] = _Pending(tuple(args))
        return token, raw, packed

    def _launch(self, core_ctx: Optional[_core.Ctx], grid: _Dim, block: _Dim,
                args: Sequence[Any], wait: bool) -> Optional[KernelLaunch]:
        g, b = _dim(self.name, "grid", grid), _dim(self.name, "block", block)
        token, raw, packed = self._prepare(args)
        try:
            if core_ctx is None:
                r = _core.oneshot_launch(self._k, g, b, raw, packed.bufs, start=not wait)
            else:
                r = core_ctx.execute_kernel(self._k, g, b, raw, packed.bufs, start=not wait)
        except RingKernelError as e:
            exc = _finish(token, packed, e)
            if exc is e or exc is None:
                raise
            raise exc from None  # the host fallback's own exception
        if r is None:
            exc2 = _finish(token, packed, None)
            if exc2 is not None:
                raise exc2
            return None
        return KernelLaunch(self.name, r, token, packed)

    def __call__(self, grid: _Dim, block: _Dim, args: Sequence[Any] = ()) -> None:
        """Runs one launch over grid blocks of block threads, to completion
        (CuPy's ``kernel(grid, block, args)``)."""
        self._launch(None, grid, block, args, True)

    launch = __call__

    def start(self, grid: _Dim, block: _Dim, args: Sequence[Any] = ()) -> KernelLaunch:
        """Starts one launch in the background: a KernelLaunch to wait on.
        The buffers belong to the launch until it has run."""
        r = self._launch(None, grid, block, args, False)
        assert r is not None
        return r

    def __repr__(self) -> str:
        return f"RawKernel(name={self.name!r}, backend={self.backend!r})"
