/*
 * src/telemetry/stats.h - counters that live in the object they describe.
 *
 * An object (a kernel, a queue) keeps its statistics as an array of
 * rk__counter next to a static const table of rk_stat_desc with the same
 * order. The usual way to keep the two in step is one X-macro list:
 *
 *   #define KSTATS(X)                                                    \
 *       X(PROCESSED, "messages_processed", RK_STAT_COUNTER,              \
 *         RK_UNIT_MESSAGES, "messages handled by the kernel")            \
 *       X(DEPTH, "queue_depth", RK_STAT_GAUGE, RK_UNIT_MESSAGES,         \
 *         "messages waiting in the inbox")
 *   enum { #define E(id, ...) KSTAT_##id, KSTATS(E) KSTAT_COUNT };
 *   static const rk_stat_desc kstat_desc[] = {
 *       #define D(id, n, k, u, d) {n, d, k, u}, KSTATS(D) };
 *   rk__counter stat[KSTAT_COUNT];     (inside the kernel struct)
 *
 * Writers use relaxed atomics: counters need no ordering with the data they
 * count, and readers only need untorn words. The _sw variants are for a
 * counter with exactly one writing thread (load + store, no locked
 * instruction); the others allow any number of writers.
 *
 * Snapshots: rk__stats_begin, then rk__stats_add_counters and
 * rk__stats_add_latency for each group, fill a caller-owned rk_stats. All
 * three are safe concurrently with writers.
 *
 * Switching telemetry off. rk__telemetry_on(flag) is how hot paths gate the
 * optional work (reading the clock, recording latency): test it once per
 * batch. With -DRK_TELEMETRY=0 it is the constant 0 and the compiler drops
 * the gated code entirely.
 */
#ifndef RK_SRC_TELEMETRY_STATS_H
#define RK_SRC_TELEMETRY_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/telemetry.h"
#include "telemetry/histogram.h"

#if RK_TELEMETRY
#define rk__telemetry_on(flag) (flag)
#else
#define rk__telemetry_on(flag) ((void)(flag), 0)
#endif

typedef _Atomic uint64_t rk__counter;

/* c += n; any number of writers. */
static inline void
rk__counter_add(rk__counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* c -= n (gauges); any number of writers. */
static inline void
rk__counter_sub(rk__counter *c, uint64_t n)
{
    atomic_fetch_sub_explicit(c, n, memory_order_relaxed);
}

/* c += n; only the counter's single writer may call this. */
static inline void
rk__counter_add_sw(rk__counter *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
        memory_order_relaxed);
}

/* c = v (gauges). */
static inline void
rk__counter_set(rk__counter *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t
rk__counter_get(const rk__counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* Empties *out, copies label (truncated to RK_STATS_LABEL_MAX - 1 bytes;
 * NULL means ""), and stamps start_ns and taken_ns = rk_now_ns(). */
void rk__stats_begin(rk_stats *out, const char *label, uint64_t start_ns);

/* Appends n counters described by desc[0..n). Returns RK_OK, or RK_ETOOBIG
 * (appending none) if they would exceed RK_STATS_MAX_COUNTERS. */
int rk__stats_add_counters(rk_stats *out, const rk_stat_desc *desc,
    const rk__counter *values, size_t n);

/* Appends the summary of h under desc. RK_OK or RK_ETOOBIG. */
int rk__stats_add_latency(
    rk_stats *out, const rk_stat_desc *desc, const rk__hist *h);

/* Appends an already computed summary under desc. RK_OK or RK_ETOOBIG. */
int rk__stats_add_summary(
    rk_stats *out, const rk_stat_desc *desc, const rk_latency_summary *sum);

#endif /* RK_SRC_TELEMETRY_STATS_H */
