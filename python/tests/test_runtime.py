"""RingKernelRuntime (blocking API): Python actors in both forms, C
kernels, lifecycle, request/reply, routes, topics, telemetry, errors."""

import os
import threading

import numpy as np
import pytest

import ringkernel as rk
from ringkernel import KernelState, errors


@rk.message
class Num:
    value: int


@rk.message
class AddReq:
    a: float
    b: float


@rk.message
class AddResp:
    result: float


@rk.ring_kernel(kernel_id="py_double", input_type=Num, output_type=Num)
def py_double(ctx):
    while not ctx.should_terminate:
        m = ctx.receive()
        ctx.send(m.reply(value=m.value * 2))


@rk.ring_kernel(kernel_id="py_async_inc", input_type=Num, output_type=Num)
async def py_async_inc(ctx):
    while not ctx.should_terminate:
        m = await ctx.receive()
        await ctx.send(Num(value=m.value + 1))


@rk.ring_kernel(kernel_id="py_fail", input_type=Num, output_type=Num)
def py_fail(ctx):
    ctx.receive()
    raise RuntimeError("boom")


@rk.ring_kernel(kernel_id="py_pub", input_type=Num, output_type=Num)
def py_pub(ctx):
    while not ctx.should_terminate:
        m = ctx.receive()
        ctx.publish("numbers", Num(value=m.value))


@rk.ring_kernel(kernel_id="py_sub", input_type=Num, output_type=Num)
def py_sub(ctx):
    while not ctx.should_terminate:
        ctx.send(Num(value=-ctx.receive().value))


def start(rt, kid, **kw):
    rt.launch(kid, **kw)
    rt.activate(kid)


def test_sync_actor_round_trip_and_states():
    with rk.RingKernelRuntime() as rt:
        rt.launch("py_double")
        assert rt.get_kernel_state("py_double") is KernelState.LAUNCHED
        rt.activate("py_double")
        assert rt.get_kernel_state("py_double") is KernelState.ACTIVE
        rt.send("py_double", Num(value=21))
        out = rt.receive("py_double", timeout=10)
        assert isinstance(out, Num) and out.value == 42
        rt.terminate("py_double", timeout=10)
        assert rt.get_kernel_state("py_double") is KernelState.TERMINATED
    assert rt.closed


def test_async_actor_runs_in_the_c_runtime():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_async_inc")
        for i in range(50):
            rt.send("py_async_inc", Num(value=i))
        got = [rt.receive("py_async_inc", timeout=10).value for _ in range(50)]
        assert got == list(range(1, 51))
        t = rt.get_telemetry("py_async_inc")
        assert t["processed"] >= 49 and t["state"] == "ACTIVE"
        snap = rt.get_stats_snapshot("py_async_inc")
        assert snap["label"] == "py_async_inc"


def test_request_matches_the_correlation_id():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        rt.send("py_double", Num(value=1))  # an unrelated output first
        rep = rt.request("py_double", Num(value=5), timeout=10)
        assert rep.value == 10
        assert rt.receive("py_double", timeout=10).value == 2  # kept for us


def test_deactivate_reactivate():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        rt.deactivate("py_double")
        assert rt.get_kernel_state("py_double") is KernelState.DEACTIVATED
        rt.send("py_double", Num(value=3))  # queued while paused
        with pytest.raises(errors.QueueTimeoutError):
            rt.receive("py_double", timeout=0.05)
        rt.reactivate("py_double")
        assert rt.receive("py_double", timeout=10).value == 6
        with pytest.raises(errors.KernelStateError):
            rt.reactivate("py_double")


def test_unknown_kernel_lists_the_ones_that_exist():
    with rk.RingKernelRuntime() as rt:
        with pytest.raises(errors.KernelNotFoundError) as ei:
            rt.launch("no_such_kernel")
        e = ei.value
        assert e.name == "RK_ENOTFOUND" and "py_double" in e.detail
        assert isinstance(e, LookupError)


def test_send_to_terminated_kernel_says_so():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        rt.terminate("py_double", timeout=10)
        # PyDotCompute forgets a terminated kernel: KernelNotFoundError,
        # whose detail says what became of it.
        with pytest.raises(errors.KernelNotFoundError) as ei:
            rt.send("py_double", Num(value=1), timeout=0)
        assert "TERMINAT" in str(ei.value) and "py_double" not in rt.kernel_ids


def test_wrong_message_type_is_refused():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        with pytest.raises(errors.MessageTypeError):
            rt.send("py_double", AddReq(a=1.0, b=2.0))


def test_failing_actor_is_supervised():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_fail")
        rt.send("py_fail", Num(value=1))
        rt.wait("py_fail", timeout=10)
        assert rt.get_kernel_state("py_fail") is KernelState.FAILED
        assert rt.get_telemetry("py_fail")["errors"] == 1
        dl = rt.dead_letter(timeout=5)
        assert dl is not None and dl["kernel_id"] == "py_fail"


def test_launch_with_a_plain_function():
    def tripler(ctx):
        while not ctx.should_terminate:
            m = ctx.receive()
            ctx.send(Num(value=m.value * 3))

    with rk.RingKernelRuntime() as rt:
        start(rt, "tripler", kernel_func=tripler, input_type=Num, output_type=Num,
              queue_size=8, backpressure="reject")
        rt.send("tripler", Num(value=3))
        assert rt.receive("tripler", timeout=10).value == 9
        # queue_size and backpressure reach the C kernel config: paused, it
        # queues 8 and refuses the 9th.
        rt.deactivate("tripler")
        for i in range(8):
            rt.send("tripler", Num(value=i), timeout=0)
        with pytest.raises(errors.MessageRejectedError):
            rt.send("tripler", Num(value=8), timeout=0)
        rt.reactivate("tripler")
        assert [rt.receive("tripler", timeout=10).value for _ in range(8)] == [3 * i for i in range(8)]


def test_topics():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_pub")
        start(rt, "py_sub")
        rt.subscribe("py_sub", "numbers")
        rt.send("py_pub", Num(value=4))
        assert rt.receive("py_sub", timeout=10).value == -4
        assert rt.publish("numbers", Num(value=9)) == 1
        assert rt.receive("py_sub", timeout=10).value == -9


def test_c_kernel_by_id(c_kernels):
    with rk.RingKernelRuntime() as rt:
        start(rt, "c_echo", output_type=Num)
        rt.send("c_echo", Num(value=77))
        assert rt.receive("c_echo", timeout=10).value == 77
        rep = rt.request("c_echo", Num(value=8), timeout=10)
        assert rep.value == 8


def test_c_kernel_fixed_layout(c_kernels):
    assert AddReq.dtype.itemsize == 16
    with rk.RingKernelRuntime() as rt:
        start(rt, "c_add")
        rt.send_fixed("c_add", AddReq(a=1.5, b=2.0))
        out = rt.receive("c_add", timeout=10, message_type=AddResp)
        assert out.result == 3.5


def test_python_actor_to_c_kernel_route(c_kernels):
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        start(rt, "c_echo", output_type=Num)
        rt.connect("py_double", "c_echo")
        rt.send("py_double", Num(value=10))
        assert rt.receive("c_echo", timeout=10).value == 20


def test_send_batch_of_fixed_records(c_kernels):
    with rk.RingKernelRuntime() as rt:
        start(rt, "c_sink")
        recs = AddReq.records(1000)
        recs["a"] = np.arange(1000)
        assert rt.send_batch("c_sink", recs, message_type=AddReq) == 1000
        rt.terminate("c_sink", timeout=10)  # drains the queue first
        assert rt.get_telemetry("c_sink")["processed"] == 1000


def test_blocking_receive_releases_the_gil():
    # The sender thread needs the GIL to send; if receive held it, the
    # receive would time out instead.
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        t = threading.Thread(target=rt.send, args=("py_double", Num(value=2)))
        t.start()
        assert rt.receive("py_double", timeout=30).value == 4
        t.join()


def test_terminate_waits_without_the_gil():
    # A Python actor needs the GIL to finish; terminate must not hold it.
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        rt.terminate("py_double", timeout=30)
        assert rt.get_kernel_state("py_double") is KernelState.TERMINATED


def test_closed_runtime_and_stale_context():
    holder = {}

    def keep(ctx):
        holder["ctx"] = ctx
        while not ctx.should_terminate:
            ctx.receive()

    from ringkernel.runtime import BlockingView

    rt = rk.RingKernelRuntime()
    b = BlockingView(rt)
    start(b, "keeper", kernel_func=keep, input_type=Num)
    b.send("keeper", Num(value=1))
    b.terminate("keeper", timeout=10)
    b.close()
    with pytest.raises(errors.ClosedError, match="closed"):
        b.send("keeper", Num(value=1))
    with pytest.raises(errors.ClosedError, match="ended"):
        holder["ctx"].receive()
    b.close()  # idempotent


def test_forked_child_gets_a_clear_error():
    rt = rk.BlockingRuntime()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            rt.get_kernel_state("x")
            msg = b"no error"
        except errors.RingKernelError as e:
            msg = str(e).encode()
        except BaseException as e:  # noqa: BLE001
            msg = repr(e).encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    out = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    rt.close()
    assert "another process" in out


def test_pydotcompute_bytes_through_a_kernel_and_back():
    from pydotcompute import message as pdc_message

    @pdc_message
    class Num:  # PyDotCompute's own class, same wire name as ours
        value: int

    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        ours = globals()["Num"]
        # PyDotCompute's serialize() straight into a ringkernel kernel...
        rt.send("py_double", Num(value=21).serialize(), type_id=ours.__rk_msgtype__.type_id)
        # ...and what the kernel sends back, decoded by PyDotCompute.
        data, hdr = rt.receive_raw("py_double", timeout=10)
        back = Num.deserialize(data)
        assert back.value == 42 and hdr["type_id"] == ours.__rk_msgtype__.type_id


def test_quickstart_prints_the_seeds_result():
    import subprocess
    import sys
    from pathlib import Path

    qs = Path(__file__).resolve().parents[2] / "examples" / "python" / "quickstart.py"
    src = qs.read_text()
    assert "from ringkernel import RingKernelRuntime, ring_kernel, message" in src
    ours = subprocess.run([sys.executable, str(qs)], capture_output=True, text=True, timeout=60)
    seeds = subprocess.run([sys.executable, "-c", src.replace("from ringkernel", "from pydotcompute")],
                           capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == seeds.stdout == "Result: 6.0\n"


@rk.ring_kernel(kernel_id="py_fast_double", input_type=Num, output_type=Num)
def py_fast_double(ctx):
    m = ctx.receive()
    while True:  # ends by ClosedError when terminated
        m = ctx.send_and_receive(m.reply(value=m.value * 2))


def test_actor_send_and_receive_loop():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_fast_double")
        for i in range(20):
            assert rt.send_and_receive("py_fast_double", Num(value=i), timeout=10).value == 2 * i
        assert rt.request("py_fast_double", Num(value=4), timeout=10).value == 8
        rt.terminate("py_fast_double", timeout=10)
        assert rt.get_kernel_state("py_fast_double") is KernelState.TERMINATED


def test_garbage_bytes_fail_the_actor_not_the_process():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        tid = Num.__rk_msgtype__.type_id
        rt.send("py_double", b"\xc1 not msgpack", type_id=tid)
        rt.wait("py_double", timeout=10)  # the actor's decode raised
        assert rt.get_kernel_state("py_double") is KernelState.FAILED
        dl = rt.dead_letter(timeout=5)
        assert dl["kernel_id"] == "py_double" and dl["payload"] == b"\xc1 not msgpack"
        with pytest.raises(errors.DecodeError):
            Num.deserialize(dl["payload"])


def test_misuse_is_an_error_not_a_crash():
    from ringkernel import _core

    raw = _core.MsgType.__new__(_core.MsgType)  # never initialised
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        with pytest.raises(TypeError):
            rt._core.send("py_double", Num(value=1), raw)
        with pytest.raises(TypeError):
            raw.encode(Num(value=1))
    with pytest.raises(errors.InvalidArgumentError):
        _core.MsgType("Bad", 7, [("x", 5, 11, 0, raw, 0)])
    seen = {}

    def closer(ctx):
        try:
            seen["rt"].close()
        except errors.RingKernelError as e:
            seen["err"] = e
        while not ctx.should_terminate:
            ctx.receive()

    with rk.RingKernelRuntime() as rt:
        seen["rt"] = rt
        start(rt, "closer", kernel_func=closer)
        rt.send("closer", b"x")  # (the actor tried close() as it started)
        rt.terminate("closer", timeout=10)
    assert seen["err"].name == "RK_EBUSY"


@rk.ring_kernel(kernel_id="py_flaky", input_type=Num, output_type=Num,
                restart="restart", max_restarts=3)
def py_flaky(ctx):
    while not ctx.should_terminate:
        m = ctx.receive()
        if m.value < 0:
            raise ValueError("negative")
        ctx.send(m)


def test_python_actor_is_restarted_by_supervision():
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_flaky")
        rt.send("py_flaky", Num(value=-1))  # fails the first instance
        rt.send("py_flaky", Num(value=5))   # handled by the restarted one
        assert rt.receive("py_flaky", timeout=10).value == 5
        t = rt.get_telemetry("py_flaky")
        assert t["restarts"] == 1 and t["errors"] == 1 and t["state"] == "ACTIVE"


@pytest.mark.parametrize("spin_us", [0, 50])
def test_actor_round_trips_with_and_without_the_gil_spin(spin_us):
    """The seeds' actor loop against a host that sends and receives, with
    the GIL hand-off spin off and on (docs/python.md): both hand every
    message over, in order, and the setting reads back."""
    prev = rk._core._gil_spin_us(spin_us)
    try:
        assert rk._core._gil_spin_us(None) == spin_us
        with rk.RingKernelRuntime() as rt:
            start(rt, "py_double")
            for i in range(300):
                rt.send("py_double", Num(value=i))
                assert rt.receive("py_double", timeout=30).value == 2 * i
    finally:
        assert rk._core._gil_spin_us(prev) == spin_us
    with pytest.raises(ValueError):
        rk._core._gil_spin_us(-1)


def test_send_takes_the_message_type_from_the_message():
    """send() with no options encodes with the message's own @message type
    (found in C from its class), bytes go raw, and a message of another
    type is still refused by the kernel's input_type."""
    with rk.RingKernelRuntime() as rt:
        start(rt, "py_double")
        rt.send("py_double", Num(value=4))
        assert rt.receive("py_double", timeout=10).value == 8
        with pytest.raises(errors.MessageTypeError):
            rt.send("py_double", AddReq(a=1.0, b=2.0))
        with pytest.raises(errors.MessageTypeError):
            rt.send("py_double", b"raw bytes")
        rt.send("py_double", Num(value=5))
        assert rt.receive("py_double", timeout=10).value == 10
