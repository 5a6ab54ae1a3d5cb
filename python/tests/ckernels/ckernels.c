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
