"""PyDotCompute's smaller public names: module paths, validators, event
loop helpers, Accelerator/MemoryPool, the one-shot @kernel and the
orchestrator's bad input."""

import asyncio
import dataclasses
import importlib

import numpy as np
import pytest

import ringkernel as rk
from ringkernel import errors


@pytest.mark.parametrize("path,names", [
    ("ringkernel", ["Accelerator", "UnifiedBuffer", "BufferState", "MemoryPool",
                    "ComputeOrchestrator", "RingKernelRuntime", "RingKernelMessage",
                    "kernel", "gpu_kernel", "ring_kernel", "message"]),
    ("ringkernel.core", ["Accelerator", "UnifiedBuffer", "BufferState", "MemoryPool",
                         "ComputeOrchestrator"]),
    ("ringkernel.core.orchestrator", ["KernelLaunchConfig", "KernelExecution"]),
    ("ringkernel.ring_kernels", ["RingKernelRuntime", "RingKernel", "KernelState",
                                 "RingKernelTelemetry", "GPUMonitor", "install_uvloop",
                                 "get_loop_info"]),
    ("ringkernel.ring_kernels.message", ["deserialize_message", "get_message_type"]),
    ("ringkernel.ring_kernels.lifecycle", ["KernelContext", "KernelState", "RingKernel"]),
    ("ringkernel.decorators", ["kernel", "gpu_kernel", "ring_kernel", "validate_message",
                               "validate_config"]),
    ("ringkernel.exceptions", ["PyDotComputeError", "KernelNotFoundError",
                               "BufferNotAllocatedError", "MessageSerializationError",
                               "MessageDeserializationError", "InvalidConfigurationError"]),
    ("ringkernel.backends.cuda", ["CudaBackend"]),
])
def test_module_paths(path, names):
    m = importlib.import_module(path)
    for n in names:
        assert hasattr(m, n), f"{path}.{n}"


def test_validators():
    from ringkernel.decorators import validators as v
    assert v.validate_queue_size(1000) == 1000 and v.validate_grid_size(4) == (4,)
    with pytest.raises(errors.InvalidConfigurationError, match="queue_size"):
        v.validate_queue_size(0)
    with pytest.raises(errors.InvalidConfigurationError, match="block_size"):
        v.validate_block_size((64, 64))
    with pytest.raises(errors.InvalidConfigurationError, match="priority"):
        v.validate_priority(300)
    with pytest.raises(TypeError, match="dataclass"):
        v.validate_message(int)

    @dataclasses.dataclass
    class Cfg:
        kernel_id: str
        queue_size: int

    @v.validate_config(Cfg)
    def make(kernel_id, queue_size=4096):
        return kernel_id, queue_size

    assert make("k") == ("k", 4096)
    with pytest.raises(TypeError, match="queue_size"):
        make("k", "big")


def test_loop_info_and_eager_tasks():
    async def main():
        rt = rk.RingKernelRuntime()
        await rt.start()
        info = rt.get_loop_info()
        assert info["loop_class"] and "runtime_uvloop_installed" in info
        await rt.shutdown()
    asyncio.run(main())


def test_accelerator_memory_pool_orchestrator():
    acc = rk.Accelerator()
    assert acc is rk.Accelerator() and acc.device_count >= 1
    assert acc.current_device.device_type.name in ("CPU", "CUDA")
    with pytest.raises(errors.InvalidArgumentError, match="device_id"):
        acc.get_device(7)
    pool = rk.MemoryPool()
    assert pool is rk.MemoryPool() and pool.get_stats().used_bytes == 0
    with pytest.raises(errors.InvalidArgumentError, match="size_mb"):
        pool.set_limit(-1)

    @rk.kernel(name="compat_add")
    def add(a, b):
        return a + b

    async def main():
        async with rk.ComputeOrchestrator() as orch:
            cfg = rk.KernelLaunchConfig(grid_size=2, block_size=(16, 16))
            ex = await orch.launch_kernel(add, cfg, np.ones(3), 1)
            assert ex.success and ex.kernel_name == "add"  # the function's name
            assert ex.result.tolist() == [2.0, 2.0, 2.0]
            with pytest.raises(ValueError, match="not registered"):
                await orch.launch_kernel("nope", cfg)
            with pytest.raises(TypeError, match="KernelLaunchConfig"):
                await orch.launch_kernel(add, {"grid_size": 1})
    asyncio.run(main())
    with pytest.raises(errors.InvalidConfigurationError, match="block_size"):
        rk.KernelLaunchConfig(block_size=0)
    with pytest.raises(errors.InvalidConfigurationError, match="device"):
        rk.kernel(device="tpu")


def test_a_name_declared_again_with_another_layout():
    """PyDotCompute lets a later class take a message name (two modules
    with a "Request"); so does ringkernel: the later class keeps the wire
    name, gets a type id of its own, and both still travel."""
    @rk.message
    class Redecl:
        a: float
    first = Redecl

    @rk.message
    class Redecl:  # noqa: F811
        b: int
        c: str

    assert first.__rk_msgtype__.type_id != Redecl.__rk_msgtype__.type_id
    assert rk.get_message_type("Redecl") is Redecl
    assert Redecl.deserialize(Redecl(b=1, c="x").serialize()).c == "x"

    def echo(ctx):
        while not ctx.should_terminate:
            ctx.send(ctx.receive())

    with rk.RingKernelRuntime() as rt:
        rt.launch("redecl_echo", echo)
        rt.activate("redecl_echo")
        rt.send("redecl_echo", first(a=1.5))
        rt.send("redecl_echo", Redecl(b=2, c="y"))
        assert rt.receive("redecl_echo", timeout=5).a == 1.5
        assert rt.receive("redecl_echo", timeout=5).c == "y"
    with pytest.raises(errors.KernelAlreadyExistsError, match="type id"):
        @rk.message(type_id=first.__rk_msgtype__.type_id)
        class Other:
            z: int
