/*
 * streaming_pipeline - a three-stage sensor pipeline on ring kernels.
 *
 *   host --Generate--> source --Reading--> normalize --Scored--> aggregate
 *                                              |                    |
 *                                       topic "alerts"         Summary -> host
 *                                              v
 *                                           alerter --Reading-> host
 *
 * source synthesises readings for four sensors (with a few spikes),
 * normalize turns each into a z-score against a running mean and variance
 * and publishes the outliers on the "alerts" topic, aggregate keeps
 * per-sensor statistics and reports them once it has seen every reading.
 * Stages talk kernel to kernel (rk_connect); the host only starts the run
 * and reads the results. At the end every kernel's telemetry is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ringkernel/ringkernel.h"

#define SENSORS     4
#ifdef RK_DEBUG
#define READINGS 40000u /* sanitizer and debug builds: a shorter stream */
#else
#define READINGS 200000u
#endif
#define SPIKE_EVERY 9973u /* every so often a reading goes wild */
#define ALERT_Z     6.0

/* ------------------------------------------------------ message types */

#define GENERATE_FIELDS(X) X(count, RK_UINT32)
#define READING_FIELDS(X)                                                     \
    X(seq, RK_UINT64) X(sensor, RK_UINT32) X(value, RK_DOUBLE)
#define SCORED_FIELDS(X)                                                      \
    X(seq, RK_UINT64) X(sensor, RK_UINT32) X(value, RK_DOUBLE) X(z, RK_DOUBLE)
#define SUMMARY_FIELDS(X)                                                     \
    X(sensor, RK_UINT32)                                                      \
    X(count, RK_UINT64) X(mean, RK_DOUBLE) X(min, RK_DOUBLE)                  \
        X(max, RK_DOUBLE) X(max_abs_z, RK_DOUBLE)

RK_MSGTYPE_DECLARE(generate, GENERATE_FIELDS);
RK_MSGTYPE_DEFINE(generate, "Generate", 100, GENERATE_FIELDS);
RK_MSGTYPE_DECLARE(reading, READING_FIELDS);
RK_MSGTYPE_DEFINE(reading, "Reading", 101, READING_FIELDS);
RK_MSGTYPE_DECLARE(scored, SCORED_FIELDS);
RK_MSGTYPE_DEFINE(scored, "Scored", 102, SCORED_FIELDS);
RK_MSGTYPE_DECLARE(summary, SUMMARY_FIELDS);
RK_MSGTYPE_DEFINE(summary, "Summary", 103, SUMMARY_FIELDS);

/* ------------------------------------------------------------ kernels */

/* source: on each Generate, emits that many readings round-robin. */
static int
source_actor(rk_ctx *ctx)
{
    uint64_t seq = 0;
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        const generate *g = m.data;
        for (uint32_t i = 0; i < g->count; i++, seq++) {
            reading r = { .seq = seq, .sensor = (uint32_t)(seq % SENSORS) };
            r.value = 20.0 + 5.0 * r.sensor + sin((double)seq * 0.001)
                + 0.1 * (double)(seq * 2654435761u % 1000) / 1000.0;
            if (seq % SPIKE_EVERY == SPIKE_EVERY - 1)
                r.value += 50.0;
            if ((rc = rk_ctx_send(ctx, reading_msgtype.id, &r, sizeof(r))))
                return rc;
        }
    }
    return rc; /* RK_ECLOSED at terminate counts as a clean end */
}

/* normalize: Welford running mean/variance per sensor -> z-score. */
typedef struct norm_state {
    uint64_t n[SENSORS];
    double mean[SENSORS], m2[SENSORS];
} norm_state;

static int
normalize_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    norm_state *st = rk_ctx_user(ctx);
    const reading *r = m->data;
    uint32_t s = r->sensor % SENSORS;
    scored out = { .seq = r->seq, .sensor = s, .value = r->value };
    double sd = st->n[s] > 1 ? sqrt(st->m2[s] / (double)(st->n[s] - 1)) : 0;
    double d;
    int rc;

    out.z = sd > 0 ? (r->value - st->mean[s]) / sd : 0;
    st->n[s]++;
    d = r->value - st->mean[s];
    st->mean[s] += d / (double)st->n[s];
    st->m2[s] += d * (r->value - st->mean[s]);
    if (fabs(out.z) > ALERT_Z
        && (rc = rk_ctx_publish(
                ctx, "alerts", reading_msgtype.id, r, sizeof(*r)))
            != RK_OK)
        return rc;
    return rk_ctx_send(ctx, scored_msgtype.id, &out, sizeof(out));
}

/* aggregate: per-sensor statistics, reported after `expected` readings. */
typedef struct agg_state {
    uint64_t expected, seen;
    summary s[SENSORS];
    double sum[SENSORS];
} agg_state;

static int
aggregate_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    agg_state *st = rk_ctx_user(ctx);
    const scored *r = m->data;
    summary *s = &st->s[r->sensor];

    if (s->count == 0 || r->value < s->min)
        s->min = r->value;
    if (s->count == 0 || r->value > s->max)
        s->max = r->value;
    if (fabs(r->z) > s->max_abs_z)
        s->max_abs_z = fabs(r->z);
    s->count++;
    st->sum[r->sensor] += r->value;
    if (++st->seen == st->expected) {
        for (uint32_t i = 0; i < SENSORS; i++) {
            int rc;
            st->s[i].sensor = i;
            st->s[i].mean = st->sum[i] / (double)st->s[i].count;
            rc = rk_ctx_send(
                ctx, summary_msgtype.id, &st->s[i], sizeof(st->s[i]));
            if (rc != RK_OK)
                return rc;
        }
    }
    return RK_OK;
}

/* alerter: forwards every alert to the host. */
static int
alerter_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_send(ctx, m->hdr->type_id, m->data, m->len);
}

/* --------------------------------------------------------------- host */

static int
fail(const char *what, int rc)
{
    fprintf(stderr, "streaming_pipeline: %s: %s (%s)\n", what, rk_strerror(rc),
        rk_errdetail());
    return 1;
}

#define TRY(what, call)                                                       \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != RK_OK)                                                     \
            return fail(what, rc_);                                           \
    } while (0)

static int
run(rk_runtime *rt)
{
    static norm_state norm;
    static agg_state agg = { .expected = READINGS };
    const int64_t wait = 60 * INT64_C(1000000000); /* slow CI, TSan */
    const rk_kernel_def defs[] = {
        { .id = "source",
            .actor = source_actor,
            .config = { .input_type = &generate_msgtype,
                .output_type = &reading_msgtype } },
        { .id = "normalize",
            .handler = normalize_handler,
            .config = { .input_type = &reading_msgtype,
                .output_type = &scored_msgtype,
                .input_capacity = 4096,
                .user = &norm } },
        { .id = "aggregate",
            .handler = aggregate_handler,
            .config = { .input_type = &scored_msgtype,
                .output_type = &summary_msgtype,
                .input_capacity = 4096,
                .user = &agg } },
        { .id = "alerter",
            .handler = alerter_handler,
            .config = { .input_type = &reading_msgtype,
                .output_type = &reading_msgtype } },
    };
    const size_t nk = sizeof(defs) / sizeof(defs[0]);
    generate g = { .count = READINGS };
    rk_kernel src, aggk, alk;
    unsigned alerts = 0;
    uint64_t t0, t1;

    for (size_t i = 0; i < nk; i++) {
        TRY("register", rk_runtime_register(rt, &defs[i]));
        TRY("launch", rk_kernel_launch(rt, defs[i].id));
    }
    TRY("connect", rk_connect(rt, "source", "normalize"));
    TRY("connect", rk_connect(rt, "normalize", "aggregate"));
    TRY("subscribe", rk_subscribe(rt, "alerter", "alerts"));
    for (size_t i = 0; i < nk; i++)
        TRY("activate", rk_kernel_activate(rt, defs[i].id));
    TRY("lookup", rk_kernel_lookup(rt, "source", &src));
    TRY("lookup", rk_kernel_lookup(rt, "aggregate", &aggk));
    TRY("lookup", rk_kernel_lookup(rt, "alerter", &alk));

    printf("streaming %u readings from %d sensors through "
           "source -> normalize -> aggregate\n\n",
        READINGS, SENSORS);
    t0 = rk_now_ns();
    TRY("send",
        rk_send(rt, src, generate_msgtype.id, &g, sizeof(g),
            RK_MSG_PRIORITY_DEFAULT, wait));
    printf("sensor  readings      mean       min       max  max |z|\n");
    for (int i = 0; i < SENSORS; i++) {
        summary s;
        size_t len;
        TRY("receive summary",
            rk_recv(rt, aggk, NULL, &s, sizeof(s), &len, wait));
        printf("%6u %9llu %9.3f %9.3f %9.3f %8.1f\n", s.sensor,
            (unsigned long long)s.count, s.mean, s.min, s.max, s.max_abs_z);
    }
    t1 = rk_now_ns();
    /* Every alert was published before its reading reached aggregate. */
    TRY("terminate", rk_kernel_terminate(rt, "normalize", wait));
    TRY("terminate", rk_kernel_terminate(rt, "alerter", wait));
    /* The old handle is stale now that alerter's instance has ended; a
     * fresh one still reads what it left in its output. */
    TRY("lookup", rk_kernel_lookup(rt, "alerter", &alk));
    for (;;) {
        reading r;
        size_t len;
        if (rk_recv(rt, alk, NULL, &r, sizeof(r), &len, RK_NO_WAIT) != RK_OK)
            break;
        if (alerts++ < 5)
            printf("%salert: sensor %u reading #%llu = %.2f\n",
                alerts == 1 ? "\n" : "", r.sensor, (unsigned long long)r.seq,
                r.value);
    }
    printf("%u alerts on topic \"alerts\"; %.0f readings/s end to end\n\n",
        alerts, (double)READINGS * 1e9 / (double)(t1 - t0));

    printf("per-kernel telemetry (latency: send -> dequeue)\n");
    printf("%-10s %9s %9s %7s %8s %8s %8s %8s %10s\n", "kernel", "processed",
        "sent", "pending", "p50 us", "p99 us", "p99.9 us", "max us", "msgs/s");
    for (size_t i = 0; i < nk; i++) {
        rk_kernel_stats st;
        TRY("stats", rk_kernel_stats_get(rt, defs[i].id, &st));
        printf("%-10s %9llu %9llu %7llu %8.1f %8.1f %8.1f %8.1f %10.0f\n",
            defs[i].id, (unsigned long long)st.processed,
            (unsigned long long)st.sent, (unsigned long long)st.pending,
            (double)st.latency_p50_ns / 1e3, (double)st.latency_p99_ns / 1e3,
            (double)st.latency_p999_ns / 1e3, (double)st.latency_max_ns / 1e3,
            st.throughput);
    }
    /* The same figures as JSON, e.g. for a dashboard. */
    {
        rk_stats st;
        TRY("telemetry", rk_kernel_telemetry(rt, "normalize", &st));
        printf("\nnormalize as JSON: ");
        rk_stats_print(stdout, &st, 1);
    }
    return 0;
}

int
main(void)
{
    rk_runtime *rt;
    int rc = rk_runtime_create(&rt, NULL);

    if (rc != RK_OK)
        return fail("create", rc);
    rc = run(rt);
    rk_runtime_destroy(rt); /* terminates what is still running */
    return rc;
}
