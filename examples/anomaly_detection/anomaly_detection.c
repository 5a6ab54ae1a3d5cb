/*
 * anomaly_detection - a streaming pipeline of four ring kernels:
 *
 *   source --K2K--> detector --K2K--> alerter ==topic "alerts"==> counter
 *                       \======= topic "metrics" ================> counter
 *
 *   source    generates sensor readings (4 sensors, a slow sine baseline
 *             plus Gaussian noise, deterministic PRNG) with spikes injected
 *             at known positions, when the host sends StreamStart.
 *   detector  keeps a rolling window (mean and variance) per sensor and
 *             flags readings whose z-score exceeds a threshold; flagged
 *             readings stay out of the window. Publishes progress metrics
 *             at normal priority.
 *   alerter   turns anomalies into Alert messages (msgpack, so any
 *             PyDotCompute subscriber can read them) and publishes them at
 *             HIGH priority, or SYSTEM for critical ones.
 *   counter   a subscriber with priority bands: alerts overtake metrics in
 *             its queue. It counts what arrives and reports to the host
 *             when the end-of-stream marker comes through.
 *
 * The host then checks: every injected anomaly was alerted (recall 100 %),
 * the pipeline's alerts are exactly those of the same detector run
 * directly on the host over the same stream (nothing lost, duplicated or
 * invented on the way), every alert travelled in the HIGH or SYSTEM band,
 * and false positives stay rare. Exit status 0 means all of that held.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define SENSORS       4
#define WINDOW        64  /* readings per sensor in the rolling window */
#define Z_THRESHOLD   6.0 /* flag |x - mean| > 6 sigma */
#define Z_CRITICAL    9.0 /* alerts above this go in the SYSTEM band */
#define STRIDE        997 /* about one injected anomaly per STRIDE readings */
#define METRICS_EVERY 5000
#define TIMEOUT_NS    (60 * INT64_C(1000000000))
#ifdef RK_DEBUG
#define READINGS 40000 /* sanitizer builds: shorter stream */
#else
#define READINGS 200000
#endif

#define PRIO_HIGH   192 /* RK_BAND_HIGH */
#define PRIO_SYSTEM 240 /* RK_BAND_SYSTEM */

/* ------------------------------------------------------ message types */

#define START_FIELDS(X) X(count, RK_UINT64)
#define READING_FIELDS(X)                                                     \
    X(seq, RK_UINT64)                                                         \
    X(sensor, RK_UINT32)                                                      \
    X(value, RK_DOUBLE)
#define END_FIELDS(X) X(count, RK_UINT64)
#define ANOMALY_FIELDS(X)                                                     \
    X(seq, RK_UINT64)                                                         \
    X(sensor, RK_UINT32)                                                      \
    X(value, RK_DOUBLE)                                                       \
    X(mean, RK_DOUBLE)                                                        \
    X(z, RK_DOUBLE)
#define ALERT_FIELDS(X)                                                       \
    X(seq, RK_UINT64)                                                         \
    X(sensor, RK_UINT32)                                                      \
    X(critical, RK_BOOL)                                                      \
    X(value, RK_DOUBLE)                                                       \
    X(z, RK_DOUBLE)
#define METRICS_FIELDS(X)                                                     \
    X(readings, RK_UINT64)                                                    \
    X(anomalies, RK_UINT64)
#define SUMMARY_FIELDS(X)                                                     \
    X(alerts, RK_UINT64)                                                      \
    X(readings, RK_UINT64)

RK_MSGTYPE_DECLARE(stream_start, START_FIELDS);
RK_MSGTYPE_DEFINE(stream_start, "StreamStart", 3001, START_FIELDS);
RK_MSGTYPE_DECLARE(reading, READING_FIELDS);
RK_MSGTYPE_DEFINE(reading, "SensorReading", 3002, READING_FIELDS);
RK_MSGTYPE_DECLARE(stream_end, END_FIELDS);
RK_MSGTYPE_DEFINE(stream_end, "StreamEnd", 3003, END_FIELDS);
RK_MSGTYPE_DECLARE(anomaly, ANOMALY_FIELDS);
RK_MSGTYPE_DEFINE(anomaly, "Anomaly", 3004, ANOMALY_FIELDS);
RK_MSGTYPE_DECLARE(alert, ALERT_FIELDS);
RK_MSGTYPE_DEFINE(alert, "Alert", 3005, ALERT_FIELDS);
RK_MSGTYPE_DECLARE(metrics, METRICS_FIELDS);
RK_MSGTYPE_DEFINE(metrics, "StreamMetrics", 3006, METRICS_FIELDS);
RK_MSGTYPE_DECLARE(summary, SUMMARY_FIELDS);
RK_MSGTYPE_DEFINE(summary, "AlertSummary", 3007, SUMMARY_FIELDS);

/* ------------------------------------------------------- the stream */

/* What the source generates; filled by the host before launch and only
 * read afterwards. */
typedef struct stream_cfg {
    uint64_t seed;
    uint64_t *injected; /* sorted positions of the spikes */
    size_t ninjected;
} stream_cfg;

static uint64_t
splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1]. */
static double
uniform(uint64_t *s)
{
    return ((double)(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
}

/* Reading number seq (readings are generated in order from *rng). */
static reading
generate(const stream_cfg *c, uint64_t seq, uint64_t *rng, size_t *next_inj)
{
    reading r = { .seq = seq, .sensor = (uint32_t)(seq % SENSORS) };
    double t = (double)(seq / SENSORS);
    /* Box-Muller: one standard normal per reading. */
    double noise = sqrt(-2.0 * log(uniform(rng)))
        * cos(2.0 * 3.14159265358979323846 * uniform(rng));

    r.value = 20.0 + 10.0 * r.sensor
        + 3.0 * sin(t / 240.0 + r.sensor) /* slow baseline drift */
        + noise;
    if (*next_inj < c->ninjected && c->injected[*next_inj] == seq) {
        /* A spike of 8 to 14 sigma, either way. */
        uint64_t h = c->seed ^ seq;
        double mag = 8.0 + 6.0 * uniform(&h);
        r.value += (splitmix64(&h) & 1) ? mag : -mag;
        ++*next_inj;
    }
    return r;
}

/* Spike positions: one per STRIDE readings with jitter, after the windows
 * have filled. */
static size_t
place_anomalies(uint64_t seed, uint64_t count, uint64_t *out, size_t cap)
{
    size_t n = 0;

    for (uint64_t base = 4 * WINDOW * SENSORS; n < cap; base += STRIDE) {
        uint64_t pos = base + splitmix64(&seed) % (STRIDE / 2);
        if (pos >= count)
            break;
        out[n++] = pos;
    }
    return n;
}

/* ----------------------------------------------------- the detector */

typedef struct window {
    double v[WINDOW];
    double sum, sumsq;
    uint32_t len, head;
} window;

typedef struct detector_state {
    window w[SENSORS];
    uint64_t readings, anomalies;
} detector_state;

/*
 * One reading through the detector: true (and *out filled) when it is an
 * anomaly. Only normal readings enter the window, so a spike does not
 * inflate the variance that judges the next ones. The same function runs
 * in the detector kernel and in the host's reference pass.
 */
static bool
detect(detector_state *d, const reading *r, anomaly *out)
{
    window *w = &d->w[r->sensor % SENSORS];

    d->readings++;
    if (w->len == WINDOW) {
        double mean = w->sum / WINDOW;
        double var = (w->sumsq - w->sum * mean) / (WINDOW - 1);
        double z = fabs(r->value - mean) / sqrt(var > 1e-12 ? var : 1e-12);
        if (z > Z_THRESHOLD) {
            *out = (anomaly) { r->seq, r->sensor, r->value, mean, z };
            d->anomalies++;
            return true;
        }
        w->sum -= w->v[w->head];
        w->sumsq -= w->v[w->head] * w->v[w->head];
    } else {
        w->len++;
    }
    w->v[w->head] = r->value;
    w->sum += r->value;
    w->sumsq += r->value * r->value;
    w->head = (w->head + 1) % WINDOW;
    return false;
}

/* ------------------------------------------------------ the kernels */

static int
source_actor(rk_ctx *ctx)
{
    const stream_cfg *c = rk_ctx_user(ctx);
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        stream_start s;
        uint64_t rng = c->seed;
        size_t next_inj = 0;
        if (rk_msg_fixed_read(&stream_start_msgtype, m.data, m.len, &s)
            != RK_OK)
            continue;
        /* rk_ctx_send goes to the detector (rk_connect); it blocks while
         * the detector's queue is full, which paces the source. */
        for (uint64_t i = 0; i < s.count; i++) {
            reading r = generate(c, i, &rng, &next_inj);
            if ((rc = rk_ctx_send(ctx, reading_msgtype.id, &r, sizeof(r)))
                != RK_OK)
                return rc;
        }
        stream_end e = { s.count };
        if ((rc = rk_ctx_send(ctx, stream_end_msgtype.id, &e, sizeof(e)))
            != RK_OK)
            return rc;
    }
    return rc == RK_ECLOSED ? RK_OK : rc;
}

static int
publish_metrics(rk_ctx *ctx, const detector_state *d)
{
    metrics mt = { d->readings, d->anomalies };

    return rk_ctx_publish(ctx, "metrics", metrics_msgtype.id, &mt, sizeof(mt));
}

/* Handler style: one call per message, state in the kernel's user data
 * (touched only by this kernel's thread while it runs). */
static int
detector_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    detector_state *d = rk_ctx_user(ctx);
    reading r;
    anomaly a;
    int rc;

    if (m->hdr->type_id == stream_end_msgtype.id) {
        /* Final metrics, then pass the marker on down the pipeline. */
        if ((rc = publish_metrics(ctx, d)) != RK_OK)
            return rc;
        return rk_ctx_send(ctx, stream_end_msgtype.id, m->data, m->len);
    }
    if ((rc = rk_msg_fixed_read(&reading_msgtype, m->data, m->len, &r))
        != RK_OK)
        return rc;
    if (detect(d, &r, &a)
        && (rc = rk_ctx_send(ctx, anomaly_msgtype.id, &a, sizeof(a))) != RK_OK)
        return rc;
    if (d->readings % METRICS_EVERY == 0)
        return publish_metrics(ctx, d);
    return RK_OK;
}

static int
alerter_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    char buf[256];
    size_t len;
    anomaly a;
    int rc;

    /* Alerts go out above the readings' normal priority: HIGH, or SYSTEM
     * for critical ones, so a subscriber with priority bands takes them
     * first. */
    if (m->hdr->type_id == stream_end_msgtype.id) {
        if ((rc = rk_ctx_set_priority(ctx, PRIO_HIGH)) != RK_OK)
            return rc;
        return rk_ctx_publish(
            ctx, "alerts", stream_end_msgtype.id, m->data, m->len);
    }
    if ((rc = rk_msg_fixed_read(&anomaly_msgtype, m->data, m->len, &a))
        != RK_OK)
        return rc;
    alert al = { a.seq, a.sensor, a.z > Z_CRITICAL, a.value, a.z };
    if ((rc = rk_msg_encode(&alert_msgtype, NULL, &al, buf, sizeof(buf), &len))
        != RK_OK)
        return rc;
    if ((rc = rk_ctx_set_priority(ctx, al.critical ? PRIO_SYSTEM : PRIO_HIGH))
        != RK_OK)
        return rc;
    return rk_ctx_publish(ctx, "alerts", alert_msgtype.id, buf, len);
}

/* What the counter saw; the host reads it after terminating the counter. */
typedef struct tally {
    uint64_t alerts, critical, below_high, metrics, last_readings;
    uint64_t *seqs; /* alert positions in arrival order */
    size_t cap;
    uint64_t band[RK_BAND_COUNT];
} tally;

static int
counter_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    tally *t = rk_ctx_user(ctx);
    rk_band band = rk_priority_band(m->hdr->priority);
    int rc;

    t->band[band]++;
    if (m->hdr->type_id == alert_msgtype.id) {
        alert al;
        if ((rc = rk_msg_decode(
                 &alert_msgtype, m->data, m->len, &al, NULL, RK_MSG_STRICT))
            != RK_OK)
            return rc;
        if (t->alerts < t->cap)
            t->seqs[t->alerts] = al.seq;
        t->alerts++;
        t->critical += al.critical;
        t->below_high += band < RK_BAND_HIGH;
    } else if (m->hdr->type_id == metrics_msgtype.id) {
        metrics mt;
        if ((rc = rk_msg_fixed_read(&metrics_msgtype, m->data, m->len, &mt))
            != RK_OK)
            return rc;
        t->metrics++;
        if (mt.readings > t->last_readings)
            t->last_readings = mt.readings;
    } else if (m->hdr->type_id == stream_end_msgtype.id) {
        /* Every alert was published before this marker, in a band at
         * least as high, so all of them have been counted by now. */
        stream_end e;
        if ((rc = rk_msg_fixed_read(&stream_end_msgtype, m->data, m->len, &e))
            != RK_OK)
            return rc;
        summary s = { t->alerts, e.count };
        return rk_ctx_send(ctx, summary_msgtype.id, &s, sizeof(s));
    }
    return RK_OK;
}

/* ------------------------------------------------------------- the host */

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

static bool
contains(const uint64_t *sorted, size_t n, uint64_t v)
{
    return bsearch(&v, sorted, n, sizeof(v), cmp_u64) != NULL;
}

static void
print_kernel_stats(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s;

    if (rk_kernel_stats_get(rt, id, &s) != RK_OK)
        return;
    printf("  %-8s %-10s processed %7" PRIu64 " sent %7" PRIu64
           " errors %" PRIu64 " high water %4" PRIu64 " p50 %7" PRIu64
           " ns p99 %8" PRIu64 " ns %9.0f msg/s\n",
        id, rk_kernel_state_name(s.state), s.processed, s.sent, s.errors,
        s.queue_high_water, s.latency_p50_ns, s.latency_p99_ns, s.throughput);
}

static const char *const pipeline[]
    = { "source", "detector", "alerter", "counter" };

static int
start_pipeline(rk_runtime *rt, stream_cfg *sc, detector_state *ds, tally *t)
{
    rk_kernel_def defs[4] = {
        { .id = "source", .actor = source_actor },
        { .id = "detector", .handler = detector_handler },
        { .id = "alerter", .handler = alerter_handler },
        { .id = "counter", .handler = counter_handler },
    };
    int rc = RK_OK;

    defs[0].config.user = sc;
    defs[1].config.user = ds;
    defs[1].config.input_capacity = 4096;
    /* Only the source's route feeds the detector, and only the detector's
     * the alerter: their input queues can take the SPSC fast path. */
    defs[1].config.single_producer = true;
    defs[2].config.single_producer = true;
    defs[3].config.user = t;
    defs[3].config.priority_bands = true;
    for (int i = 0; i < 4 && rc == RK_OK; i++)
        if ((rc = rk_runtime_register(rt, &defs[i])) == RK_OK)
            rc = rk_kernel_launch(rt, defs[i].id);
    if (rc == RK_OK)
        rc = rk_connect(rt, "source", "detector");
    if (rc == RK_OK)
        rc = rk_connect(rt, "detector", "alerter");
    if (rc == RK_OK)
        rc = rk_subscribe(rt, "counter", "alerts");
    if (rc == RK_OK)
        rc = rk_subscribe(rt, "counter", "metrics");
    /* Activate downstream first so nothing waits on a paused stage. */
    for (int i = 3; i >= 0 && rc == RK_OK; i--)
        rc = rk_kernel_activate(rt, pipeline[i]);
    return rc;
}

int
main(void)
{
    static uint64_t injected[READINGS / STRIDE + 1];
    static uint64_t seen[READINGS]; /* counter's alert log */
    static uint64_t expected[READINGS];
    stream_cfg sc = { .seed = UINT64_C(20240601), .injected = injected };
    static detector_state ds, host_ds;
    tally t = { .seqs = seen, .cap = READINGS };
    rk_runtime_config rcfg = { .no_static_kernels = true };
    rk_runtime *rt = NULL;
    size_t nexpected = 0, missed = 0, false_pos = 0;
    summary sum = { 0 };
    uint64_t t0, t1;
    int rc, fails = 0;

    sc.ninjected = place_anomalies(
        sc.seed, READINGS, injected, sizeof(injected) / sizeof(*injected));
    if ((rc = rk_runtime_create(&rt, &rcfg)) != RK_OK
        || (rc = start_pipeline(rt, &sc, &ds, &t)) != RK_OK) {
        fprintf(stderr, "anomaly_detection: start: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        rk_runtime_destroy(rt);
        return 2;
    }

    /* Run the stream and wait for the counter's end-of-stream report. */
    stream_start go = { READINGS };
    t0 = rk_now_ns();
    rc = rk_send_id(rt, "source", stream_start_msgtype.id, &go, sizeof(go),
        RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    if (rc == RK_OK) {
        rk_kernel counter;
        size_t len;
        if ((rc = rk_kernel_lookup(rt, "counter", &counter)) == RK_OK)
            rc = rk_recv(
                rt, counter, NULL, &sum, sizeof(sum), &len, TIMEOUT_NS);
    }
    t1 = rk_now_ns();
    if (rc != RK_OK) {
        printf("stream did not complete: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        fails++;
    }
    /* Graceful stop in pipeline order; each drains its queue first. */
    for (int i = 0; i < 4; i++)
        if (rk_kernel_terminate(rt, pipeline[i], TIMEOUT_NS) != RK_OK) {
            printf("terminate %s: %s\n", pipeline[i], rk_errdetail());
            fails++;
        }

    /* The host reference: the same detector over the same stream. */
    {
        uint64_t rng = sc.seed;
        size_t next_inj = 0;
        anomaly a;
        for (uint64_t i = 0; i < READINGS; i++) {
            reading r = generate(&sc, i, &rng, &next_inj);
            if (detect(&host_ds, &r, &a))
                expected[nexpected++] = a.seq;
        }
    }
    size_t nseen = t.alerts < t.cap ? (size_t)t.alerts : t.cap;
    qsort(seen, nseen, sizeof(*seen), cmp_u64);
    for (size_t i = 0; i < sc.ninjected; i++)
        missed += !contains(seen, nseen, injected[i]);
    for (size_t i = 0; i < nseen; i++)
        false_pos += !contains(injected, sc.ninjected, seen[i]);

    printf("anomaly_detection: %d readings from %d sensors in %.1f ms "
           "(%.0f readings/s)\n",
        READINGS, SENSORS, (double)(t1 - t0) / 1e6,
        READINGS / ((double)(t1 - t0) / 1e9));
    printf("  injected %zu, alerted %" PRIu64 " (%" PRIu64
           " critical), detected %zu, missed %zu, false positives %zu\n",
        sc.ninjected, t.alerts, t.critical, sc.ninjected - missed, missed,
        false_pos);
    printf("  recall %.1f %%, precision %.1f %%; host reference flags %zu\n",
        100.0 * (double)(sc.ninjected - missed) / (double)sc.ninjected,
        nseen ? 100.0 * (double)(nseen - false_pos) / (double)nseen : 0.0,
        nexpected);
    printf("  counter queue bands: system %" PRIu64 " high %" PRIu64
           " normal %" PRIu64 " low %" PRIu64 " (%" PRIu64
           " metrics, last at %" PRIu64 " readings)\n",
        t.band[RK_BAND_SYSTEM], t.band[RK_BAND_HIGH], t.band[RK_BAND_NORMAL],
        t.band[RK_BAND_LOW], t.metrics, t.last_readings);

    fails += missed != 0;
    fails += nseen != nexpected
        || memcmp(seen, expected, nseen * sizeof(*seen)) != 0;
    fails += sum.alerts != t.alerts || sum.readings != READINGS;
    fails += t.below_high != 0;
    fails += t.last_readings != READINGS || ds.readings != READINGS;
    /* Six sigma on Gaussian noise: false alarms should be a handful. */
    fails += false_pos > READINGS / 10000;

    printf("telemetry:\n");
    for (int i = 0; i < 4; i++)
        print_kernel_stats(rt, pipeline[i]);
    {
        static const char *const topics[] = { "alerts", "metrics" };
        for (int i = 0; i < 2; i++) {
            rk_topic_stats ts;
            if (rk_topic_stats_get(rt, topics[i], &ts) == RK_OK)
                printf("  topic %-8s published %" PRIu64 " delivered %" PRIu64
                       " failed %" PRIu64 "\n",
                    topics[i], ts.published, ts.delivered, ts.failed);
        }
    }
    rk_runtime_destroy(rt);
    printf("anomaly_detection: %s (%d failed checks)\n",
        fails ? "FAILED" : "OK", fails);
    return fails ? 1 : 0;
}
