/*
 * Supervision and shutdown: restart with backoff, dead letters, FAILED,
 * terminate with pending messages, destroy with active kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define POISON UINT64_C(0xdead)

/* Echoes, but fails on POISON. Counts its (re)starts. */
static int starts;

static int
fragile_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    starts++;
    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint64_t v;
        memcpy(&v, m.data, sizeof(v));
        if (v == POISON)
            return RK_EINTERNAL;
        if ((rc = rk_ctx_reply(ctx, &m, 0, &v, sizeof(v))) != RK_OK)
            return rc;
    }
    return rc;
}

static int
fragile_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    uint64_t v;
    memcpy(&v, m->data, sizeof(v));
    if (v == POISON)
        return RK_EDECODE;
    return rk_ctx_send(ctx, 0, &v, sizeof(v));
}

static void
send_u64(rk_runtime *rt, rk_kernel k, uint64_t v)
{
    assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
}

static uint64_t
recv_u64(rk_runtime *rt, rk_kernel k)
{
    uint64_t v = 0;
    size_t len;
    assert_int_equal(
        rk_recv(rt, k, NULL, &v, sizeof(v), &len, RT_LONG), RK_OK);
    return v;
}

static void
expect_dead(
    rk_runtime *rt, const char *id, rk_dead_reason why, int err, uint64_t v)
{
    rk_dead_letter dl;
    uint64_t got = 0;

    assert_int_equal(
        rk_dead_letter_recv(rt, &dl, &got, sizeof(got), RT_LONG), RK_OK);
    assert_string_equal(dl.kernel_id, id);
    assert_int_equal(dl.reason, why);
    assert_int_equal(dl.error, err);
    assert_int_equal(dl.len, sizeof(got));
    assert_int_equal(got, v);
}

static void
restart_case(bool handler)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "fragile" };
    int err = handler ? RK_EDECODE : RK_EINTERNAL;
    rk_kernel_stats st;
    rk_kernel k;

    if (handler)
        def.handler = fragile_handler;
    else
        def.actor = fragile_actor;
    def.config.supervision = (rk_supervision) {
        .policy = RK_SUPERVISE_RESTART,
        .max_restarts = 2,
        .backoff_ns = 1000,
        .backoff_max_ns = 4000,
    };
    starts = 0;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "fragile"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "fragile"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "fragile", &k), RK_OK);

    for (int round = 1; round <= 2; round++) {
        send_u64(rt, k, (uint64_t)round);
        send_u64(rt, k, POISON);
        send_u64(rt, k, (uint64_t)round + 100);
        /* The message before the failure was handled, the poison went to
         * the dead letters, and the kernel came back for the next one. */
        assert_int_equal(recv_u64(rt, k), (uint64_t)round);
        expect_dead(rt, "fragile", RK_DEAD_FAILED, err, POISON);
        assert_int_equal(recv_u64(rt, k), (uint64_t)round + 100);
        assert_int_equal(rt_state(rt, "fragile"), RK_KERNEL_ACTIVE);
    }
    if (!handler)
        assert_int_equal(starts, 3);
    /* Third failure: the policy gives up; what is queued is abandoned. */
    assert_int_equal(rk_kernel_deactivate(rt, "fragile"), RK_OK);
    send_u64(rt, k, POISON);
    send_u64(rt, k, 7);
    send_u64(rt, k, 8);
    assert_int_equal(rk_kernel_activate(rt, "fragile"), RK_OK);
    assert_int_equal(rk_kernel_wait(rt, "fragile", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "fragile"), RK_KERNEL_FAILED);
    expect_dead(rt, "fragile", RK_DEAD_FAILED, err, POISON);
    expect_dead(rt, "fragile", RK_DEAD_ABANDONED, err, 7);
    expect_dead(rt, "fragile", RK_DEAD_ABANDONED, err, 8);
    {
        rk_dead_letter dl;
        assert_int_equal(
            rk_dead_letter_recv(rt, &dl, NULL, 0, RK_NO_WAIT), RK_ETIMEDOUT);
    }
    assert_int_equal(rk_kernel_stats_get(rt, "fragile", &st), RK_OK);
    assert_int_equal(st.errors, 3);
    assert_int_equal(st.restarts, 2);
    assert_int_equal(st.dead_lettered, 5);
    assert_int_equal(st.processed, 4);
    assert_int_equal(st.offered, 9);
    assert_int_equal(st.pending, 0);
    /* Sends to a failed kernel are refused and counted. */
    {
        rk_kernel fresh;
        uint64_t v = 1;
        assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v), 128, 0), RK_ESTALE);
        assert_int_equal(rk_kernel_lookup(rt, "fragile", &fresh), RK_OK);
        assert_int_equal(
            rk_send(rt, fresh, 0, &v, sizeof(v), 128, 0), RK_EFAILED);
        assert_int_equal(rk_kernel_stats_get(rt, "fragile", &st), RK_OK);
        assert_int_equal(st.rejected, 1);
        assert_int_equal(st.offered,
            st.processed + st.dropped + st.rejected + st.dead_lettered
                + st.pending);
    }
    rk_runtime_destroy(rt);
}

static void
test_restart_actor(void **state)
{
    (void)state;
    restart_case(false);
}

static void
test_restart_handler(void **state)
{
    (void)state;
    restart_case(true);
}

static void
test_stop_policy(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "once", .actor = fragile_actor };
    rk_kernel_stats st;
    rk_kernel k;

    (void)state;
    starts = 0;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "once"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "once"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "once", &k), RK_OK);
    send_u64(rt, k, POISON);
    assert_int_equal(rk_kernel_wait(rt, "once", RT_LONG), RK_OK);
    assert_int_equal(rt_state(rt, "once"), RK_KERNEL_FAILED);
    assert_int_equal(starts, 1);
    expect_dead(rt, "once", RK_DEAD_FAILED, RK_EINTERNAL, POISON);
    assert_int_equal(rk_kernel_stats_get(rt, "once", &st), RK_OK);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(st.errors, 1);
    /* FAILED kernels can be launched again. */
    assert_int_equal(rk_kernel_launch(rt, "once"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "once"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "once", &k), RK_OK);
    send_u64(rt, k, 3);
    assert_int_equal(recv_u64(rt, k), 3);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------ terminate, destroy */

static void
test_terminate_drains_pending(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
    rk_kernel_stats st;
    rk_kernel k;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_deactivate(rt, "echo"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
    for (uint64_t i = 0; i < 50; i++)
        send_u64(rt, k, i);
    /* Paused with 50 queued: terminate still processes them all. */
    assert_int_equal(rk_kernel_terminate(rt, "echo", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "echo", &st), RK_OK);
    assert_int_equal(st.processed, 50);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.dead_lettered, 0);
    assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
    for (uint64_t i = 0; i < 50; i++)
        assert_int_equal(recv_u64(rt, k), i);
    rk_runtime_destroy(rt);
}

static void
test_terminate_unstarted_dead_letters(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "idle", .actor = rt_echo_actor };
    rk_kernel_stats st;
    rk_kernel k;

    (void)state;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "idle"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "idle", &k), RK_OK);
    for (uint64_t i = 0; i < 20; i++)
        send_u64(rt, k, i);
    /* Never activated: no actor code runs; the input is dead-lettered. */
    assert_int_equal(rk_kernel_terminate(rt, "idle", RT_LONG), RK_OK);
    for (uint64_t i = 0; i < 20; i++)
        expect_dead(rt, "idle", RK_DEAD_TERMINATED, RK_OK, i);
    assert_int_equal(rk_kernel_stats_get(rt, "idle", &st), RK_OK);
    assert_int_equal(st.dead_lettered, 20);
    assert_int_equal(st.processed, 0);
    assert_int_equal(st.offered, 20);
    assert_int_equal(st.pending, 0);
    rk_runtime_destroy(rt);
}

static rt_gate hold;

static int
held_actor(rk_ctx *ctx)
{
    rt_gate_pass(&hold);
    return rt_echo_actor(ctx);
}

static void
test_destroy_with_active_kernels(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    const char *ids[] = { "a", "b", "c", "d", "e" };
    rk_kernel_def held = { .id = "held", .actor = held_actor };
    rk_kernel k;

    (void)state;
    rt_gate_init(&hold);
    for (int i = 0; i < 5; i++) {
        rk_kernel_def def = { .id = ids[i], .actor = rt_echo_actor };
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, ids[i]), RK_OK);
        if (i < 4)
            assert_int_equal(rk_kernel_activate(rt, ids[i]), RK_OK);
        assert_int_equal(rk_kernel_lookup(rt, ids[i], &k), RK_OK);
        for (uint64_t v = 0; v < 10; v++)
            send_u64(rt, k, v);
    }
    assert_int_equal(rk_kernel_deactivate(rt, "c"), RK_OK);
    assert_int_equal(rk_connect(rt, "a", "b"), RK_OK);
    assert_int_equal(rk_subscribe(rt, "d", "t"), RK_OK);
    /* One kernel is busy in its own code when destroy starts; it returns
     * once released, and destroy waits for it. */
    assert_int_equal(rk_runtime_register(rt, &held), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "held"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "held"), RK_OK);
    rt_gate_wait_for(&hold, 1);
    rt_gate_open(&hold);
    rk_runtime_destroy(rt); /* ASan/TSan check nothing leaks or races */
    rt_gate_fini(&hold);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_actor),
        cmocka_unit_test(test_restart_handler),
        cmocka_unit_test(test_stop_policy),
        cmocka_unit_test(test_terminate_drains_pending),
        cmocka_unit_test(test_terminate_unstarted_dead_letters),
        cmocka_unit_test(test_destroy_with_active_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
