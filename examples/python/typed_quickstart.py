"""The quick start, typed: what `mypy --strict` checks (make mypy).

@message classes deriving from TypedMessage are dataclasses for the
checker, with the envelope (message_id, reply(), ...) typed; contexts and
the runtime are annotated; receive() returns the decoded message, which
the annotation on the receiving variable types.
"""

import asyncio

from ringkernel import AsyncKernelContext, RingKernelRuntime, TypedMessage, message, ring_kernel


@message
class ComputeRequest(TypedMessage):
    values: list[float]


@message
class ComputeResponse(TypedMessage):
    result: float


@ring_kernel(kernel_id="typed_compute", input_type=ComputeRequest, output_type=ComputeResponse)
async def compute_actor(ctx: AsyncKernelContext) -> None:
    while not ctx.should_terminate:
        msg: ComputeRequest = await ctx.receive()
        await ctx.send(msg.reply(response_class=ComputeResponse, result=sum(msg.values)))


async def main() -> float:
    async with RingKernelRuntime() as runtime:
        await runtime.launch("typed_compute")
        await runtime.activate("typed_compute")
        await runtime.send("typed_compute", ComputeRequest(values=[1.0, 2.0, 3.0]))
        response: ComputeResponse = await runtime.receive("typed_compute", timeout=10)
        return response.result


if __name__ == "__main__":
    print(f"Result: {asyncio.run(main())}")  # 6.0
