from ..buffers import BufferState, DeviceArray, UnifiedBuffer  # noqa: F401
