"""UnifiedBuffer over the C rk_buffer, with PyDotCompute's semantics:
allocate/free, host and device views that do not change the state,
writers that mark the host dirty, the six states and their transfers,
numpy views without copies."""

import asyncio

import numpy as np
import pytest

from ringkernel import BufferState, UnifiedBuffer, errors


def test_states_and_transfers():
    b = UnifiedBuffer((4, 3), dtype=np.float64, device="cpu")
    assert b.state is BufferState.UNINITIALIZED and not b.is_allocated
    assert b.allocate(host=True, device=False) is b
    assert b.state is BufferState.HOST_ONLY
    h = b.host
    assert h.shape == (4, 3) and h.dtype == np.float64 and not h.any()
    h[1, 2] = 7.5
    assert b.state is BufferState.HOST_ONLY  # reading host changes nothing
    b.sync_to_device()
    assert b.state is BufferState.SYNCHRONIZED and b.stats["h2d_transfers"] == 1
    b.sync_to_device()  # already current: no copy
    assert b.stats["h2d_transfers"] == 1 and b.stats["transfers_avoided"] >= 1
    b.host[0, 0] = 1.0
    b.mark_host_dirty()
    assert b.state is BufferState.HOST_DIRTY
    d = b.device  # synced, not dirtied: a numpy array over the device side
    assert b.state is BufferState.SYNCHRONIZED and b.stats["h2d_transfers"] == 2
    assert d[0, 0] == 1.0 and d[1, 2] == 7.5
    assert d.__array_interface__["data"][0] != b.host.__array_interface__["data"][0]
    d[0, 0] = 2.0
    b.mark_device_dirty()
    assert b.state is BufferState.DEVICE_DIRTY
    r = b.host_readonly  # reads sync back
    assert r[0, 0] == 2.0 and not r.flags.writeable
    assert b.state is BufferState.SYNCHRONIZED and b.stats["d2h_transfers"] == 1


def test_writers_mark_host_dirty():
    b = UnifiedBuffer(6, dtype=np.int32, device="cpu").allocate()
    assert b.state is BufferState.SYNCHRONIZED
    b[2] = 5
    assert b.state is BufferState.HOST_DIRTY and b[2] == 5
    asyncio.run(b.ensure_on_device())
    assert b.state is BufferState.SYNCHRONIZED and b.device[2] == 5
    b.copy_from(np.arange(6))
    assert b.state is BufferState.HOST_DIRTY
    out = np.zeros(6, dtype=np.int32)
    b.copy_to(out)
    assert list(out) == list(range(6))
    b.fill(3)
    assert list(b.host) == [3] * 6
    b.zeros()
    assert not b.host.any()


def test_host_view_is_zero_copy():
    b = UnifiedBuffer(8, dtype=np.int32).allocate()
    v1 = b.host
    v1[:] = np.arange(8)
    v2 = b.host
    assert v2.__array_interface__["data"][0] == v1.__array_interface__["data"][0]
    assert b[3] == 3


def test_unallocated_and_freed():
    b = UnifiedBuffer(4)
    for get in (lambda: b.host, lambda: b.device, b.mark_host_dirty, b.mark_device_dirty,
                b.sync_to_host):
        with pytest.raises(errors.BufferNotAllocatedError, match="allocate"):
            get()
    b.allocate()
    v = b.host
    v[:] = 1.0
    b.free()  # the view keeps its memory, as a numpy array would
    assert not b.is_allocated and b.state is BufferState.UNINITIALIZED
    assert list(v) == [1.0] * 4
    with pytest.raises(errors.BufferNotAllocatedError):
        b.host
    b.allocate()
    assert not b.host.any()  # new memory


def test_other_dtypes_and_dimensions():
    b = UnifiedBuffer((2, 3), dtype=np.complex64).allocate()
    b.host[:] = 1 + 2j
    b.mark_host_dirty()
    assert b.device.dtype == np.complex64 and b.device[1, 2] == 1 + 2j
    c = UnifiedBuffer((2, 2, 2, 2), dtype=np.float32).zeros()
    assert c.host.shape == (2, 2, 2, 2)


def test_bad_shapes_and_types():
    with pytest.raises(errors.InvalidArgumentError):
        UnifiedBuffer((0,))
    with pytest.raises(errors.InvalidArgumentError):
        UnifiedBuffer("x")
    with pytest.raises(errors.InvalidArgumentError):
        UnifiedBuffer(4, device="tpu")
    with pytest.raises(TypeError):
        UnifiedBuffer(4, dtype=object)
    b = UnifiedBuffer(4).allocate()
    with pytest.raises(errors.InvalidArgumentError):
        b.copy_from(np.zeros(5))
    with pytest.raises(TypeError):
        b.copy_to([0, 0, 0, 0])
