"""Other libraries' arrays as one-shot kernel arguments, without a copy.

An object that exports the CUDA Array Interface (``__cuda_array_interface__``,
v2 or v3: Numba's device arrays, CuPy, PyTorch) or DLPack on a CUDA device
(``__dlpack__`` / ``__dlpack_device__`` with kDLCUDA: CuPy, PyTorch, JAX)
becomes a buffer of the launch over its own memory (``rk_buffer_wrap_device``
in C): the kernel reads and writes the array in place. Host arrays (kDLCPU)
are numpy arrays to the launch (a view, no copy), which travel as numpy
arrays always have.

Checks, each a clear error naming the kernel and the argument: memory on
another CUDA device than the kernel's (both devices named), another kind
of device, an array that is not C-contiguous, an empty one, a CUDA Array
Interface older than v2 or with a mask, stream 0.

Lifetime: the wrapping buffer holds a reference to the array (or, for
DLPack, to the consumed tensor, whose deleter runs when the buffer goes),
so the memory outlives the launch even when the caller drops the array;
the caller must not write to the array while a started launch runs.
Synchronisation: a CUDA Array Interface v3 ``stream`` is waited for before
the launch, and a DLPack producer is asked to order its work before the
legacy default stream (``stream=1``), which is then waited for.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from .errors import InvalidArgumentError, NotSupportedError, error

# DLPack device types (dlpack.h).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
             8: "kDLMetal", 10: "kDLROCM", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}


def _dl_device(a: Any) -> Optional[tuple[int, int]]:
    f = getattr(a, "__dlpack_device__", None)
    if f is None:
        return None
    dt, did = f()
    return int(dt), int(did)


def is_foreign(a: Any) -> bool:
    """True for an object with the CUDA Array Interface or DLPack."""
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__")


def host_view(a: Any) -> Optional[np.ndarray[Any, Any]]:
    """A DLPack host array (kDLCPU) as a numpy view of its memory; None
    for anything else."""
    dev = _dl_device(a)
    if dev is None or dev[0] != _DL_CPU or hasattr(a, "__cuda_array_interface__"):
        return None
    return np.from_dlpack(a)


def _contiguous(shape: tuple[int, ...], strides: Optional[tuple[int, ...]], item: int) -> bool:
    """strides (None: C order) are C order's for shape (item-sized units)."""
    if strides is None:
        return True
    want, n = [], item
    for d in reversed(shape):
        want.append(n)
        n *= d
    return all(d == 1 or s == w for d, s, w in zip(shape, strides, reversed(want)))


def wrap(kname: str, i: int, a: Any, ordinal: int) -> _core.Buffer:
    """a (is_foreign, not a host array) as a Buffer over its memory on
    CUDA device ordinal, the kernel's."""
    what = f"one-shot kernel {kname!r}: argument {i} ({type(a).__name__})"
    dev = _dl_device(a)
    if dev is not None:
        if dev[0] not in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise error("RK_ENOTSUP", f"{what} is memory of a "
                        f"{_DL_NAMES.get(dev[0], f'DLPack device type {dev[0]}')} device; "
                        "a kernel on cuda takes CUDA device memory (kDLCUDA) or host "
                        "arrays", NotSupportedError)
        if dev[1] != ordinal:
            raise error("RK_EINVAL", f"{what} is on CUDA device {dev[1]}, the kernel runs "
                        f"on device {ordinal}", InvalidArgumentError)
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(what, a, dict(cai), ordinal)
    return _from_dlpack(what, a, ordinal)


def _checked(what: str, shape: tuple[int, ...], strides: Optional[tuple[int, ...]],
             item: int) -> int:
    """The array's bytes, once it is non-empty and C-contiguous."""
    n = item
    for d in shape:
        n *= d
    if n == 0:
        raise error("RK_EINVAL", f"{what} is empty (shape {shape}): no memory for the "
                    "kernel to address", InvalidArgumentError)
    if not _contiguous(shape, strides, item):
        raise error("RK_EINVAL", f"{what} is not C-contiguous (shape {shape}, strides "
                    f"{strides}): pass a contiguous copy", InvalidArgumentError)
    return n


def _from_cai(what: str, a: Any, cai: dict[str, Any], ordinal: int) -> _core.Buffer:
    version = cai.get("version", 0)
    if not isinstance(version, int) or version < 2:
        raise error("RK_ENOTSUP", f"{what}: __cuda_array_interface__ version {version!r}; "
                    "ringkernel reads versions 2 and 3", NotSupportedError)
    if cai.get("mask") is not None:
        raise error("RK_ENOTSUP", f"{what}: a masked __cuda_array_interface__ (the kernel "
                    "would see masked elements)", NotSupportedError)
    ptr = int(cai["data"][0])
    shape = tuple(int(d) for d in cai["shape"])
    item = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    # CAI strides are in bytes, as are C order's counted from item.
    nbytes = _checked(what, shape, None if strides is None else
                      tuple(int(s) for s in strides), item)
    stream = cai.get("stream") if version >= 3 else None
    return _core.wrap_device(ptr, nbytes, ordinal, a, stream)


def _from_dlpack(what: str, a: Any, ordinal: int) -> _core.Buffer:
    cap = None
    for kw in ({"stream": 1, "max_version": (1, 0)}, {"stream": 1}):
        try:
            cap = a.__dlpack__(**kw)
            break
        except TypeError:  # an older producer: fewer keywords
            continue
    if cap is None:
        cap, stream = a.__dlpack__(), None
    else:
        stream = 1  # the producer ordered its work before the legacy stream
    holder, ptr, shape, strides, (code, bits, lanes), dev, _ro = _core.dlpack_import(cap)
    if dev[0] not in (_DL_CUDA, _DL_CUDA_MANAGED) or dev[1] != ordinal:
        raise error("RK_EINVAL", f"{what}: its DLPack tensor is on device {dev} (type, id), "
                    f"the kernel runs on CUDA device {ordinal}", InvalidArgumentError)
    # DLPack strides are in elements: C order's counted from 1.
    count = _checked(what, shape, strides, 1)
    return _core.wrap_device(ptr, count * ((bits * lanes + 7) // 8), ordinal, holder, stream)
