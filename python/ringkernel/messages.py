"""@message: dataclass-like message types encoded by the C codec.

A ``@message`` class is a dataclass with three envelope fields appended
(``message_id``, ``priority``, ``correlation_id``), as in PyDotCompute. Its
fields are described to the C library as an ``rk_msgtype`` built at run
time (``_core.MsgType``), so ``serialize()`` and every send produce the
PyDotCompute msgpack wire format through the C encoder
(docs/wire-format.md), and receives decode through the C decoder.

Field annotations and what they become (docs/python.md has the table):

=====================  ===========================================
``int``                int64
``float``              float64
``bool``               bool
``str``                string, at most ``DEFAULT_STR_MAX`` bytes
``bytes``              bytes, at most ``DEFAULT_BYTES_MAX``
``uuid.UUID``          ``{"__uuid_bin__": bin16}`` (as PyDotCompute)
``list[float|int|bool]``  variable array, decoded as a list
``numpy.ndarray``      variable float64 array, decoded as an ndarray
another @message       nested map
``int32``, ``float32``, ...          fixed-width scalars (this module)
``array(float32, 4)``  fixed array of 4 (numpy array)
``vla(float64, 1024)`` variable array of at most 1024
``string(64)``, ``blob(256)``        bounded str / bytes
``Annotated[T, spec]`` T for type checkers, spec for the wire
=====================  ===========================================

A type whose fields are all fixed-width scalars, fixed arrays and such
nested types has a fixed layout: ``Cls.dtype`` is the numpy structured
dtype of its C struct, ``Cls.view(buffer)`` reads payloads in place, and
``RingKernelRuntime.send_batch`` sends a record array without copying.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
import uuid
import zlib
from typing import Any, Callable, Optional, TypeVar, overload

import numpy as np

from . import _core
from .errors import KernelAlreadyExistsError, error

_T = TypeVar("_T")

if typing.TYPE_CHECKING:
    from typing_extensions import Self

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # type checkers use the 3.11 form; older interpreters only run it
    def dataclass_transform(**_kw: Any) -> Callable[[_T], _T]:
        return lambda f: f

# rk_fclass / rk_fkind values (include/ringkernel/message.h)
SCALAR, ARRAY, VLA, BYTES, STRING, NESTED = range(6)
(K_BOOL, K_INT8, K_INT16, K_INT32, K_INT64, K_UINT8, K_UINT16, K_UINT32,
 K_UINT64, K_FLOAT, K_DOUBLE, K_NONE) = range(12)
_PRESENT_DEFAULT, _PRESENT_LIST, _PRESENT_UUID = range(3)

_KIND_DTYPE = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
               "uint32", "uint64", "float32", "float64"]

#: Maxima for annotations that give none (a queue slot must still hold the
#: whole message: see ring_kernel(max_payload=...)).
DEFAULT_STR_MAX = 1 << 16
DEFAULT_BYTES_MAX = 1 << 20
DEFAULT_LIST_MAX = 1 << 16

ENVELOPE_FIELDS = ("message_id", "priority", "correlation_id")


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """How one field travels: an rk_fclass, an rk_fkind, a count."""

    cls: int
    kind: int = K_NONE
    count: int = 0
    nested: Any = None  # a @message class, for NESTED
    present: int = _PRESENT_DEFAULT

    def __repr__(self) -> str:
        names = ["scalar", "array", "vla", "bytes", "string", "nested"]
        kind = _KIND_DTYPE[self.kind] if self.kind < K_NONE else ""
        return f"FieldSpec({names[self.cls]} {kind} {self.count})".replace("  ", " ")


def _scalar(kind: int) -> FieldSpec:
    return FieldSpec(SCALAR, kind)


bool_ = _scalar(K_BOOL)
int8, int16, int32, int64 = (_scalar(k) for k in (K_INT8, K_INT16, K_INT32, K_INT64))
uint8, uint16, uint32, uint64 = (_scalar(k) for k in (K_UINT8, K_UINT16, K_UINT32, K_UINT64))
float32, float64 = _scalar(K_FLOAT), _scalar(K_DOUBLE)

_BY_DTYPE = {np.dtype(n): k for k, n in enumerate(_KIND_DTYPE)}


def _elem_kind(elem: Any) -> int:
    if isinstance(elem, FieldSpec):
        if elem.cls != SCALAR:
            raise TypeError("array elements must be scalars")
        return elem.kind
    if elem is bool:
        return K_BOOL
    if elem is int:
        return K_INT64
    if elem is float:
        return K_DOUBLE
    try:
        return _BY_DTYPE[np.dtype(elem)]
    except (TypeError, KeyError):
        raise TypeError(f"unsupported array element type {elem!r}") from None


def array(elem: Any, n: int) -> FieldSpec:
    """A fixed array of n elements (decoded as a numpy array)."""
    if n <= 0:
        raise ValueError("array length must be positive")
    return FieldSpec(ARRAY, _elem_kind(elem), n)


def vla(elem: Any, max_len: int = DEFAULT_LIST_MAX, *, as_list: bool = False) -> FieldSpec:
    """A variable array of at most max_len elements (numpy array, or a list
    with as_list)."""
    if max_len <= 0:
        raise ValueError("maximum length must be positive")
    return FieldSpec(VLA, _elem_kind(elem), max_len,
                     present=_PRESENT_LIST if as_list else _PRESENT_DEFAULT)


def string(max_len: int = DEFAULT_STR_MAX) -> FieldSpec:
    """A str of at most max_len UTF-8 bytes."""
    return FieldSpec(STRING, K_NONE, max_len)


def blob(max_len: int = DEFAULT_BYTES_MAX) -> FieldSpec:
    """bytes of at most max_len."""
    return FieldSpec(BYTES, K_NONE, max_len)


# UUID fields travel as PyDotCompute writes them: {"__uuid_bin__": bin16},
# a nested one-field map.
_UUID_MT = _core.MsgType("UUID", 0x55554944, [("__uuid_bin__", BYTES, K_NONE, 16, None, 0)])


def _spec_for(owner: str, name: str, ann: Any) -> FieldSpec:
    if typing.get_origin(ann) is typing.Annotated:
        for extra in ann.__metadata__:
            if isinstance(extra, FieldSpec):
                return extra
        ann = typing.get_args(ann)[0]
    if isinstance(ann, FieldSpec):
        return ann
    if ann is bool:
        return bool_
    if ann is int:
        return int64
    if ann is float:
        return float64
    if ann is str:
        return string()
    if ann is bytes:
        return blob()
    if ann is uuid.UUID:
        return FieldSpec(NESTED, K_NONE, 0, _UUID_MT, _PRESENT_UUID)
    if ann is np.ndarray:
        return vla(np.float64)
    origin = typing.get_origin(ann)
    if origin in (list, typing.List, tuple):
        args = typing.get_args(ann)
        elem = args[0] if args else float
        return vla(elem, as_list=True)
    if isinstance(ann, type) and hasattr(ann, "__rk_msgtype__"):
        return FieldSpec(NESTED, K_NONE, 0, ann)
    raise TypeError(f"{owner}.{name}: unsupported field type {ann!r} "
                    "(see ringkernel.messages for the supported ones)")


def _type_id(name: str) -> int:
    # A stable id from the name (CRC-32, never 0); ids only need to be
    # unique within a process and agree between programs.
    return zlib.crc32(name.encode()) or 1


def _dtype_of(mt: Any) -> Optional[np.dtype[np.void]]:
    if not mt.fixed_size:
        return None
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    for name, offset, cls, kind, count, nested in mt.layout:
        names.append(name)
        offsets.append(offset)
        if cls == SCALAR:
            formats.append(np.dtype(_KIND_DTYPE[kind]))
        elif cls == ARRAY:
            formats.append((np.dtype(_KIND_DTYPE[kind]), (count,)))
        else:
            formats.append(_dtype_of(nested))
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": mt.size})


@overload
def message(cls: type[_T], /) -> type[_T]: ...
@overload
def message(*, type_id: Optional[int] = None,
            name: Optional[str] = None) -> Callable[[type[_T]], type[_T]]: ...


# dataclass_transform: type checkers treat a @message class as a dataclass
# (its __init__ from the annotations; field() works). The envelope fields
# and methods the decorator adds are declared by TypedMessage, for classes
# that want them typed.
@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def message(cls: Optional[type[_T]] = None, *, type_id: Optional[int] = None,
            name: Optional[str] = None) -> Any:
    """Declares a message type (the seeds' @message). Usable bare or with
    ``type_id=`` (the envelope type id; default: CRC-32 of the name) and
    ``name=`` (the wire ``__type__``; default: the class name).

    A class that is already a dataclass (``@message @dataclass``) is taken
    as it is, its own envelope fields included (as PyDotCompute does).
    Fields the C codec cannot describe (a plain ``list``, ``dict``,
    ``Any``...) make the whole type travel through PyDotCompute's own
    msgpack form, encoded in Python (``Cls.__rk_pycodec__`` is True)."""

    def wrap(arg: Any) -> Any:
        if not isinstance(arg, type):
            raise TypeError(f"@message needs a class, not {type(arg).__name__}")
        c: Any = arg
        dc: Any
        if "__dataclass_fields__" not in c.__dict__:
            ann = c.__dict__.get("__annotations__", {})
            for f in ENVELOPE_FIELDS:
                ann.pop(f, None)
            c.__annotations__ = ann
            # envelope fields last, with defaults (PyDotCompute's order)
            ann["message_id"] = uuid.UUID
            ann["priority"] = int
            ann["correlation_id"] = Optional[uuid.UUID]
            c.message_id = dataclasses.field(default_factory=_core.uuid7)
            c.priority = 128
            c.correlation_id = None
            plain = "__post_init__" not in c.__dict__ and "__init__" not in c.__dict__
            if "__post_init__" not in c.__dict__ and not hasattr(c, "__post_init__"):
                c.__post_init__ = _post_init
            dc = dataclasses.dataclass(c)
        else:
            dc, plain = c, False
        _attach(dc, name or dc.__name__, type_id, plain)
        for attr, fn in _METHODS.items():
            if attr not in dc.__dict__ and not _inherited_user(dc, attr):
                setattr(dc, attr, fn)
        return dc

    return wrap(cls) if cls is not None else wrap


def _inherited_user(cls: type, attr: str) -> bool:
    """True when a base class defines attr itself (not one of ours)."""
    for base in cls.__mro__[1:]:
        v = base.__dict__.get(attr)
        if v is not None and v is not _METHODS.get(attr) and base is not object:
            fn = getattr(v, "__func__", v)
            ours = _METHODS.get(attr)
            return fn is not getattr(ours, "__func__", ours)
    return False


def _attach(dc: type, wire: str, type_id: Optional[int], plain: bool) -> Any:
    """Builds and attaches the MsgType of a dataclass message class."""
    try:
        hints = typing.get_type_hints(dc, include_extras=True)
    except Exception:  # an annotation that does not resolve here
        hints = {}
    specs: list[tuple[str, Any]] = []
    dynamic = False
    for f in dataclasses.fields(dc):
        if f.name in ENVELOPE_FIELDS:
            continue
        if f.name not in hints:
            dynamic = True
            continue
        try:
            specs.append((f.name, _spec_for(dc.__name__, f.name, hints[f.name])))
        except TypeError:
            dynamic = True  # PyDotCompute's msgpack form, in Python
    tid = type_id or _type_id(wire)
    if dynamic or not specs:
        fields = [("__payload__", BLOB_CLS, K_NONE, DEFAULT_BYTES_MAX, None, 0)]
        codec = _pycodec(dc, wire)
        specs = []
    else:
        fields, codec = [], None
        for n, s in specs:
            nested = s.nested
            if s.cls == NESTED and nested is not _UUID_MT:
                nested = nested.__rk_msgtype__
            fields.append((n, s.cls, s.kind, s.count, nested, s.present))
    try:
        mt = _core.MsgType(wire, tid, fields, dc, codec)
    except KernelAlreadyExistsError:
        if type_id:
            raise  # an id given explicitly: the caller must choose another
        # Another class of this name with another layout (a module declared
        # twice, two modules with a "Request"): as in PyDotCompute, the
        # later class is the one the name stands for; it keeps the wire
        # name and gets an id of its own, outside the C type registry.
        again = _redeclared[wire] = _redeclared.get(wire, 0) + 1
        mt = _core.MsgType(wire, _type_id(f"{wire}#{again}"), fields, dc, codec, False)
    if codec is None:
        mt.fast = plain  # decode may fill __dict__ without __init__
    type.__setattr__(dc, "__rk_msgtype__", mt)
    type.__setattr__(dc, "__rk_fields__", dict(specs))
    type.__setattr__(dc, "__rk_pycodec__", dynamic or not specs)
    type.__setattr__(dc, "dtype", None if (dynamic or not specs) else _dtype_of(mt))
    _registry[wire] = dc
    _by_id[mt.type_id] = mt
    return mt


BLOB_CLS = BYTES
#: how many times each wire name was declared again with another layout
_redeclared: dict[str, int] = {}


# ------------------------------------------- PyDotCompute's msgpack form
def _pdc_default(obj: Any) -> Any:
    if isinstance(obj, uuid.UUID):
        return {"__uuid_bin__": obj.bytes}
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tobytes(), "dtype": str(obj.dtype), "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode a {type(obj).__name__}")


def _pdc_hook(obj: dict[str, Any]) -> Any:
    if "__uuid_bin__" in obj:
        return uuid.UUID(bytes=obj["__uuid_bin__"])
    if "__uuid__" in obj:
        return uuid.UUID(obj["__uuid__"])
    if "__ndarray__" in obj:
        return np.frombuffer(obj["__ndarray__"], dtype=obj["dtype"]).reshape(obj["shape"]).copy()
    return obj


def _msgpack() -> Any:
    try:
        import msgpack
    except ImportError:  # pragma: no cover - a dependency of the package
        raise error("RK_ENOTSUP", "messages with plain list/dict fields need the "
                    "msgpack package (pip install msgpack)") from None
    return msgpack


def _pycodec(cls: type, wire: str) -> tuple[Callable[[Any], bytes],
                                            Callable[[bytes], dict[str, Any]]]:
    names = [f.name for f in dataclasses.fields(cls)]
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]

    def encode(obj: Any) -> bytes:
        d = {n: getattr(obj, n) for n in names}
        d["__type__"] = wire
        try:
            b: bytes = _msgpack().packb(d, default=_pdc_default)
            return b
        except (TypeError, ValueError, OverflowError) as e:
            bad = next((n for n in names if not _packable(d[n])), None)
            raise error("RK_EENCODE", f"{wire}.{bad}: {e}" if bad else f"{wire}: {e}") from None

    def decode(data: bytes) -> dict[str, Any]:
        try:
            m = _msgpack().unpackb(data, object_hook=_pdc_hook, raw=False)
        except Exception as e:
            raise error("RK_EDECODE", f"{wire}: not a msgpack message ({e})") from None
        if not isinstance(m, dict):
            raise error("RK_EDECODE", f"{wire}: the payload is not a msgpack map")
        for k in ("message_id", "correlation_id"):
            v = m.get(k)
            if isinstance(v, str):
                m[k] = uuid.UUID(v)
            elif isinstance(v, bytes) and len(v) == 16:
                m[k] = uuid.UUID(bytes=v)
        for n in required:
            if n not in m:
                raise error("RK_EFIELDMISSING", f"{wire}.{n}: missing")
        return {k: v for k, v in m.items() if k in names}

    return encode, decode


def _packable(v: Any) -> bool:
    try:
        _msgpack().packb(v, default=_pdc_default)
        return True
    except Exception:
        return False


def _post_init(self: Any) -> None:
    if not isinstance(self.priority, int) or not 0 <= self.priority <= 255:
        raise ValueError(f"Priority must be 0-255, got {self.priority}")


def _serialize(self: Any) -> bytes:
    """The PyDotCompute msgpack form (through the C encoder)."""
    mt: _core.MsgType = type(self).__rk_msgtype__
    return mt.encode(self)


def _deserialize_impl(cls: Any, data: bytes) -> Any:
    """From msgpack (PyDotCompute's or ours) or the fixed form."""
    return cls.__rk_msgtype__.decode(data)


_deserialize = classmethod(_deserialize_impl)


def _to_fixed(self: Any) -> bytes:
    """The fixed-layout form (the C struct's bytes)."""
    mt = type(self).__rk_msgtype__
    if not mt.fixed_size:
        raise TypeError(f"{type(self).__name__} has no fixed layout")
    return np.array([_record(self)], dtype=type(self).dtype).tobytes()


def _record(obj: Any) -> tuple[Any, ...]:
    out = []
    for n, s in type(obj).__rk_fields__.items():
        v = getattr(obj, n)
        out.append(_record(v) if s.cls == NESTED else v)
    return tuple(out)


def _view_impl(cls: Any, buffer: Any) -> np.ndarray[Any, np.dtype[np.void]]:
    """A zero-copy numpy view of fixed-form payloads (one or many back to
    back) as records of cls.dtype."""
    if cls.dtype is None:
        raise TypeError(f"{cls.__name__} has no fixed layout")
    return np.frombuffer(buffer, dtype=cls.dtype)


def _records_impl(cls: Any, n: int) -> np.ndarray[Any, np.dtype[np.void]]:
    """A zeroed record array of n messages, ready for send_batch."""
    if cls.dtype is None:
        raise TypeError(f"{cls.__name__} has no fixed layout")
    return np.zeros(n, dtype=cls.dtype)


_view = classmethod(_view_impl)
_records = classmethod(_records_impl)


def _reply(self: Any, **kwargs: Any) -> Any:
    """A reply: a new message correlated to this one (PyDotCompute's)."""
    response_class = kwargs.pop("response_class", type(self))
    return response_class(correlation_id=self.message_id, **kwargs)


def _with_correlation(self: Any, correlation_id: Optional[uuid.UUID]) -> Any:
    return dataclasses.replace(self, correlation_id=correlation_id)


_METHODS: dict[str, Any] = {
    "__post_init__": _post_init,
    "serialize": _serialize,
    "deserialize": _deserialize,
    "to_fixed": _to_fixed,
    "view": _view,
    "records": _records,
    "reply": _reply,
    "with_correlation": _with_correlation,
}

class TypedMessage:
    """A base for @message classes in typed code: it declares, for type
    checkers and IDEs, the envelope fields and methods that @message adds
    (it adds them to any class; this base only makes them visible)::

        @message
        class Ping(TypedMessage):
            n: int

        p = Ping(n=1)          # checked: Ping(n: int)
        p.reply(n=2).message_id  # checked: Ping, uuid.UUID

    The envelope fields are not parameters of the checked __init__ (set
    ``priority`` by ``send(..., priority=)`` or by assignment); at run time
    the constructor still takes them as keywords.
    """

    message_id: uuid.UUID
    priority: int
    correlation_id: Optional[uuid.UUID]

    if typing.TYPE_CHECKING:
        __rk_msgtype__: typing.ClassVar[_core.MsgType]
        dtype: typing.ClassVar[Optional[np.dtype[np.void]]]

        def serialize(self) -> bytes: ...
        @classmethod
        def deserialize(cls, data: bytes) -> Self: ...
        def to_fixed(self) -> bytes: ...
        @classmethod
        def view(cls, buffer: Any) -> np.ndarray[Any, np.dtype[np.void]]: ...
        @classmethod
        def records(cls, n: int) -> np.ndarray[Any, np.dtype[np.void]]: ...
        @overload
        def reply(self, *, response_class: type[_T], **kwargs: Any) -> _T: ...
        @overload
        def reply(self, **kwargs: Any) -> Self: ...
        def reply(self, **kwargs: Any) -> Any: ...
        def with_correlation(self, correlation_id: Optional[uuid.UUID]) -> Self: ...


_registry: dict[str, type] = {}
#: {type id: MsgType}: how an untyped kernel's messages are decoded.
_by_id: dict[int, Any] = {}
_core._set_type_registry(_by_id)


def get_message_type(name: str) -> Optional[type]:
    """A declared @message class by wire name."""
    return _registry.get(name)


def msgtype_of(cls_or_obj: Any) -> Any:
    """The _core.MsgType of a @message class or instance, or None."""
    return getattr(cls_or_obj, "__rk_msgtype__", None)


class _LazyMsgType:
    """``__rk_msgtype__`` of a RingKernelMessage subclass that @message did
    not see (PyDotCompute's ``@dataclass class M(RingKernelMessage)``):
    built at its first use, when the class is complete."""

    def __get__(self, inst: Any, owner: type) -> Any:
        return _attach(owner, owner.__name__, None, False)


class _MessageBase:
    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        type.__setattr__(cls, "__rk_msgtype__", _LazyMsgType())


@message
class RingKernelMessage(_MessageBase):
    """PyDotCompute's message base class: the three envelope fields
    (``message_id``, ``priority`` 0-255, ``correlation_id``) with
    ``serialize()``, ``deserialize()``, ``reply()`` and
    ``with_correlation()``. Subclass it as a dataclass, or use @message."""


def deserialize_message(data: bytes) -> Any:
    """A message of a type named by its ``__type__``: the registered
    @message class, else a RingKernelMessage (PyDotCompute's)."""
    try:
        m = _msgpack().unpackb(data, raw=False, object_hook=_pdc_hook)
    except Exception as e:
        raise error("RK_EDECODE", f"deserialize_message: not a msgpack message ({e})") from None
    if not isinstance(m, dict):
        raise error("RK_EDECODE", "deserialize_message: the payload is not a msgpack map")
    t = m.get("__type__")
    cls: Any = (_registry.get(t) if isinstance(t, str) else None) or RingKernelMessage
    if cls is not RingKernelMessage:
        return cls.deserialize(data)
    kw = {k: m[k] for k in ENVELOPE_FIELDS if k in m}
    try:
        return RingKernelMessage(**kw)
    except (TypeError, ValueError) as e:
        raise error("RK_EDECODE", f"deserialize_message: {e}") from None
