"""UnifiedBuffer over the C rk_buffer: numpy views without copies, the six
states and their transfers."""

import numpy as np
import pytest

from ringkernel import BufferState, UnifiedBuffer, errors


def test_states_and_transfers():
    b = UnifiedBuffer((4, 3), dtype=np.float64)
    assert b.state is BufferState.UNINITIALIZED
    h = b.host
    assert h.shape == (4, 3) and h.dtype == np.float64 and not h.any()
    h[1, 2] = 7.5
    assert b.state is BufferState.HOST_ONLY
    b.sync_to_device()
    assert b.state is BufferState.SYNCHRONIZED and b.stats["h2d_transfers"] == 1
    b.sync_to_device()  # already current: no copy
    assert b.stats["h2d_transfers"] == 1 and b.stats["transfers_avoided"] >= 1
    b.mark_host_dirty()
    assert b.state is BufferState.HOST_DIRTY
    assert b.device != 0  # taking the device copy syncs it and makes it current
    assert b.state is BufferState.DEVICE_DIRTY and b.stats["h2d_transfers"] == 2
    r = b.host_readonly  # reads sync back without dirtying
    assert r[1, 2] == 7.5 and not r.flags.writeable
    assert b.state is BufferState.SYNCHRONIZED and b.stats["d2h_transfers"] == 1


def test_host_view_is_zero_copy():
    b = UnifiedBuffer(8, dtype=np.int32)
    v1 = b.host
    v1[:] = np.arange(8)
    v2 = b.host
    assert v2.__array_interface__["data"][0] == v1.__array_interface__["data"][0]
    assert b[3] == 3


def test_free_with_live_view_and_after_free():
    b = UnifiedBuffer(4)
    v = b.host
    with pytest.raises(errors.BusyError):
        b.free()
    del v
    b.free()
    with pytest.raises(errors.ClosedError):
        b.host


def test_bad_shapes_and_types():
    with pytest.raises(errors.InvalidArgumentError):
        UnifiedBuffer((0,))
    with pytest.raises(errors.InvalidArgumentError):
        UnifiedBuffer((1, 1, 1, 1))
    with pytest.raises(TypeError):
        UnifiedBuffer(4, dtype=np.complex64)
