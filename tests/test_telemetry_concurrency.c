/* Histograms and counters under concurrency: a single writer with a
 * concurrent snapshot reader, and conservation with many writers. Meant to
 * run under TSan too (make tsan); all synchronisation is by atomics and
 * thread joins, never by sleeping. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after setjmp.h, stdarg.h and stddef.h */

#include "common/common.h"
#include "ringkernel/ringkernel.h"
#include "telemetry/stats.h"

/* Sanitizer builds are several times slower; keep each test a few seconds
 * at most on a shared two-core machine. */
#ifdef RK_DEBUG
#define RECORDS 100000u
#else
#define RECORDS 200000u
#endif
#define WRITERS 4u

/* The i-th value a writer records: deterministic, spread over many
 * buckets, never 0 so that min is a known value. */
static uint64_t
value_of(uint64_t i)
{
    return 1 + (i * 2654435761u) % 5000000u;
}

typedef struct sw_ctx {
    rk__hist *h;
    rk__counter processed;
    atomic_int done;
} sw_ctx;

static void *
single_writer(void *arg)
{
    sw_ctx *c = arg;
    for (uint64_t i = 0; i < RECORDS; i++) {
        rk__hist_record(c->h, value_of(i));
        rk__counter_add_sw(&c->processed, 1);
    }
    /* Release pairs with the reader's acquire load of done: after seeing
     * done the reader's final snapshot must include every record. */
    atomic_store_explicit(&c->done, 1, memory_order_release);
    return NULL;
}

static void
test_single_writer_with_reader(void **state)
{
    (void)state;
    sw_ctx c;
    memset(&c, 0, sizeof(c));
    c.h = calloc(1, sizeof(*c.h));
    rk__hist_snap *snap = malloc(sizeof(*snap));
    assert_non_null(c.h);
    assert_non_null(snap);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, single_writer, &c), 0);
    uint64_t last_count = 0, last_processed = 0;
    unsigned snapshots = 0;
    int done = 0;
    while (!done) {
        done = atomic_load_explicit(&c.done, memory_order_acquire);
        rk__hist_snapshot(c.h, snap);
        uint64_t processed = rk__counter_get(&c.processed);
        /* Counts only grow; every field stays coherent with the buckets. */
        assert_true(snap->count >= last_count);
        assert_true(processed >= last_processed);
        assert_true(snap->count <= RECORDS);
        if (snap->count > 0) {
            assert_true(snap->min <= snap->max);
            uint64_t p = rk__hist_snap_percentile(snap, 99.0);
            assert_true(p >= snap->min && p <= snap->max);
            rk_latency_summary s;
            rk__hist_snap_summary(snap, &s);
            assert_true(s.p50_ns <= s.p90_ns && s.p90_ns <= s.p99_ns
                && s.p99_ns <= s.p999_ns && s.p999_ns <= s.max_ns);
        }
        last_count = snap->count;
        last_processed = processed;
        snapshots++;
    }
    assert_int_equal(pthread_join(t, NULL), 0);

    /* The snapshot taken after seeing done is complete and exact. */
    assert_int_equal(snap->count, RECORDS);
    assert_int_equal(last_processed, RECORDS);
    uint64_t sum = 0, mn = UINT64_MAX, mx = 0;
    for (uint64_t i = 0; i < RECORDS; i++) {
        uint64_t v = value_of(i);
        sum += v;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    assert_int_equal(snap->sum, sum);
    assert_int_equal(snap->min, mn);
    assert_int_equal(snap->max, mx);
    assert_true(snapshots >= 1);
    free(snap);
    free(c.h);
}

typedef struct mw_ctx {
    rk__hist *h;
    rk__counter *counter;
    unsigned id;
} mw_ctx;

static void *
multi_writer(void *arg)
{
    mw_ctx *c = arg;
    for (uint64_t i = 0; i < RECORDS; i++) {
        /* Writer id shifts the values so that min and max come from
         * different threads. */
        rk__hist_record_mw(c->h, value_of(i) + c->id);
        rk__counter_add(c->counter, 1);
    }
    return NULL;
}

static void
test_multi_writer_conservation(void **state)
{
    (void)state;
    rk__hist *h = calloc(1, sizeof(*h));
    rk__counter counter = 0;
    assert_non_null(h);
    pthread_t t[WRITERS];
    mw_ctx ctx[WRITERS];
    for (unsigned i = 0; i < WRITERS; i++) {
        ctx[i] = (mw_ctx) { h, &counter, i };
        assert_int_equal(
            pthread_create(&t[i], NULL, multi_writer, &ctx[i]), 0);
    }
    for (unsigned i = 0; i < WRITERS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);

    rk_latency_summary s;
    rk__hist_summary(h, &s);
    assert_int_equal(s.count, (uint64_t)WRITERS * RECORDS);
    assert_int_equal(rk__counter_get(&counter), (uint64_t)WRITERS * RECORDS);
    uint64_t sum = 0, mn = UINT64_MAX, mx = 0;
    for (unsigned w = 0; w < WRITERS; w++)
        for (uint64_t i = 0; i < RECORDS; i++) {
            uint64_t v = value_of(i) + w;
            sum += v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
    assert_int_equal(atomic_load(&h->sum), sum);
    assert_int_equal(s.min_ns, mn);
    assert_int_equal(s.max_ns, mx);
    free(h);
}

typedef struct merge_ctx {
    rk__hist *dst;
    rk__hist *src;
    unsigned rounds;
} merge_ctx;

static void *
merger(void *arg)
{
    merge_ctx *c = arg;
    for (unsigned i = 0; i < c->rounds; i++)
        rk__hist_merge(c->dst, c->src);
    return NULL;
}

/* Merging into a histogram that other threads record into loses nothing. */
static void
test_merge_concurrent_with_writers(void **state)
{
    (void)state;
    rk__hist *dst = calloc(1, sizeof(*dst));
    rk__hist *src = calloc(1, sizeof(*src));
    rk__counter counter = 0;
    assert_non_null(dst);
    assert_non_null(src);
    for (uint64_t i = 0; i < 1000; i++)
        rk__hist_record(src, value_of(i));

    const unsigned rounds = 50;
    pthread_t w[2], m;
    mw_ctx ctx[2];
    merge_ctx mc = { dst, src, rounds };
    for (unsigned i = 0; i < 2; i++) {
        ctx[i] = (mw_ctx) { dst, &counter, i };
        assert_int_equal(
            pthread_create(&w[i], NULL, multi_writer, &ctx[i]), 0);
    }
    assert_int_equal(pthread_create(&m, NULL, merger, &mc), 0);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(pthread_join(w[i], NULL), 0);
    assert_int_equal(pthread_join(m, NULL), 0);

    rk_latency_summary s;
    rk__hist_summary(dst, &s);
    assert_int_equal(s.count, 2u * RECORDS + rounds * 1000u);
    free(dst);
    free(src);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_writer_with_reader),
        cmocka_unit_test(test_multi_writer_conservation),
        cmocka_unit_test(test_merge_concurrent_with_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
