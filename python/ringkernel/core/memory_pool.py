from ..compute import (MemoryPool, PoolStatistics, configure_memory_pool,  # noqa: F401
                       get_memory_pool)
