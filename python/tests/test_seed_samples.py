"""The seeds' own samples, run with only their import lines changed
(python/tests/seeds/), and the PyDotCompute-compatibility behaviours the
samples and issue 28 rely on."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import pytest

import ringkernel as rk
from ringkernel import errors

SEEDS = Path(__file__).parent / "seeds"


def run_sample(name: str, prelude: str = "") -> str:
    code = prelude + f"\nimport runpy\nrunpy.run_path({str(SEEDS / name)!r}, run_name='__main__')\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_streaming_actor_queue_size_1000():
    assert run_sample("summer.py") == "Sum: 15.0\n"


# The sample calls a compute kernel it leaves out ("simplified"): one power
# iteration of PageRank on the 3-node graph of the sample, in place.
PAGERANK_KERNEL = """
import numpy as np
from ringkernel import kernel

M = np.array([[0, 0, 0.5], [1, 0, 0.5], [0, 1, 0]], dtype=np.float32)

@kernel(name="pagerank_iteration")
def pagerank_iteration(ranks, damping):
    ranks[:] = (1 - damping) / len(ranks) + damping * (M @ ranks)
"""


def test_pagerank_actor_needs_allocate():
    """The sample uses a UnifiedBuffer it never allocated; PyDotCompute
    refuses that (BufferNotAllocatedError), and so does ringkernel. With
    the one missing ``allocate()`` call it runs (below)."""
    p = subprocess.run([sys.executable, "-c", PAGERANK_KERNEL + "\nimport runpy\nrunpy.run_path("
                        f"{str(SEEDS / 'pagerank.py')!r}, run_name='__main__')"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "BufferNotAllocatedError" in p.stderr
    assert "Call allocate() first" in p.stderr


def test_pagerank_actor():
    src = (SEEDS / "pagerank.py").read_text()
    line = "        ranks = UnifiedBuffer((num_nodes,), dtype=np.float32)\n"
    assert line in src
    fixed = Path(__import__("tempfile").mkdtemp()) / "pagerank_allocated.py"
    fixed.write_text(src.replace(line, line + "        ranks.allocate()\n"))
    code = PAGERANK_KERNEL + f"\nimport runpy\nrunpy.run_path({str(fixed)!r}, run_name='__main__')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] in ("PageRank converged: True", "PageRank converged: False")
    iters = int(out[1].split(": ")[1])
    assert 1 < iters <= 100
    ranks = eval(out[2].split(": ", 1)[1])
    # the fixed point of the same iteration, computed directly
    m = np.array([[0, 0, 0.5], [1, 0, 0.5], [0, 1, 0]])
    r = np.full(3, 1 / 3)
    for _ in range(200):
        r = 0.15 / 3 + 0.85 * (m @ r)
    assert np.allclose(ranks, r, atol=1e-4)


@rk.message
class Raw:
    values: list  # a plain list: any values, PyDotCompute's form


@rk.message
class Scaled:
    value: float = 0.0


@rk.ring_kernel(kernel_id="pipe_scale", input_type=Raw, output_type=Scaled)
async def pipe_scale(ctx):
    while not ctx.should_terminate:
        try:
            msg = await ctx.receive(timeout=0.1)
        except Exception:
            continue
        await ctx.send(Scaled(value=2.0 * sum(msg.values)))


@rk.ring_kernel(kernel_id="pipe_offset")  # untyped: decodes by type id
async def pipe_offset(ctx):
    while not ctx.should_terminate:
        try:
            msg = await ctx.receive(timeout=0.1)
        except Exception:
            continue
        await ctx.send(Scaled(value=msg.value + 10, correlation_id=msg.message_id))


def test_two_stage_pipeline_keeps_ids():
    async def main():
        async with rk.RingKernelRuntime() as rt:
            for k in ("pipe_scale", "pipe_offset"):
                await rt.launch(k)
                await rt.activate(k)
            req = Raw(values=[1, 2.5])
            await rt.send("pipe_scale", req)
            mid = await rt.receive("pipe_scale", timeout=5)
            assert isinstance(mid, Scaled) and mid.value == 7.0
            await rt.send("pipe_offset", mid)
            out = await rt.receive("pipe_offset", timeout=5)
            assert out.value == 17.0 and out.correlation_id == mid.message_id
            assert sorted(rt.kernel_ids) == ["pipe_offset", "pipe_scale"]
    asyncio.run(main())


def test_plain_with_on_an_existing_runtime_blocks():
    """Issue 27: ``rt = RingKernelRuntime(); with rt: rt.launch(...)`` used
    to return coroutines that were never awaited. Inside a plain with, the
    object's own calls are the blocking ones."""
    rt = rk.RingKernelRuntime()
    with rt:
        k = rt.launch("pipe_scale")
        assert isinstance(k, rk.RingKernel) and k.state == rk.KernelState.LAUNCHED
        rt.activate("pipe_scale")
        rt.send("pipe_scale", Raw(values=[2]))
        assert rt.receive("pipe_scale", timeout=5).value == 4.0
        assert rt.is_active and rt.kernel_ids == ["pipe_scale"]
    assert not rt.is_active and rt.closed
    with rk.RingKernelRuntime() as rt2:  # the same behaviour
        assert rt2.launch("pipe_scale").state == rk.KernelState.LAUNCHED


def test_pydotcompute_states_and_errors():
    async def main():
        rt = rk.RingKernelRuntime(enable_telemetry=False)
        assert not rt.is_active and rt.kernel_ids == []
        await rt.start()
        await rt.launch("pipe_scale")
        with pytest.raises(errors.KernelAlreadyExistsError, match="pipe_scale"):
            await rt.launch("pipe_scale")
        with pytest.raises(errors.KernelStateError, match="LAUNCHED"):
            await rt.send("pipe_scale", Raw(values=[1]))  # not activated yet
        with pytest.raises(errors.KernelNotFoundError, match="nope"):
            await rt.activate("nope")
        with pytest.raises(errors.KernelNotFoundError, match="nope"):
            await rt.terminate("nope")
        assert rt.get_telemetry("pipe_scale") is None and rt.get_all_telemetry() == {}
        assert rt.get_summary()["kernel_count"] == 1
        await rt.terminate("pipe_scale")
        assert rt.kernel_ids == []
        await rt.shutdown()
        assert not rt.is_active
    asyncio.run(main())


def test_bad_decorator_input():
    with pytest.raises(TypeError, match="must be a @message"):
        rk.ring_kernel(input_type=str)(lambda ctx: None)
    with pytest.raises(errors.InvalidConfigurationError, match="grid_size"):
        rk.ring_kernel(kernel_id="bad", grid_size=0)(lambda ctx: None)
    with pytest.raises(errors.InvalidConfigurationError, match="backend"):
        rk.ring_kernel(kernel_id="bad", backend="tpu")(lambda ctx: None)
    with pytest.raises(errors.InvalidConfigurationError, match="queue_size"):
        rk.ring_kernel(kernel_id="bad", queue_size=-1)(lambda ctx: None)


def test_telemetry_object_and_stats_dict():
    with rk.RingKernelRuntime() as rt:
        rt.launch("pipe_scale")
        rt.activate("pipe_scale")
        rt.send("pipe_scale", Raw(values=[1]))
        rt.receive("pipe_scale", timeout=5)
        # An actor's message counts as processed once it asks for the next
        # one, which may come just after its reply: wait for it (bounded).
        deadline = time.monotonic() + 10
        while (rt.get_kernel_stats("pipe_scale")["processed"] < 1
               and time.monotonic() < deadline):
            time.sleep(0.001)
        t = rt.get_telemetry("pipe_scale")
        assert isinstance(t, rk.RingKernelTelemetry) and t.kernel_id == "pipe_scale"
        assert t.messages_processed == t["processed"] and t["offered"] == 1
        assert rt.get_kernel_stats("pipe_scale")["processed"] == 1


def test_bad_input_names_the_kernel_or_field():
    with rk.RingKernelRuntime() as rt:
        rt.launch("pipe_scale")
        rt.activate("pipe_scale")
        with pytest.raises(errors.MessageTypeError, match="pipe_scale.*str"):
            rt.send("pipe_scale", "not a message")
        with pytest.raises(errors.MessageTypeError, match="pipe_scale"):
            rt.send("pipe_scale", Scaled(value=1.0))  # the kernel takes Raw
        with pytest.raises(TypeError, match="kernel id"):
            rt.send(42, Raw(values=[]))
        with pytest.raises(errors.InvalidArgumentError, match="kernel id"):
            rt.launch(42)
        with pytest.raises(errors.EncodeError, match=r"Raw\.values"):
            rt.send("pipe_scale", Raw(values=[object()]))
        with pytest.raises(errors.QueueTimeoutError):
            rt.receive("pipe_scale", timeout=0.01)

    async def main():
        async with rk.RingKernelRuntime() as art:
            await art.launch("pipe_scale")
            await art.activate("pipe_scale")
            with pytest.raises(errors.MessageTypeError, match="pipe_scale.*int"):
                await art.send("pipe_scale", 5)
    asyncio.run(main())


def test_terminated_kernel_is_not_found_and_with_then_async_with():
    rt = rk.RingKernelRuntime()
    with rt:
        rt.launch("pipe_scale")
        rt.activate("pipe_scale")
        rt.terminate("pipe_scale")
        with pytest.raises(errors.KernelNotFoundError, match="pipe_scale"):
            rt.receive("pipe_scale", timeout=0.01)

    async def main():  # after the plain with, the calls are awaitable again
        async with rt:
            k = await rt.launch("pipe_scale")
            assert k.state == rk.KernelState.LAUNCHED and rt.is_active
    asyncio.run(main())
