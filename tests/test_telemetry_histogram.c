/* The latency histogram: bucket layout, accuracy against an exact sorted
 * reference, edge values, merge, reset and the public wrapper. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after setjmp.h, stdarg.h and stddef.h */

#include "common/common.h"
#include "ringkernel/ringkernel.h"
#include "telemetry/histogram.h"

/* xorshift64*: deterministic test data without libc rand(). */
static uint64_t
rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest rank for p given in tenths of a percent, in integer arithmetic:
 * ceil(pm * n / 1000), at least 1. Independent of the library's code. */
static uint64_t
ref_rank(unsigned pm, uint64_t n)
{
    uint64_t r = ((uint64_t)pm * n + 999) / 1000;
    return r < 1 ? 1 : r;
}

/* The documented bound: |got - want| <= want / 64, i.e. 64*|d| <= want. */
static void
assert_within_bound(uint64_t got, uint64_t want)
{
    uint64_t d = got > want ? got - want : want - got;
    if (want < 64) {
        assert_int_equal(got, want);
        return;
    }
    if (d > want / 64) {
        fail_msg("percentile %llu vs exact %llu: error %llu > %llu",
            (unsigned long long)got, (unsigned long long)want,
            (unsigned long long)d, (unsigned long long)(want / 64));
    }
}

static rk__hist *
hist_new(void)
{
    rk__hist *h = calloc(1, sizeof(*h)); /* zeroed == empty */
    assert_non_null(h);
    return h;
}

static void
test_bucket_layout(void **state)
{
    (void)state;
    uint64_t next_low = 0;
    for (size_t i = 0; i < RK__HIST_OVERFLOW; i++) {
        uint64_t lo = rk__hist_bucket_low(i), w = rk__hist_bucket_width(i);
        /* Buckets tile [0, 2^42) without gaps or overlaps. */
        assert_int_equal(lo, next_low);
        assert_int_equal(rk__hist_index(lo), i);
        assert_int_equal(rk__hist_index(lo + w - 1), i);
        /* Relative width bound that gives the 1/64 error bound. */
        if (i >= 64)
            assert_true(w * 32 <= lo);
        else
            assert_int_equal(w, 1);
        next_low = lo + w;
    }
    assert_int_equal(next_low, RK_HISTOGRAM_MAX_NS);
    assert_int_equal(rk__hist_index(RK_HISTOGRAM_MAX_NS), RK__HIST_OVERFLOW);
    assert_int_equal(rk__hist_index(UINT64_MAX), RK__HIST_OVERFLOW);
    assert_int_equal(
        rk__hist_index(RK_HISTOGRAM_MAX_NS - 1), RK__HIST_OVERFLOW - 1);
}

static void
test_empty(void **state)
{
    (void)state;
    rk__hist *h = hist_new();
    rk_latency_summary s;
    memset(&s, 0xff, sizeof(s));
    rk__hist_summary(h, &s);
    assert_int_equal(s.count, 0);
    assert_int_equal(s.min_ns, 0);
    assert_int_equal(s.max_ns, 0);
    assert_int_equal(s.p99_ns, 0);
    assert_true(s.mean_ns == 0.0);
    free(h);
}

static void
test_edge_values(void **state)
{
    (void)state;
    rk__hist *h = hist_new();
    rk__hist_snap *snap = malloc(sizeof(*snap));
    assert_non_null(snap);

    rk__hist_record(h, 0);
    rk__hist_record(h, 1);
    rk__hist_record(h, UINT64_MAX);
    rk__hist_record(h, RK_HISTOGRAM_MAX_NS);
    rk__hist_snapshot(h, snap);
    assert_int_equal(snap->count, 4);
    assert_int_equal(snap->bucket[0], 1);
    assert_int_equal(snap->bucket[1], 1);
    assert_int_equal(snap->bucket[RK__HIST_OVERFLOW], 2);
    assert_int_equal(snap->min, 0);
    assert_int_equal(snap->max, UINT64_MAX);
    /* Overflow values enter the sum clamped, so it cannot wrap. */
    assert_int_equal(snap->sum, 1 + 2 * RK_HISTOGRAM_MAX_NS);
    assert_int_equal(rk__hist_snap_percentile(snap, 0.0), 0);
    assert_int_equal(rk__hist_snap_percentile(snap, 25.0), 0);
    assert_int_equal(rk__hist_snap_percentile(snap, 50.0), 1);
    assert_int_equal(rk__hist_snap_percentile(snap, 75.0), UINT64_MAX);
    assert_int_equal(rk__hist_snap_percentile(snap, 100.0), UINT64_MAX);
    assert_int_equal(rk__hist_snap_percentile(snap, NAN), 0);
    assert_int_equal(rk__hist_snap_percentile(snap, -5.0), 0);
    assert_int_equal(rk__hist_snap_percentile(snap, 1e9), UINT64_MAX);

    /* A single value is reported exactly by every percentile. */
    rk__hist_reset(h);
    rk__hist_record(h, 123456789);
    rk_latency_summary s;
    rk__hist_summary(h, &s);
    assert_int_equal(s.count, 1);
    assert_int_equal(s.min_ns, 123456789);
    assert_int_equal(s.max_ns, 123456789);
    assert_int_equal(s.p50_ns, 123456789);
    assert_int_equal(s.p999_ns, 123456789);
    assert_true(s.mean_ns == 123456789.0);
    free(snap);
    free(h);
}

/* Records n values from gen into a histogram (single or multi writer) and
 * checks every summary field against the sorted reference. */
static void
check_against_reference(uint64_t *v, size_t n, int multi)
{
    rk__hist *h = hist_new();
    rk__hist_snap *snap = malloc(sizeof(*snap));
    assert_non_null(snap);
    long double sum = 0;

    for (size_t i = 0; i < n; i++) {
        if (multi)
            rk__hist_record_mw(h, v[i]);
        else
            rk__hist_record(h, v[i]);
        sum += (long double)v[i];
    }
    qsort(v, n, sizeof(*v), cmp_u64);

    rk_latency_summary s;
    rk__hist_summary(h, &s);
    assert_int_equal(s.count, n);
    assert_int_equal(s.min_ns, v[0]);
    assert_int_equal(s.max_ns, v[n - 1]);
    double mean = (double)(sum / (long double)n);
    assert_true(fabs(s.mean_ns - mean) <= 1e-9 * mean + 1e-9);
    assert_within_bound(s.p50_ns, v[ref_rank(500, n) - 1]);
    assert_within_bound(s.p90_ns, v[ref_rank(900, n) - 1]);
    assert_within_bound(s.p99_ns, v[ref_rank(990, n) - 1]);
    assert_within_bound(s.p999_ns, v[ref_rank(999, n) - 1]);

    /* Every percentile, tenth by tenth. */
    rk__hist_snapshot(h, snap);
    for (unsigned pm = 1; pm <= 1000; pm++) {
        uint64_t got = rk__hist_snap_percentile(snap, (double)pm / 10.0);
        assert_within_bound(got, v[ref_rank(pm, n) - 1]);
    }
    free(snap);
    free(h);
}

static void
test_percentiles_uniform(void **state)
{
    (void)state;
    size_t n = 100000;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    uint64_t *v = malloc(n * sizeof(*v));
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = rng_next(&seed) % 1000000; /* 0 .. 1 ms */
    check_against_reference(v, n, 0);
    free(v);
}

static void
test_percentiles_log_uniform(void **state)
{
    (void)state;
    size_t n = 100000;
    uint64_t seed = 42;
    uint64_t *v = malloc(n * sizeof(*v));
    assert_non_null(v);
    /* Spread over every octave 2^0 .. 2^41 so each bucket width occurs. */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&seed);
        unsigned k = (unsigned)(r % 42);
        uint64_t base = UINT64_C(1) << k;
        v[i] = base + (rng_next(&seed) & (base - 1));
    }
    check_against_reference(v, n, 1);
    free(v);
}

static void
test_percentiles_small_sets(void **state)
{
    (void)state;
    uint64_t seed = 7;
    /* Small n exercises the rank arithmetic (p99.9 of 10 values). */
    for (size_t n = 1; n <= 40; n++) {
        uint64_t v[40];
        for (size_t i = 0; i < n; i++)
            v[i] = 1000 + rng_next(&seed) % 100000;
        check_against_reference(v, n, (int)(n & 1));
    }
}

/* A snapshot racing a writer can read min, max and the buckets at
 * different moments. Simulate such torn reads directly: the snapshot must
 * still put min in the lowest occupied bucket and max in the highest. */
static void
test_snapshot_repairs_torn_min_max(void **state)
{
    (void)state;
    rk__hist *h = hist_new();
    rk__hist_snap *snap = malloc(sizeof(*snap));
    assert_non_null(snap);
    size_t b_lo = rk__hist_index(1000), b_hi = rk__hist_index(5000000);

    atomic_store(&h->bucket[b_lo], 3);
    atomic_store(&h->bucket[b_hi], 2);
    /* min/max not yet written (a reader saw the buckets first). */
    rk__hist_snapshot(h, snap);
    assert_int_equal(snap->min, rk__hist_bucket_low(b_lo));
    assert_int_equal(snap->max,
        rk__hist_bucket_low(b_hi) + rk__hist_bucket_width(b_hi) - 1);
    /* Stale values from before a new extreme was recorded. */
    atomic_store(&h->min_c, ~UINT64_C(4000));
    atomic_store(&h->max, 4000);
    rk__hist_snapshot(h, snap);
    assert_int_equal(snap->min, rk__hist_bucket_low(b_lo));
    assert_int_equal(snap->max,
        rk__hist_bucket_low(b_hi) + rk__hist_bucket_width(b_hi) - 1);
    /* Consistent values are kept exactly. */
    atomic_store(&h->min_c, ~UINT64_C(1001));
    atomic_store(&h->max, 5000001);
    rk__hist_snapshot(h, snap);
    assert_int_equal(snap->min, 1001);
    assert_int_equal(snap->max, 5000001);
    assert_true(rk__hist_snap_percentile(snap, 50.0) >= snap->min);
    free(snap);
    free(h);
}

static void
test_single_and_multi_writer_agree(void **state)
{
    (void)state;
    rk__hist *a = hist_new(), *b = hist_new();
    uint64_t seed = 99;
    for (int i = 0; i < 5000; i++) {
        uint64_t x = rng_next(&seed) >> (rng_next(&seed) % 64);
        rk__hist_record(a, x);
        rk__hist_record_mw(b, x);
    }
    assert_memory_equal(a, b, sizeof(*a));
    free(a);
    free(b);
}

static void
test_merge(void **state)
{
    (void)state;
    rk__hist *a = hist_new(), *b = hist_new(), *all = hist_new();
    uint64_t seed = 1234;
    for (int i = 0; i < 3000; i++) {
        uint64_t x = rng_next(&seed) % 50000;
        rk__hist_record(a, x);
        rk__hist_record(all, x);
    }
    for (int i = 0; i < 2000; i++) {
        uint64_t x = 20000 + rng_next(&seed) % 9000000;
        rk__hist_record(b, x);
        rk__hist_record(all, x);
    }
    rk__hist_merge(a, b);
    assert_memory_equal(a, all, sizeof(*a));

    /* Merging an empty histogram changes nothing; into an empty one
     * copies. */
    rk__hist *empty = hist_new(), *copy = hist_new();
    rk__hist_merge(a, empty);
    assert_memory_equal(a, all, sizeof(*a));
    rk__hist_merge(copy, b);
    assert_memory_equal(copy, b, sizeof(*b));

    rk__hist_reset(a);
    assert_memory_equal(a, empty, sizeof(*a));
    free(a);
    free(b);
    free(all);
    free(empty);
    free(copy);
}

static void
test_public_histogram(void **state)
{
    (void)state;
    rk_histogram *h = NULL, *g = NULL;
    assert_int_equal(rk_histogram_create(NULL), RK_EINVAL);
    assert_int_equal(rk_histogram_create(&h), RK_OK);
    assert_int_equal(rk_histogram_create(&g), RK_OK);
    for (uint64_t i = 1; i <= 100; i++)
        rk_histogram_record(h, i * 1000);
    rk_histogram_record(g, 7);
    rk_latency_summary s;
    rk_histogram_summary(h, &s);
    assert_int_equal(s.count, 100);
    assert_int_equal(s.min_ns, 1000);
    assert_int_equal(s.max_ns, 100000);
    assert_within_bound(s.p50_ns, 50000);
    assert_within_bound(s.p90_ns, 90000);
    assert_within_bound(s.p99_ns, 99000);
    assert_int_equal(s.p999_ns, 100000);
    assert_true(s.mean_ns == 50500.0);
    assert_within_bound(rk_histogram_percentile(h, 37.0), 37000);

    rk_histogram_merge(h, g);
    rk_histogram_merge(h, h); /* documented no-op */
    rk_histogram_summary(h, &s);
    assert_int_equal(s.count, 101);
    assert_int_equal(s.min_ns, 7);
    assert_int_equal(rk_histogram_percentile(h, 0.0), 7);

    rk_histogram_reset(h);
    rk_histogram_summary(h, &s);
    assert_int_equal(s.count, 0);
    assert_int_equal(rk_histogram_percentile(h, 50.0), 0);

    /* NULL handles are ignored rather than crashing. */
    rk_histogram_record(NULL, 1);
    rk_histogram_summary(NULL, &s);
    assert_int_equal(s.count, 0);
    assert_int_equal(rk_histogram_percentile(NULL, 50.0), 0);
    rk_histogram_destroy(NULL);
    rk_histogram_destroy(h);
    rk_histogram_destroy(g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_layout),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_edge_values),
        cmocka_unit_test(test_percentiles_uniform),
        cmocka_unit_test(test_percentiles_log_uniform),
        cmocka_unit_test(test_percentiles_small_sets),
        cmocka_unit_test(test_snapshot_repairs_torn_min_max),
        cmocka_unit_test(test_single_and_multi_writer_agree),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_public_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
