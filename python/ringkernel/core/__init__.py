"""PyDotCompute's ``pydotcompute.core`` module path."""

from ..buffers import BufferState, UnifiedBuffer
from ..compute import Accelerator, ComputeOrchestrator, MemoryPool

__all__ = ["Accelerator", "UnifiedBuffer", "BufferState", "MemoryPool", "ComputeOrchestrator"]
