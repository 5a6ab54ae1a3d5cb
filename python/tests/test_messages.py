"""@message types through the C codec: round trips, PyDotCompute wire
compatibility in both directions, fixed layouts and bad input."""

import uuid
from typing import Annotated

import msgpack
import numpy as np
import pytest
from pydotcompute import message as pdc_message

import ringkernel as rk
from ringkernel import errors


@rk.message
class MsgAll:
    i: int
    f: float
    b: bool
    s: str
    raw: bytes
    ident: uuid.UUID
    xs: list[float]
    ns: list[int]
    arr: np.ndarray
    small: rk.int16
    w: rk.array(rk.float32, 3)


@rk.message
class MsgPoint:
    x: float
    y: float


@rk.message
class MsgParticle:
    pos: MsgPoint
    mass: rk.float32
    alive: bool
    ids: rk.array(rk.uint16, 4)


@rk.message
class MsgBounded:
    name: rk.string(4)
    tag: Annotated[bytes, rk.blob(2)]


@rk.message
class MsgInts:
    i8: rk.int8
    i16: rk.int16
    i32: rk.int32
    i64: rk.int64
    u8: rk.uint8
    u16: rk.uint16
    u32: rk.uint32
    u64: rk.uint64


# The range of each integer field of MsgInts.
INT_RANGES = {f"{s}{b}": ((-(2 ** (b - 1)), 2 ** (b - 1) - 1) if s == "i" else (0, 2 ** b - 1))
              for s in "iu" for b in (8, 16, 32, 64)}


# The same shapes declared with PyDotCompute's own decorator.
@pdc_message
class PdcAll:
    i: int
    f: float
    b: bool
    s: str
    raw: bytes
    ident: uuid.UUID
    xs: list
    ns: list
    arr: object
    small: int
    w: object


def make_all():
    return MsgAll(i=-5, f=2.5, b=True, s="héllo", raw=b"\x00\x01", ident=uuid.uuid4(),
                  xs=[1.0, 2.5], ns=[1, -2, 3], arr=np.arange(4, dtype=np.float64),
                  small=-300, w=np.array([1, 2, 3], dtype=np.float32), priority=7)


def test_round_trip_every_field_kind():
    m = make_all()
    back = MsgAll.deserialize(m.serialize())
    assert back.i == -5 and back.f == 2.5 and back.b is True
    assert back.s == "héllo" and back.raw == b"\x00\x01" and back.ident == m.ident
    assert back.xs == [1.0, 2.5] and back.ns == [1, -2, 3]
    assert isinstance(back.arr, np.ndarray) and back.arr.tolist() == [0, 1, 2, 3]
    assert back.small == -300 and back.w.dtype == np.float32 and back.w.tolist() == [1, 2, 3]
    assert back.message_id == m.message_id and back.priority == 7
    assert back.correlation_id is None


def test_wire_is_pydotcompute_msgpack_map():
    m = make_all()
    d = msgpack.unpackb(m.serialize(), raw=False)
    assert d["__type__"] == "MsgAll"
    assert d["message_id"] == {"__uuid_bin__": m.message_id.bytes}
    assert d["ident"]["__uuid_bin__"] == m.ident.bytes
    assert d["priority"] == 7 and d["correlation_id"] is None
    assert d["s"] == "héllo"


def test_pydotcompute_decodes_what_we_encode():
    m = make_all()
    p = PdcAll.deserialize(m.serialize())
    assert p.i == -5 and p.s == "héllo" and p.raw == b"\x00\x01"
    assert p.ident == m.ident and p.message_id == m.message_id
    assert list(p.xs) == [1.0, 2.5] and list(p.arr) == [0, 1, 2, 3]
    assert list(p.w) == [1, 2, 3]


def test_we_decode_what_pydotcompute_encodes():
    ident = uuid.uuid4()
    p = PdcAll(i=9, f=-1.25, b=False, s="x", raw=b"zz", ident=ident, xs=[3.0], ns=[4, 5],
               arr=np.array([1.5, 2.5]), small=12, w=np.array([4, 5, 6], dtype=np.float32),
               priority=200)
    p.__class__.__name__  # PyDotCompute writes __type__ = its class name
    data = msgpack.packb({**msgpack.unpackb(p.serialize(), raw=False), "__type__": "MsgAll"},
                         use_bin_type=True)
    m = MsgAll.deserialize(data)
    assert m.i == 9 and m.f == -1.25 and m.b is False and m.s == "x" and m.raw == b"zz"
    assert m.ident == ident and m.xs == [3.0] and m.ns == [4, 5]
    assert m.arr.tolist() == [1.5, 2.5] and m.small == 12 and m.w.tolist() == [4, 5, 6]
    assert m.priority == 200 and m.message_id == p.message_id


def test_other_type_name_is_refused():
    bad = msgpack.packb({"__type__": "Other", "x": 1.0, "y": 2.0})
    with pytest.raises(errors.MessageTypeError) as ei:
        MsgPoint.deserialize(bad)
    assert ei.value.name == "RK_ETYPE" and "Other" in ei.value.detail


def test_nested_and_fixed_layout_dtype():
    p = MsgParticle(pos=MsgPoint(x=1.0, y=2.0), mass=0.5, alive=True,
                    ids=np.array([1, 2, 3, 4], dtype=np.uint16))
    back = MsgParticle.deserialize(p.serialize())
    assert back.pos.x == 1.0 and back.pos.y == 2.0 and back.mass == 0.5
    assert back.alive is True and back.ids.tolist() == [1, 2, 3, 4]
    # C layout: Point {double x, y} at 0, float mass at 16, bool at 20,
    # uint16[4] at 22, size 32 (aligned to 8).
    assert MsgParticle.dtype.itemsize == 32
    assert MsgParticle.dtype.fields["mass"][1] == 16
    assert MsgParticle.dtype.fields["alive"][1] == 20
    assert MsgParticle.dtype.fields["ids"][1] == 22
    fixed = p.to_fixed()
    assert len(fixed) == 32
    view = MsgParticle.view(fixed)  # zero-copy records over the bytes
    assert view[0]["pos"]["y"] == 2.0 and view[0]["ids"][3] == 4
    again = MsgParticle.deserialize(fixed)  # the fixed form decodes too
    assert again.pos.y == 2.0 and again.ids.tolist() == [1, 2, 3, 4]
    assert MsgAll.dtype is None  # variable-length fields: no fixed layout


@pytest.mark.parametrize("kwargs, cls, field", [
    (dict(i="seven"), errors.FieldTypeError, "MsgAll.i"),
    (dict(f="x"), errors.FieldTypeError, "MsgAll.f"),
    (dict(b=3), errors.FieldTypeError, "MsgAll.b"),
    (dict(s=b"bytes"), errors.FieldTypeError, "MsgAll.s"),
    (dict(raw="str"), errors.FieldTypeError, "MsgAll.raw"),
    (dict(ident="not-a-uuid"), errors.FieldTypeError, "MsgAll.ident"),
    (dict(small=40000), errors.FieldTypeError, "MsgAll.small"),
    (dict(i=2**64), errors.FieldTypeError, "MsgAll.i"),
    (dict(w=[1.0, 2.0]), errors.FieldTypeError, "MsgAll.w"),
    (dict(xs=["a"]), errors.FieldTypeError, "MsgAll.xs"),
    (dict(w=[1e39, 0, 0]), errors.FieldTypeError, "MsgAll.w"),
])
def test_bad_values_name_the_field(kwargs, cls, field):
    m = make_all()
    for k, v in kwargs.items():
        setattr(m, k, v)
    with pytest.raises(cls) as ei:
        m.serialize()
    assert field in ei.value.detail


@pytest.mark.parametrize("field", sorted(INT_RANGES))
def test_integer_fields_hold_their_range_and_refuse_beyond(field):
    lo, hi = INT_RANGES[field]
    def ints(v):  # every other field 0
        return MsgInts(**{**dict.fromkeys(INT_RANGES, 0), field: v})
    for v in (lo, hi):  # both ends are stored, narrowed, and come back
        back = MsgInts.deserialize(ints(v).serialize())
        assert getattr(back, field) == v
    for v in (lo - 1, hi + 1):
        with pytest.raises(errors.FieldTypeError) as ei:
            ints(v).serialize()
        assert f"MsgInts.{field}" in ei.value.detail


def test_too_long_is_too_big():
    with pytest.raises(errors.TooBigError) as ei:
        MsgBounded(name="abcdef", tag=b"x").serialize()
    assert "name" in ei.value.detail
    with pytest.raises(errors.TooBigError):
        MsgBounded(name="ab", tag=b"xyz").serialize()


def test_missing_field_and_garbage():
    data = msgpack.packb({"__type__": "MsgPoint", "x": 1.0})
    with pytest.raises(errors.FieldMissingError) as ei:
        MsgPoint.deserialize(data)
    assert "y" in ei.value.detail
    with pytest.raises((errors.DecodeError, errors.TruncatedError)):
        MsgPoint.deserialize(b"\xc1\xff not msgpack")
    with pytest.raises(errors.FieldTypeError) as ei:
        MsgPoint.deserialize(msgpack.packb({"x": "one", "y": 2.0}))
    assert "x" in ei.value.detail
    m = MsgPoint(x=1.0, y=2.0)
    del m.y
    with pytest.raises(errors.FieldMissingError):
        m.serialize()


def test_priority_validated():
    with pytest.raises(ValueError):
        MsgPoint(x=1.0, y=2.0, priority=300)


def test_dynamic_fields_travel_as_pydotcompute_writes_them():
    """A field the C codec cannot describe (dict, plain list) makes the type
    travel in PyDotCompute's own msgpack form, encoded in Python: the
    bytes are PyDotCompute's, and a value msgpack cannot hold is refused
    with the field named."""
    import pydotcompute

    @rk.message
    class MsgDyn:
        d: dict
        items: list

    @pydotcompute.message
    class MsgDynP:
        d: dict
        items: list

    assert MsgDyn.__rk_pycodec__
    m = MsgDyn(d={"a": 1}, items=[1, "two", 3.0])
    back = MsgDyn.deserialize(m.serialize())
    assert (back.d, back.items, back.message_id) == (m.d, m.items, m.message_id)
    p = MsgDynP.deserialize(m.serialize())  # PyDotCompute reads ours
    assert (p.d, p.items, p.message_id) == (m.d, m.items, m.message_id)
    with pytest.raises(errors.EncodeError, match=r"MsgDyn\.d"):
        MsgDyn(d={"a": object()}, items=[]).serialize()
    with pytest.raises(errors.MessageDeserializationError):
        MsgDyn.deserialize(b"\xc1")


def test_reply_sets_correlation():
    a = MsgPoint(x=1.0, y=2.0)
    r = a.reply(x=3.0, y=4.0)
    assert r.correlation_id == a.message_id
