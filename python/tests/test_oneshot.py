"""One-shot kernels from Python (ringkernel.kernel / gpu_kernel over CUDA C,
RawKernel) on the cpu backend: the host fallback, launches run and
started, ctx.execute_kernel from an actor, and every refusal. The cuda
backend's side runs under the stand-in driver in test_cuda_python.py."""

import asyncio
import threading

import numpy as np
import pytest

import ringkernel as rk
from ringkernel.compute import get_kernel_registry
from ringkernel.oneshot import _pack

SRC = "RK_DEV_ONESHOT(rk_os_vadd, os_vadd)\n"  # never compiled here: no GPU


def vadd_host(x, y, z, n):
    z.host[:n] = x.host[:n] + y.host[:n]


def buffers(n=16):
    x = rk.UnifiedBuffer((n,), np.uint32).allocate()
    x.copy_from(np.arange(n))
    y = rk.UnifiedBuffer((n,), np.uint32).allocate()
    y.copy_from(np.arange(n) * 10)
    z = rk.UnifiedBuffer((n,), np.uint32).allocate()
    return x, y, z


def test_kernel_over_source_runs_its_host_fallback_on_cpu():
    k = rk.kernel(source=SRC, name="vadd_cpu", device="cpu")(vadd_host)
    assert isinstance(k, rk.RawKernel)
    assert k.backend == "cpu" and k.name == "vadd_cpu" and k.__name__ == "vadd_host"
    x, y, z = buffers()
    k(1, 64, (x, y, z, np.uint32(16)))
    assert (z.host == np.arange(16) * 11).all()
    # the C launch made the host side the current one
    assert get_kernel_registry().get("vadd_cpu") is k


def test_gpu_kernel_is_the_same_over_source():
    k = rk.gpu_kernel(source=SRC, name="vadd_gpu_alias")(vadd_host)
    assert isinstance(k, rk.RawKernel) and k.backend == "cpu"
    x, y, z = buffers()
    k.launch((1, 1, 1), (32,), [x, y, z, 16])
    assert (z.host == np.arange(16) * 11).all()


def test_started_launch_is_waited_for_and_awaited():
    seen = []
    release = threading.Event()

    def slow(x, tag):
        assert release.wait(10)  # the launch is started before this runs to its end
        seen.append((threading.get_ident(), tag))
        x.host[0] = 7

    k = rk.RawKernel(None, "slow", host=slow)
    x = rk.UnifiedBuffer((4,), np.int32).zeros()
    launch = k.start(1, 1, (x, 1))
    assert not launch.done
    with pytest.raises(rk.QueueTimeoutError):
        launch.wait(0)
    release.set()
    launch.wait(10)
    assert launch.done and x.host[0] == 7
    assert seen[0][0] != threading.get_ident()  # it ran on the launch's thread
    launch.wait()  # the result stays

    async def main():
        await k.start(1, 1, (x, 2))

    asyncio.run(main())
    assert seen[-1][1] == 2
    # a launch dropped unwaited still runs, and leaves nothing behind
    from ringkernel.oneshot import _pending
    k.start(1, 1, (x, 3))
    assert seen[-1][1] == 3 and not _pending


def test_host_fallback_exception_reaches_the_caller():
    def bad(x):
        raise ValueError("fallback broke")

    k = rk.RawKernel(None, "bad_fallback", host=bad)
    x = rk.UnifiedBuffer((4,), np.int32).zeros()
    with pytest.raises(ValueError, match="fallback broke"):
        k(1, 1, (x,))
    launch = k.start(1, 1, (x,))
    with pytest.raises(ValueError, match="fallback broke"):
        launch.wait(10)
    with pytest.raises(ValueError, match="fallback broke"):
        launch.wait(10)  # the same outcome again


def test_source_without_fallback_is_refused_on_cpu_naming_the_kernel():
    with pytest.raises(rk.NotSupportedError) as e:
        rk.kernel(SRC, name="no_fallback", device="cpu")
    assert "no_fallback" in str(e.value) and "no host fallback" in str(e.value)
    with pytest.raises(rk.RingKernelError) as e2:  # auto: no backend runs it here
        rk.gpu_kernel(SRC, name="no_fallback2")
    assert "no_fallback2" in str(e2.value)
    assert get_kernel_registry().get("no_fallback") is None


def test_bad_definitions_and_launches():
    with pytest.raises(rk.InvalidConfigurationError, match="name= is needed"):
        rk.kernel(SRC)
    with pytest.raises(rk.InvalidConfigurationError, match="device"):
        rk.RawKernel(SRC, "k", device="tpu")
    with pytest.raises(rk.InvalidArgumentError, match="neither CUDA C source nor"):
        rk.RawKernel(None, "nothing")
    with pytest.raises(TypeError, match="function"):
        rk.RawKernel(None, "k", host=3)
    k = rk.RawKernel(None, "sizes", host=lambda *a: None)
    with pytest.raises(rk.InvalidArgumentError, match="'sizes': grid 0"):
        k(0, 1)
    with pytest.raises(rk.InvalidArgumentError, match="'sizes': grid 1 x block 2048"):
        k(1, 2048)
    with pytest.raises(rk.InvalidArgumentError, match="other dimensions are 1"):
        k((2, 2), 1)
    with pytest.raises(rk.InvalidArgumentError, match="'sizes': block must be an int >= 1"):
        k(1, -32)
    with pytest.raises(TypeError, match="argument 0 is a dict"):
        k(1, 1, ({},))
    many = [rk.UnifiedBuffer((1,), np.int32).zeros() for _ in range(9)]
    with pytest.raises(rk.InvalidArgumentError, match="'sizes': 9 buffers \\(at most 8\\)"):
        k(1, 1, many)
    with pytest.raises(rk.BufferNotAllocatedError):
        k(1, 1, (rk.UnifiedBuffer((4,), np.int32),))


def test_buffer_in_a_started_launch_cannot_be_freed():
    release = threading.Event()
    k = rk.RawKernel(None, "holder", host=lambda b: release.wait(10) and None)
    b = rk.UnifiedBuffer((4,), np.int32).zeros()
    core = b._buf()
    launch = k.start(1, 1, (b,))
    with pytest.raises(rk.BusyError, match="launch"):
        core.free()
    release.set()
    launch.wait(10)
    del launch
    core.free()  # no longer used


def test_arguments_pack_as_a_c_struct():
    b = rk.UnifiedBuffer((4,), np.float32).zeros()
    p = _pack("k", (np.uint8(1), b, np.float32(2.5), 3, True, 1.5, b"ab"), True)
    # u8 @0, f32 @4, i64 @8, bool @16, f64 @24, 2 bytes @32; size 40 (align 8)
    raw = p.finish()
    assert len(raw) == 40 and len(p.bufs) == 1
    assert raw[0] == 1
    assert np.frombuffer(raw[4:8], np.float32)[0] == 2.5
    assert np.frombuffer(raw[8:16], np.int64)[0] == 3
    assert raw[16] == 1
    assert np.frombuffer(raw[24:32], np.float64)[0] == 1.5
    assert raw[32:34] == b"ab"


def test_orchestrator_launches_a_raw_kernel():
    k = rk.RawKernel(None, "orch_vadd", host=vadd_host)
    x, y, z = buffers()

    async def main():
        async with rk.ComputeOrchestrator() as o:
            ex = await o.launch_kernel(k, rk.KernelLaunchConfig(grid_size=1, block_size=32),
                                       x, y, z, 16)
            assert ex.success

    asyncio.run(main())
    assert (z.host == np.arange(16) * 11).all()


@rk.message
class Job:
    n: int
    start: bool


@rk.message
class Done:
    total: int


def test_execute_kernel_from_an_actor_run_and_started():
    threads = []

    def fill(buf, value):
        threads.append(threading.get_ident())
        buf.host[:] = value

    rk.RawKernel(None, "fill_from_actor", host=fill)
    buf = rk.UnifiedBuffer((8,), np.int64).zeros()

    @rk.ring_kernel(kernel_id="oneshot_actor", input_type=Job, output_type=Done,
                    auto_register=False)
    def actor(ctx):
        while not ctx.should_terminate:
            m = ctx.receive()
            if m.start:
                launch = ctx.execute_kernel("fill_from_actor", [buf, m.n], wait=False)
                launch.wait(10)
            else:
                assert ctx.execute_kernel("fill_from_actor", (buf, m.n)) is None
            ctx.send(Done(total=int(buf.host.sum())))

    with rk.RingKernelRuntime() as rt:
        rt.launch("oneshot_actor", actor, input_type=Job, output_type=Done)
        rt.activate("oneshot_actor")
        rt.send("oneshot_actor", Job(n=2, start=False))
        assert rt.receive("oneshot_actor", timeout=10).total == 16
        rt.send("oneshot_actor", Job(n=3, start=True))
        assert rt.receive("oneshot_actor", timeout=10).total == 24
        rt.terminate("oneshot_actor")
    assert len(threads) == 2 and threads[0] != threads[1]


def test_async_actor_awaits_a_started_kernel_and_errors_name_it():
    def inc(b):
        b.host[:] += 1

    rk.RawKernel(None, "inc_async", host=inc)
    buf = rk.UnifiedBuffer((4,), np.int64).zeros()
    errors = []

    @rk.ring_kernel(kernel_id="oneshot_async", input_type=Job, output_type=Done,
                    auto_register=False)
    async def actor(ctx):
        while not ctx.should_terminate:
            m = await ctx.receive()
            await ctx.execute_kernel("inc_async", (buf,))
            await (await ctx.execute_kernel("inc_async", (buf,), wait=False))
            try:
                await ctx.execute_kernel("no_such_oneshot", ())
            except rk.KernelNotFoundError as e:
                errors.append(str(e))
            await ctx.send(Done(total=int(buf.host[0]) + m.n))

    with rk.RingKernelRuntime() as rt:
        rt.launch("oneshot_async", actor, input_type=Job, output_type=Done)
        rt.activate("oneshot_async")
        rt.send("oneshot_async", Job(n=100, start=False))
        assert rt.receive("oneshot_async", timeout=10).total == 102
        rt.terminate("oneshot_async")
    assert "no_such_oneshot" in errors[0]


def test_device_actor_source_must_be_cuda_c_text():
    with pytest.raises(TypeError, match="'dev_bad': device_source must be a str"):
        rk.ring_kernel(kernel_id="dev_bad", device_source=b"RK_DEV_KERNEL",
                       auto_register=False)(lambda ctx: None)
