/*
 * Latency sampling (rk_kernel_config.latency_sample, src/runtime/stamp.h):
 * with 1 every message is timed and the histogram counts exactly the
 * messages processed; with the default a busy sender's messages are timed
 * one in 16 (a little more when the thread stalls, since sampling also
 * follows time), a quiet sender's (sends 1 ms or more apart) every one
 * (issue 27, item 3); telemetry_off times none. The sampler's exact
 * strides, with a clock the test drives, are in test_runtime_stamp.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include <pthread.h>

#include "rt_helpers.h"

#define N 800u /* a multiple of 16 */

static int
nop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

/* The most stamps n sends (in strides of at most 16) may carry when they
 * took elapsed_ns: n / 16 by count, plus, by time, at most one stride
 * shorter than 16 for each 1/16 ms the sends took (a short stride follows
 * an interval of over 1/16 ms a send, stamp.h), plus the first two. */
static uint64_t
most_stamps(uint64_t n, uint64_t elapsed_ns)
{
    return n / 16 + 2 + elapsed_ns / (1000000 / 16);
}

static rk_kernel_stats
run(uint32_t sample, bool telemetry_off, bool batched, uint64_t *elapsed)
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
    uint64_t t0 = rk_now_ns();
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
    if (elapsed != NULL)
        *elapsed = rk_now_ns() - t0;
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
    assert_int_equal(run(1, false, false, NULL).latency_count, N);
    assert_int_equal(run(1, false, true, NULL).latency_count, N);
}

static void
test_default_sampling(void **state)
{
    rk_kernel_stats st;
    uint64_t took;
    (void)state;

    /* This thread's countdown may stand anywhere after the runs above; a
     * stride is never over 16, so at least N / 16 of N sends are
     * stamped whatever the phase, and at most most_stamps. */
    st = run(0, false, false, &took);
    print_message("%llu of %u sends stamped in %.2f ms\n",
        (unsigned long long)st.latency_count, N, (double)took / 1e6);
    assert_true(st.latency_count >= N / 16);
    assert_true(st.latency_count <= most_stamps(N, took));
    /* A batch send shares one header: 50 batches of 16, of which at least
     * 3 are stamped (whatever the phase), each timing all its 16. */
    st = run(0, false, true, &took);
    assert_int_equal(st.latency_count % 16, 0);
    assert_true(st.latency_count >= 48);
    assert_true(st.latency_count / 16 <= most_stamps(N / 16, took));
}

/* Sends n messages to "k" from a thread of its own (a fresh sampler),
 * gap_ns apart (0: back to back). */
typedef struct sender {
    rk_runtime *rt;
    rk_kernel k;
    uint32_t n;
    uint64_t gap_ns, elapsed_ns;
} sender;

static void *
sender_main(void *arg)
{
    sender *s = arg;
    uint64_t t0 = rk_now_ns();
    uint32_t v = 0;

    for (uint32_t i = 0; i < s->n; i++) {
        if (rk_send(s->rt, s->k, 0, &v, sizeof(v), 0, RT_LONG) != RK_OK)
            return NULL;
        /* Pacing, not synchronisation: the sender is quiet because each
         * send comes at least gap_ns after the one before; nothing waits
         * for another thread. */
        if (s->gap_ns != 0) {
            uint64_t next = rk_now_ns() + s->gap_ns;
            struct timespec ts = { .tv_sec = (time_t)(next / 1000000000u),
                .tv_nsec = (long)(next % 1000000000u) };
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
                != 0) { }
        }
    }
    s->elapsed_ns = rk_now_ns() - t0;
    return NULL;
}

static rk_kernel_stats
run_sender(uint32_t n, uint64_t gap_ns, uint64_t *elapsed)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "k", .handler = nop_handler };
    sender s = { .rt = rt, .n = n, .gap_ns = gap_ns };
    rk_kernel_stats st;
    pthread_t t;

    def.config.input_capacity = 2048;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "k"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "k", &s.k), RK_OK);
    assert_int_equal(pthread_create(&t, NULL, sender_main, &s), 0);
    pthread_join(t, NULL);
    assert_int_equal(rk_kernel_terminate(rt, "k", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "k", &st), RK_OK);
    assert_int_equal(st.processed, n);
    rk_runtime_destroy(rt);
    *elapsed = s.elapsed_ns;
    return st;
}

/* A quiet sender (a send every 2 ms, 500 a second) has every message
 * timed with the default latency_sample; by count alone it was 2 of 20. */
static void
test_quiet_sender_times_every_message(void **state)
{
    rk_kernel_stats st;
    uint64_t took;
    (void)state;

    st = run_sender(20, 2000000, &took);
    assert_int_equal(st.latency_count, 20);
}

/* A busy sender keeps one in 16 (and a bit more if it stalled). */
static void
test_busy_sender_times_one_in_16(void **state)
{
    const uint32_t n = 1600;
    rk_kernel_stats st;
    uint64_t took;
    (void)state;

    st = run_sender(n, 0, &took);
    print_message("busy: %llu of %u sends stamped in %.2f ms\n",
        (unsigned long long)st.latency_count, n, (double)took / 1e6);
    assert_true(st.latency_count >= n / 16);
    assert_true(st.latency_count <= most_stamps(n, took));
}

static void
test_telemetry_off_times_nothing(void **state)
{
    (void)state;
    assert_int_equal(run(1, true, false, NULL).latency_count, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_timed),
        cmocka_unit_test(test_default_sampling),
        cmocka_unit_test(test_telemetry_off_times_nothing),
        cmocka_unit_test(test_quiet_sender_times_every_message),
        cmocka_unit_test(test_busy_sender_times_one_in_16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
