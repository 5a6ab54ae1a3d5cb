from ..compute import ComputeOrchestrator, KernelExecution, KernelLaunchConfig  # noqa: F401
