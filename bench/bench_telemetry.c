/*
 * bench/bench_telemetry.c - what telemetry costs on the hot path.
 *
 * Suite "telemetry", impl "ringkernel". Every figure is a mean over many
 * operations, in ns per operation unless the unit says otherwise:
 *   record_single_writer     rk__hist_record (a kernel's own thread)
 *   record_multi_writer      rk__hist_record_mw, one thread (uncontended)
 *   record_multi_writer_2t   rk__hist_record_mw, two threads on one
 *                            histogram (contended; per record per thread)
 *   counter_add_sw           rk__counter_add_sw (load + store)
 *   counter_add              rk__counter_add (relaxed fetch_add)
 *   clock_and_record         rk_now_ns() + rk__hist_record: the full cost
 *                            of timing one message
 *   gated_off / gated_on     a batch loop of 64 "messages" whose recording
 *                            is behind rk__telemetry_on(flag), the flag
 *                            read once per batch (ns per message)
 *   snapshot_summary         rk__hist_summary of a populated histogram (us)
 *   stats_format_json        rk_stats_format_json of a small snapshot
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ringkernel/ringkernel.h"
#include "telemetry/stats.h"

#define NVALUES 4096 /* power of two, cycled through by the loops */

static uint64_t values[NVALUES];

static void
fill_values(void)
{
    uint64_t s = 88172645463325252u;
    for (size_t i = 0; i < NVALUES; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* Mostly 100 ns .. 100 us, like message latencies. */
        values[i] = 100 + s % 100000;
    }
}

static void
emit_ns_per_op(const char *name, uint64_t t0, uint64_t t1, uint64_t ops)
{
    char extra[64];
    snprintf(extra, sizeof(extra), "\"ops\":%llu", (unsigned long long)ops);
    bench_emit("telemetry", name, "ringkernel",
        (double)(t1 - t0) / (double)ops, "ns", extra);
}

typedef struct mw_arg {
    rk__hist *h;
    uint64_t n;
    atomic_int *go;
    uint64_t ns;
} mw_arg;

static void *
mw_thread(void *p)
{
    mw_arg *a = p;
    /* Spin until both threads are ready, so the timed loops overlap. */
    atomic_fetch_add(a->go, 1);
    while (atomic_load(a->go) < 2)
        ;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < a->n; i++)
        rk__hist_record_mw(a->h, values[i & (NVALUES - 1)]);
    a->ns = bench_now_ns() - t0;
    return NULL;
}

/* The flag lives in memory the compiler cannot see through, as a
 * runtime's per-kernel "telemetry enabled" field would. */
static volatile int telemetry_flag;

static void
gated_loop(rk__hist *h, uint64_t n, int on)
{
    telemetry_flag = on;
    uint64_t acc = 0;
    uint64_t t0 = bench_now_ns();
    for (uint64_t b = 0; b < n; b += 64) {
        int enabled = rk__telemetry_on(telemetry_flag);
        for (uint64_t i = b; i < b + 64; i++) {
            uint64_t v = values[i & (NVALUES - 1)];
            acc += v; /* stands in for the message's own work */
            if (enabled)
                rk__hist_record(h, v);
        }
    }
    uint64_t t1 = bench_now_ns();
    char extra[64];
    snprintf(extra, sizeof(extra), "\"batch\":64,\"acc\":%llu",
        (unsigned long long)(acc & 0xff));
    bench_emit("telemetry", on ? "gated_on" : "gated_off", "ringkernel",
        (double)(t1 - t0) / (double)n, "ns", extra);
}

int
main(void)
{
    double scale = bench_scale();
    uint64_t n = (uint64_t)(20000000.0 * scale);
    if (n < 1000)
        n = 1000;
    rk__hist *h = calloc(1, sizeof(*h));
    rk__counter *ctr = calloc(1, sizeof(*ctr));
    if (h == NULL || ctr == NULL)
        return 1;
    fill_values();

    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        rk__hist_record(h, values[i & (NVALUES - 1)]);
    emit_ns_per_op("record_single_writer", t0, bench_now_ns(), n);

    rk__hist_reset(h);
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        rk__hist_record_mw(h, values[i & (NVALUES - 1)]);
    emit_ns_per_op("record_multi_writer", t0, bench_now_ns(), n);

    rk__hist_reset(h);
    atomic_int go = 0;
    mw_arg args[2] = { { h, n / 2, &go, 0 }, { h, n / 2, &go, 0 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, mw_thread, &args[i]) != 0)
            return 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    bench_emit("telemetry", "record_multi_writer_2t", "ringkernel",
        (double)(args[0].ns + args[1].ns) / (double)n, "ns", "\"threads\":2");

    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        rk__counter_add_sw(ctr, 1);
    emit_ns_per_op("counter_add_sw", t0, bench_now_ns(), n);

    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        rk__counter_add(ctr, 1);
    emit_ns_per_op("counter_add", t0, bench_now_ns(), n);

    uint64_t nc = n / 4;
    uint64_t prev = rk_now_ns();
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < nc; i++) {
        uint64_t now = rk_now_ns();
        rk__hist_record(h, now - prev);
        prev = now;
    }
    emit_ns_per_op("clock_and_record", t0, bench_now_ns(), nc);

    gated_loop(h, n, 0);
    gated_loop(h, n, 1);

    /* Snapshots of a histogram holding every kind of value. */
    uint64_t ns_snap = (uint64_t)(20000.0 * scale) + 10;
    rk_latency_summary sum;
    uint64_t guard = 0;
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < ns_snap; i++) {
        rk__hist_summary(h, &sum);
        guard += sum.p99_ns;
    }
    uint64_t t1 = bench_now_ns();
    bench_emit("telemetry", "snapshot_summary", "ringkernel",
        (double)(t1 - t0) / (double)ns_snap / 1000.0, "us", NULL);

    static const rk_stat_desc d[] = {
        { "messages_processed", "messages handled", RK_STAT_COUNTER,
            RK_UNIT_MESSAGES },
        { "latency_ns", "handler latency", RK_STAT_GAUGE, RK_UNIT_NS },
    };
    rk_stats st;
    char buf[1024];
    rk__stats_begin(&st, "bench", 0);
    rk__stats_add_counters(&st, d, ctr, 1);
    rk__stats_add_summary(&st, &d[1], &sum);
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < ns_snap; i++)
        guard += (uint64_t)rk_stats_format_json(&st, buf, sizeof(buf), NULL);
    emit_ns_per_op("stats_format_json", t0, bench_now_ns(), ns_snap);

    fprintf(stderr, "bench_telemetry: n=%llu guard=%llu\n",
        (unsigned long long)n, (unsigned long long)guard);
    free(h);
    free(ctr);
    return 0;
}
