"""Queue capacities that are not powers of two (issue 27, item 1): the
seeds' ``queue_size=1000`` works, the queue holds exactly that many
messages (the next meets the backpressure policy), and telemetry reports
the capacity asked for."""

import pytest

import ringkernel as rk
from ringkernel import errors


@rk.message
class Num:
    value: int


@rk.ring_kernel(kernel_id="py_cap1000", input_type=Num, output_type=Num,
                queue_size=1000, backpressure="reject")
def py_cap1000(ctx):
    while not ctx.should_terminate:
        m = ctx.receive()
        ctx.send(Num(value=m.value + 1))


def test_queue_size_1000_holds_exactly_1000():
    # accept_before_activate: sends to a launched kernel queue up before
    # it is activated (ringkernel's option; PyDotCompute refuses them).
    with rk.RingKernelRuntime(accept_before_activate=True) as rt:
        # Launched, not active: the kernel takes nothing, its input fills.
        rt.launch("py_cap1000")
        for i in range(1000):
            rt.send("py_cap1000", Num(value=i), timeout=0)
        with pytest.raises(errors.MessageRejectedError):
            rt.send("py_cap1000", Num(value=1000), timeout=0)
        st = rt.get_telemetry("py_cap1000")
        assert st["queue_capacity"] == 1000
        assert st["output_capacity"] == 1000
        assert st["queue_depth"] == 1000
        assert st["rejected"] == 1
        # The 1000 outputs fit the output queue of 1000 too.
        rt.activate("py_cap1000")
        assert [rt.receive("py_cap1000", timeout=10).value
                for _ in range(1000)] == list(range(1, 1001))


@pytest.mark.parametrize("cap", [1, 3, 10])
def test_input_queue_size_any_value(cap):
    def echo(ctx):
        while not ctx.should_terminate:
            ctx.send(ctx.receive())

    # accept_before_activate: sends to a launched kernel queue up before
    # it is activated (ringkernel's option; PyDotCompute refuses them).
    with rk.RingKernelRuntime(accept_before_activate=True) as rt:
        rt.launch("echo_cap", kernel_func=echo, input_type=Num,
                  output_type=Num, input_queue_size=cap,
                  backpressure="drop_new")
        for i in range(cap):
            rt.send("echo_cap", Num(value=i), timeout=0)
        with pytest.raises(errors.MessageDroppedError):
            rt.send("echo_cap", Num(value=cap), timeout=0)
        assert rt.get_telemetry("echo_cap")["queue_capacity"] == cap
        rt.activate("echo_cap")
        assert [rt.receive("echo_cap", timeout=10).value
                for _ in range(cap)] == list(range(cap))
