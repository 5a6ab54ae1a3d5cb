/*
 * src/telemetry/histogram.h - the embeddable latency histogram.
 *
 * rk__hist is a fixed-size, log-linear histogram of nanosecond values in
 * the style of HdrHistogram. The owner embeds it (in a kernel, a queue) and
 * records on the hot path without allocating; any thread may summarise it
 * at any time. A zeroed rk__hist is a valid empty histogram, so an object
 * obtained from calloc needs no init call.
 *
 * Layout. Values below 32 each get their own bucket. A value v >= 32 with
 * highest set bit k (2^k <= v < 2^(k+1)) falls in one of 32 equal-width
 * sub-buckets of [2^k, 2^(k+1)), each 2^(k-5) wide. So a bucket is never
 * wider than 1/32 of its lower bound; reporting its midpoint keeps every
 * percentile within 1/64 of the exact value (values below 64 are exact).
 * Values >= RK_HISTOGRAM_MAX_NS (2^42) go to one overflow bucket.
 * docs/telemetry.md has the derivation.
 *
 * Concurrency. Every field is _Atomic and every access relaxed: counts need
 * no ordering with anything else, and a reader only needs each word to be
 * untorn. Two writers are offered:
 *   rk__hist_record     single writer (the owning kernel's thread): plain
 *                       relaxed load + store, no read-modify-write;
 *   rk__hist_record_mw  any number of writers: relaxed fetch_add and CAS.
 * Never mix rk__hist_record with any other writer on the same histogram
 * (merge and reset count as writers).
 *
 * Compile with -DRK_TELEMETRY=0 to turn both record functions into no-ops.
 */
#ifndef RK_SRC_TELEMETRY_HISTOGRAM_H
#define RK_SRC_TELEMETRY_HISTOGRAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/telemetry.h"

#ifndef RK_TELEMETRY
#define RK_TELEMETRY 1
#endif

#define RK__HIST_SUB_BITS 5
#define RK__HIST_SUB      (1u << RK__HIST_SUB_BITS) /* sub-buckets per octave */
#define RK__HIST_TOP_BIT  42 /* RK_HISTOGRAM_MAX_NS == 2^42 */
/* Octaves k = 5..41 each hold RK__HIST_SUB buckets after the first 32
 * exact ones; then the overflow bucket. */
#define RK__HIST_OVERFLOW                                                     \
    ((RK__HIST_TOP_BIT - RK__HIST_SUB_BITS + 1) * RK__HIST_SUB)
#define RK__HIST_BUCKETS (RK__HIST_OVERFLOW + 1)

typedef struct rk__hist {
    _Atomic uint64_t sum;   /* values clamped to RK_HISTOGRAM_MAX_NS */
    _Atomic uint64_t max;   /* largest value; 0 when empty */
    _Atomic uint64_t min_c; /* ~min (so zeroed means "no minimum yet") */
    _Atomic uint64_t bucket[RK__HIST_BUCKETS];
} rk__hist;

/* A plain copy of a histogram, taken by rk__hist_snapshot. */
typedef struct rk__hist_snap {
    uint64_t count; /* sum of bucket[] */
    uint64_t sum;
    uint64_t min; /* UINT64_MAX when empty */
    uint64_t max;
    uint64_t bucket[RK__HIST_BUCKETS];
} rk__hist_snap;

/* The bucket that holds v. */
static inline size_t
rk__hist_index(uint64_t v)
{
    if (v < RK__HIST_SUB)
        return (size_t)v;
    if (v >= RK_HISTOGRAM_MAX_NS)
        return RK__HIST_OVERFLOW;
    unsigned k = 63u - (unsigned)__builtin_clzll(v); /* 5 .. 41 */
    unsigned shift = k - RK__HIST_SUB_BITS;
    return (size_t)(shift + 1) * RK__HIST_SUB
        + (size_t)((v >> shift) & (RK__HIST_SUB - 1));
}

/* Records n equal values v. Only the histogram's single writer may call
 * this (relaxed load-and-store updates, no read-modify-write). */
static inline void
rk__hist_record_n(rk__hist *h, uint64_t v, uint64_t n)
{
#if RK_TELEMETRY
    _Atomic uint64_t *b = &h->bucket[rk__hist_index(v)];
    uint64_t clamped = v < RK_HISTOGRAM_MAX_NS ? v : RK_HISTOGRAM_MAX_NS;

    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + n,
        memory_order_relaxed);
    atomic_store_explicit(&h->sum,
        atomic_load_explicit(&h->sum, memory_order_relaxed) + clamped * n,
        memory_order_relaxed);
    if (v > atomic_load_explicit(&h->max, memory_order_relaxed))
        atomic_store_explicit(&h->max, v, memory_order_relaxed);
    if (~v > atomic_load_explicit(&h->min_c, memory_order_relaxed))
        atomic_store_explicit(&h->min_c, ~v, memory_order_relaxed);
#else
    (void)h;
    (void)v;
    (void)n;
#endif
}

/* Records v. Only the histogram's single writer may call this. */
static inline void
rk__hist_record(rk__hist *h, uint64_t v)
{
    rk__hist_record_n(h, v, 1);
}

/* Raises *a to at least v (relaxed CAS loop). */
static inline void
rk__hist_raise(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur
        && !atomic_compare_exchange_weak_explicit(
            a, &cur, v, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* Records v. Safe from any number of threads at once. */
static inline void
rk__hist_record_mw(rk__hist *h, uint64_t v)
{
#if RK_TELEMETRY
    uint64_t clamped = v < RK_HISTOGRAM_MAX_NS ? v : RK_HISTOGRAM_MAX_NS;

    atomic_fetch_add_explicit(
        &h->bucket[rk__hist_index(v)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, clamped, memory_order_relaxed);
    rk__hist_raise(&h->max, v);
    rk__hist_raise(&h->min_c, ~v);
#else
    (void)h;
    (void)v;
#endif
}

/* Empties h (all zero). Counts as a writer. */
void rk__hist_reset(rk__hist *h);

/* Copies h into *out. Safe concurrently with any writer. */
void rk__hist_snapshot(const rk__hist *h, rk__hist_snap *out);

/* Nearest-rank p-th percentile of a snapshot (see telemetry.h). */
uint64_t rk__hist_snap_percentile(const rk__hist_snap *s, double p);

/* Fills *out from a snapshot. */
void rk__hist_snap_summary(const rk__hist_snap *s, rk_latency_summary *out);

/* Snapshot + summary in one call (the snapshot lives on the stack). */
void rk__hist_summary(const rk__hist *h, rk_latency_summary *out);

/* Adds src into dst with relaxed fetch_add, so dst may have concurrent
 * rk__hist_record_mw writers (but not an rk__hist_record writer). */
void rk__hist_merge(rk__hist *dst, const rk__hist *src);

/* Smallest value that lands in bucket i, and the bucket's width. */
uint64_t rk__hist_bucket_low(size_t i);
uint64_t rk__hist_bucket_width(size_t i);

#endif /* RK_SRC_TELEMETRY_HISTOGRAM_H */
