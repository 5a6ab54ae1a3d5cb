"""ringkernel.jupyter: the telemetry dashboard's widget model follows the
kernels while they run.

The widgets talk to a recording comm (what a notebook frontend would
receive), so the test waits on the "update" messages the dashboard's
background refresh sends, with a bounded deadline, instead of sleeping.
"""

import asyncio
import os
import threading
import time

import pytest

import ringkernel as rk

if os.environ.get("RK_REQUIRE_JUPYTER"):  # make pytest: missing is a failure
    import comm
    import ipywidgets
else:
    ipywidgets = pytest.importorskip("ipywidgets")
    comm = pytest.importorskip("comm")

from ringkernel.jupyter import COLUMNS, KernelMetrics, TelemetryDashboard, display_telemetry

DEADLINE = 20.0  # seconds; generous for sanitizer builds and loaded CI


@rk.message
class JNum:
    value: int


@rk.ring_kernel(kernel_id="jup_echo", input_type=JNum, output_type=JNum)
def jup_echo(ctx):
    while not ctx.should_terminate:
        m = ctx.receive()
        ctx.send(m.reply(value=m.value + 1))


@rk.ring_kernel(kernel_id="jup_sink", input_type=JNum)
def jup_sink(ctx):
    while not ctx.should_terminate:
        ctx.receive()


class RecordingComm(comm.base_comm.BaseComm):
    """A comm that keeps every message a widget sends (the frontend's
    view) and wakes whoever waits for one."""

    cond = threading.Condition()
    sent = []  # (comm_id, data) of every comm message, in order

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        with RecordingComm.cond:
            RecordingComm.sent.append((self.comm_id, msg_type, data))
            RecordingComm.cond.notify_all()


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", lambda **kw: RecordingComm(**kw))
    RecordingComm.sent = []
    return RecordingComm


def frontend_value(rec, widget):
    """The last value the frontend was sent for widget (None: never)."""
    last = None
    for cid, kind, data in rec.sent:
        if cid == widget.model_id and kind == "comm_msg" and data.get("method") == "update":
            last = data["state"].get("value", last)
    return last


def wait_frontend(rec, pred, what):
    """Waits (bounded) until pred() holds; pred is re-checked whenever a
    widget sends an update."""
    with rec.cond:
        if not rec.cond.wait_for(pred, timeout=DEADLINE):
            raise AssertionError(f"the dashboard did not show {what} within {DEADLINE} s")


def test_widget_values_move_while_kernels_run(recorded):
    with rk.RingKernelRuntime() as rt:
        for k in ("jup_echo", "jup_sink"):
            rt.launch(k)
            rt.activate(k)
        dash = TelemetryDashboard(rt)
        root = dash.widget
        assert isinstance(root, ipywidgets.VBox)
        dash.start(interval=0.01)
        try:
            # Rows appear for every kernel of the runtime.
            wait_frontend(recorded, lambda: dash.refreshes >= 1 and len(dash.metrics) == 2,
                          "both kernels")
            echo = dash.cells("jup_echo")
            assert set(echo) == {"kernel_id"} | {f for f, _, _ in COLUMNS}
            assert echo["kernel_id"].value == "jup_echo"
            assert echo["state"].value == "ACTIVE"
            assert echo["processed"].get_state()["value"] == 0

            # 1. Processed and latency move as messages go through.
            n = 200
            for i in range(n):
                rt.send("jup_echo", JNum(value=i))
            for i in range(n):
                assert rt.receive("jup_echo", timeout=DEADLINE).value == i + 1
            wait_frontend(recorded, lambda: frontend_value(recorded, echo["processed"]) == n,
                          f"jup_echo processed == {n}")
            assert echo["processed"].get_state()["value"] == n  # the model itself
            assert echo["latency_p50_us"].value > 0
            assert echo["latency_p99_us"].value >= echo["latency_p50_us"].value
            assert dash.metrics["jup_echo"].latency_count > 0  # sampled, not every message

            # 2. Queue depth rises while the sink is paused, and falls back.
            sink = dash.cells("jup_sink")
            rt.deactivate("jup_sink")
            m = 50
            for i in range(m):
                rt.send("jup_sink", JNum(value=i))
            wait_frontend(recorded, lambda: frontend_value(recorded, sink["queue_depth"]) == m,
                          f"jup_sink queue depth {m}")
            assert sink["state"].value == "DEACTIVATED"
            assert sink["processed"].value == 0
            rt.reactivate("jup_sink")
            wait_frontend(recorded, lambda: frontend_value(recorded, sink["queue_depth"]) == 0
                          and frontend_value(recorded, sink["processed"]) == m,
                          "jup_sink drained")
            # Throughput is the rate over a refresh interval: it was
            # non-zero in some refresh while the queue drained or the echo
            # ran (the sent values say what the frontend saw).
            rates = [d["state"]["value"] for cid, kind, d in recorded.sent
                     if cid in (echo["throughput"].model_id, sink["throughput"].model_id)
                     and kind == "comm_msg" and "value" in d.get("state", {})]
            assert any(r > 0 for r in rates), rates
        finally:
            dash.stop()
        assert not dash.running and dash.stopped_reason == "stopped"

        # Restarted, the background refresh ends by itself when the runtime
        # closes, and says so.
        dash.start(interval=0.01)
    deadline = time.monotonic() + DEADLINE
    dash._thread.join(DEADLINE)
    assert time.monotonic() < deadline and not dash.running
    assert dash.stopped_reason == "the runtime was closed"
    assert "stopped" in dash._status.value


def test_rows_follow_kernels_launched_later(recorded):
    with rk.RingKernelRuntime() as rt:
        rt.launch("jup_echo")
        dash = TelemetryDashboard(rt)
        dash.widget
        dash.refresh()
        assert list(dash.metrics) == ["jup_echo"]
        heading = len(COLUMNS) + 1
        assert len(dash._table.children) == heading * 2
        rt.launch("jup_sink")
        dash.refresh()
        assert list(dash.metrics) == ["jup_echo", "jup_sink"]
        assert len(dash._table.children) == heading * 3
        assert dash.cells("jup_sink")["state"].value == "LAUNCHED"


def test_terminated_kernels_keep_their_row_and_a_closed_runtime_ends_it(recorded):
    # runtime.kernel_ids lists only the kernels not terminated
    # (PyDotCompute's); the dashboard keeps showing one it has seen.
    with rk.RingKernelRuntime() as rt:
        rt.launch("jup_echo")
        rt.activate("jup_echo")
        dash = TelemetryDashboard(rt)
        rt.send("jup_echo", JNum(value=1))
        assert rt.receive("jup_echo", timeout=DEADLINE).value == 2
        assert dash.refresh()["jup_echo"].state == "ACTIVE"
        rt.terminate("jup_echo")
        assert rt.kernel_ids == []
        m = dash.refresh()["jup_echo"]
        assert (m.state, m.processed) == ("TERMINATED", 1)
        rt.launch("jup_echo")  # launched again under the same id: its new figures
        m = dash.refresh()["jup_echo"]
        assert (m.state, m.processed) == ("LAUNCHED", 0)
    # Closed, the runtime lists no kernels: the dashboard says it closed
    # rather than showing an empty table.
    with pytest.raises(rk.errors.ClosedError):
        dash.refresh()


def test_selected_kernels_and_unknown_kernel(recorded):
    with rk.RingKernelRuntime() as rt:
        rt.launch("jup_echo")
        rt.launch("jup_sink")
        dash = TelemetryDashboard(rt, ["jup_sink"])
        assert list(dash.refresh()) == ["jup_sink"]
        with pytest.raises(rk.errors.KernelNotFoundError):
            TelemetryDashboard(rt, ["no_such_kernel"]).refresh()
        # display_telemetry refreshes before it returns: the error is the
        # caller's, and no thread was started.
        with pytest.raises(rk.errors.KernelNotFoundError):
            display_telemetry(rt, "no_such_kernel")


def test_stream_yields_moving_figures_and_ends_when_the_runtime_closes(recorded):
    async def main():
        rt = rk.RingKernelRuntime()
        await rt.launch("jup_echo")
        await rt.activate("jup_echo")
        dash = TelemetryDashboard(rt)
        seen = []
        async for metrics in dash.stream(interval=0.001):
            km = metrics["jup_echo"]
            assert isinstance(km, KernelMetrics)
            seen.append(km.processed)
            if len(seen) <= 3:
                await rt.send("jup_echo", JNum(value=len(seen)))
                await rt.receive("jup_echo", timeout=DEADLINE)
            else:
                await rt.shutdown()  # the stream ends at its next refresh
        return dash, seen

    dash, seen = asyncio.run(asyncio.wait_for(main(), DEADLINE))
    # Each receive above came after the actor processed that message, so
    # every refresh after one saw it.
    assert seen[0] == 0 and seen[1] >= 1 and seen[2] >= 2 and seen[3] == 3, seen
    assert dash.stopped_reason == "the runtime was closed"


def test_widget_needs_ipywidgets_only(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_widgets(name, *a, **kw):
        if name == "ipywidgets":
            raise ImportError("no ipywidgets here")
        return real(name, *a, **kw)

    with rk.RingKernelRuntime() as rt:
        rt.launch("jup_echo")
        dash = TelemetryDashboard(rt)
        monkeypatch.setattr(builtins, "__import__", no_widgets)
        assert dash.refresh()["jup_echo"].state == "LAUNCHED"  # figures still work
        with pytest.raises(ImportError, match=r"ringkernel\[jupyter\]"):
            dash.widget
