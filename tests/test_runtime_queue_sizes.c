/* A kernel's queue sizes through the public API (issue 10): a max_payload
 * whose slot does not fit 32 bits is refused at launch with a detail
 * naming the field (it used to be truncated and overflow the output ring);
 * capacities out of range are refused naming their field; any capacity
 * in range is held exactly, inputs and outputs, and reported as asked
 * (issue 27, item 1);
 * a 3-byte max_payload keeps every header aligned (UBSan checks the
 * kernel's and the handler's header reads); every inbox kind (single
 * producer, general, bands, DROP_OLDEST) round-trips in place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

/* Launch of a kernel with cfg is refused with RK_EINVAL naming field. */
static void
expect_refused(const rk_kernel_config *cfg, const char *field)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .actor = rt_echo_actor };

    def.config = *cfg;
    int rc = rk_runtime_register(rt, &def);
    if (rc == RK_OK)
        rc = rk_kernel_launch(rt, "k");
    assert_int_equal(rc, RK_EINVAL);
    assert_non_null(strstr(rk_errdetail(), field));
    rk_runtime_destroy(rt); /* ASan: nothing of the refused launch leaks */
}

static void
test_huge_max_payload_refused(void **state)
{
    rk_kernel_config c = { 0 };

    (void)state;
    /* The reproducer of issue 10, defect 1. */
    c.max_payload = UINT32_MAX;
    c.batch = 1;
    c.output_capacity = 4;
    expect_refused(&c, "max_payload");
    c.max_payload = UINT32_MAX - 64 - 10; /* fits 32 bits, not rounded */
    expect_refused(&c, "max_payload");
}

static void
test_capacities_name_their_field(void **state)
{
    rk_kernel_config c = { 0 };

    (void)state;
    c.input_capacity = RK_KERNEL_MAX_CAPACITY + 1;
    expect_refused(&c, "input_capacity");
    c.input_capacity = 0;
    c.output_capacity = RK_KERNEL_MAX_CAPACITY + 3;
    expect_refused(&c, "output_capacity");
}

/* ---------------------------------------------------- any capacity */

static const uint32_t any_caps[] = { 1, 3, 10, 1000 };

/* What the (N+1)th send meets (RK_NO_WAIT) under each policy. */
static int
over_rc(rk_backpressure bp)
{
    switch (bp) {
    case RK_BP_BLOCK: return RK_EFULL;
    case RK_BP_REJECT: return RK_EREJECTED;
    case RK_BP_DROP_NEW: return RK_EDROPPED;
    default: return RK_OK; /* DROP_OLDEST: in, the oldest dropped */
    }
}

/* Issue 27, item 1: input_capacity N in {1, 3, 10, 1000}, every policy,
 * with and without bands, on a launched kernel that takes nothing yet:
 * N sends go in, the (N+1)th meets the policy exactly as at a power of
 * two (per band with bands), and the counters agree. */
static void
test_any_input_capacity_held_exactly(void **state)
{
    static const rk_backpressure bps[] = { RK_BP_BLOCK, RK_BP_REJECT,
        RK_BP_DROP_NEW, RK_BP_DROP_OLDEST };

    (void)state;
    for (size_t ci = 0; ci < sizeof(any_caps) / sizeof(any_caps[0]); ci++)
        for (size_t pi = 0; pi < sizeof(bps) / sizeof(bps[0]); pi++)
            for (int bands = 0; bands < 2; bands++) {
                uint32_t n = any_caps[ci];
                rk_runtime *rt = rt_new_runtime();
                rk_kernel_def def = { .id = "k", .actor = rt_echo_actor };
                rk_kernel_stats st;
                rk_kernel k;
                uint64_t v = 0;
                int nb = bands ? 2 : 1;

                print_message("input_capacity %u, policy %d, bands %d\n", n,
                    (int)bps[pi], bands);
                def.config.input_capacity = n;
                def.config.backpressure = bps[pi];
                def.config.priority_bands = bands;
                assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
                assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
                assert_int_equal(rk_kernel_lookup(rt, "k", &k), RK_OK);
                for (int b = 0; b < nb; b++) {
                    uint8_t prio = b == 0 ? 128 : 250;
                    for (uint32_t i = 0; i < n; i++, v++)
                        assert_int_equal(rk_send(rt, k, 0, &v, sizeof(v),
                                             prio, RK_NO_WAIT),
                            RK_OK);
                    assert_int_equal(
                        rk_send(rt, k, 0, &v, sizeof(v), prio, RK_NO_WAIT),
                        over_rc(bps[pi]));
                }
                assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
                assert_int_equal(st.queue_depth, (uint64_t)n * nb);
                assert_int_equal(st.offered, (uint64_t)(n + 1) * nb);
                assert_int_equal(st.dropped + st.rejected, (uint64_t)nb);
                assert_int_equal(st.queue_capacity, n);
                rk_runtime_destroy(rt);
            }
}

/* Sends one output per input and counts the sends that returned. */
static _Atomic uint64_t out_done;

static int
count_echo_actor(rk_ctx *ctx)
{
    rk_msg_view m;

    while (!rk_should_terminate(ctx)) {
        int rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER);
        if (rc == RK_ECLOSED)
            break;
        if (rc != RK_OK)
            return rc;
        if ((rc = rk_ctx_send(ctx, m.hdr->type_id, m.data, m.len)) != RK_OK)
            return rc;
        atomic_fetch_add(&out_done, 1);
    }
    return RK_OK;
}

/* output_capacity N in {1, 3, 10, 1000}: with nobody receiving, the
 * kernel's N outputs go in and its (N+1)th waits (the output is BLOCK):
 * while the kernel takes its inputs, no more than N sends ever complete
 * (the exact wait, without timing, is test_queue_inbox's
 * test_outq_any_capacity_exact). One receive lets it through, and every
 * output arrives once, in order. */
static void
test_any_output_capacity_held_exactly(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < sizeof(any_caps) / sizeof(any_caps[0]); ci++) {
        uint32_t n = any_caps[ci];
        rk_runtime *rt = rt_new_runtime();
        rk_kernel_def def = { .id = "o", .actor = count_echo_actor };
        rk_kernel_stats st;
        rk_kernel k;
        uint64_t t0;

        print_message("output_capacity %u\n", n);
        atomic_store(&out_done, 0);
        def.config.output_capacity = n;
        def.config.input_capacity = 2048;
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, "o"), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, "o"), RK_OK);
        assert_int_equal(rk_kernel_lookup(rt, "o", &k), RK_OK);
        for (uint64_t v = 0; v <= n; v++)
            assert_int_equal(
                rk_send(rt, k, 0, &v, sizeof(v), 128, RT_LONG), RK_OK);
        /* The kernel has taken every input and sent N outputs. */
        t0 = rk_now_ns();
        for (;;) {
            assert_int_equal(rk_kernel_stats_get(rt, "o", &st), RK_OK);
            if (st.queue_depth == 0 && atomic_load(&out_done) == n)
                break;
            assert_true(atomic_load(&out_done) <= n);
            assert_true(rk_now_ns() - t0 < (uint64_t)RT_LONG);
            sched_yield();
        }
        for (uint64_t v = 0; v <= n; v++) {
            uint64_t got = ~v;
            size_t len = 0;
            assert_int_equal(
                rk_recv(rt, k, NULL, &got, sizeof(got), &len, RT_LONG), RK_OK);
            assert_int_equal(got, v);
        }
        assert_int_equal(rk_kernel_stats_get(rt, "o", &st), RK_OK);
        assert_int_equal(st.output_capacity, n);
        rk_runtime_destroy(rt);
    }
}

/* Telemetry and /metrics report the capacities asked for (not the rings'
 * sizes inside). */
static void
test_capacity_reported_as_asked(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "cap", .actor = rt_echo_actor };
    rk_kernel_stats st;
    rk_stats snap;
    const rk_stat_value *sv;
    rk_metrics *m = NULL;
    char *text = NULL;

    (void)state;
    def.config.input_capacity = 1000;
    def.config.output_capacity = 10;
    def.config.priority_bands = true;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "cap"), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "cap", &st), RK_OK);
    assert_int_equal(st.queue_capacity, 1000);
    assert_int_equal(st.output_capacity, 10);
    assert_int_equal(rk_kernel_telemetry(rt, "cap", &snap), RK_OK);
    assert_non_null(sv = rk_stats_find(&snap, "queue_capacity"));
    assert_int_equal(sv->value, 1000);
    assert_non_null(sv = rk_stats_find(&snap, "output_capacity"));
    assert_int_equal(sv->value, 10);
    assert_int_equal(rk_metrics_create(&m, rt, NULL), RK_OK);
    assert_int_equal(rk_metrics_render(m, RK_METRICS_PROMETHEUS, &text, NULL),
        RK_OK);
    assert_non_null(
        strstr(text, "ringkernel_queue_capacity{kernel=\"cap\"} 1000\n"));
    assert_non_null(
        strstr(text, "ringkernel_output_capacity{kernel=\"cap\"} 10\n"));
    free(text);
    text = NULL;
    assert_int_equal(
        rk_metrics_render(m, RK_METRICS_JSON, &text, NULL), RK_OK);
    assert_non_null(strstr(text, "\"queue_capacity\":1000"));
    assert_non_null(strstr(text, "\"output_capacity\":10"));
    free(text);
    rk_metrics_destroy(m);
    rk_runtime_destroy(rt);
}

/* Round trips of a 3-byte payload through every inbox kind. */
static void
test_tiny_payload_round_trips(void **state)
{
    (void)state;
    for (int kind = 0; kind < 4; kind++) {
        rk_runtime *rt = rt_new_runtime();
        rk_kernel_def def = { .id = "echo", .actor = rt_echo_actor };
        rk_kernel k;

        def.config.max_payload = 3;
        def.config.single_producer = kind == 0;
        def.config.priority_bands = kind == 2;
        def.config.backpressure = kind == 3 ? RK_BP_DROP_OLDEST : RK_BP_BLOCK;
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, "echo"), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, "echo"), RK_OK);
        assert_int_equal(rk_kernel_lookup(rt, "echo", &k), RK_OK);
        for (int i = 0; i < 100; i++) {
            unsigned char msg[3] = { (unsigned char)i, 7, 9 }, back[3];
            rk_msg_header h;
            size_t len = 0;
            assert_int_equal(
                rk_send(rt, k, 5, msg, 3, (uint8_t)(i * 3), RT_LONG), RK_OK);
            assert_int_equal(
                rk_recv(rt, k, &h, back, sizeof(back), &len, RT_LONG), RK_OK);
            assert_int_equal(len, 3);
            assert_memory_equal(back, msg, 3);
            assert_int_equal(h.type_id, 5);
        }
        /* Four is more than the payload limit. */
        assert_int_equal(
            rk_send(rt, k, 5, "abcd", 4, 128, RK_NO_WAIT), RK_EMSGSIZE);
        rk_runtime_destroy(rt);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_max_payload_refused),
        cmocka_unit_test(test_capacities_name_their_field),
        cmocka_unit_test(test_any_input_capacity_held_exactly),
        cmocka_unit_test(test_any_output_capacity_held_exactly),
        cmocka_unit_test(test_capacity_reported_as_asked),
        cmocka_unit_test(test_tiny_payload_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
