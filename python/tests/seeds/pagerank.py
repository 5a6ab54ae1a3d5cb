"""
PyDotCompute Ring Kernel Example: PageRank Actor
(the analysis document's appendix A.1, with only the imports changed)
"""
import asyncio
from dataclasses import dataclass, field
from typing import List
from uuid import UUID, uuid4

from ringkernel import RingKernelRuntime, ring_kernel, message, UnifiedBuffer
from ringkernel.backends.cuda import CudaBackend
import numpy as np

# Message definitions
@message
class PageRankRequest:
    graph_edges: List[tuple[int, int]]
    damping: float = 0.85
    iterations: int = 100

@message
class PageRankResponse:
    ranks: List[float]
    converged: bool
    iterations_run: int

# Ring Kernel actor
@ring_kernel(
    kernel_id="pagerank",
    input_type=PageRankRequest,
    output_type=PageRankResponse,
    backend=CudaBackend,
    queue_size=256,
)
async def pagerank_actor(ctx):
    """
    Persistent PageRank computation actor.
    Receives graph data, computes PageRank on GPU, returns results.
    """
    while not ctx.should_terminate:
        request = await ctx.receive()

        # Convert to GPU-friendly format
        num_nodes = max(max(e) for e in request.graph_edges) + 1

        # Allocate unified buffers
        ranks = UnifiedBuffer((num_nodes,), dtype=np.float32)
        ranks.host[:] = 1.0 / num_nodes
        await ranks.ensure_on_device()

        # Run PageRank iterations on GPU
        converged = False
        for i in range(request.iterations):
            old_ranks = ranks.device.copy()

            # GPU kernel execution (simplified)
            await ctx.execute_kernel(
                'pagerank_iteration',
                args=[ranks.device, request.damping],
            )

            # Check convergence
            diff = float(abs(ranks.device - old_ranks).max())
            if diff < 1e-6:
                converged = True
                break

        # Send response
        await ranks.ensure_on_host()
        response = PageRankResponse(
            ranks=ranks.host.tolist(),
            converged=converged,
            iterations_run=i + 1,
        )
        await ctx.send(response)

# Usage
async def main():
    async with RingKernelRuntime() as runtime:
        # Launch PageRank actor
        await runtime.launch("pagerank")
        await runtime.activate("pagerank")

        # Send graph for processing
        edges = [(0, 1), (1, 2), (2, 0), (2, 1)]
        request = PageRankRequest(graph_edges=edges)

        await runtime.send("pagerank", request)
        response = await runtime.receive("pagerank", timeout=10.0)

        print(f"PageRank converged: {response.converged}")
        print(f"Iterations: {response.iterations_run}")
        print(f"Ranks: {response.ranks}")

if __name__ == "__main__":
    asyncio.run(main())
