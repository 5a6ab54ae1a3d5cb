/*
 * quickstart - the seeds' first example in C: a "compute" ring kernel sums
 * the values of each request and sends the result back.
 *
 * The README quotes this file; CI builds and runs it (test_examples_run).
 */
#include <stdio.h>

#include "ringkernel/ringkernel.h"

/* Message types, declared once: the struct, its descriptor, msgpack and
 * the fixed layout all come from these field lists. */
#define REQUEST_FIELDS(X)  X(n, RK_UINT32) X(values, RK_ARRAY(RK_DOUBLE, 8))
#define RESPONSE_FIELDS(X) X(result, RK_DOUBLE)
RK_MSGTYPE_DECLARE(compute_request, REQUEST_FIELDS);
RK_MSGTYPE_DEFINE(compute_request, "ComputeRequest", 1, REQUEST_FIELDS);
RK_MSGTYPE_DECLARE(compute_response, RESPONSE_FIELDS);
RK_MSGTYPE_DEFINE(compute_response, "ComputeResponse", 2, RESPONSE_FIELDS);

/* The actor: a persistent loop, as in the seeds' @ring_kernel. */
static int
compute_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while (!rk_should_terminate(ctx)) {
        rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER);
        if (rc != RK_OK)
            return rc == RK_ECLOSED ? RK_OK : rc; /* closed at terminate */
        const compute_request *req = m.data;
        compute_response out = { 0 };
        for (uint32_t i = 0; i < req->n && i < 8; i++)
            out.result += req->values[i];
        if ((rc = rk_ctx_send(ctx, compute_response_msgtype.id, &out,
                 sizeof(out))))
            return rc;
    }
    return RK_OK;
}

RK_RING_KERNEL(compute_actor, "compute",
    .input_type = &compute_request_msgtype,
    .output_type = &compute_response_msgtype);

int
main(void)
{
    rk_runtime *rt;
    compute_request req = { .n = 3, .values = { 1.0, 2.0, 3.0 } };
    compute_response resp;
    rk_msg_header hdr;
    size_t len;
    int rc;

    if ((rc = rk_runtime_create(&rt, NULL)) != RK_OK
        || (rc = rk_kernel_launch(rt, "compute")) != RK_OK    /* phase 1 */
        || (rc = rk_kernel_activate(rt, "compute")) != RK_OK  /* phase 2 */
        || (rc = rk_send_id(rt, "compute", compute_request_msgtype.id, &req,
                sizeof(req), 128, RK_WAIT_FOREVER)) != RK_OK
        || (rc = rk_recv_id(rt, "compute", &hdr, &resp, sizeof(resp), &len,
                5000000000)) != RK_OK) {
        fprintf(stderr, "quickstart: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        return 1;
    }
    printf("Result: %.1f\n", resp.result); /* 6.0 */
    rk_runtime_destroy(rt); /* terminates every kernel gracefully */
    return resp.result == 6.0 ? 0 : 1;
}
