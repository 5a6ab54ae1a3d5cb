/*
 * Behaviour a first-time user asked about (issue 10, "Interop and API"),
 * pinned down by tests:
 *   - a kernel may reply later, after further receives, from a copy of the
 *     request's header (rk_ctx_reply reads only req->hdr);
 *   - priority bands order what is queued at each dequeue: with batch 1 an
 *     actor gets per-message band order, and with a larger batch a SYSTEM
 *     message that arrives while a batch is being handled comes after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_fault.h"
#include "rt_helpers.h"

/* ------------------------------------------------- replying later */

/* Holds the first request (a copy of its header), answers the second,
 * then answers the first from the copy. */
static int
later_actor(rk_ctx *ctx)
{
    rk_msg_view m, first;
    rk_msg_header copy;
    char first_data[16], out[24];
    size_t first_len;
    int rc;

    for (;;) {
        if ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) != RK_OK)
            break;
        memcpy(&copy, m.hdr, sizeof(copy));
        first_len = m.len < sizeof(first_data) ? m.len : sizeof(first_data);
        memcpy(first_data, m.data, first_len);
        /* The next receive ends m's validity. */
        if ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) != RK_OK)
            break;
        out[0] = 'r';
        memcpy(out + 1, m.data, m.len < 16 ? m.len : 16);
        if ((rc = rk_ctx_reply(ctx, &m, 0, out, 1 + (m.len < 16 ? m.len : 16)))
            != RK_OK)
            return rc;
        first = (rk_msg_view) { .hdr = &copy };
        memcpy(out + 1, first_data, first_len);
        if ((rc = rk_ctx_reply(ctx, &first, 0, out, 1 + first_len)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static int
call_request_named(rt_call *c)
{
    /* c->id carries the payload (the requester's name). */
    return rk_request(c->rt, c->k, 0, c->id, strlen(c->id), &c->hdr, c->buf,
        sizeof(c->buf), &c->len, RT_LONG);
}

static void
test_reply_later_from_copied_header(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "later", .actor = later_actor };
    rt_call a, b;
    rk_kernel k;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "later"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "later"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "later", &k), RK_OK);
    for (int round = 0; round < 20; round++) {
        a = (rt_call) {
            .fn = call_request_named, .rt = rt, .k = k, .id = "alpha"
        };
        b = (rt_call) {
            .fn = call_request_named, .rt = rt, .k = k, .id = "beta"
        };
        assert_int_equal(rt_call_start(&a), 0);
        assert_int_equal(rt_call_start(&b), 0);
        /* Each requester gets the answer to its own request, whichever
         * of the two was held and answered from the copy. */
        assert_int_equal(rt_call_join(&a), RK_OK);
        assert_int_equal(rt_call_join(&b), RK_OK);
        assert_int_equal(a.len, 6);
        assert_memory_equal(a.buf, "ralpha", 6);
        assert_int_equal(b.len, 5);
        assert_memory_equal(b.buf, "rbeta", 5);
    }
    rk_runtime_destroy(rt);
}

/* ------------------------------------------ band order and batches */

#define NNORMAL 6

static rt_gate band_gate;

/* Reports each message's priority in the order it gets them; holds the
 * first at the gate. */
static int
band_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    bool first = true;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint8_t p = m.hdr->priority;
        if (first) {
            first = false;
            rt_gate_pass(&band_gate);
        }
        if ((rc = rk_ctx_send(ctx, 0, &p, 1)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

/* NNORMAL NORMAL messages are queued before the kernel runs; while it
 * handles the first, a SYSTEM one arrives. Returns the position at which
 * the SYSTEM message came out. */
static size_t
system_position(uint32_t batch)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "bands", .actor = band_actor };
    rk_kernel k;
    size_t pos = SIZE_MAX;

    rt_gate_init(&band_gate);
    def.config.priority_bands = true;
    def.config.batch = batch;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "bands"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "bands", &k), RK_OK);
    for (int i = 0; i < NNORMAL; i++)
        assert_int_equal(rk_send(rt, k, 0, "n", 1, 128, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "bands"), RK_OK);
    rt_gate_wait_for(&band_gate, 1);
    assert_int_equal(rk_send(rt, k, 0, "s", 1, 250, RT_LONG), RK_OK);
    rt_gate_open(&band_gate);
    for (size_t i = 0; i < NNORMAL + 1; i++) {
        uint8_t p = 0;
        size_t len;
        assert_int_equal(rk_recv(rt, k, NULL, &p, 1, &len, RT_LONG), RK_OK);
        if (p == 250) {
            assert_int_equal(pos, SIZE_MAX);
            pos = i;
        } else {
            assert_int_equal(p, 128);
        }
    }
    rk_runtime_destroy(rt);
    rt_gate_fini(&band_gate);
    return pos;
}

static void
test_actor_batch1_band_order(void **state)
{
    (void)state;
    /* Per-message band order: right after the message in hand. */
    assert_int_equal(system_position(1), 1);
}

static void
test_actor_batch_band_order_per_dequeue(void **state)
{
    (void)state;
    /* The default batch took all NNORMAL at once: SYSTEM comes after. */
    assert_int_equal(system_position(0), NNORMAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reply_later_from_copied_header),
        cmocka_unit_test(test_actor_batch1_band_order),
        cmocka_unit_test(test_actor_batch_band_order_per_dequeue),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
