/*
 * Latency sampling (rk_kernel_config.latency_sample): with 1 every message
 * is timed and the histogram counts exactly the messages processed; with
 * the default one send in 16 per thread is stamped, so a single sender's
 * messages are timed exactly every 16th; telemetry_off times none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rt_helpers.h"

#define N 800u /* a multiple of 16 */

static int
nop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static rk_kernel_stats
run(uint32_t sample, bool telemetry_off, bool batched)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .handler = nop_handler };
    rk_kernel_stats st;
    rk_kernel h;
    uint32_t v[N] = { 0 };

    def.config.latency_sample = sample;
    def.config.telemetry_off = telemetry_off;
    def.config.input_capacity = 1024;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "k", &h), RK_OK);
    if (batched) {
        size_t sent = 0;
        for (uint32_t i = 0; i < N; i += 16) {
            assert_int_equal(rk_send_batch(rt, h, 0, v, sizeof(v[0]), 16, 0,
                                 RT_LONG, &sent),
                RK_OK);
            assert_int_equal(sent, 16);
        }
    } else {
        for (uint32_t i = 0; i < N; i++)
            assert_int_equal(
                rk_send(rt, h, 0, &v[i], sizeof(v[i]), 0, RT_LONG), RK_OK);
    }
    assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.processed, N);
    rk_runtime_destroy(rt);
    return st;
}

static void
test_every_message_timed(void **state)
{
    (void)state;
    assert_int_equal(run(1, false, false).latency_count, N);
    assert_int_equal(run(1, false, true).latency_count, N);
}

static void
test_default_sampling(void **state)
{
    rk_kernel_stats st;
    (void)state;

    /* This thread's countdown may stand anywhere after the runs above:
     * N / 16 sends of N are stamped whatever the phase. */
    st = run(0, false, false);
    assert_int_equal(st.latency_count, N / 16);
    /* A batch send shares one header: every 16th of the 50 batches of 16
     * is stamped, 3 or 4 of them by the countdown's phase. */
    st = run(0, false, true);
    assert_true(st.latency_count == 48 || st.latency_count == 64);
}

static void
test_telemetry_off_times_nothing(void **state)
{
    (void)state;
    assert_int_equal(run(1, true, false).latency_count, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_timed),
        cmocka_unit_test(test_default_sampling),
        cmocka_unit_test(test_telemetry_off_times_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
