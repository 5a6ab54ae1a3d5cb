/** @file
 * ringkernel/telemetry.h - counters, latency histograms and their snapshots.
 *
 * Statistics live inside the object they describe (a kernel, a queue) and
 * are updated on the hot path with relaxed atomics. Each counter has a
 * static descriptor (rk_stat_desc: name, unit, kind, description) owned by
 * the code that defines the counter; the descriptor tables are never copied
 * and must outlive every snapshot that points at them (in practice they are
 * static const arrays).
 *
 * Readers never lock anything: they take an rk_stats snapshot, a plain
 * value owned by the caller, that copies the counters out and summarises
 * the latency histograms (rk_latency_summary). A snapshot taken while
 * writers run is not one atomic cut across all counters, but every value in
 * it was the counter's value at some instant during the copy.
 *
 * rk_histogram is a standalone latency histogram for application code (for
 * example an example program timing round trips). The runtime embeds the
 * same histogram, without the allocation, in every kernel.
 *
 * Histogram accuracy: values are nanoseconds bucketed log-linearly (32
 * linear sub-buckets per power of two). Every reported percentile is within
 * 1/64 (1.5625%) of the exact nearest-rank value; values below 64 ns are
 * exact; count, min and max are always exact. Values at or above
 * RK_HISTOGRAM_MAX_NS (2^42 ns, about 73 minutes) are counted in one
 * overflow bucket, reported as the recorded maximum, and enter the mean as
 * RK_HISTOGRAM_MAX_NS. See docs/telemetry.md.
 *
 * NULL arguments: functions returning int give RK_EINVAL; the others do
 * nothing or give a neutral answer (0, 0.0, NULL, a zeroed summary).
 * tests/test_bad_input.c holds every function here to that.
 */
#ifndef RINGKERNEL_TELEMETRY_H
#define RINGKERNEL_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ histograms */

/** Largest value tracked with full precision (2^42 ns, about 73 minutes). */
#define RK_HISTOGRAM_MAX_NS (UINT64_C(1) << 42)

/** A latency distribution. All fields are 0 when count is 0. */
typedef struct rk_latency_summary {
    uint64_t count;   /**< values recorded */
    uint64_t min_ns;  /**< smallest value */
    uint64_t max_ns;  /**< largest value */
    uint64_t p50_ns;  /**< median */
    uint64_t p90_ns;  /**< 90th percentile */
    uint64_t p99_ns;  /**< 99th percentile */
    uint64_t p999_ns; /**< 99.9th percentile */
    double mean_ns;   /**< arithmetic mean */
} rk_latency_summary;

/** A standalone histogram (about 10 KiB, one allocation at create). */
typedef struct rk_histogram rk_histogram;

/** Allocates an empty histogram; on success the caller owns *out and frees
 * it with rk_histogram_destroy. RK_EINVAL if out is NULL, RK_ENOMEM. */
int rk_histogram_create(rk_histogram **out);

/** Frees h. NULL is ignored. No thread may use h afterwards. */
void rk_histogram_destroy(rk_histogram *h);

/** Records one value. Safe from any number of threads at once, and
 * concurrently with summaries. Never allocates. */
void rk_histogram_record(rk_histogram *h, uint64_t ns);

/** Fills *out from the current contents. Safe concurrently with writers. */
void rk_histogram_summary(const rk_histogram *h, rk_latency_summary *out);

/** The nearest-rank p-th percentile (0 <= p <= 100, clamped), or 0 if h is
 * empty. p = 0 gives the exact minimum and p = 100 the exact maximum. */
uint64_t rk_histogram_percentile(const rk_histogram *h, double p);

/** Adds every value of src into dst (src is unchanged; dst == src does
 * nothing). Safe concurrently with writers on either histogram. */
void rk_histogram_merge(rk_histogram *dst, const rk_histogram *src);

/** Empties h. Records made concurrently with a reset may be lost or kept,
 * but the histogram stays valid. */
void rk_histogram_reset(rk_histogram *h);

/* ------------------------------------------------------------ counters */

/** A counter only grows (messages handled); a gauge goes up and down (queue
 * depth). Rates are computed for counters only. */
typedef enum rk_stat_kind {
    RK_STAT_COUNTER = 0, /**< only grows */
    RK_STAT_GAUGE = 1,   /**< goes up and down */
} rk_stat_kind;

/** The unit of a statistic. */
typedef enum rk_stat_unit {
    RK_UNIT_NONE = 0, /**< a plain number */
    RK_UNIT_MESSAGES, /**< messages */
    RK_UNIT_BYTES,    /**< bytes */
    RK_UNIT_NS,       /**< nanoseconds */
    RK_UNIT_EVENTS,   /**< occurrences of an event */
} rk_stat_unit;

/** The static description of one counter or histogram. name is a JSON-safe
 * identifier ("messages_processed"); desc is one human sentence. */
typedef struct rk_stat_desc {
    const char *name;  /**< JSON-safe identifier */
    const char *desc;  /**< one human sentence */
    rk_stat_kind kind; /**< counter or gauge */
    rk_stat_unit unit; /**< what the value counts */
} rk_stat_desc;

/** Short unit label: "", "msg", "B", "ns", "events"; "?" if unknown. */
const char *rk_stat_unit_name(rk_stat_unit unit);

/* ------------------------------------------------------------ snapshots */

/** Most counters one rk_stats holds. */
#define RK_STATS_MAX_COUNTERS 32
/** Most latency summaries one rk_stats holds. */
#define RK_STATS_MAX_LATENCIES 4
/** Size of rk_stats.label, with the NUL. */
#define RK_STATS_LABEL_MAX 64

/** One counter's value in an rk_stats snapshot. */
typedef struct rk_stat_value {
    const rk_stat_desc *desc; /**< borrowed: points into a static table */
    uint64_t value;           /**< the value when the snapshot was taken */
} rk_stat_value;

/** One latency summary in an rk_stats snapshot. */
typedef struct rk_stat_latency {
    const rk_stat_desc *desc; /**< borrowed, unit RK_UNIT_NS */
    rk_latency_summary
        summary; /**< the distribution when the snapshot was taken */
} rk_stat_latency;

/**
 * A snapshot of one object's statistics, owned by the caller (a plain value
 * that can be copied and kept). label names the object (a kernel id);
 * start_ns is when the object started counting and taken_ns when the
 * snapshot was taken, both on rk_now_ns().
 */
typedef struct rk_stats {
    char label[RK_STATS_LABEL_MAX]; /**< the object's name (a kernel id) */
    uint64_t start_ns;              /**< when the object started counting */
    uint64_t taken_ns;              /**< when the snapshot was taken */
    size_t ncounters;               /**< entries used in counter */
    rk_stat_value
        counter[RK_STATS_MAX_COUNTERS]; /**< the counters, in add order */
    size_t nlatencies;                  /**< entries used in latency */
    rk_stat_latency
        latency[RK_STATS_MAX_LATENCIES]; /**< the latency summaries, in add
                                            order */
} rk_stats;

/**
 * Building a snapshot by hand (the runtime fills its own from the live
 * counters; these are for application code, e.g. to print an rk_histogram
 * with the formatters below). rk_stats_init empties *s, copies label
 * (truncated to RK_STATS_LABEL_MAX - 1 bytes; NULL means "") and sets
 * start_ns and taken_ns = rk_now_ns(). The add functions append one entry
 * that points at desc (borrowed: it must outlive s) and return RK_OK,
 * RK_ETOOBIG when s is full, or RK_EINVAL for a NULL argument.
 */
void rk_stats_init(rk_stats *s, const char *label, uint64_t start_ns);

/** Appends a counter value to s (see rk_stats_init for the rules). */
int rk_stats_add_value(rk_stats *s, const rk_stat_desc *desc, uint64_t value);

/** Appends a latency summary to s (see rk_stats_init for the rules). */
int rk_stats_add_summary(
    rk_stats *s, const rk_stat_desc *desc, const rk_latency_summary *sum);

/** The counter called name in s, or NULL if there is none. */
const rk_stat_value *rk_stats_find(const rk_stats *s, const char *name);

/** The latency summary called name in s, or NULL if there is none. */
const rk_latency_summary *rk_stats_find_latency(
    const rk_stats *s, const char *name);

/* ------------------------------------------------------------ rates */

/** taken_ns - start_ns, or 0 if the clock values are inverted. */
uint64_t rk_stats_uptime_ns(const rk_stats *s);

/** count / seconds for elapsed_ns; 0.0 when elapsed_ns is 0. */
double rk_rate_per_sec(uint64_t count, uint64_t elapsed_ns);

/** The average rate of counter name over the object's uptime (value /
 * uptime), or 0.0 if it is absent or uptime is 0. */
double rk_stats_rate(const rk_stats *s, const char *name);

/** The rate of counter name between two snapshots of the same object
 * (delta / (cur->taken_ns - prev->taken_ns)); 0.0 if the counter is absent
 * from either, went backwards, or no time passed. */
double rk_stats_rate_between(
    const rk_stats *prev, const rk_stats *cur, const char *name);

/* ------------------------------------------------------------ formatting */

/**
 * Writes s as one JSON object on one line (no newline), e.g.
 *   {"label":"worker","uptime_ns":2000,
 *    "counters":{"messages_processed":10,"queue_depth":0},
 *    "latency":{"latency_ns":{"count":5,"min_ns":1,"max_ns":9,
 *      "mean_ns":4.2,"p50_ns":4,"p90_ns":8,"p99_ns":9,"p999_ns":9}}}
 * "counters" holds every counter and gauge in snapshot order under its
 * descriptor name; "latency" holds each latency summary as an object
 * under its name; both are present (possibly empty). The label is read up
 * to RK_STATS_LABEL_MAX bytes even without a NUL; bytes that are not
 * valid UTF-8 in the label or a name are written as U+FFFD, so the output
 * is always valid JSON (docs/telemetry.md). Like snprintf, at most size
 * bytes are written (always NUL-terminated when size > 0) and *len (if not
 * NULL) receives the full length without the NUL. Returns RK_OK,
 * RK_ETOOBIG if the text was truncated, RK_EINVAL if s is NULL or buf is
 * NULL with size > 0.
 */
int rk_stats_format_json(
    const rk_stats *s, char *buf, size_t size, size_t *len);

/** Same contract, readable multi-line text: one line per counter with its
 * unit, its rate for counters, and one line per latency summary. */
int rk_stats_format_text(
    const rk_stats *s, char *buf, size_t size, size_t *len);

/** Writes rk_stats_format_text (json = 0) or rk_stats_format_json plus a
 * newline (json != 0) to f. Returns RK_OK, RK_EINVAL, RK_ENOMEM (a long
 * snapshot needs a temporary buffer) or RK_EINTERNAL if the write failed. */
int rk_stats_print(FILE *f, const rk_stats *s, int json);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_TELEMETRY_H */
