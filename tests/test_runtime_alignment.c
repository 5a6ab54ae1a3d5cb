/*
 * Queue slots are laid out at the header's alignment whatever max_payload
 * is (issue 10, defect 7). With max_payload = 3 a single-producer lane
 * handed out headers at odd addresses: the actor's and handler's alignment
 * checks fail, and UBSan reports the misaligned typed read of
 * hdr->send_ns. The fix is the queue rework's (slot strides rounded up to
 * 64 bytes in the lane and the output ring).
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

/* Replies, per message, 1 if its header is at the header's alignment and
 * 0 if not. Reading hdr->send_ns through a misaligned pointer is what
 * UBSan reports. */
static int
align_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        unsigned char ok = ((uintptr_t)m.hdr % _Alignof(rk_msg_header)) == 0;
        volatile uint64_t sink = m.hdr->send_ns; /* the typed read */
        (void)sink;
        if ((rc = rk_ctx_reply(ctx, &m, 0, &ok, 1)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static int
align_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    unsigned char ok = ((uintptr_t)m->hdr % _Alignof(rk_msg_header)) == 0;
    volatile uint64_t sink = m->hdr->send_ns;
    (void)sink;
    return rk_ctx_reply(ctx, m, 0, &ok, 1);
}

static void
align_case(bool handler, bool single_producer)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "odd" };
    unsigned char three[3 * 16];
    rk_msg_header hdr;
    rk_kernel k;
    size_t sent = 0, n = 0;

    if (handler)
        def.handler = align_handler;
    else
        def.actor = align_actor;
    def.config.max_payload = 3;
    def.config.batch = 8;
    def.config.input_capacity = 64;
    def.config.output_capacity = 64;
    def.config.single_producer = single_producer;
    memset(three, 7, sizeof(three));
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "odd"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "odd"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "odd", &k), RK_OK);
    /* A batch lays 16 frames out back to back; then single sends. */
    assert_int_equal(
        rk_send_batch(rt, k, 0, three, 3, 16, 128, RT_LONG, &sent), RK_OK);
    assert_int_equal(sent, 16);
    for (int i = 0; i < 5; i++)
        assert_int_equal(rk_send(rt, k, 0, three, 3, 128, RT_LONG), RK_OK);
    for (n = 0; n < 21; n++) {
        unsigned char ok = 0;
        size_t len = 0;
        assert_int_equal(rk_recv(rt, k, &hdr, &ok, 1, &len, RT_LONG), RK_OK);
        assert_int_equal(len, 1);
        if (!ok)
            fail_msg("message %zu reached the %s at a misaligned header", n,
                handler ? "handler" : "actor");
    }
    /* A request reads its reply's header in the output ring. */
    {
        unsigned char ok = 0;
        size_t len = 0;
        assert_int_equal(
            rk_request(rt, k, 0, three, 3, &hdr, &ok, 1, &len, RT_LONG),
            RK_OK);
        assert_int_equal(ok, 1);
    }
    rk_runtime_destroy(rt);
}

static void
test_headers_aligned_actor_lane(void **state)
{
    (void)state;
    align_case(false, true);
}

static void
test_headers_aligned_handler_lane(void **state)
{
    (void)state;
    align_case(true, true);
}

static void
test_headers_aligned_actor_mqueue(void **state)
{
    (void)state;
    align_case(false, false);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_aligned_actor_lane),
        cmocka_unit_test(test_headers_aligned_handler_lane),
        cmocka_unit_test(test_headers_aligned_actor_mqueue),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
