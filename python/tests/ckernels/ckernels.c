/*
 * ckernels.c - C kernels the Python tests and benchmarks load at run time
 * (ringkernel.load_library): a user's C kernel library, built against the
 * package's headers and libringkernel (see docs/python.md).
 */
#include <string.h>

#include "ringkernel/ringkernel.h"

/* c_echo: answers every message with the same bytes, correlated. */
static int
c_echo(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
}
RK_RING_HANDLER(c_echo, "c_echo", .max_payload = 4096);

/* c_sink: takes messages and sends nothing (one-way throughput). */
static int
c_sink(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}
RK_RING_HANDLER(c_sink, "c_sink", .max_payload = 256, .input_capacity = 65536);

/* c_add: the fixed form of { double a, b } in, { double result } out. */
typedef struct add_req {
    double a, b;
} add_req;

static int
c_add(rk_ctx *ctx, const rk_msg_view *m)
{
    add_req r;
    double out;
    if (m->len != sizeof(r))
        return RK_EINVAL;
    memcpy(&r, m->data, sizeof(r));
    out = r.a + r.b;
    return rk_ctx_reply(ctx, m, 0, &out, sizeof(out));
}
RK_RING_HANDLER(c_add, "c_add");

/* c_gpu_echo: c_echo with a device twin, for the cuda backend. Under the
 * runtime's default backend ("auto") a kernel with device code runs on
 * cuda where a GPU (or, in the tests, the stand-in driver) is usable: the
 * runtime compiles this source with NVRTC and runs it as a persistent
 * kernel; elsewhere the host handler runs. The source is the same as
 * rk_echo in tests/kernels/test_kernels.cu, whose host build the stand-in
 * driver runs. */
static const char c_gpu_echo_src[]
    = "RK_DEV_HANDLER(echo_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);\n"
      "}\n"
      "RK_DEV_KERNEL(rk_echo, echo_h)\n";

static int
c_gpu_echo(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
}
RK_RING_HANDLER(c_gpu_echo, "c_gpu_echo", .max_payload = 128,
    .device_source = c_gpu_echo_src, .device_entry = "rk_echo",
    .device_source_name = "c_gpu_echo.cu");
