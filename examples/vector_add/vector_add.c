/*
 * vector_add - the smallest useful ring kernel: a persistent actor that adds
 * two float vectors and replies.
 *
 * The kernel is declared statically with RK_RING_HANDLER (the C form of a
 * @ring_kernel decorator), so rk_runtime_create() registers it. It takes two
 * kinds of request:
 *
 *   VectorAddRequest  small vectors by value: a msgpack map with two float
 *                     arrays (the PyDotCompute wire format); the reply
 *                     carries the sum the same way.
 *   VectorAddBuffers  large vectors by reference: a fixed-layout message
 *                     with three rk_buffer handles and a length. The kernel
 *                     reads a and b through their device side and writes c
 *                     there; the host then reads c back, and each buffer's
 *                     state machine decides what actually gets copied.
 *
 * The host drives it with rk_request() (the reply is matched by correlation
 * id), checks every element bit for bit against a host computation, and
 * prints the buffer states, transfer counters and the kernel's telemetry.
 * Exit status 0 means every check passed.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define INLINE_MAX  64 /* longest vector sent by value */
#define MAX_PAYLOAD 1024
#define TIMEOUT_NS  (10 * INT64_C(1000000000))

/* ------------------------------------------------------ message types */

#define ADD_REQ_FIELDS(X)                                                     \
    X(a, RK_VLA(RK_FLOAT, INLINE_MAX))                                        \
    X(b, RK_VLA(RK_FLOAT, INLINE_MAX))
#define ADD_RESP_FIELDS(X)                                                    \
    X(status, RK_INT32)                                                       \
    X(c, RK_VLA(RK_FLOAT, INLINE_MAX))
/* Buffer handles travel as integers: they are only meaningful inside this
 * process, exactly like device addresses would be on one GPU. */
#define ADD_BUF_FIELDS(X)                                                     \
    X(a, RK_UINT64)                                                           \
    X(b, RK_UINT64)                                                           \
    X(c, RK_UINT64)                                                           \
    X(n, RK_UINT64)
#define ADD_DONE_FIELDS(X)                                                    \
    X(status, RK_INT32)                                                       \
    X(n, RK_UINT64)

RK_MSGTYPE_DECLARE(add_req, ADD_REQ_FIELDS);
RK_MSGTYPE_DEFINE(add_req, "VectorAddRequest", 1001, ADD_REQ_FIELDS);
RK_MSGTYPE_DECLARE(add_resp, ADD_RESP_FIELDS);
RK_MSGTYPE_DEFINE(add_resp, "VectorAddResponse", 1002, ADD_RESP_FIELDS);
RK_MSGTYPE_DECLARE(add_buf, ADD_BUF_FIELDS);
RK_MSGTYPE_DEFINE(add_buf, "VectorAddBuffers", 1003, ADD_BUF_FIELDS);
RK_MSGTYPE_DECLARE(add_done, ADD_DONE_FIELDS);
RK_MSGTYPE_DEFINE(add_done, "VectorAddDone", 1004, ADD_DONE_FIELDS);

/* ----------------------------------------------------------- the kernel */

static int
reply_inline(rk_ctx *ctx, const rk_msg_view *m, const add_resp *resp)
{
    char out[MAX_PAYLOAD];
    size_t len;
    int rc;

    rc = rk_msg_encode(&add_resp_msgtype, NULL, resp, out, sizeof(out), &len);
    if (rc != RK_OK)
        return rc;
    return rk_ctx_reply(ctx, m, add_resp_msgtype.id, out, len);
}

static int
add_by_value(rk_ctx *ctx, const rk_msg_view *m)
{
    add_req req;
    add_resp resp = { 0 };
    float c[INLINE_MAX];
    int rc;

    /* A malformed request gets an error reply; it is the sender's
     * problem, not a reason to fail the kernel. */
    resp.status = rk_msg_decode(
        &add_req_msgtype, m->data, m->len, &req, NULL, RK_MSG_STRICT);
    if (resp.status == RK_OK && req.a.len != req.b.len)
        resp.status = RK_EINVAL;
    if (resp.status == RK_OK) {
        for (uint32_t i = 0; i < req.a.len; i++)
            c[i] = req.a.ptr[i] + req.b.ptr[i];
        resp.c.ptr = c;
        resp.c.len = req.a.len;
    }
    rk_msg_free(&add_req_msgtype, &req);
    rc = reply_inline(ctx, m, &resp);
    return rc;
}

/* Checks that h names an f32 buffer of n elements. */
static rk_buffer *
as_vector(uint64_t h, uint64_t n)
{
    rk_buffer *b = (rk_buffer *)(uintptr_t)h;

    if (b == NULL || rk_buffer_dtype(b) != RK_DTYPE_F32
        || rk_buffer_count(b) != n)
        return NULL;
    return b;
}

static int
add_by_reference(rk_ctx *ctx, const rk_msg_view *m)
{
    add_buf req;
    add_done done = { 0 };
    rk_buffer *a, *b, *c;
    void *pa, *pb, *pc;

    done.status = rk_msg_fixed_read(&add_buf_msgtype, m->data, m->len, &req);
    if (done.status == RK_OK) {
        a = as_vector(req.a, req.n);
        b = as_vector(req.b, req.n);
        c = as_vector(req.c, req.n);
        if (a == NULL || b == NULL || c == NULL)
            done.status = RK_EINVAL;
    }
    /* The kernel works on the device side of each buffer: a and b are
     * read (copied over only if the host copy is newer), c is overwritten
     * entirely, so nothing is copied into it first. */
    if (done.status == RK_OK
        && (done.status = rk_buffer_device(a, RK_ACCESS_READ, &pa)) == RK_OK
        && (done.status = rk_buffer_device(b, RK_ACCESS_READ, &pb)) == RK_OK
        && (done.status = rk_buffer_device(c, RK_ACCESS_DISCARD, &pc))
            == RK_OK) {
        const float *x = pa, *y = pb;
        float *z = pc;
        for (uint64_t i = 0; i < req.n; i++)
            z[i] = x[i] + y[i];
        done.n = req.n;
    }
    return rk_ctx_reply(ctx, m, add_done_msgtype.id, &done, sizeof(done));
}

static int
vector_add(rk_ctx *ctx, const rk_msg_view *m)
{
    if (m->hdr->type_id == add_req_msgtype.id)
        return add_by_value(ctx, m);
    if (m->hdr->type_id == add_buf_msgtype.id)
        return add_by_reference(ctx, m);
    return RK_ETYPE; /* dead-lettered; supervision restarts the kernel */
}

RK_RING_HANDLER(vector_add, "vector_add", .max_payload = MAX_PAYLOAD,
    .supervision = { .policy = RK_SUPERVISE_RESTART });

/* ------------------------------------------------------------- the host */

/* Deterministic inputs: splitmix64 mapped to floats in [-1000, 1000). */
static uint64_t
splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void
fill_random(float *v, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((double)(splitmix64(seed) >> 11) * 0x1.0p-53 * 2000.0
            - 1000.0);
}

/* Counts elements of got that differ in any bit from a[i] + b[i]. */
static size_t
count_mismatches(const float *a, const float *b, const float *got, size_t n)
{
    size_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&want, &got[i], sizeof(want)) != 0)
            bad++;
    }
    return bad;
}

/* One by-value request of n elements (n may differ between a and b to
 * exercise the error reply). Returns the number of failed checks. */
static int
request_inline(
    rk_runtime *rt, rk_kernel k, uint32_t na, uint32_t nb, uint64_t *seed)
{
    float a[INLINE_MAX], b[INLINE_MAX];
    char req_buf[MAX_PAYLOAD], resp_buf[MAX_PAYLOAD];
    add_req req = { { a, na }, { b, nb } };
    add_resp resp;
    rk_msg_header h;
    size_t len, rlen;
    int rc, want = na == nb ? RK_OK : RK_EINVAL;

    fill_random(a, na, seed);
    fill_random(b, nb, seed);
    if ((rc = rk_msg_encode(
             &add_req_msgtype, NULL, &req, req_buf, sizeof(req_buf), &len))
            != RK_OK
        || (rc = rk_request(rt, k, add_req_msgtype.id, req_buf, len, &h,
                resp_buf, sizeof(resp_buf), &rlen, TIMEOUT_NS))
            != RK_OK
        || (rc = rk_msg_decode(
                &add_resp_msgtype, resp_buf, rlen, &resp, NULL, 0))
            != RK_OK) {
        printf(
            "  by value n=%u: %s (%s)\n", na, rk_strerror(rc), rk_errdetail());
        return 1;
    }
    size_t bad = resp.c.len == (want == RK_OK ? na : 0)
        ? count_mismatches(a, b, resp.c.ptr, resp.c.len)
        : na + 1;
    printf("  by value     n=%2u+%-2u %3zu-byte request  status %-9s "
           "mismatches %zu\n",
        na, nb, len, rk_err_name(resp.status), bad);
    rc = resp.status != want || bad != 0 || h.type_id != add_resp_msgtype.id;
    rk_msg_free(&add_resp_msgtype, &resp);
    return rc;
}

/* The state history of the three buffers, printed after both rounds. */
typedef struct trace {
    char text[3][256];
} trace;

static void
trace_states(trace *t, rk_buffer *const bufs[3])
{
    for (int i = 0; i < 3; i++) {
        size_t used = strlen(t->text[i]);
        snprintf(t->text[i] + used, sizeof(t->text[i]) - used, "%s%s",
            used ? " -> " : "",
            rk_buffer_state_name(rk_buffer_get_state(bufs[i])));
    }
}

static void
print_buffer(const char *name, const rk_buffer *b, const char *history)
{
    rk_buffer_stats st;

    rk_buffer_stats_get(b, &st);
    printf("    %s: h2d %" PRIu64 " (%" PRIu64 " B) d2h %" PRIu64 " (%" PRIu64
           " B) avoided %" PRIu64 "\n",
        name, st.h2d_transfers, st.h2d_bytes, st.d2h_transfers, st.d2h_bytes,
        st.transfers_avoided);
    if (history != NULL)
        printf("       %s\n", history);
}

/* Sends the three handles, waits for the reply and checks c. */
static int
add_buffers(rk_runtime *rt, rk_kernel k, rk_buffer *bufs[3], const float *a,
    const float *b, size_t n, trace *t)
{
    add_buf req
        = { (uintptr_t)bufs[0], (uintptr_t)bufs[1], (uintptr_t)bufs[2], n };
    add_done done;
    size_t len;
    void *pc;
    int rc;

    /* The buffers are not thread-safe: the host leaves them alone until
     * the reply says the kernel is done with them. The queue hand-off
     * orders the kernel's writes before our reads. */
    rc = rk_request(rt, k, add_buf_msgtype.id, &req, sizeof(req), NULL, &done,
        sizeof(done), &len, TIMEOUT_NS);
    if (rc == RK_OK)
        rc = done.status;
    if (rc == RK_OK) {
        trace_states(t, bufs); /* as the kernel left them */
        rc = rk_buffer_host(bufs[2], RK_ACCESS_READ, &pc);
        trace_states(t, bufs); /* after the host read c back */
    }
    if (rc != RK_OK) {
        printf("  by reference n=%zu: %s\n", n, rk_strerror(rc));
        return 1;
    }
    size_t bad = count_mismatches(a, b, pc, n);
    printf("  by reference n=%-7zu status %-9s mismatches %zu\n", n,
        rk_err_name(done.status), bad);
    return bad != 0 || done.n != n;
}

/* Two rounds on the same three buffers: the second changes only a, so
 * only a is copied to the device again. */
static int
request_buffers(
    rk_runtime *rt, rk_kernel k, size_t n, bool show_states, uint64_t *seed)
{
    rk_buffer_config cfg = { .dtype = RK_DTYPE_F32, .dims = { n } };
    rk_buffer *bufs[3] = { NULL, NULL, NULL };
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    trace t = { { "", "", "" } };
    void *pa;
    int fails = 0;

    if (a == NULL || b == NULL)
        goto oom;
    for (int i = 0; i < 3; i++)
        if (rk_buffer_create(&bufs[i], &cfg) != RK_OK)
            goto oom;
    fill_random(a, n, seed);
    fill_random(b, n, seed);
    if (rk_buffer_copy_from(bufs[0], a, n * sizeof(float)) != RK_OK
        || rk_buffer_copy_from(bufs[1], b, n * sizeof(float)) != RK_OK)
        goto oom;
    trace_states(&t, bufs);
    fails += add_buffers(rt, k, bufs, a, b, n, &t);
    /* Round two: the host rewrites a in place. */
    if (rk_buffer_host(bufs[0], RK_ACCESS_WRITE, &pa) != RK_OK)
        goto oom;
    fill_random(a, n, seed);
    memcpy(pa, a, n * sizeof(float));
    trace_states(&t, bufs);
    fails += add_buffers(rt, k, bufs, a, b, n, &t);
    if (show_states)
        printf("    states after: host wrote a,b | kernel | host read c | "
               "host rewrote a | kernel | host read c\n");
    for (int i = 0; i < 3; i++)
        print_buffer((const char *[]) { "a", "b", "c" }[i], bufs[i],
            show_states ? t.text[i] : NULL);
    /* The lazy sync must have moved exactly what changed. */
    {
        rk_buffer_stats sa, sb, sc;
        rk_buffer_stats_get(bufs[0], &sa);
        rk_buffer_stats_get(bufs[1], &sb);
        rk_buffer_stats_get(bufs[2], &sc);
        if (sa.h2d_transfers != 2 || sb.h2d_transfers != 1
            || sc.d2h_transfers != 2 || sc.h2d_transfers != 0
            || rk_buffer_get_state(bufs[2]) != RK_BUFFER_SYNCHRONIZED) {
            printf("    unexpected transfer counts\n");
            fails++;
        }
    }
    goto out;
oom:
    printf(
        "  by reference n=%zu: allocation failed (%s)\n", n, rk_errdetail());
    fails++;
out:
    for (int i = 0; i < 3; i++)
        rk_buffer_destroy(bufs[i]);
    free(a);
    free(b);
    return fails;
}

int
main(void)
{
    static const uint32_t inline_sizes[] = { 1, 7, 33, INLINE_MAX };
    static const size_t buffer_sizes[] = { 1000, 100000, 1u << 20 };
    uint64_t seed = 42;
    rk_runtime *rt = NULL;
    rk_kernel k;
    int rc, fails = 0;

    if ((rc = rk_runtime_create(&rt, NULL)) != RK_OK
        || (rc = rk_kernel_launch(rt, "vector_add")) != RK_OK
        || (rc = rk_kernel_activate(rt, "vector_add")) != RK_OK
        || (rc = rk_kernel_lookup(rt, "vector_add", &k)) != RK_OK) {
        fprintf(stderr, "vector_add: start: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        rk_runtime_destroy(rt);
        return 2;
    }
    printf("vector_add: small vectors by value (msgpack)\n");
    for (size_t i = 0; i < sizeof(inline_sizes) / sizeof(*inline_sizes); i++)
        fails
            += request_inline(rt, k, inline_sizes[i], inline_sizes[i], &seed);
    /* Mismatched lengths must come back as an error reply. */
    fails += request_inline(rt, k, 5, 4, &seed);

    printf("vector_add: large vectors by reference (unified buffers)\n");
    for (size_t i = 0; i < sizeof(buffer_sizes) / sizeof(*buffer_sizes); i++)
        fails += request_buffers(rt, k, buffer_sizes[i], i == 0, &seed);

    printf("telemetry:\n");
    {
        /* The runtime's telemetry snapshot, in the telemetry layer's
         * text form. */
        rk_stats st;
        if (rk_kernel_telemetry(rt, "vector_add", &st) == RK_OK)
            rk_stats_print(stdout, &st, 0);
    }
    rc = rk_kernel_terminate(rt, "vector_add", TIMEOUT_NS);
    if (rc != RK_OK) {
        printf("terminate: %s\n", rk_strerror(rc));
        fails++;
    }
    rk_runtime_destroy(rt);
    printf(
        "vector_add: %s (%d failed checks)\n", fails ? "FAILED" : "OK", fails);
    return fails ? 1 : 0;
}
