/*
 * rk_send_frame / rk_publish_frame: a forwarded message keeps its identity
 * (message id, correlation id, priority, type, flags), so a relay can pass
 * a request on and the reply still correlates with the original.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rt_helpers.h"

/* Replies with the envelope it saw: message id, correlation id,
 * priority, type, flags. */
typedef struct seen {
    rk_uuid id, corr;
    uint32_t type_id, flags;
    uint8_t priority;
} seen;

static int
mirror_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    seen s = { m->hdr->message_id, m->hdr->correlation_id, m->hdr->type_id,
        m->hdr->flags, m->hdr->priority };
    return rk_ctx_reply(ctx, m, 0, &s, sizeof(s));
}

static void
test_send_frame_keeps_identity(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "m", .handler = mirror_handler };
    rk_msg_header h, rh;
    rk_kernel k;
    seen s;
    size_t len;
    uint32_t payload = 7;
    (void)state;

    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "m"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "m"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "m", &k), RK_OK);
    memset(&h, 0xee, sizeof(h)); /* garbage the runtime must overwrite */
    h.message_id = rk_uuid_v7();
    h.correlation_id = rk_uuid_v7();
    h.type_id = 42;
    h.type_version = 1;
    h.priority = 201;
    h.flags = 0x40000000u;
    assert_int_equal(
        rk_send_frame(rt, k, &h, &payload, sizeof(payload), RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv(rt, k, &rh, &s, sizeof(s), &len, RT_LONG), RK_OK);
    assert_int_equal(len, sizeof(s));
    assert_memory_equal(&s.id, &h.message_id, sizeof(rk_uuid));
    assert_memory_equal(&s.corr, &h.correlation_id, sizeof(rk_uuid));
    assert_int_equal(s.type_id, 42);
    assert_int_equal(s.priority, 201);
    assert_int_equal(s.flags, 0x40000000u);
    /* The reply correlates with the forwarded id. */
    assert_memory_equal(&rh.correlation_id, &h.message_id, sizeof(rk_uuid));
    assert_int_equal(rk_send_frame(rt, k, NULL, NULL, 0, RT_LONG), RK_EINVAL);
    rk_runtime_destroy(rt);
}

static void
test_publish_frame_keeps_identity(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "m", .handler = mirror_handler };
    rk_msg_header h, rh;
    seen s;
    size_t len, n = 0;
    (void)state;

    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "m"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "m"), RK_OK);
    assert_int_equal(rk_subscribe(rt, "m", "t"), RK_OK);
    memset(&h, 0, sizeof(h));
    h.message_id = rk_uuid_v7();
    h.priority = 9;
    assert_int_equal(rk_publish_frame(rt, "t", &h, NULL, 0, RT_LONG, &n),
        RK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(
        rk_recv_id(rt, "m", &rh, &s, sizeof(s), &len, RT_LONG), RK_OK);
    assert_memory_equal(&s.id, &h.message_id, sizeof(rk_uuid));
    assert_int_equal(s.priority, 9);
    assert_int_equal(rk_publish_frame(rt, NULL, &h, NULL, 0, RT_LONG, &n),
        RK_EINVAL);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send_frame_keeps_identity),
        cmocka_unit_test(test_publish_frame_keeps_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
