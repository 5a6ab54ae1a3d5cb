from ..compute import (Accelerator, DeviceProperties, DeviceType, cuda_available,  # noqa: F401
                       get_accelerator, metal_available)
