"""UnifiedBuffer's zero-copy exports on the host: DLPack (kDLCPU) through
numpy, the capsule's fields, the errors; no __cuda_array_interface__
without CUDA memory. The CUDA side (kDLCUDA, the interface dict) runs under
the stand-in driver in test_cuda_python.py, with the capsule reader here."""

import ctypes
import gc

import numpy as np
import pytest

import ringkernel as rk


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def read_capsule(cap):
    """The fields of a capsule's DLTensor, as a dict (both capsule kinds)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype = ctypes.c_char_p
    name.argtypes = [ctypes.py_object]
    n = name(cap)
    p = get(cap, n)
    if n == b"dltensor_versioned":
        m = DLManagedTensorVersioned.from_address(p)
        t, version = m.dl_tensor, (m.major, m.minor)
    else:
        t, version = DLTensor.from_address(p), None
    nd = t.ndim
    return {"name": n.decode(), "version": version, "data": t.data,
            "device": (t.device.device_type, t.device.device_id), "ndim": nd,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "shape": tuple(t.shape[i] for i in range(nd)),
            "strides": tuple(t.strides[i] for i in range(nd))}


def test_numpy_takes_host_memory_without_a_copy():
    b = rk.UnifiedBuffer((3, 4), np.float32, device="cpu").allocate()
    b.copy_from(np.arange(12).reshape(3, 4))
    a = np.from_dlpack(b)
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert a.ctypes.data == b.host.ctypes.data  # the buffer's own memory
    assert (a == np.arange(12).reshape(3, 4)).all()
    a[1, 2] = 99.0
    b.mark_host_dirty()
    assert b.host[1, 2] == 99.0
    assert b.__dlpack_device__() == (1, 0)  # kDLCPU
    auto = rk.UnifiedBuffer((5,), np.int16).zeros()  # no GPU: the host array
    assert auto.__dlpack_device__() == (1, 0)
    assert (np.from_dlpack(auto) == 0).all()


@pytest.mark.parametrize("dtype,code,bits", [
    (np.int8, 0, 8), (np.uint16, 1, 16), (np.int64, 0, 64), (np.float64, 2, 64),
    (np.float16, 2, 16), (np.complex64, 5, 64), (np.bool_, 6, 8)])
def test_capsule_fields(dtype, code, bits):
    b = rk.UnifiedBuffer((2, 3), dtype, device="cpu").zeros()
    for max_version, name, version in ((None, "dltensor", None),
                                       ((1, 0), "dltensor_versioned", (1, 0))):
        d = read_capsule(b.__dlpack__(max_version=max_version))
        assert d["name"] == name and d["version"] == version
        assert d["device"] == (1, 0) and d["ndim"] == 2
        assert d["dtype"] == (code, bits, 1)
        assert d["shape"] == (2, 3) and d["strides"] == (3, 1)  # in elements
        assert d["data"] == b.host.ctypes.data
    assert np.from_dlpack(b).dtype == np.dtype(dtype)


def test_export_keeps_the_memory_and_blocks_free():
    b = rk.UnifiedBuffer((4,), np.int32, device="cpu").zeros()
    core = b._buf()
    a = np.from_dlpack(b)
    with pytest.raises(rk.BusyError):
        core.free()  # numpy holds the memory
    b.free()  # the UnifiedBuffer lets go; the memory stays for a
    a[:] = 5
    assert (a == 5).all()
    del a
    gc.collect()
    core.free()


def test_wrong_device_stream_copy_and_dtype_are_clear_errors():
    b = rk.UnifiedBuffer((4,), np.float32, device="cpu").zeros()
    with pytest.raises(rk.DLPackError) as e:
        b.__dlpack__(dl_device=(2, 0))
    assert isinstance(e.value, BufferError) and e.value.name == "RK_ENODEV"
    assert "(2, 0)" in str(e.value) and "(1, 0)" in str(e.value)
    with pytest.raises(BufferError, match="kDLCPU takes stream=None"):
        b.__dlpack__(stream=1)
    with pytest.raises(rk.DLPackError, match="copy=True"):
        b.__dlpack__(copy=True)
    rec = rk.UnifiedBuffer((2,), np.dtype([("a", np.int32), ("b", np.float32)]),
                           device="cpu").zeros()
    with pytest.raises(rk.DLPackError, match="no type"):
        rec.__dlpack__()
    with pytest.raises(rk.BufferNotAllocatedError):
        rk.UnifiedBuffer((2,), np.int32, device="cpu").__dlpack__()


def test_no_cuda_array_interface_without_cuda_memory():
    b = rk.UnifiedBuffer((4,), np.float32, device="cpu").zeros()
    assert not hasattr(b, "__cuda_array_interface__")
    assert isinstance(b.device, np.ndarray)  # .device keeps its meaning
