/*
 * src/telemetry/histogram.c - snapshots, percentiles and merging for
 * rk__hist, and the public rk_histogram wrapper around it.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "telemetry/histogram.h"

struct rk_histogram {
    rk__hist h;
};

uint64_t
rk__hist_bucket_low(size_t i)
{
    if (i < 2 * RK__HIST_SUB)
        return (uint64_t)i; /* exact buckets: width 1 */
    if (i >= RK__HIST_OVERFLOW)
        return RK_HISTOGRAM_MAX_NS;
    unsigned shift = (unsigned)(i / RK__HIST_SUB) - 1;
    return (uint64_t)(RK__HIST_SUB + i % RK__HIST_SUB) << shift;
}

uint64_t
rk__hist_bucket_width(size_t i)
{
    if (i < 2 * RK__HIST_SUB)
        return 1;
    if (i >= RK__HIST_OVERFLOW)
        return UINT64_MAX - RK_HISTOGRAM_MAX_NS + 1;
    return UINT64_C(1) << ((unsigned)(i / RK__HIST_SUB) - 1);
}

void
rk__hist_reset(rk__hist *h)
{
    atomic_store_explicit(&h->sum, 0, memory_order_relaxed);
    atomic_store_explicit(&h->max, 0, memory_order_relaxed);
    atomic_store_explicit(&h->min_c, 0, memory_order_relaxed);
    for (size_t i = 0; i < RK__HIST_BUCKETS; i++)
        atomic_store_explicit(&h->bucket[i], 0, memory_order_relaxed);
}

void
rk__hist_snapshot(const rk__hist *h, rk__hist_snap *out)
{
    uint64_t n = 0;

    for (size_t i = 0; i < RK__HIST_BUCKETS; i++) {
        out->bucket[i]
            = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        n += out->bucket[i];
    }
    out->count = n;
    out->sum = atomic_load_explicit(&h->sum, memory_order_relaxed);
    out->max = atomic_load_explicit(&h->max, memory_order_relaxed);
    out->min = ~atomic_load_explicit(&h->min_c, memory_order_relaxed);
    /*
     * With writers running, min/max/sum may have been read before or after
     * records that the buckets did or did not include. Keep the snapshot
     * self-consistent where it matters for percentiles: with no writer the
     * minimum lies in the lowest occupied bucket and the maximum in the
     * highest, so make that true here too.
     */
    if (n > 0) {
        size_t lo = 0, hi = RK__HIST_BUCKETS - 1;
        while (out->bucket[lo] == 0)
            lo++;
        while (out->bucket[hi] == 0)
            hi--;
        uint64_t lo_min = rk__hist_bucket_low(lo);
        uint64_t lo_max = lo_min + (rk__hist_bucket_width(lo) - 1);
        uint64_t hi_min = rk__hist_bucket_low(hi);
        uint64_t hi_max = hi_min + (rk__hist_bucket_width(hi) - 1);
        if (out->min < lo_min || out->min > lo_max)
            out->min = lo_min;
        if (out->max < hi_min || out->max > hi_max)
            out->max = hi_max;
    }
}

/* The nearest rank (1-based) of percentile p among n values. The small
 * slack absorbs binary rounding of p (99.9 is not exact), so that
 * p = 99.9 of 1000 values gives rank 999, not 1000. */
static uint64_t
nearest_rank(double p, uint64_t n)
{
    if (!(p > 0.0)) /* also catches NaN */
        return 1;
    if (p >= 100.0)
        return n;
    double r = p / 100.0 * (double)n - 1e-9;
    if (r <= 1.0)
        return 1;
    if (r >= (double)n)
        return n;
    uint64_t k = (uint64_t)r;         /* floor, r > 1 */
    return (double)k < r ? k + 1 : k; /* ceil without libm */
}

uint64_t
rk__hist_snap_percentile(const rk__hist_snap *s, double p)
{
    if (s->count == 0)
        return 0;
    uint64_t rank = nearest_rank(p, s->count);
    if (rank == 1)
        return s->min;
    if (rank == s->count)
        return s->max;

    uint64_t seen = 0;
    size_t i = 0;
    for (; i < RK__HIST_BUCKETS; i++) {
        seen += s->bucket[i];
        if (seen >= rank)
            break;
    }
    RK_ASSERT(i < RK__HIST_BUCKETS);
    /* The rank-th value lies in bucket i; report its midpoint, which is
     * within half a bucket width of it. The overflow bucket has no upper
     * bound, so it reports the maximum. */
    uint64_t v = i == RK__HIST_OVERFLOW
        ? s->max
        : rk__hist_bucket_low(i) + (rk__hist_bucket_width(i) - 1) / 2;
    if (v < s->min)
        v = s->min;
    if (v > s->max)
        v = s->max;
    return v;
}

void
rk__hist_snap_summary(const rk__hist_snap *s, rk_latency_summary *out)
{
    memset(out, 0, sizeof(*out));
    if (s->count == 0)
        return;
    out->count = s->count;
    out->min_ns = s->min;
    out->max_ns = s->max;
    out->p50_ns = rk__hist_snap_percentile(s, 50.0);
    out->p90_ns = rk__hist_snap_percentile(s, 90.0);
    out->p99_ns = rk__hist_snap_percentile(s, 99.0);
    out->p999_ns = rk__hist_snap_percentile(s, 99.9);
    out->mean_ns = (double)s->sum / (double)s->count;
}

void
rk__hist_summary(const rk__hist *h, rk_latency_summary *out)
{
    rk__hist_snap s;

    rk__hist_snapshot(h, &s);
    rk__hist_snap_summary(&s, out);
}

void
rk__hist_merge(rk__hist *dst, const rk__hist *src)
{
    for (size_t i = 0; i < RK__HIST_BUCKETS; i++) {
        uint64_t n
            = atomic_load_explicit(&src->bucket[i], memory_order_relaxed);
        if (n != 0)
            atomic_fetch_add_explicit(
                &dst->bucket[i], n, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&dst->sum,
        atomic_load_explicit(&src->sum, memory_order_relaxed),
        memory_order_relaxed);
    rk__hist_raise(
        &dst->max, atomic_load_explicit(&src->max, memory_order_relaxed));
    rk__hist_raise(
        &dst->min_c, atomic_load_explicit(&src->min_c, memory_order_relaxed));
}

/* ------------------------------------------------------ public wrapper */

int
rk_histogram_create(rk_histogram **out)
{
    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_histogram_create: out is NULL");
    rk_histogram *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return rk__fail(
            RK_ENOMEM, "rk_histogram_create: %zu bytes", sizeof(*h));
    *out = h;
    return RK_OK;
}

void
rk_histogram_destroy(rk_histogram *h)
{
    free(h);
}

void
rk_histogram_record(rk_histogram *h, uint64_t ns)
{
    if (h != NULL)
        rk__hist_record_mw(&h->h, ns);
}

void
rk_histogram_summary(const rk_histogram *h, rk_latency_summary *out)
{
    if (out == NULL)
        return;
    if (h == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    rk__hist_summary(&h->h, out);
}

uint64_t
rk_histogram_percentile(const rk_histogram *h, double p)
{
    rk__hist_snap s;

    if (h == NULL)
        return 0;
    rk__hist_snapshot(&h->h, &s);
    return rk__hist_snap_percentile(&s, p);
}

void
rk_histogram_merge(rk_histogram *dst, const rk_histogram *src)
{
    if (dst != NULL && src != NULL && dst != src)
        rk__hist_merge(&dst->h, &src->h);
}

void
rk_histogram_reset(rk_histogram *h)
{
    if (h != NULL)
        rk__hist_reset(&h->h);
}
