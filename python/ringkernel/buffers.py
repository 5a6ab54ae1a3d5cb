"""UnifiedBuffer: PyDotCompute's host/device buffer over the C rk_buffer.

The semantics are PyDotCompute's: a buffer is created unallocated
(UNINITIALIZED), ``allocate()`` gives it memory, ``host`` and ``device``
read their side (synchronised first; the state does not change, so a write
through them is declared with ``mark_host_dirty()`` /
``mark_device_dirty()``), ``copy_from``, ``fill``, ``zeros`` and item
assignment write the host side and mark it dirty, and an unallocated
buffer raises BufferNotAllocatedError. The state machine and the copies are
the C library's (docs/memory.md): the host side is a numpy array over the C
buffer's own memory (no copy). ``host_readonly`` and ``host_write`` are
ringkernel's additions (a read-only view; a view whose taking marks the
host side dirty).

With ``device="auto"`` (the default) and no usable GPU, ``device`` is the
host array, as PyDotCompute's CPU fallback. With ``device="cpu"`` the
"device" side is a second host allocation, so the six states and the
transfer counts behave as on a GPU, and ``device`` is a numpy array over
it; on a CUDA device ``device`` is a DeviceArray (the
address, ``__cuda_array_interface__``; a CuPy array when CuPy is
installed). ``device="cuda:N"`` puts the device side on CUDA device N;
``managed=True`` makes one managed allocation for both sides, with
``prefetch()`` and ``advise()`` (docs/python.md, "Devices, managed memory
and foreign arrays").

``UnifiedBuffer`` is generic in its numpy scalar type for type checkers:
``UnifiedBuffer[np.float32]`` (also valid at run time, as an annotation or
a typed alias), and ``UnifiedBuffer((n,), np.float32)`` infers it, so
``host`` is an ``ndarray`` of that scalar type.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, Optional, TypeVar, Union, overload

import numpy as np

from . import _core
from .errors import BufferNotAllocatedError, DLPackError, InvalidArgumentError, error

_FORMAT = {np.dtype(t): f for t, f in (
    (np.uint8, "B"), (np.int8, "b"), (np.uint16, "H"), (np.int16, "h"),
    (np.uint32, "I"), (np.int32, "i"), (np.uint64, "Q"), (np.int64, "q"),
    (np.float32, "f"), (np.float64, "d"))}

#: The scalar type of a UnifiedBuffer's elements (type checkers only).
_S = TypeVar("_S", bound=np.generic)

# DLPack's device types and type codes (dlpack.h).
_DL_CPU, _DL_CUDA = 1, 2
_DL_CODE = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_Shape = Union[int, "tuple[int, ...]", "list[int]"]
_SIDES = {"host": 0, "device": 1}  # rk_buffer_side
_ADVICE = {"read_mostly": 1, "unset_read_mostly": 2, "preferred_location": 3,
           "unset_preferred_location": 4, "accessed_by": 5, "unset_accessed_by": 6}


def _ordinal_of(device: Any) -> Optional[int]:
    """N for "cuda:N" (RK_EINVAL for a bad N), else None."""
    if not isinstance(device, str) or not device.startswith("cuda:"):
        return None
    n = device[5:]
    if not n.isdigit():
        raise error("RK_EINVAL", f"UnifiedBuffer: 'cuda:N' takes a device ordinal N >= 0, "
                    f"got {device!r}", InvalidArgumentError)
    return int(n)


class BufferState(enum.IntEnum):
    """rk_buffer_state (PyDotCompute's six states)."""

    UNINITIALIZED = 0
    HOST_ONLY = 1
    DEVICE_ONLY = 2
    SYNCHRONIZED = 3
    HOST_DIRTY = 4
    DEVICE_DIRTY = 5


class _Interface:
    """Holds the C buffer alive under a numpy (or CUDA) array of a side."""

    def __init__(self, key: str, addr: int, shape: tuple[int, ...], typestr: str,
                 owner: Any) -> None:
        setattr(self, key, {"data": (addr, False), "shape": shape, "typestr": typestr,
                            "strides": None, "version": 3})
        self._owner = owner


class DeviceArray:
    """A CUDA buffer's device side: ``ptr``, ``shape``, ``dtype`` and
    ``__cuda_array_interface__`` (CuPy, Numba and PyTorch take it as is)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype[Any],
                 owner: Any) -> None:
        self.ptr, self.shape, self.dtype = ptr, shape, dtype
        self._owner = owner
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": dtype.str, "strides": None, "version": 3}

    def __int__(self) -> int:
        return self.ptr


class UnifiedBuffer(Generic[_S]):
    """A numeric array with a host and a device copy (PyDotCompute's)."""

    @overload
    def __init__(self: UnifiedBuffer[np.float32], shape: _Shape, *,
                 device: str = "auto", pinned: bool = False, managed: bool = False) -> None: ...
    @overload
    def __init__(self, shape: _Shape, dtype: type[_S] | np.dtype[_S],
                 device: str = "auto", *, pinned: bool = False,
                 managed: bool = False) -> None: ...
    @overload
    def __init__(self: UnifiedBuffer[Any], shape: _Shape, dtype: str,
                 device: str = "auto", *, pinned: bool = False,
                 managed: bool = False) -> None: ...

    def __init__(self, shape: Any, dtype: Any = np.float32, device: str = "auto", *,
                 pinned: bool = False, managed: bool = False) -> None:
        """shape: an int or a tuple of positive ints; dtype: any fixed-size
        numpy dtype (the C library's own types travel as such; others,
        complex64 say, as their bytes). device: "auto" (CUDA when the C
        runtime can use a GPU, else the CPU device), "cpu", "cuda", or
        "cuda:N" (CUDA device ordinal N; "cuda" is device 0). managed: one
        managed allocation (cuMemAllocManaged) that host and device both
        address, always SYNCHRONIZED, steered with prefetch() and
        advise(); never larger than the device has free (OutOfMemoryError
        naming both sizes, raised here and again at allocation)."""
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise error("RK_EINVAL", f"UnifiedBuffer: shape must be an int or a tuple of "
                        f"ints, got {shape!r}") from None
        if not shape or any(d <= 0 for d in shape):
            raise error("RK_EINVAL", f"UnifiedBuffer: every dimension must be positive, "
                        f"got {shape}")
        try:
            self._dtype: np.dtype[_S] = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"UnifiedBuffer: {dtype!r} is not a numpy dtype") from None
        if self._dtype.itemsize == 0 or self._dtype.hasobject:
            raise TypeError(f"UnifiedBuffer: unsupported dtype {self._dtype} (needs a "
                            "fixed-size dtype without Python objects)")
        self._ordinal = _ordinal_of(device)
        if self._ordinal is not None:
            device = "cuda"
        if device not in ("auto", "cpu", "cuda", "any"):
            raise error("RK_EINVAL", f"UnifiedBuffer: device must be 'auto', 'cpu', "
                        f"'cuda' or 'cuda:N', got {device!r}")
        # "auto" without a GPU: PyDotCompute's CPU fallback, where the
        # device side *is* the host array (``device`` returns ``host``).
        self._host_is_device = False
        if device == "auto":
            from ._device import cuda_available
            device = "cuda" if cuda_available() else "cpu"
            self._host_is_device = device == "cpu"
        self._device_kind = {"cpu": 0, "cuda": 1, "any": 2}[device]
        self._shape: tuple[int, ...] = shape
        self._pinned = bool(pinned)
        self._managed = bool(managed)
        self._native = self._dtype in _FORMAT and len(shape) <= 3
        self._b: Optional[_core.Buffer] = self._new()  # checks shape and size now; no memory yet

    def _new(self) -> _core.Buffer:
        shape, fmt = (self._shape, _FORMAT[self._dtype]) if self._native else \
            ((self.nbytes,), "B")  # any other dtype, or over 3 dimensions: the bytes
        return _core.Buffer(shape, fmt, self._device_kind, ordinal=self._ordinal or 0,
                            managed=self._managed, pinned=self._pinned)

    # ------------------------------------------------------------ shape
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype[_S]:
        return self._dtype

    @property
    def size(self) -> int:
        n = 1
        for d in self._shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def device_kind(self) -> str:
        return ("cpu", "cuda", "any")[self._device_kind]

    @property
    def ordinal(self) -> int:
        """The CUDA device ordinal of the device side (0 off CUDA)."""
        return self._ordinal or 0

    @property
    def is_managed(self) -> bool:
        """True for a managed buffer (``managed=True``)."""
        return self._managed

    def _managed_buf(self, what: str) -> _core.Buffer:
        if not self._managed:
            raise error("RK_EINVAL", f"{what}: {self!r} is not managed (UnifiedBuffer(..., "
                        "managed=True)); sync_to_host/sync_to_device move a plain "
                        "buffer's data", InvalidArgumentError)
        if self._b is None:
            self._b = self._new()
        return self._b

    def prefetch(self, to: str = "device") -> None:
        """Moves a managed buffer's pages to ``to``, "device" (the buffer's
        device) or "host", and waits until they are there (allocating,
        zeroed, on first use). InvalidArgumentError for a buffer that is
        not managed; NotSupportedError where the driver lacks the call."""
        if to not in _SIDES:
            raise error("RK_EINVAL", f"prefetch: to must be 'device' or 'host', got {to!r}",
                        InvalidArgumentError)
        self._managed_buf("prefetch").prefetch(_SIDES[to])

    def advise(self, advice: Union[str, int], side: str = "device") -> None:
        """Gives the driver advice on a managed buffer's use (cuMemAdvise):
        "read_mostly", "preferred_location", "accessed_by" or their
        "unset_" forms (or CUmem_advise's number); side names the location
        for preferred_location and accessed_by ("device" or "host")."""
        a = _ADVICE.get(advice) if isinstance(advice, str) else advice
        if not isinstance(a, int) or isinstance(a, bool) or side not in _SIDES:
            raise error("RK_EINVAL", f"advise: advice must be one of {sorted(_ADVICE)} and "
                        f"side 'device' or 'host', got {advice!r}, {side!r}",
                        InvalidArgumentError)
        self._managed_buf("advise").advise(a, _SIDES[side])

    # ------------------------------------------------------------ state
    @property
    def state(self) -> BufferState:
        if self._b is None:
            return BufferState.UNINITIALIZED
        return BufferState(self._b.state())

    @property
    def is_allocated(self) -> bool:
        return self.state != BufferState.UNINITIALIZED

    def allocate(self, *, host: bool = True, device: bool = True) -> UnifiedBuffer[_S]:
        """Gives the buffer memory (both sides by default: SYNCHRONIZED;
        host only: HOST_ONLY; device only: DEVICE_ONLY). Returns self."""
        if self._b is None:
            self._b = self._new()
        if host or not device:
            self._b.op("ensure_host")
        if device:
            self._b.op("ensure_device")
        return self

    def free(self) -> None:
        """Releases the memory; the buffer is UNINITIALIZED again (allocate
        gives it new memory). Arrays taken from it keep theirs alive until
        they are gone, as numpy arrays would."""
        if self._b is not None:
            try:
                self._b.free()
            except Exception:  # views still export it: they keep it alive
                pass
        self._b = None

    def _buf(self) -> _core.Buffer:
        b = self._b
        if b is None or b.state() == 0:
            raise error("RK_ESTATE", "Buffer has not been allocated. Call allocate() first.",
                        BufferNotAllocatedError)
        return b

    def _view(self, b: _core.Buffer, mode: int) -> np.ndarray[Any, np.dtype[_S]]:
        b.set_mode(mode)
        a: np.ndarray[Any, np.dtype[_S]] = np.asarray(b)
        if not self._native:
            a = a.view(self._dtype).reshape(self._shape)
        return a

    # ------------------------------------------------------------ sides
    @property
    def host(self) -> np.ndarray[Any, np.dtype[_S]]:
        """The host copy as a writable numpy array (no copy), synchronised
        from the device side first when that is newer; the state does not
        change (mark_host_dirty() after writing through it)."""
        return self._view(self._buf(), 2)

    @property
    def host_readonly(self) -> np.ndarray[Any, np.dtype[_S]]:
        """A read-only view of the host copy (synchronised first)."""
        return self._view(self._buf(), 0)

    @property
    def host_write(self) -> np.ndarray[Any, np.dtype[_S]]:
        """A writable view whose taking makes the host copy the current one
        (HOST_DIRTY when the device side exists)."""
        return self._view(self._buf(), 1)

    @property
    def device(self) -> Any:
        """The device copy, synchronised from the host side first when that
        is newer (state unchanged otherwise): a numpy array over it on the
        CPU device, a DeviceArray (CuPy array with CuPy) on CUDA."""
        if self._host_is_device:
            return self.host  # no GPU (device="auto"): PyDotCompute's fallback
        b = self._buf()
        addr = b.op("device_read")
        shape = self._shape
        if self._device_kind == 0:
            holder = _Interface("__array_interface__", addr, shape, self._dtype.str, b) \
                if self._native else _Interface("__array_interface__", addr, (self.nbytes,),
                                                "|u1", b)
            a = np.asarray(holder)
            return a if self._native else a.view(self._dtype).reshape(shape)
        d = DeviceArray(addr, shape, self._dtype, b)
        try:
            import cupy
            return cupy.asarray(d)
        except ImportError:
            return d

    @property
    def device_ptr(self) -> int:
        """The device copy's address (synchronised first)."""
        addr: int = self._buf().op("device_read")
        return addr

    # ------------------------------------------------ zero-copy exports
    def _on_cuda(self) -> bool:
        if self._device_kind == 2:  # "any": CUDA 0 when the C runtime has one
            from ._device import cuda_available
            return cuda_available()
        return self._device_kind == 1

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (v3) of the device copy, synchronised
        first (the state does not change: after writing through it, call
        mark_device_dirty()). CuPy, Numba and PyTorch take the buffer
        without a copy. Only a buffer on a CUDA device has one
        (AttributeError otherwise, so ``hasattr`` says so)."""
        if not self._on_cuda():
            raise AttributeError(f"{self!r} has no CUDA device memory (device "
                                 f"{self.device_kind!r}): no __cuda_array_interface__")
        addr: int = self._buf().op("device_read")
        d: dict[str, Any] = {"data": (addr, False), "shape": self._shape,
                             "typestr": self._dtype.str, "strides": None, "version": 3,
                             "stream": None}  # transfers are synchronous: nothing to wait for
        if self._dtype.fields is not None:
            d["descr"] = self._dtype.descr
        return d

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA, ordinal) for a buffer on a CUDA device, else (kDLCPU, 0)."""
        return (_DL_CUDA, self.ordinal) if self._on_cuda() else (_DL_CPU, 0)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule over the buffer's memory, without a copy: the
        device copy on CUDA (kDLCUDA), the host copy otherwise or when
        ``dl_device`` is (kDLCPU, 0); synchronised first, the state
        unchanged (mark the side dirty after writing through it). The
        buffer cannot be freed while a consumer holds it. DLPackError (a
        BufferError) for another device, a stream given for host memory,
        stream 0 (ambiguous), copy=True, or a dtype DLPack cannot
        describe."""
        own = self.__dlpack_device__()
        want = own if dl_device is None else tuple(int(x) for x in dl_device)
        if want != own and want != (_DL_CPU, 0):
            raise error("RK_ENODEV", f"__dlpack__: {self!r} is on device {own} (DLPack "
                        f"type, id); the consumer asked for {want}", DLPackError)
        if copy:
            raise error("RK_ENOTSUP", "__dlpack__: copy=True, but a UnifiedBuffer exports "
                        "its own memory (copy=None or False)", DLPackError)
        code = _DL_CODE.get(self._dtype.kind)
        if code is None or not self._dtype.isnative:
            raise error("RK_ENOTSUP", f"__dlpack__: DLPack has no type for {self._dtype}",
                        DLPackError)
        bits = 8 if self._dtype.kind == "b" else self._dtype.itemsize * 8
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        if want == (_DL_CPU, 0):
            if stream is not None:
                raise error("RK_EINVAL", f"__dlpack__: stream {stream!r} for host memory "
                            "(kDLCPU takes stream=None)", DLPackError)
            view = self.host  # the export holds the view, so free() refuses meanwhile
            owner: Any = view
            addr: int = view.ctypes.data
        else:
            if stream == 0:
                raise error("RK_EINVAL", "__dlpack__: stream 0 is ambiguous for CUDA (give "
                            "None, 1, 2 or a stream handle)", DLPackError)
            b = self._buf()
            owner, addr = b, b.op("device_read")  # synchronous: nothing for stream to wait on
        strides, n = [], 1
        for d in reversed(self._shape):
            strides.append(n)
            n *= d
        return _core.dlpack(owner, addr, self._shape, tuple(reversed(strides)), code, bits, 1,
                            want[0], want[1], versioned, False)

    @property
    def metal(self) -> Any:
        raise error("RK_ENODEV", "Metal not available: ringkernel has no Metal backend")

    def mark_host_dirty(self) -> None:
        """The host copy was written (through ``host``): it is the current one."""
        b = self._buf()
        if b.state() == BufferState.HOST_ONLY:
            return  # no device side: nothing to mark stale
        b.op("mark_host_dirty")

    def mark_device_dirty(self) -> None:
        """The device copy was written: it is the current one."""
        b = self._buf()
        if b.state() == BufferState.HOST_ONLY:
            b.op("ensure_device")  # the device side gets memory (and the data)
        b.op("mark_device_dirty")

    mark_metal_dirty = mark_device_dirty

    def sync_to_host(self) -> None:
        self._buf().op("ensure_host")

    def sync_to_device(self) -> None:
        self._buf().op("ensure_device")

    def synchronize(self) -> None:
        """Copies whichever side is newer to the other (PyDotCompute's)."""
        st = self.state
        if st == BufferState.HOST_DIRTY:
            self._buf().op("ensure_device")
        elif st == BufferState.DEVICE_DIRTY:
            self._buf().op("ensure_host")

    async def ensure_on_device(self) -> None:
        """Makes the device copy current (awaitable, as PyDotCompute's)."""
        self._buf().op("ensure_device")

    async def ensure_on_host(self) -> None:
        """Makes the host copy current (awaitable, as PyDotCompute's)."""
        self._buf().op("ensure_host")

    # --------------------------------------------------------- contents
    def copy_from(self, data: Any) -> None:
        """Copies data (array-like of this shape) into the host side and
        marks it dirty; allocates first if needed."""
        src = np.asarray(data)
        if src.shape != self._shape and src.size != self.size:
            raise error("RK_EINVAL", f"copy_from: data of shape {src.shape} does not fit a "
                        f"buffer of shape {self._shape}")
        if not self.is_allocated:
            self.allocate()
        np.copyto(self._view(self._buf(), 1), src.reshape(self._shape), casting="unsafe")

    def copy_to(self, out: np.ndarray[Any, Any]) -> None:
        """Copies the host side (synchronised first) into out."""
        if not isinstance(out, np.ndarray):
            raise TypeError(f"copy_to: out must be a numpy array, not {type(out).__name__}")
        np.copyto(out, self.host_readonly)

    def zeros(self) -> UnifiedBuffer[_S]:
        if not self.is_allocated:
            self.allocate()
        self._buf().op("zeros")
        return self

    def fill(self, value: Any) -> UnifiedBuffer[_S]:
        if not self.is_allocated:
            self.allocate()
        self._view(self._buf(), 1).fill(value)
        return self

    @property
    def stats(self) -> dict[str, int]:
        return self._buf().stats()

    def __len__(self) -> int:
        return self._shape[0]

    def __getitem__(self, key: Any) -> Any:
        return self.host_readonly[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._view(self._buf(), 1)[key] = value

    def __repr__(self) -> str:
        return (f"UnifiedBuffer(shape={self._shape}, dtype={self._dtype}, "
                f"state={self.state.name}, device={self.device_kind})")
