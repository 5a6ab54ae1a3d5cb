/*
 * API items of issue 10 ("Interop and API, as a first-time user met them")
 * and issue 9's output-type check:
 *   - rk_request_opts: a request with its own priority (and type and
 *     timeout); the kernel sees that priority and the reply keeps it;
 *   - every send refusal's detail names the operation, the kernel and its
 *     state (docs/runtime.md promises it; sends left the operation out);
 *   - rk_ctx_send, rk_ctx_reply and routed sends check the kernel's
 *     declared output_type, as rk_send checks input_type (RK_ETYPE).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "msg_test_types.h"
#include "ringkernel/ringkernel.h"
#include "rt_fault.h"
#include "rt_helpers.h"

/* Until rk_request_opts exists, the test fails by saying so rather than
 * breaking the build (a weak reference is NULL when nothing defines it). */
#pragma weak rk_request_opts

/* Replies with the priority the request arrived with. */
static int
prio_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint8_t p = m.hdr->priority;
        if ((rc = rk_ctx_reply(ctx, &m, 0, &p, 1)) != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static void
test_request_opts_priority(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "prio", .actor = prio_actor };
    rk_request_options opts = RK_REQUEST_OPTIONS_INIT;
    rk_msg_header hdr;
    rk_kernel k;
    uint8_t seen = 0;
    size_t len = 0;

    (void)state;
    if (rk_request_opts == NULL)
        fail_msg("rk_request_opts is not implemented");
    def.config.priority_bands = true;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "prio"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "prio"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "prio", &k), RK_OK);

    /* The defaults: priority 128, as rk_request. */
    assert_int_equal(opts.priority, RK_MSG_PRIORITY_DEFAULT);
    assert_int_equal(
        rk_request_opts(rt, k, NULL, "a", 1, &hdr, &seen, 1, &len), RK_OK);
    assert_int_equal(seen, RK_MSG_PRIORITY_DEFAULT);
    assert_int_equal(hdr.priority, RK_MSG_PRIORITY_DEFAULT);
    /* A SYSTEM-band request, and a LOW one. */
    for (int p = 0; p <= 255; p += 85) {
        opts.priority = (uint8_t)(p == 255 ? 240 : p);
        opts.timeout_ns = RT_LONG;
        seen = 0;
        assert_int_equal(
            rk_request_opts(rt, k, &opts, "a", 1, &hdr, &seen, 1, &len),
            RK_OK);
        assert_int_equal(seen, opts.priority);
        assert_int_equal(hdr.priority, opts.priority);
    }
    rk_runtime_destroy(rt);
}

/* ------------------------------------------- refusals name the operation */

static void
expect_refusal(int rc, int want, const char *op, const char *state)
{
    const char *d = rk_errdetail();

    if (rc != want)
        fail_msg("%s gave %s, want %s (%s)", op, rk_err_name(rc),
            rk_err_name(want), d);
    if (strstr(d, op) == NULL || strstr(d, "'target'") == NULL
        || (state != NULL && strstr(d, state) == NULL))
        fail_msg("the detail of a refused %s does not name the operation, "
                 "the kernel and its state (%s): '%s'",
            op, state ? state : "-", d);
}

static void
test_send_refusals_name_operation(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "target", .actor = rt_echo_actor };
    char buf[8];
    size_t len, n;
    rk_kernel k;

    (void)state;
    def.config.when_inactive = RK_INACTIVE_REJECT;
    def.config.max_payload = 8;
    def.config.input_type = &rkt_point_msgtype;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_subscribe(rt, "target", "topic"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "target", &k), RK_OK);
    /* CREATED */
    expect_refusal(rk_send(rt, k, rkt_point_msgtype.id, "x", 1, 128, 0),
        RK_ENOTLAUNCHED, "send", "not been launched");
    assert_int_equal(rk_kernel_launch(rt, "target"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "target", &k), RK_OK);
    /* LAUNCHED, when_inactive REJECT */
    expect_refusal(rk_send(rt, k, rkt_point_msgtype.id, "x", 1, 128, 0),
        RK_ENOTACTIVE, "send", "LAUNCHED");
    expect_refusal(
        rk_send_id(rt, "target", rkt_point_msgtype.id, "x", 1, 128, 0),
        RK_ENOTACTIVE, "send", "LAUNCHED");
    expect_refusal(
        rk_send_batch(rt, k, rkt_point_msgtype.id, "xy", 1, 2, 128, 0, &n),
        RK_ENOTACTIVE, "send", "LAUNCHED");
    expect_refusal(
        rk_publish(rt, "topic", rkt_point_msgtype.id, "x", 1, 128, 0, &n),
        RK_ENOTACTIVE, "publish", "LAUNCHED");
    expect_refusal(rk_request(rt, k, rkt_point_msgtype.id, "x", 1, NULL, buf,
                       sizeof(buf), &len, 0),
        RK_ENOTACTIVE, "request", "LAUNCHED");
    assert_int_equal(rk_kernel_activate(rt, "target"), RK_OK);
    /* Wrong type and too big, while ACTIVE. */
    expect_refusal(rk_send(rt, k, 0, "x", 1, 128, 0), RK_ETYPE, "send", NULL);
    expect_refusal(
        rk_request(rt, k, 0, "x", 1, NULL, buf, sizeof(buf), &len, 0),
        RK_ETYPE, "request", NULL);
    expect_refusal(
        rk_send(rt, k, rkt_point_msgtype.id, "123456789", 9, 128, 0),
        RK_EMSGSIZE, "send", NULL);
    /* TERMINATED (through a fresh handle; the old one is stale). */
    assert_int_equal(rk_kernel_terminate(rt, "target", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "target", &k), RK_OK);
    expect_refusal(rk_send(rt, k, rkt_point_msgtype.id, "x", 1, 128, 0),
        RK_ETERMINATED, "send", "TERMINATED");
    expect_refusal(
        rk_publish(rt, "topic", rkt_point_msgtype.id, "x", 1, 128, 0, &n),
        RK_ETERMINATED, "publish", "TERMINATED");
    rk_runtime_destroy(rt);
}

/* --------------------------------------------- output_type is enforced */

typedef struct typed_result {
    int wrong_send, right_send, wrong_reply, untyped_send;
} typed_result;

static typed_result typed_seen;

/* On each message: tries its declared output type and a wrong one. */
static int
typed_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    rkt_point pt = { 1.0, 2.0 };
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        typed_seen.wrong_send = rk_ctx_send(ctx, 999, &pt, sizeof(pt));
        typed_seen.untyped_send = rk_ctx_send(ctx, 0, &pt, sizeof(pt));
        typed_seen.wrong_reply = rk_ctx_reply(ctx, &m, 999, &pt, sizeof(pt));
        typed_seen.right_send
            = rk_ctx_send(ctx, rkt_point_msgtype.id, &pt, sizeof(pt));
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static void
test_ctx_send_checks_output_type(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "typed", .actor = typed_actor };
    rk_msg_header hdr;
    rkt_point got;
    rk_kernel k;
    size_t len = 0;
    rk_kernel_stats st;

    (void)state;
    def.config.output_type = &rkt_point_msgtype;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "typed"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "typed"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "typed", &k), RK_OK);
    assert_int_equal(rk_send(rt, k, 0, "x", 1, 128, RT_LONG), RK_OK);
    /* Only the declared type reaches the output. */
    assert_int_equal(
        rk_recv(rt, k, &hdr, &got, sizeof(got), &len, RT_LONG), RK_OK);
    assert_int_equal(hdr.type_id, rkt_point_msgtype.id);
    assert_int_equal(rk_kernel_terminate(rt, "typed", RT_LONG), RK_OK);
    assert_int_equal(typed_seen.wrong_send, RK_ETYPE);
    assert_int_equal(typed_seen.untyped_send, RK_ETYPE);
    assert_int_equal(typed_seen.wrong_reply, RK_ETYPE);
    assert_int_equal(typed_seen.right_send, RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "typed", &st), RK_OK);
    assert_int_equal(st.sent, 1);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_opts_priority),
        cmocka_unit_test(test_send_refusals_name_operation),
        cmocka_unit_test(test_ctx_send_checks_output_type),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
