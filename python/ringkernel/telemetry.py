"""Telemetry objects with PyDotCompute's names: RingKernelTelemetry (one
kernel's counters, from the C runtime's rk_kernel_stats) and GPUMonitor
(NVML through pynvml, when installed)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass
class RingKernelTelemetry:
    """One kernel's telemetry (PyDotCompute's fields). The counters are the
    C kernel's own; ``stats`` holds the whole rk_kernel_stats dict
    (offered, rejected, latency percentiles, CPU time...), which
    ``telemetry["name"]`` also reads."""

    kernel_id: str = ""
    messages_processed: int = 0
    messages_dropped: int = 0
    queue_depth: int = 0
    total_latency_ns: int = 0
    max_latency_ns: int = 0
    min_latency_ns: int = 0
    error_count: int = 0
    last_error: Optional[str] = None
    uptime_seconds: float = 0.0
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_stats(cls, kernel_id: str, s: dict[str, Any]) -> "RingKernelTelemetry":
        n = s.get("latency_count", 0)
        # The C runtime keeps a latency histogram, not a sum: the total is
        # the count times the median (an estimate; stats has percentiles).
        return cls(kernel_id=kernel_id, messages_processed=s.get("processed", 0),
                   messages_dropped=s.get("dropped", 0), queue_depth=s.get("queue_depth", 0),
                   total_latency_ns=n * s.get("latency_p50_ns", 0),
                   max_latency_ns=s.get("latency_max_ns", 0),
                   min_latency_ns=0, error_count=s.get("errors", 0),
                   uptime_seconds=s.get("uptime_ns", 0) / 1e9, stats=dict(s))

    @property
    def avg_latency_ns(self) -> float:
        return self.total_latency_ns / self.messages_processed if self.messages_processed else 0.0

    @property
    def avg_latency_ms(self) -> float:
        return self.avg_latency_ns / 1e6

    @property
    def throughput(self) -> float:
        """Messages per second since the kernel started."""
        return self.messages_processed / self.uptime_seconds if self.uptime_seconds else 0.0

    def __getitem__(self, key: str) -> Any:
        return self.stats[key]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.update(avg_latency_ns=self.avg_latency_ns, throughput=self.throughput)
        return d


@dataclasses.dataclass
class GPUInfo:
    """One GPU's state as NVML reports it."""

    device_index: int = 0
    name: str = "N/A"
    uuid: str = ""
    memory_total: int = 0
    memory_used: int = 0
    memory_free: int = 0
    utilization_gpu: float = 0.0
    utilization_memory: float = 0.0
    temperature: float = 0.0
    power_usage: float = 0.0
    power_limit: float = 0.0


class GPUMonitor:
    """GPU monitoring through NVML (the pynvml package, ``pip install
    ringkernel[cuda]``); ``is_available`` is False without it or a GPU."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._device_count = 0
        try:
            import pynvml
            pynvml.nvmlInit()
            self._device_count = pynvml.nvmlDeviceGetCount()
            self._nvml = pynvml
        except Exception:  # no pynvml, no driver, no GPU
            self._nvml = None

    @property
    def is_available(self) -> bool:
        return self._nvml is not None and self._device_count > 0

    @property
    def device_count(self) -> int:
        return self._device_count

    def get_gpu_info(self, device_index: int = 0) -> GPUInfo:
        if not self.is_available:
            return GPUInfo(device_index=device_index)
        nv = self._nvml
        try:
            h = nv.nvmlDeviceGetHandleByIndex(device_index)
            name = nv.nvmlDeviceGetName(h)
            uid = nv.nvmlDeviceGetUUID(h)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            util = nv.nvmlDeviceGetUtilizationRates(h)
            info = GPUInfo(device_index=device_index,
                           name=name.decode() if isinstance(name, bytes) else name,
                           uuid=uid.decode() if isinstance(uid, bytes) else uid,
                           memory_total=mem.total, memory_used=mem.used, memory_free=mem.free,
                           utilization_gpu=util.gpu / 100.0, utilization_memory=util.memory / 100.0)
            try:
                info.temperature = float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
                info.power_usage = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
                info.power_limit = nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
            except Exception:
                pass
            return info
        except Exception:
            return GPUInfo(device_index=device_index)

    def get_all_gpu_info(self) -> list[GPUInfo]:
        return [self.get_gpu_info(i) for i in range(self._device_count)]
