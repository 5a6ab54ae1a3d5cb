"""Device handlers written in Python and compiled by Numba.

``@ring_kernel(..., backend="cuda", device_handler=fn)`` (or
:func:`compile_device_handler` directly) turns a Python function into the
handler of a persistent device kernel:

* numba-cuda compiles ``fn`` to PTX as a device function with the C ABI
  (``numba.cuda.compile(..., device=True, abi="c")``), named
  ``rk_numba_handler``: ``int rk_numba_handler(const void *in, void *out)``;
* the loop (``ringkernel/dev_numba.h``: the persistent loop and a
  trampoline that calls that symbol) is compiled by NVRTC as relocatable
  code and linked with the PTX by nvJitLink into one cubin
  (src/backend/cuda/jitlink.c), through the kernel cache;
* on the stand-in driver (CPU threads) the same function is compiled by
  Numba's CPU target as a C-ABI ``numba.cfunc`` (:func:`compile_host_handler`),
  whose address the host build of the same loop calls.

The function takes the request and the reply as records of the message
types' fixed layouts (``Cls.dtype``): ``def fn(req, resp)``; it reads
``req.field`` and writes ``resp.field`` (arrays element by element). It
returns nothing or 0 (send ``resp`` as the reply), a positive int (send
nothing), or a negative int (a failure: the block faults, the message is
dead-lettered and supervision decides). docs/python.md, "Device handlers
in Python", lists the Python it may use.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, Optional

from .errors import DeviceError, NotSupportedError, error

#: the C symbol Numba's function gets, and the kernel entry around it
SYMBOL = "rk_numba_handler"
ENTRY = "rk_numba_kernel"
#: RK_DEV_NUMBA_MAX_OUT (include/ringkernel/dev_numba.h)
MAX_OUT = 4096
#: numpy kinds a field may have (scalars, fixed arrays, nested fixed types)
_KINDS = "iufb"


class NumbaCompileError(DeviceError):
    """Numba could not compile a device handler (RK_ECOMPILE; RK_EINVAL
    for a message type it cannot take): the text names the function and
    Numba's reason."""


@dataclasses.dataclass(frozen=True)
class DeviceHandler:
    """A Python handler compiled for the device: what the cuda backend
    links and runs (``ptx`` is Numba's output; ``source`` the loop's
    CUDA C, ``entry`` its kernel)."""
    name: str
    ptx: str
    source: str
    entry: str
    in_size: int
    out_size: int
    out_type_id: int
    cc: tuple[int, int]


def _numba() -> Any:
    # numba-cuda finds NVVM and libdevice in the toolkit: point it at
    # /usr/local/cuda unless the user chose another.
    if "CUDA_HOME" not in os.environ and os.path.isdir("/usr/local/cuda/nvvm"):
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
    try:
        import numba
        from numba import cuda
    except ImportError as e:  # pragma: no cover - CI installs it
        raise error("RK_ENOTSUP", f"device handlers need numba-cuda "
                    f"(pip install numba-cuda): {e}", NotSupportedError) from e
    return numba, cuda


def _fn_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn)))


def _layout(name: str, role: str, cls: Any) -> Any:
    """cls's numpy dtype, refused unless it is a fixed layout of numbers."""
    dt = getattr(cls, "dtype", None)
    if not hasattr(cls, "__rk_msgtype__") or dt is None:
        raise error("RK_EINVAL", f"device_handler {name!r}: {role} "
                    f"{getattr(cls, '__name__', cls)!r} must be a @message type "
                    "with a fixed layout (fixed-width numbers and fixed arrays "
                    "of them)", NumbaCompileError)

    def check(d: Any) -> None:
        for f in d.names:
            sub = d.fields[f][0]
            base = sub.base if sub.subdtype is not None else sub
            if base.names:
                check(base)
            elif base.kind not in _KINDS:
                raise error("RK_EINVAL", f"device_handler {name!r}: {role} "
                            f"{cls.__name__}.{f} has dtype {base}, not a number",
                            NumbaCompileError)
    check(dt)
    return dt


def _signature(name: str, input_type: Any,
               output_type: Any) -> tuple[Any, Any, tuple[Any, Any], tuple[Any, Any]]:
    """The two dtypes, the records the user's function takes, and the C
    signature's pointers to them."""
    numba, _ = _numba()
    din = _layout(name, "input_type", input_type)
    dout = _layout(name, "output_type", output_type)
    if dout.itemsize > MAX_OUT:
        raise error("RK_EINVAL", f"device_handler {name!r}: output_type "
                    f"{output_type.__name__} is {dout.itemsize} bytes, over the "
                    f"device reply limit of {MAX_OUT}", NumbaCompileError)
    rin, rout = numba.from_dtype(din), numba.from_dtype(dout)
    return din, dout, (rin, rout), (numba.types.CPointer(rin),
                                    numba.types.CPointer(rout))


# The wrapper Numba compiles: the C ABI on one side, the user's records on
# the other. `_user` is the user's function jitted for the target; `carray`
# the target's numba.carray.
_WRAP_NONE = """
def _rk_wrap(inp, out):
    _user(carray(inp, 1)[0], carray(out, 1)[0])
    return int32(0)
"""
_WRAP_INT = """
def _rk_wrap(inp, out):
    return int32(_user(carray(inp, 1)[0], carray(out, 1)[0]))
"""


def _wrapper(user: Any, carray: Any, returns_none: bool) -> Callable[..., Any]:
    numba, _ = _numba()
    ns: dict[str, Any] = {"_user": user, "carray": carray, "int32": numba.int32}
    exec(_WRAP_NONE if returns_none else _WRAP_INT, ns)
    return ns["_rk_wrap"]  # type: ignore[no-any-return]


def _refuse_raise(name: str, fn: Callable[..., Any]) -> None:
    """numba-cuda compiles ``raise`` in a device function to an error
    status that the C ABI drops (the reply would go out as if nothing
    happened): refused, with what to do instead."""
    import dis
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    if any(i.opname in ("RAISE_VARARGS", "RERAISE") for i in dis.get_instructions(code)):
        raise error("RK_ECOMPILE", f"device_handler {name!r}: raises an exception; "
                    "a device handler cannot raise: return a negative int to fail "
                    "the message", NumbaCompileError)


def _reason(e: BaseException) -> str:
    # Numba's messages carry ANSI colours and a long trace: the first
    # lines that say what is wrong are enough for the detail.
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[:6])[:900] or type(e).__name__


def _returns_none(name: str, rtype: Any) -> bool:
    numba, _ = _numba()
    if rtype in (numba.types.none, numba.types.void):
        return True
    if isinstance(rtype, (numba.types.Integer, numba.types.Boolean)):
        return False
    raise error("RK_ECOMPILE", f"device_handler {name!r}: it returns {rtype}; a "
                "device handler returns None or an int (0: reply, > 0: no reply, "
                "< 0: failure)", NumbaCompileError)


# numba-cuda asks the current device's compute capability when it compiles
# a function that the wrapper calls, even for numba.cuda.compile(cc=...):
# without a GPU there is none. The compile below answers the target's.
_cc_lock = threading.Lock()


class _Device:
    def __init__(self, cc: tuple[int, int]):
        self.compute_capability = cc


def _compile_cuda(fn: Callable[..., Any], recs: Any, args: Any,
                  cc: tuple[int, int]) -> Any:
    numba, cuda = _numba()
    from numba.cuda import dispatcher as cuda_dispatcher
    from numba.cuda.np.numpy_support import carray
    with _cc_lock:
        saved = getattr(cuda_dispatcher, "get_current_device")
        setattr(cuda_dispatcher, "get_current_device", lambda: _Device(cc))
        try:
            user = cuda.jit(device=True)(fn)
            rtype = user.compile_device(recs).signature.return_type
            wrap = _wrapper(user, carray, _returns_none(_fn_name(fn), rtype))
            ptx, _ = cuda.compile(wrap, args, device=True, abi="c",
                                  output="ptx", cc=cc,
                                  abi_info={"abi_name": SYMBOL})
        finally:
            setattr(cuda_dispatcher, "get_current_device", saved)
    return ptx


def _numba_errors() -> tuple[type[BaseException], ...]:
    numba, _ = _numba()
    from numba.core import errors as core_errors
    kinds: list[type[BaseException]] = [core_errors.NumbaError]
    try:
        from numba.cuda.core import errors as cuda_errors
        kinds.append(cuda_errors.NumbaError)
    except ImportError:  # pragma: no cover - older numba-cuda
        pass
    return tuple(kinds)


def compile_device_handler(fn: Callable[..., Any], input_type: Any,
                           output_type: Optional[Any] = None, *,
                           cc: tuple[int, int] = (7, 5)) -> DeviceHandler:
    """Compiles fn(req, resp) to PTX (numba-cuda, C ABI, symbol
    ``rk_numba_handler``) for compute capability ``cc`` (PTX for 7.5, the
    oldest CUDA 13 targets, links
    for any newer GPU) and generates the loop's source. Raises
    :class:`NumbaCompileError` (RK_ECOMPILE) naming fn and Numba's reason
    when fn uses Python Numba cannot compile for the GPU."""
    name = _fn_name(fn)
    if not callable(fn):
        raise error("RK_EINVAL", f"device_handler must be a function, not "
                    f"{type(fn).__name__}", NumbaCompileError)
    output_type = output_type or input_type
    _refuse_raise(name, fn)
    din, dout, recs, args = _signature(name, input_type, output_type)
    try:
        ptx = _compile_cuda(fn, recs, args, cc)
    except NumbaCompileError:
        raise
    except _numba_errors() as e:
        raise error("RK_ECOMPILE", f"device_handler {name!r}: Numba cannot "
                    f"compile it for the GPU: {_reason(e)}", NumbaCompileError) from e
    except Exception as e:  # NVVM missing, a toolkit error: still no crash
        raise error("RK_ECOMPILE", f"device_handler {name!r}: Numba cannot "
                    f"compile it for the GPU: {type(e).__name__}: {_reason(e)}",
                    NumbaCompileError) from e
    out_id = int(output_type.__rk_msgtype__.type_id)
    source = (f"/* device_handler {name}: {input_type.__name__} -> "
              f"{output_type.__name__} */\n"
              "#include \"ringkernel/dev_numba.h\"\n"
              f"RK_DEV_NUMBA_EXTERN({SYMBOL})\n"
              f"RK_DEV_NUMBA_KERNEL({ENTRY}, {din.itemsize}u, {dout.itemsize}u, "
              f"{out_id}u, {SYMBOL})\n")
    return DeviceHandler(name=name, ptx=ptx, source=source, entry=ENTRY,
                         in_size=din.itemsize, out_size=dout.itemsize,
                         out_type_id=out_id, cc=cc)


def compile_host_handler(fn: Callable[..., Any], input_type: Any,
                         output_type: Optional[Any] = None) -> Any:
    """The same handler for the host build of the loop (the stand-in
    driver): a ``numba.cfunc`` with the C signature
    ``int (const void *in, void *out)``; its ``.address`` is what the loop
    calls. Errors as :func:`compile_device_handler`."""
    numba, _ = _numba()
    name = _fn_name(fn)
    output_type = output_type or input_type
    _refuse_raise(name, fn)
    _, _, recs, args = _signature(name, input_type, output_type)
    try:
        user = numba.njit(fn)
        user.compile(recs)
        rtype = user.overloads[recs].signature.return_type
        wrap = _wrapper(user, numba.carray, _returns_none(name, rtype))
        return numba.cfunc(numba.int32(*args))(wrap)
    except NumbaCompileError:
        raise
    except _numba_errors() as e:
        raise error("RK_ECOMPILE", f"device_handler {name!r}: Numba cannot "
                    f"compile it for the host: {_reason(e)}",
                    NumbaCompileError) from e
