from ..telemetry import GPUInfo, GPUMonitor, RingKernelTelemetry  # noqa: F401
