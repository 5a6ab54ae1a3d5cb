"""UnifiedBuffer: the seeds' host/device buffer over the C rk_buffer.

The host side is a numpy array over the C buffer's own memory (the buffer
protocol: no copy). Taking ``host`` for writing makes the host copy the
current one (``rk_buffer_host(RK_ACCESS_WRITE)``), so the next
``sync_to_device()`` copies; ``host_readonly`` reads without dirtying.
The six states are the C library's (docs/memory.md). On the CPU device
the "device" copy is a second host allocation, so the state machine and
its transfer counts behave as on a GPU.

``UnifiedBuffer`` is generic in its numpy scalar type for type checkers:
``UnifiedBuffer[np.float32]`` (also valid at run time, as an annotation or
a typed alias), and ``UnifiedBuffer((n,), np.float32)`` infers it, so
``host`` is an ``ndarray`` of that scalar type.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar, Union, overload

import numpy as np

from . import _core

_FORMAT = {np.dtype(t): f for t, f in (
    (np.uint8, "B"), (np.int8, "b"), (np.uint16, "H"), (np.int16, "h"),
    (np.uint32, "I"), (np.int32, "i"), (np.uint64, "Q"), (np.int64, "q"),
    (np.float32, "f"), (np.float64, "d"))}


class BufferState(enum.IntEnum):
    """rk_buffer_state (the seeds' states plus HOST_ONLY/DEVICE_ONLY)."""

    UNINITIALIZED = 0
    HOST_ONLY = 1
    DEVICE_ONLY = 2
    SYNCHRONIZED = 3
    HOST_DIRTY = 4
    DEVICE_DIRTY = 5


#: The scalar type of a UnifiedBuffer's elements (type checkers only).
_S = TypeVar("_S", bound=np.generic)
_Shape = Union[int, "tuple[int, ...]", "list[int]"]


class UnifiedBuffer(Generic[_S]):
    """A 1-3 dimensional numeric array with a host and a device copy."""

    @overload
    def __init__(self: UnifiedBuffer[np.float32], shape: _Shape, *,
                 device: str = "cpu") -> None: ...
    @overload
    def __init__(self, shape: _Shape, dtype: type[_S] | np.dtype[_S],
                 device: str = "cpu") -> None: ...
    @overload
    def __init__(self: UnifiedBuffer[Any], shape: _Shape, dtype: str,
                 device: str = "cpu") -> None: ...

    def __init__(self, shape: Any, dtype: Any = np.float32, device: str = "cpu") -> None:
        shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        self._dtype: np.dtype[_S] = np.dtype(dtype)
        if self._dtype not in _FORMAT:
            raise TypeError(f"unsupported dtype {self._dtype}")
        if device not in ("cpu", "cuda", "any"):
            raise ValueError("device must be 'cpu', 'cuda' or 'any'")
        kind = {"cpu": 0, "cuda": 1, "any": 2}[device]
        self._b = _core.Buffer(shape, _FORMAT[self._dtype], kind)
        self._shape: tuple[int, ...] = shape

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype[_S]:
        return self._dtype

    @property
    def size(self) -> int:
        return int(np.prod(self._shape))

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def state(self) -> BufferState:
        return BufferState(self._b.state())

    @property
    def host(self) -> np.ndarray[Any, np.dtype[_S]]:
        """A writable numpy view of the host copy (synced first; the host
        copy becomes the current one)."""
        self._b.state()  # ClosedError once freed (numpy would hide it)
        self._b.set_mode(True)
        view: np.ndarray[Any, np.dtype[_S]] = np.asarray(self._b)
        return view

    @property
    def host_readonly(self) -> np.ndarray[Any, np.dtype[_S]]:
        """A read-only view of the host copy (synced first; state stays
        clean)."""
        self._b.state()
        self._b.set_mode(False)
        view: np.ndarray[Any, np.dtype[_S]] = np.asarray(self._b)
        return view

    @property
    def device(self) -> int:
        """The device copy's address (synced first; it becomes current)."""
        addr: int = self._b.op("device_write")
        return addr

    def mark_host_dirty(self) -> None:
        self._b.op("mark_host_dirty")

    def mark_device_dirty(self) -> None:
        self._b.op("mark_device_dirty")

    def sync_to_host(self) -> None:
        self._b.op("ensure_host")

    def sync_to_device(self) -> None:
        self._b.op("ensure_device")

    synchronize = sync_to_host

    def copy_from(self, data: Any) -> None:
        self.host[...] = np.asarray(data, dtype=self._dtype).reshape(self._shape)

    def copy_to(self, out: np.ndarray[Any, Any]) -> None:
        out[...] = self.host_readonly

    def zeros(self) -> UnifiedBuffer[_S]:
        self._b.op("zeros")
        return self

    def fill(self, value: Any) -> UnifiedBuffer[_S]:
        self.host[...] = value
        return self

    @property
    def stats(self) -> dict[str, int]:
        return self._b.stats()

    def free(self) -> None:
        """Releases the memory now (BusyError while views exist)."""
        self._b.free()

    def __len__(self) -> int:
        return self._shape[0]

    def __getitem__(self, key: Any) -> Any:
        return self.host_readonly[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.host[key] = value

    def __repr__(self) -> str:
        return f"UnifiedBuffer(shape={self._shape}, dtype={self._dtype}, state={self.state.name})"
