#!/usr/bin/env python3
"""Writes the msgpack test vectors with the published PyDotCompute package.

Usage: gen_msg_vectors.py OUT.txt   (one "name hex" line per vector)

ctest runs this as the setup fixture of test_msg_codec and
test_msg_codec_errors (tests/CMakeLists.txt) so the C encoder is compared, byte for byte, with what PyDotCompute 0.2.0
itself writes, not with a script of ours that imitates it. It fails loudly
(exit status 1) if Python, msgpack, numpy or pydotcompute==0.2.0 is missing:
tools/pydeps.sh installs them.

What comes from where:
- the *_ref vectors, point_nan and the numpy-scalar vectors are
  RingKernelMessage.serialize() of @message classes, the declaration form
  PyDotCompute documents: the fields in declaration order, then
  message_id, priority, correlation_id, then "__type__".
- PyDotCompute cannot serialise a nested message object (its msgpack hook
  raises TypeError), so a nested field is given as the dict a Python peer
  would send: its fields, then "__type__" (the order we write).
- the input-form vectors (lists, uuid strings, typestr dtypes, a bare bin
  id, the dataclass-subclass key order) are maps packed with PyDotCompute's
  own msgpack hook (pydotcompute.ring_kernels.message._uuid_encoder) and
  the same packb call serialize() makes.
"""
import math
import sys
import uuid
from dataclasses import dataclass

try:
    import msgpack
    import numpy as np
    import pydotcompute
    from pydotcompute import message
    from pydotcompute.ring_kernels.message import (RingKernelMessage,
                                                   _uuid_encoder)
except ImportError as e:
    sys.exit("gen_msg_vectors.py: %s; run tools/pydeps.sh "
             "(pip install pydotcompute==0.2.0)" % e)

if pydotcompute.__version__ != "0.2.0":
    sys.exit("gen_msg_vectors.py: pydotcompute %s installed, the vectors are "
             "defined against 0.2.0; run tools/pydeps.sh"
             % pydotcompute.__version__)

MID = uuid.UUID("01890a5d-ac96-774b-bcce-b302099a8057")
CID = uuid.UUID("0189aaaa-bbbb-7ccc-8ddd-eeeeffff0011")


@message
class Point:
    x: float
    y: float


# tests/support/msg_test_types.h: rkt_all, field for field.
@message
class AllTypes:
    flag: bool
    i8: int
    i16: int
    i32: int
    i64: int
    u8: int
    u16: int
    u32: int
    u64: int
    f32: float
    f64: float
    arr: object
    bits: object
    samples: object
    ids: object
    blob: bytes
    label: str
    origin: object


@dataclass
class PointSubclass(RingKernelMessage):
    """The other declaration form: envelope keys first."""
    x: float = 0.0
    y: float = 0.0


def pack(d):
    """What serialize() does with its dict."""
    return msgpack.packb(d, default=_uuid_encoder, strict_types=False)


def nested_point(x, y):
    return {"x": x, "y": y, "__type__": "Point"}


vectors = {}
vectors["point_ref"] = Point(x=1.5, y=-2.25, message_id=MID,
                             priority=128).serialize()
vectors["all_ref"] = AllTypes(
    flag=True, i8=-128, i16=-32768, i32=-2147483648, i64=-(2**63),
    u8=255, u16=65535, u32=2**32 - 1, u64=2**64 - 1,
    f32=math.inf, f64=-math.inf,
    arr=np.array([1.0, -0.5, 3.25, 1e30], dtype=np.float32),
    bits=np.array([True, False, True]),
    samples=np.array([0.0, -1.0, 2.5e-300], dtype=np.float64),
    ids=np.array([], dtype=np.int32),
    blob=b"\x00\x01\xfe\xff",
    label="h\u00e9llo",
    origin=nested_point(0.25, 4.0),
    message_id=MID, priority=7, correlation_id=CID).serialize()
vectors["point_nan"] = Point(x=math.nan, y=math.inf, message_id=MID,
                             priority=128).serialize()
# numpy scalars: PyDotCompute's hook turns each into a 0-d ndarray map
# (np.float64 is a Python float subclass and stays a float64).
vectors["point_np_scalars"] = Point(x=np.float32(1.5), y=np.int64(-3),
                                    message_id=MID).serialize()
vectors["all_np_scalars"] = AllTypes(
    flag=np.bool_(True), i8=np.int8(-5), i16=np.int16(-300),
    i32=np.int32(70000), i64=np.int64(-(2**40)), u8=np.uint8(200),
    u16=np.uint16(60000), u32=np.uint32(4000000000),
    u64=np.uint64(2**64 - 2), f32=np.float32(0.1), f64=np.float32(0.1),
    arr=np.zeros(4, dtype=np.float32), bits=np.zeros(3, dtype=bool),
    samples=np.array([], dtype=np.float64), ids=np.array([], dtype=np.int32),
    blob=b"", label="", origin=nested_point(np.float32(2.5), np.int64(7)),
    message_id=MID, priority=1).serialize()
vectors["point_subclass"] = PointSubclass(x=0.5, y=8.0, message_id=MID,
                                          priority=9).serialize()
# Forms the reference accepts on input: uuid strings, lists, ints for
# floats, an unknown key, no __type__ on the nested map.
vectors["all_lists"] = pack({
    "message_id": {"__uuid__": str(MID)}, "priority": 0,
    "correlation_id": str(CID), "__type__": "AllTypes",
    "flag": False, "i8": 127, "i16": 32767, "i32": 2147483647,
    "i64": 2**63 - 1, "u8": 0, "u16": 0, "u32": 0, "u64": 0,
    "f32": 3, "f64": -7,
    "arr": [1, 2.5, -3, 4], "bits": [False, True, False],
    "samples": [1.0, 2, -3.5], "ids": [-1, 0, 1], "blob": b"",
    "label": "", "origin": {"x": 1, "y": 2.0}, "extra": [1, 2, 3]})
# A bare 16-byte bin message id, no __type__.
vectors["point_bare_bin"] = pack({"message_id": MID.bytes, "x": 0.0,
                                  "y": -0.0})
# A 2-D ndarray with a typestr dtype, dtypes that need converting.
vectors["all_typestr"] = pack({
    "flag": True, "i8": 1, "i16": 2, "i32": 3, "i64": 4, "u8": 5, "u16": 6,
    "u32": 7, "u64": 8, "f32": 0.5, "f64": 0.25,
    "arr": {"__ndarray__": np.array([[1, 2], [3, 4]], dtype="<f4").tobytes(),
            "dtype": "<f4", "shape": [2, 2]},
    "bits": np.array([1, 0, 1], dtype=np.uint8).astype(bool),
    "samples": np.array([1, 2, 3], dtype=np.int64),  # converted to float64
    "ids": np.array([7, -7], dtype=np.int32),
    "blob": b"x", "label": "y", "origin": nested_point(1.0, 1.0),
    "message_id": MID, "priority": 255, "correlation_id": None,
    "__type__": "AllTypes"})

if len(sys.argv) != 2:
    sys.exit("usage: gen_msg_vectors.py OUT.txt")
with open(sys.argv[1], "w") as out:
    out.write("# pydotcompute %s, msgpack %s, numpy %s\n"
              % (pydotcompute.__version__,
                 ".".join(map(str, msgpack.version)), np.__version__))
    for name, b in vectors.items():
        out.write("%s %s\n" % (name, b.hex()))
