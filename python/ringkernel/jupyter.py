"""Live kernel telemetry in Jupyter: the seeds' ``display_telemetry`` and
``TelemetryDashboard``.

::

    from ringkernel.jupyter import TelemetryDashboard, display_telemetry

    display_telemetry(runtime, "my_kernel", refresh_rate=1.0)  # a live view

    dashboard = TelemetryDashboard(runtime)     # every kernel of the runtime
    display(dashboard.widget)                   # an ipywidgets tree
    async for metrics in dashboard.stream(interval=0.5):
        ...                                     # widget updated each time

Every figure is the C runtime's own (``rk_kernel_stats``): processed,
queue depth, latency percentiles (send timestamp to start of processing),
errors, drops; ``throughput`` is messages processed per second over the
last refresh interval (the first sample uses the kernel's average since
its activation). A :class:`TelemetryDashboard` works without ipywidgets
(``sample``, ``refresh``, ``stream``); only ``widget`` needs it
(``pip install ringkernel[jupyter]``).

Updates: ``refresh()`` samples once and updates the widget; ``stream()``
refreshes every ``interval`` seconds on the event loop; ``start()`` does the
same on a background thread (what ``display_telemetry`` uses, so the view
keeps moving while the notebook's cell runs blocking code). Every path
stops by itself when the runtime closes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional, Sequence

from .errors import ClosedError, KernelNotFoundError, RingKernelError, error

if TYPE_CHECKING:
    from .runtime import BlockingRuntime

__all__ = ["KernelMetrics", "TelemetryDashboard", "display_telemetry", "COLUMNS"]


@dataclasses.dataclass(frozen=True)
class KernelMetrics:
    """One kernel's figures at one refresh."""

    kernel_id: str
    state: str
    processed: int
    offered: int
    #: messages processed per second over the last refresh interval
    throughput: float
    #: messages processed per second of uptime (the C runtime's average)
    avg_throughput: float
    queue_depth: int
    queue_high_water: int
    latency_p50_us: float
    latency_p99_us: float
    latency_p999_us: float
    latency_max_us: float
    latency_count: int
    errors: int
    #: dropped + rejected by backpressure
    dropped: int
    restarts: int
    #: time.monotonic() of the sample
    time: float

    @classmethod
    def from_stats(cls, kernel_id: str, s: dict[str, Any], throughput: float,
                   now: float) -> KernelMetrics:
        """From a ``get_kernel_stats`` dict (``rk_kernel_stats``)."""
        us = 1e-3
        return cls(
            kernel_id=kernel_id, state=str(s["state"]), processed=int(s["processed"]),
            offered=int(s["offered"]), throughput=throughput,
            avg_throughput=float(s["throughput"]), queue_depth=int(s["queue_depth"]),
            queue_high_water=int(s["queue_high_water"]),
            latency_p50_us=s["latency_p50_ns"] * us, latency_p99_us=s["latency_p99_ns"] * us,
            latency_p999_us=s["latency_p999_ns"] * us, latency_max_us=s["latency_max_ns"] * us,
            latency_count=int(s["latency_count"]), errors=int(s["errors"]),
            dropped=int(s["dropped"]) + int(s["rejected"]), restarts=int(s["restarts"]),
            time=now)


#: The dashboard's columns after the kernel id: (KernelMetrics field,
#: heading, is_float).
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("state", "state", False),
    ("processed", "processed", False),
    ("throughput", "msgs/s", True),
    ("queue_depth", "queue", False),
    ("latency_p50_us", "p50 us", True),
    ("latency_p99_us", "p99 us", True),
    ("latency_p999_us", "p99.9 us", True),
    ("errors", "errors", False),
    ("dropped", "dropped", False),
)


def _widgets() -> Any:
    try:
        import ipywidgets
    except ImportError as e:  # the [jupyter] extra
        raise ImportError("TelemetryDashboard.widget needs ipywidgets: "
                          "pip install 'ringkernel[jupyter]'") from e
    return ipywidgets


def _display(obj: object) -> None:
    from IPython.display import display
    display(obj)  # type: ignore[no-untyped-call]  # IPython's is unannotated


class TelemetryDashboard:
    """Every kernel's telemetry (or the given kernels'), as a live
    ipywidgets table (``widget``) and as an async stream of
    :class:`KernelMetrics` (``stream``).

    kernel_ids: the kernels to show; None shows every kernel launched
    through the runtime, including those launched after the dashboard was
    made (rows appear at the next refresh) and those terminated since a
    refresh saw them (``runtime.kernel_ids`` lists only the running ones).
    """

    def __init__(self, runtime: BlockingRuntime, kernel_ids: Optional[Sequence[str]] = None):
        self._rt = runtime
        self._ids: Optional[list[str]] = list(kernel_ids) if kernel_ids is not None else None
        self._lock = threading.Lock()  # one refresh at a time (thread and loop)
        self._prev: dict[str, tuple[float, int]] = {}
        self._widget: Any = None
        self._table: Any = None
        self._status: Any = None
        self._cells: dict[str, dict[str, Any]] = {}
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        #: the last refresh's figures, by kernel id
        self.metrics: dict[str, KernelMetrics] = {}
        #: refreshes done (each one updates the widget when it exists)
        self.refreshes = 0
        #: why updates ended (the runtime closed, an error), or None
        self.stopped_reason: Optional[str] = None

    # ------------------------------------------------------------ figures
    @property
    def kernel_ids(self) -> list[str]:
        """The kernels shown now."""
        if self._ids is not None:
            return list(self._ids)
        # The runtime lists the kernels not terminated; one a refresh has
        # seen stays (its row then shows TERMINATED and its final figures).
        live = self._rt.kernel_ids
        return list(self._prev) + [k for k in live if k not in self._prev]

    def sample(self) -> dict[str, KernelMetrics]:
        """Reads every shown kernel's telemetry now (no widget update).
        ClosedError once the runtime is closed; KernelNotFoundError for a
        kernel_ids entry the runtime does not know."""
        out: dict[str, KernelMetrics] = {}
        # A closed runtime has no kernels (kernel_ids is empty once it
        # closes): say so, rather than show an empty table forever.
        if self._rt.closed:
            raise error("RK_ECLOSED", "telemetry: the runtime was closed")
        gone = set(self._prev).difference(self._rt.kernel_ids) if self._ids is None else set()
        for kid in self.kernel_ids:
            # The C runtime's rk_kernel_stats, straight from the extension
            # (the same dict as BlockingRuntime.get_kernel_stats; get_telemetry
            # wraps it in a RingKernelTelemetry, or is None with telemetry off).
            try:
                s = self._rt._core.stats(kid)
            except KernelNotFoundError:
                if kid in gone:
                    continue  # terminated, and no longer known to the C runtime
                raise
            now = time.monotonic()
            processed = int(s["processed"])
            prev = self._prev.get(kid)
            if prev is None or now <= prev[0] or processed < prev[1]:
                rate = float(s["throughput"])  # first sample, or relaunched
            else:
                rate = (processed - prev[1]) / (now - prev[0])
            self._prev[kid] = (now, processed)
            out[kid] = KernelMetrics.from_stats(kid, s, rate, now)
        return out

    def refresh(self) -> dict[str, KernelMetrics]:
        """Samples every kernel and updates the widget (when it has been
        made); returns the figures, also kept in ``metrics``."""
        with self._lock:
            m = self.sample()
            self.metrics = m
            self.refreshes += 1
            if self._widget is not None:
                self._update_widget(m)
            return m

    # ------------------------------------------------------------- widget
    @property
    def widget(self) -> Any:
        """The dashboard as an ipywidgets ``VBox``: a status line and a grid
        with one row per kernel (``Label`` for id and state, disabled
        ``IntText`` / ``FloatText`` for the figures, so each value is a
        widget model's ``value``)."""
        with self._lock:
            if self._widget is None:
                w = _widgets()
                self._status = w.HTML(value="<b>ringkernel telemetry</b>: waiting for the first refresh")
                self._table = w.GridBox(layout=w.Layout(
                    grid_template_columns=f"minmax(8em, max-content) repeat({len(COLUMNS)}, 7.5em)",
                    grid_gap="2px 6px"))
                self._widget = w.VBox([self._status, self._table])
                if self.metrics:
                    self._update_widget(self.metrics)
            return self._widget

    def cells(self, kernel_id: str) -> dict[str, Any]:
        """The widgets of one kernel's row, by KernelMetrics field name
        (plus "kernel_id"); a row exists once a refresh has seen the
        kernel after the widget was made."""
        with self._lock:
            return dict(self._cells[kernel_id])

    def _header(self, w: Any) -> list[Any]:
        return [w.HTML(value="<b>kernel</b>")] + [
            w.HTML(value=f"<b>{title}</b>") for _, title, _ in COLUMNS]

    def _update_widget(self, m: dict[str, KernelMetrics]) -> None:
        w = _widgets()
        grew = False
        for kid in m:
            if kid not in self._cells:
                row: dict[str, Any] = {"kernel_id": w.Label(value=kid)}
                for field, _, is_float in COLUMNS:
                    if field == "state":
                        row[field] = w.Label(value="")
                    elif is_float:
                        row[field] = w.FloatText(value=0.0, disabled=True,
                                                 layout=w.Layout(width="7.5em"))
                    else:
                        row[field] = w.IntText(value=0, disabled=True,
                                               layout=w.Layout(width="7.5em"))
                self._cells[kid] = row
                grew = True
        for kid, km in m.items():
            row = self._cells[kid]
            for field, _, is_float in COLUMNS:
                v = getattr(km, field)
                row[field].value = round(v, 1) if is_float else v
        if grew:
            children = self._header(w)
            for row in self._cells.values():
                children.append(row["kernel_id"])
                children.extend(row[f] for f, _, _ in COLUMNS)
            self._table.children = tuple(children)
        total = sum(km.throughput for km in m.values())
        self._status.value = (
            f"<b>ringkernel telemetry</b>: {len(m)} kernel(s), "
            f"{total:,.0f} msgs/s in all, refresh {self.refreshes} at "
            f"{time.strftime('%H:%M:%S')}")

    def _ended(self, reason: str) -> None:
        with self._lock:
            self.stopped_reason = reason
            if self._status is not None:
                self._status.value = f"<b>ringkernel telemetry</b>: stopped ({reason})"

    def show(self) -> None:
        """Displays the widget in the notebook (IPython's display)."""
        _display(self.widget)

    def _ipython_display_(self) -> None:
        _display(self.widget)

    # ------------------------------------------------------------ updates
    async def stream(self, interval: float = 0.5) -> AsyncIterator[dict[str, KernelMetrics]]:
        """Refreshes (updating the widget) every interval seconds and yields
        the figures, until the runtime closes (or the loop breaks)."""
        while True:
            try:
                m = self.refresh()
            except ClosedError:
                self._ended("the runtime was closed")
                return
            yield m
            await asyncio.sleep(interval)

    def start(self, interval: float = 1.0) -> None:
        """Refreshes every interval seconds on a background thread (a daemon)
        until stop() or the runtime closes. The widget keeps moving while
        the notebook runs blocking code."""
        if interval <= 0:
            raise ValueError("interval must be positive")
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.stopped_reason = None
        self._thread = threading.Thread(target=self._run, args=(interval,),
                                        name="ringkernel-telemetry", daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while True:
            try:
                self.refresh()
            except ClosedError:
                self._ended("the runtime was closed")
                return
            except RingKernelError as e:
                self._ended(f"{e.name}: {e.detail or e.message}")
                return
            if self._stop.wait(interval):  # paces the refreshes; stop() ends it
                self._ended("stopped")
                return

    def stop(self, timeout: Optional[float] = 5.0) -> None:
        """Ends the background refreshes (and waits for the thread)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    @property
    def running(self) -> bool:
        """True while the background thread refreshes."""
        return self._thread is not None and self._thread.is_alive()

    def __repr__(self) -> str:
        return (f"<TelemetryDashboard kernels={self.kernel_ids} refreshes={self.refreshes}"
                f"{' running' if self.running else ''}>")


def display_telemetry(runtime: BlockingRuntime, kernel_id: Optional[str] = None,
                      refresh_rate: float = 1.0) -> TelemetryDashboard:
    """Displays a live telemetry view of one kernel (every kernel of the
    runtime when kernel_id is None) in the notebook, refreshed every
    refresh_rate seconds on a background thread until the runtime closes
    or ``.stop()`` is called on the dashboard it returns. The first
    refresh happens before it returns (an unknown kernel_id raises
    KernelNotFoundError here)."""
    dash = TelemetryDashboard(runtime, None if kernel_id is None else [kernel_id])
    dash.refresh()
    _display(dash.widget)
    dash.start(refresh_rate)
    return dash
