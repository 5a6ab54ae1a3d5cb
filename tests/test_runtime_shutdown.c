/*
 * Shutdown and host receivers (issue 10, defects 2 and 4, and "host
 * receives learn that a kernel has ended"):
 *   - once a kernel has ended (TERMINATED or FAILED) and its output is
 *     drained, rk_recv and rk_request return RK_ETERMINATED at once, also
 *     to a caller already blocked in them (RK_WAIT_FOREVER included);
 *   - rk_runtime_destroy wakes every host call blocked in the runtime
 *     (they return RK_ECLOSED or RK_ETERMINATED) and waits until they have
 *     left before it frees anything (ASan sees any use after free);
 *   - rk_runtime_destroy comes back from an actor that never returns
 *     after terminate_timeout_ns, names it in rk_errdetail(), and leaves
 *     its thread running on memory that is not freed.
 *
 * Blocked calls run on their own threads (rt_call, support/rt_fault.h);
 * a test waits until such a thread is asleep inside its call, which is
 * observed, not guessed with a sleep.
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

#define SHORT (5 * INT64_C(1000000000)) /* a caller's own, finite wait */

/* What a call woken by an ending kernel or by destroy may say: the kernel
 * ended (or failed: a kernel whose downstream ended first fails), or the
 * runtime is going away. */
static bool
ended_code(int rc)
{
    return rc == RK_ETERMINATED || rc == RK_ECLOSED || rc == RK_EFAILED;
}

/* Takes messages and never answers. */
static int
sink_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK)
        ;
    return rc == RK_ECLOSED ? RK_OK : rc;
}

/* Answers its first message, then ends by itself (fail: with an error). */
static int
once_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    bool fail = *(bool *)rk_ctx_user(ctx);
    int rc;

    if ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) != RK_OK)
        return rc;
    if ((rc = rk_ctx_reply(ctx, &m, 0, m.data, m.len)) != RK_OK)
        return rc;
    return fail ? RK_EINTERNAL : RK_OK;
}

static void
start(rk_runtime *rt, const rk_kernel_def *def, rk_kernel *k)
{
    assert_int_equal(rk_runtime_register(rt, def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, def->id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, def->id), RK_OK);
    if (k != NULL)
        assert_int_equal(rk_kernel_lookup(rt, def->id, k), RK_OK);
}

/* Output queued before terminate is still received; then RK_ETERMINATED,
 * at once rather than after the caller's timeout. */
static void
test_recv_after_terminate_drains_then_ends(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
    rk_kernel k;
    uint64_t v;
    size_t len;

    (void)state;
    start(rt, &def, &k);
    for (v = 1; v <= 3; v++)
        assert_int_equal(
            rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "echo", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "echo"), RK_KERNEL_TERMINATED);
    for (uint64_t want = 1; want <= 3; want++) {
        v = 0;
        assert_int_equal(
            rk_recv_id(rt, "echo", NULL, &v, sizeof(v), &len, SHORT), RK_OK);
        assert_int_equal(v, want);
    }
    /* Drained and ended: today this waited out SHORT (RK_ETIMEDOUT). */
    assert_int_equal(rk_recv_id(rt, "echo", NULL, &v, sizeof(v), &len, SHORT),
        RK_ETERMINATED);
    assert_non_null(strstr(rk_errdetail(), "'echo'"));
    /* RK_WAIT_FOREVER too (today it never returned). */
    assert_int_equal(
        rk_recv_id(rt, "echo", NULL, &v, sizeof(v), &len, RK_WAIT_FOREVER),
        RK_ETERMINATED);
    rk_runtime_destroy(rt);
}

/* A kernel that ends by itself, TERMINATED or FAILED. */
static void
ended_by_itself(bool fail)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "once", .actor = once_actor };
    rk_kernel k;
    uint64_t v = 42, got = 0;
    size_t len;

    def.config.user = &fail;
    start(rt, &def, &k);
    assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    assert_int_equal(
        rk_recv_id(rt, "once", NULL, &got, sizeof(got), &len, SHORT), RK_OK);
    assert_int_equal(got, 42);
    /* Whether or not it has ended yet, the next receive learns it. */
    assert_int_equal(
        rk_recv_id(rt, "once", NULL, &got, sizeof(got), &len, RK_WAIT_FOREVER),
        RK_ETERMINATED);
    assert_non_null(strstr(rk_errdetail(), fail ? "FAILED" : "TERMINATED"));
    assert_int_equal(
        rt_state(rt, "once"), fail ? RK_KERNEL_FAILED : RK_KERNEL_TERMINATED);
    if (fail) {
        rk_dead_letter dl;
        while (rk_dead_letter_recv(rt, &dl, NULL, 0, RK_NO_WAIT) == RK_OK)
            ;
    }
    rk_runtime_destroy(rt);
}

static void
test_recv_learns_kernel_returned(void **state)
{
    (void)state;
    ended_by_itself(false);
}

static void
test_recv_learns_kernel_failed(void **state)
{
    (void)state;
    ended_by_itself(true);
}

static int
call_request(rt_call *c)
{
    uint64_t v = 1;
    return rk_request(c->rt, c->k, 0, &v, sizeof(v), &c->hdr, c->buf,
        sizeof(c->buf), &c->len, c->timeout_ns);
}

/* Callers already blocked (RK_WAIT_FOREVER) in rk_recv and rk_request
 * learn of a terminate at once. Today they never returned. */
static void
test_blocked_callers_wake_on_terminate(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "quiet", .actor = sink_actor };
    rt_call recv = { 0 }, req = { 0 };
    rk_kernel k;

    (void)state;
    start(rt, &def, &k);
    recv = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = k, .timeout_ns = RK_WAIT_FOREVER
    };
    req = (rt_call) {
        .fn = call_request, .rt = rt, .k = k, .timeout_ns = RK_WAIT_FOREVER
    };
    assert_int_equal(rt_call_start(&recv), 0);
    assert_true(rt_call_wait_blocked(&recv));
    assert_int_equal(rt_call_start(&req), 0);
    assert_true(rt_call_wait_blocked(&req));
    assert_int_equal(rk_kernel_terminate(rt, "quiet", RT_LONG), RK_OK);
    assert_int_equal(rt_call_join(&recv), RK_ETERMINATED);
    assert_int_equal(rt_call_join(&req), RK_ETERMINATED);
    rk_runtime_destroy(rt);
}

/* rk_runtime_destroy with host threads blocked in receives: each is woken
 * with RK_ECLOSED or RK_ETERMINATED, and nothing is freed under them. With
 * finite timeouts, today's destroy returned and the receivers then woke
 * into freed memory (ASan: heap-use-after-free in outq.c). */
static void
test_destroy_wakes_blocked_receivers(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def a = { .id = "a", .actor = sink_actor };
    rk_kernel_def b = { .id = "b", .actor = sink_actor };
    rt_call calls[4];
    rk_kernel ka, kb;

    (void)state;
    start(rt, &a, &ka);
    start(rt, &b, &kb);
    /* Two receivers on one output (one waits for the other), a receiver
     * with no deadline, and a request. */
    calls[0] = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = ka, .timeout_ns = SHORT
    };
    calls[1] = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = ka, .timeout_ns = SHORT
    };
    calls[2] = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = kb, .timeout_ns = RK_WAIT_FOREVER
    };
    calls[3] = (rt_call) {
        .fn = call_request, .rt = rt, .k = kb, .timeout_ns = SHORT
    };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rt_call_start(&calls[i]), 0);
        assert_true(rt_call_wait_blocked(&calls[i]));
    }
    rk_runtime_destroy(rt);
    for (int i = 0; i < 4; i++) {
        int rc = rt_call_join(&calls[i]);
        if (!ended_code(rc))
            fail_msg(
                "receiver %d returned %s after destroy", i, rk_err_name(rc));
    }
}

/* ------------------------------------ destroy while everything is busy */

/* Works a while on every message, then passes it on (to "tail"). */
static int
busy_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    volatile uint64_t x = 0;
    for (int i = 0; i < 20000; i++)
        x += (uint64_t)i * m->len;
    return rk_ctx_send(ctx, 0, m->data, m->len);
}

static int
tail_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* 8 MiB of 8-byte payloads: far more than the slow kernel takes before
 * destroy, so the one call below is still sending when destroy comes. */
#define FLOOD_N (UINT32_C(1) << 20)
static uint64_t flood_payload[FLOOD_N];

static int
call_flood(rt_call *c)
{
    size_t sent = 0;
    int rc;

    /* One call that sends for as long as it is let: it blocks on the full
     * input of the slow kernel most of the time. */
    rc = rk_send_batch(c->rt, c->k, 0, flood_payload, sizeof(flood_payload[0]),
        FLOOD_N, 128, RK_WAIT_FOREVER, &sent);
    c->len = sent;
    return rc;
}

/* The fault test: kernels busy (a slow kernel fed flat out, its K2K
 * target), a host thread blocked sending into its full input, and host
 * threads blocked receiving, when rk_runtime_destroy is called. */
static void
test_destroy_while_busy_and_blocked(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true,
        .terminate_timeout_ns = 2 * INT64_C(1000000000) };
    rk_kernel_def busy = { .id = "busy", .handler = busy_handler };
    rk_kernel_def tail = { .id = "tail", .handler = tail_handler };
    rt_call flood, r1, r2;
    rk_kernel kb, kt;

    (void)state;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    busy.config.input_capacity = 64;
    busy.config.batch = 4;
    start(rt, &tail, &kt);
    start(rt, &busy, &kb);
    assert_int_equal(rk_connect(rt, "busy", "tail"), RK_OK);
    flood = (rt_call) { .fn = call_flood, .rt = rt, .k = kb };
    r1 = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = kt, .timeout_ns = RK_WAIT_FOREVER
    };
    r2 = (rt_call) {
        .fn = rt_call_recv, .rt = rt, .k = kb, .timeout_ns = SHORT
    };
    assert_int_equal(rt_call_start(&flood), 0);
    assert_true(rt_call_wait_blocked(&flood));
    assert_int_equal(rt_call_start(&r1), 0);
    assert_true(rt_call_wait_blocked(&r1));
    assert_int_equal(rt_call_start(&r2), 0);
    assert_true(rt_call_wait_blocked(&r2));
    rk_runtime_destroy(rt);
    {
        rt_call *calls[] = { &flood, &r1, &r2 };
        for (int i = 0; i < 3; i++) {
            int rc = rt_call_join(calls[i]);
            if (!ended_code(rc))
                fail_msg("call %d returned %s after destroy (%s)", i,
                    rk_err_name(rc), rk_errdetail());
        }
    }
}

/* ------------------------------------- an actor that never returns */

static rt_gate stuck_gate, stuck_after;
static int stuck_should_terminate = -1, stuck_send_rc = -1;

/* Takes one message and then waits on a gate that destroy cannot open:
 * "stuck in its own code". Released by the test after destroy, it checks
 * that its context still answers (nothing it reaches was freed), then
 * waits again, for good. */
static int
stuck_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    uint64_t v = 1;
    int rc;

    if ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) != RK_OK)
        return rc;
    rt_gate_pass(&stuck_gate);
    stuck_should_terminate = rk_should_terminate(ctx);
    stuck_send_rc = rk_ctx_send(ctx, 0, &v, sizeof(v));
    rt_gate_pass(&stuck_after);
    return RK_OK;
}

/* The log callback: keeps the last error-level message. */
static char stuck_log[512];

static void
keep_log(rk_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= RK_LOG_ERROR)
        snprintf(stuck_log, sizeof(stuck_log), "%s", msg);
}

/* Today rk_runtime_destroy joined the stuck thread and never returned
 * (ctest's timeout reports it). */
static void
test_destroy_with_stuck_actor(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true,
        .terminate_timeout_ns = 200 * INT64_C(1000000) };
    rk_kernel_def stuck = { .id = "stuck", .actor = stuck_actor };
    rk_kernel_def fine = { .id = "fine", .actor = rt_echo_actor };
    rk_kernel k;
    uint64_t v = 7;

    (void)state;
    rt_gate_init(&stuck_gate);
    rt_gate_init(&stuck_after);
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    start(rt, &stuck, &k);
    start(rt, &fine, NULL);
    assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
    rt_gate_wait_for(&stuck_gate, 1);
    /* terminate gives up after its timeout and says so ... */
    assert_int_equal(
        rk_kernel_terminate(rt, "stuck", 10 * INT64_C(1000000)), RK_ETIMEDOUT);
    assert_int_equal(rt_state(rt, "stuck"), RK_KERNEL_TERMINATING);
    /* ... and so does destroy, naming the kernel it left behind in its
     * detail and in the log. */
    stuck_log[0] = '\0';
    rk_set_log(keep_log, NULL);
    rk_runtime_destroy(rt);
    rk_set_log(NULL, NULL);
    if (strstr(stuck_log, "'stuck'") == NULL)
        fail_msg("destroy logged no message naming the stuck kernel: '%s'",
            stuck_log);
    if (strstr(rk_errdetail(), "'stuck'") == NULL)
        fail_msg("destroy's detail does not name the stuck kernel: '%s'",
            rk_errdetail());
    assert_null(strstr(rk_errdetail(), "'fine'"));
    /* The detached thread still runs on its (leaked) instance. */
    rt_gate_open(&stuck_gate);
    rt_gate_wait_for(&stuck_after, 1);
    assert_int_equal(stuck_should_terminate, 1);
    assert_true(ended_code(stuck_send_rc));
    /* stuck_after stays shut: the thread waits there until the process
     * exits, holding what destroy left to it (LeakSanitizer finds the
     * leaked runtime reachable from its stack). */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_after_terminate_drains_then_ends),
        cmocka_unit_test(test_recv_learns_kernel_returned),
        cmocka_unit_test(test_recv_learns_kernel_failed),
        cmocka_unit_test(test_blocked_callers_wake_on_terminate),
        cmocka_unit_test(test_destroy_wakes_blocked_receivers),
        cmocka_unit_test(test_destroy_while_busy_and_blocked),
        cmocka_unit_test(test_destroy_with_stuck_actor),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
