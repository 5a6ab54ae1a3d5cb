/*
 * The sender's latency sampler (src/runtime/stamp.h), driven with a clock
 * of the test's own: a sender whose sends come 1 ms or more apart stamps
 * every one; a busy one (many sends a millisecond) stamps exactly one in
 * latency_sample; one in between stamps about once a millisecond; a
 * sender that turns quiet after a busy spell stamps every send again
 * within latency_sample sends (issue 27, item 3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "runtime/stamp.h"

#define MS UINT64_C(1000000)
#define US UINT64_C(1000)

/* One send at time now: true if it is stamped. */
static bool
send_at(rk__stamp_state *s, uint32_t sample, uint64_t now)
{
    if (rk__stamp_skip(s, sample))
        return false;
    rk__stamp_taken(s, sample, now);
    return true;
}

/* n sends from t0, gap ns apart: how many are stamped, and the time after
 * the last. */
static unsigned
run(rk__stamp_state *s, uint32_t sample, uint64_t *t, uint64_t gap, unsigned n)
{
    unsigned stamped = 0;
    for (unsigned i = 0; i < n; i++) {
        stamped += send_at(s, sample, *t);
        *t += gap;
    }
    return stamped;
}

static void
test_quiet_stamps_every_send(void **state)
{
    rk__stamp_state s = { 0 };
    uint64_t t = 1000 * MS;
    (void)state;

    assert_int_equal(run(&s, 16, &t, 10 * MS, 100), 100); /* 100 a second */
    assert_int_equal(run(&s, 16, &t, 1 * MS, 100), 100);  /* 1000 a second */
    /* latency_sample does not thin a quiet sender. */
    assert_int_equal(run(&s, 1000, &t, 2 * MS, 50), 50);
}

static void
test_busy_stamps_one_in_sample(void **state)
{
    rk__stamp_state s = { 0 };
    uint64_t t = 1000 * MS;
    unsigned last = 0, stamps = 0;
    (void)state;

    /* 1 us apart: after the first two stamps (the first on a fresh
     * thread is always stamped), exactly every 16th. */
    for (unsigned i = 0; i < 1600; i++, t += US) {
        if (!send_at(&s, 16, t))
            continue;
        if (stamps >= 2)
            assert_int_equal(i - last, 16);
        last = i;
        stamps++;
    }
    assert_int_equal(stamps, 2 + (1600 - 2) / 16);
    /* The same with a sparser rate. */
    assert_int_equal(run(&s, 64, &t, US, 6400), 100);
}

/* Between quiet and busy: about one stamp per millisecond. */
static void
test_moderate_stamps_each_millisecond(void **state)
{
    rk__stamp_state s = { 0 };
    uint64_t t = 1000 * MS;
    unsigned n;
    (void)state;

    (void)run(&s, 16, &t, 250 * US, 8); /* settle */
    n = run(&s, 16, &t, 250 * US, 400); /* 100 ms */
    assert_int_equal(n, 100);
    (void)run(&s, 16, &t, 100 * US, 20);
    n = run(&s, 16, &t, 100 * US, 1000); /* 100 ms */
    assert_int_equal(n, 100);
}

/* Busy, then quiet: at most one busy stride (16 sends) unstamped, then
 * every send. */
static void
test_busy_then_quiet(void **state)
{
    rk__stamp_state s = { 0 };
    uint64_t t = 1000 * MS;
    unsigned first = 0;
    (void)state;

    (void)run(&s, 16, &t, US, 1000);
    for (unsigned i = 0; i < 100 && first == 0; i++) {
        if (send_at(&s, 16, t))
            first = i + 1;
        t += 10 * MS;
    }
    assert_true(first >= 1 && first <= 16);
    assert_int_equal(run(&s, 16, &t, 10 * MS, 50), 50);
}

/* latency_sample 1 stamps everything; a countdown left by a sparser
 * kernel does not delay a denser one. */
static void
test_sample_one_and_switching(void **state)
{
    rk__stamp_state s = { 0 };
    uint64_t t = 1000 * MS;
    (void)state;

    assert_int_equal(run(&s, 1, &t, 1, 1000), 1000);
    (void)run(&s, 1000, &t, 1, 4500); /* stamps 0, 1000, ..., 4000 */
    assert_int_equal(s.left, 500);
    assert_true(send_at(&s, 16, t));
}

static void *
fresh_thread(void *arg)
{
    uint64_t *out = arg;
    out[0] = rk__stamp(0);
    out[1] = rk__stamp(0);
    out[2] = rk__stamp(0); /* skipped unless the two came 1/16 ms apart */
    return NULL;
}

/* The real clock: a new thread stamps its first two sends (it has no
 * history, so it starts as a quiet one). */
static void
test_real_clock_fresh_thread(void **state)
{
    uint64_t v[3];
    pthread_t t;
    (void)state;

    assert_int_equal(pthread_create(&t, NULL, fresh_thread, v), 0);
    pthread_join(t, NULL);
    assert_true(v[0] != 0);
    assert_true(v[1] >= v[0]);
    assert_true(v[2] == 0 || v[2] >= v[1]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_stamps_every_send),
        cmocka_unit_test(test_busy_stamps_one_in_sample),
        cmocka_unit_test(test_moderate_stamps_each_millisecond),
        cmocka_unit_test(test_busy_then_quiet),
        cmocka_unit_test(test_sample_one_and_switching),
        cmocka_unit_test(test_real_clock_fresh_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
