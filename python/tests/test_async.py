"""The async API: receive wakes the event loop through an eventfd (no
polling), receive_stream, timeouts and cancellation."""

import asyncio

import pytest

import ringkernel as rk
from ringkernel import errors


@rk.message
class Tick:
    n: int


@rk.ring_kernel(kernel_id="aio_echo", input_type=Tick, output_type=Tick)
async def aio_echo(ctx):
    while not ctx.should_terminate:
        m = await ctx.receive()
        await ctx.send(m.reply(n=m.n))


@pytest.mark.asyncio
async def test_receive_waits_on_the_event_loop():
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        # The receive starts first, so it must wait (eventfd path), and the
        # loop must stay free to run the sender meanwhile.
        recv = asyncio.ensure_future(rt.receive("aio_echo", timeout=30))
        await asyncio.sleep(0)
        assert not recv.done()
        await rt.send("aio_echo", Tick(n=5))
        assert (await recv).n == 5
        assert rt._receivers, "the eventfd receiver was used"


@pytest.mark.asyncio
async def test_request_and_terminate_async():
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        rep = await rt.request("aio_echo", Tick(n=3), timeout=10)
        assert rep.n == 3
        await rt.terminate("aio_echo", timeout=10)
        assert rt.get_kernel_state("aio_echo") is rk.KernelState.TERMINATED


@pytest.mark.asyncio
async def test_receive_stream():
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        for i in range(20):
            await rt.send("aio_echo", Tick(n=i))
        got = []
        async for m in rt.receive_stream("aio_echo", timeout=10):
            got.append(m.n)
            if len(got) == 20:
                break
        assert got == list(range(20))


@pytest.mark.asyncio
async def test_timeout_and_cancel_lose_nothing():
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        with pytest.raises(errors.QueueTimeoutError):
            await rt.receive("aio_echo", timeout=0.05)
        waiter = asyncio.ensure_future(rt.receive("aio_echo"))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await rt.send("aio_echo", Tick(n=11))
        assert (await rt.receive("aio_echo", timeout=10)).n == 11


@pytest.mark.asyncio
async def test_concurrent_receivers_each_get_one():
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        tasks = [asyncio.ensure_future(rt.receive("aio_echo", timeout=30)) for _ in range(5)]
        await asyncio.sleep(0)
        for i in range(5):
            await rt.send("aio_echo", Tick(n=i))
        got = sorted(m.n for m in await asyncio.gather(*tasks))
        assert got == [0, 1, 2, 3, 4]


@pytest.mark.asyncio
async def test_closed_runtime_fails_pending_receive():
    rt = rk.RingKernelRuntime()
    await rt.launch("aio_echo")
    await rt.activate("aio_echo")
    pending = asyncio.ensure_future(rt.receive("aio_echo"))
    await asyncio.sleep(0)
    await rt.shutdown()
    with pytest.raises(errors.ClosedError):
        await pending


@pytest.mark.asyncio
async def test_async_send_and_receive():
    async with rk.RingKernelRuntime(async_spin_us=0) as rt:  # always the eventfd path
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        for i in range(10):
            assert (await rt.send_and_receive("aio_echo", Tick(n=i), timeout=10)).n == i
    async with rk.RingKernelRuntime() as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        for i in range(10):
            assert (await rt.send_and_receive("aio_echo", Tick(n=i), timeout=10)).n == i


def _threads() -> int:
    import os
    return len(os.listdir("/proc/self/task"))


@pytest.mark.asyncio
async def test_pending_receive_has_no_thread_and_no_wakeups():
    """An async receive waits on the kernel output's eventfd
    (rk_kernel_output_arm) in the loop's own select: no waiter thread, and
    nothing runs until output comes."""
    async with rk.RingKernelRuntime(async_spin_us=0) as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        before = _threads()
        pending = asyncio.ensure_future(rt.receive("aio_echo", timeout=30))
        await asyncio.sleep(0)
        r = next(iter(rt._receivers.values()))
        calls = []
        real = r._ready
        r._ready = lambda: (calls.append(1), real())  # counts loop wake-ups
        rt_fd = r._fd
        assert rt_fd is not None, "the eventfd is armed and watched"
        asyncio.get_running_loop().remove_reader(rt_fd)
        asyncio.get_running_loop().add_reader(rt_fd, r._ready)
        await asyncio.sleep(0.2)  # an observation window, not a synchronisation
        assert _threads() == before, "no thread was started for the receive"
        assert calls == [], "the eventfd was written with no output"
        assert not pending.done()
        await rt.send("aio_echo", Tick(n=7))
        assert (await pending).n == 7
        assert calls == [1], "one wake-up for one output"


@pytest.mark.asyncio
async def test_eventfd_pingpong_loses_no_wakeup():
    """Every receive parks on the eventfd (async_spin_us=0), racing the
    echo's reply: a lost wake-up would end in QueueTimeoutError."""
    async with rk.RingKernelRuntime(async_spin_us=0) as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        for i in range(2000):
            await rt.send("aio_echo", Tick(n=i))
            assert (await rt.receive("aio_echo", timeout=30)).n == i


@pytest.mark.asyncio
async def test_relaunch_gets_the_new_instance_eventfd():
    async with rk.RingKernelRuntime(async_spin_us=0) as rt:
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        await rt.send("aio_echo", Tick(n=1))
        assert (await rt.receive("aio_echo", timeout=30)).n == 1
        pending = asyncio.ensure_future(rt.receive("aio_echo", timeout=30))
        await asyncio.sleep(0)
        await rt.terminate("aio_echo", timeout=10)
        # The end of the instance wakes the waiting receive.
        with pytest.raises(errors.KernelTerminatedError):
            await pending
        await rt.launch("aio_echo")
        await rt.activate("aio_echo")
        await rt.send("aio_echo", Tick(n=2))
        assert (await rt.receive("aio_echo", timeout=30)).n == 2


def test_one_event_loop_per_kernel_output():
    """A kernel's output is awaited from one event loop at a time: a second
    loop that waits on it while the first does gets BusyError, and the
    first still gets its message."""
    import threading

    from ringkernel.runtime import BlockingView

    rt = rk.RingKernelRuntime(async_spin_us=0)
    blocking = BlockingView(rt)  # the blocking calls, rt's stay async
    blocking.launch("aio_echo")
    blocking.activate("aio_echo")
    started, got = threading.Event(), []

    async def first():
        task = asyncio.ensure_future(rt.receive("aio_echo", timeout=30))
        await asyncio.sleep(0)
        started.set()
        got.append((await task).n)

    t = threading.Thread(target=asyncio.run, args=(first(),))
    t.start()
    try:
        assert started.wait(30)
        with pytest.raises(errors.BusyError):
            asyncio.run(rt.receive("aio_echo", timeout=1))
        blocking.send("aio_echo", Tick(n=3))
    finally:
        t.join(30)
        rt.close()
    assert got == [3]
