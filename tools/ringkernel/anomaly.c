/*
 * tools/ringkernel/anomaly.c - the streaming anomaly-detection pipeline
 * behind `ringkernel demo` and `ringkernel bench anomaly`, and the batch
 * baseline it is compared with.
 *
 *   source --K2K--> detector --K2K--> alerter ==topic "alerts"==> sink
 *
 *   source    an actor generating readings from `sensors` sensors (slow
 *             sine baseline plus Gaussian noise) with spikes of 10 to 16
 *             sigma injected at positions only the harness knows, each
 *             stamped with rk_now_ns() when generated; rk_ctx_send blocks
 *             while the detector's queue is full, which paces it.
 *   detector  a handler keeping a rolling window (mean, variance) per
 *             sensor; a reading beyond 6 sigma is an anomaly and stays out
 *             of the window. Records generated -> decided per reading.
 *             With cfg->cuda the stage is the device actor of
 *             anomaly_dev.h on the cuda backend (anomaly_cuda.c), the
 *             same detection function on the device, its output routed
 *             through the backend's relay: the alerts, and per batch a
 *             verdict record (the batch's readings and what the batch
 *             cost on the device) that the alerter accounts.
 *   alerter   turns anomalies into alerts published at HIGH priority.
 *   sink      counts alerts, records generated -> alert, and checks each
 *             against the injected positions (precision and recall).
 *
 * Ownership: a run's state (struct run) lives on cli_anomaly_run's stack
 * and is shared with the kernels through rk_kernel_config.user; every
 * kernel has ended before the function returns. The counters the host
 * reads while the stream runs are relaxed atomics; the detector windows
 * are touched by the detector's thread only (on the cuda backend they are
 * device memory), the verdict records' sums by the alerter's, and the
 * verdicts by whichever of the two decides them; the host reads those
 * after every kernel has ended.
 */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define CLI_AND_LAYOUT_ONLY
#include "anomaly_dev.h"

#define STRIDE     997 /* about one spike per STRIDE readings */
#define PRIO_HIGH  192
#define TIMEOUT_NS (60 * INT64_C(1000000000))

/* The layouts and the detection are anomaly_dev.h's, so the device
 * detector and this one are the same code. */
typedef cli_and_reading reading;
typedef cli_and_alert alert;
typedef cli_and_window window;

/* Readings before this position are never spikes: windows fill first. */
static uint64_t
warmup(uint32_t sensors)
{
    return 4ull * CLI_AND_WINDOW * sensors;
}

static bool
is_injected(uint64_t seed, uint32_t sensors, uint64_t seq)
{
    uint64_t h = seed ^ (seq * UINT64_C(0x9E3779B97F4A7C15));

    return seq >= warmup(sensors) && cli_splitmix64(&h) % STRIDE == 0;
}

/* Reading seq; *rng is the stream's noise generator, used in order. */
static reading
generate(uint64_t seed, uint32_t sensors, uint64_t seq, uint64_t *rng)
{
    reading r = { .seq = seq, .sensor = (uint32_t)(seq % sensors) };
    double t = (double)(seq / sensors);
    double noise = sqrt(-2.0 * log(cli_uniform(rng)))
        * cos(2.0 * 3.14159265358979323846 * cli_uniform(rng));

    r.value = 20.0 + (double)(r.sensor % 17) * 5.0
        + 3.0 * sin(t / 240.0 + r.sensor) + noise;
    if (is_injected(seed, sensors, seq)) {
        uint64_t h = seed + seq;
        double mag = 10.0 + 6.0 * cli_uniform(&h);
        r.value += (cli_splitmix64(&h) & 1) ? mag : -mag;
    }
    r.t_ns = rk_now_ns();
    return r;
}

/* With rate > 0, sleeps until reading seq of a stream started at t0 is
 * due; called once per CLI_PACE_BURST readings. */
static void
pace(uint64_t t0, uint64_t seq, double rate)
{
    uint64_t due, now;

    if (rate <= 0 || seq % CLI_PACE_BURST != 0)
        return;
    due = t0 + (uint64_t)((double)seq * 1e9 / rate);
    now = rk_now_ns();
    if (due > now) {
        struct timespec ts = { (time_t)((due - now) / 1000000000),
            (long)((due - now) % 1000000000) };
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------ kernels */

typedef struct run {
    const cli_anomaly_cfg *cfg;
    window *win; /* sensors windows; detector thread only (cpu) */
    rk_histogram *verdict, *alert, *stage;
    _Atomic uint64_t generated, injected, alerts, true_alerts;
    uint64_t zhash;        /* sink thread only */
    cli_anomaly_xfer xfer; /* alerter thread only (cuda) */
    /* cuda: the windows on the device, and the detector's block */
    rk_buffer *dev_win;
    uint64_t dev_win_addr;
    cli_cuda_dev dev;
    uint32_t threads;
} run;

/* A reading's verdict, where the caller asked for them. */
static void
set_verdict(run *r, uint64_t seq, uint8_t v)
{
    if (r->cfg->verdicts == NULL)
        return;
    if (seq >= r->cfg->readings) {
        r->xfer.bad++;
        return;
    }
    if (v == CLI_VERDICT_ANOMALY || r->cfg->verdicts[seq] == CLI_VERDICT_NONE)
        r->cfg->verdicts[seq] = v;
}

static int
source_actor(rk_ctx *ctx)
{
    run *r = rk_ctx_user(ctx);
    const cli_anomaly_cfg *c = r->cfg;
    uint64_t rng = c->seed, seq = 0, t0 = rk_now_ns();
    int rc;

    while (c->readings == 0 || seq < c->readings) {
        pace(t0, seq, c->rate);
        /* The stop flag and terminate are checked every 256 readings. */
        if ((seq & 255) == 0
            && ((c->stop
                    && atomic_load_explicit(c->stop, memory_order_relaxed))
                || rk_should_terminate(ctx)))
            break;
        reading rd = generate(c->seed, c->sensors, seq, &rng);
        if ((rc = rk_ctx_send(ctx, CLI_AND_READING_TYPE, &rd, sizeof(rd)))
            != RK_OK)
            return rc;
        seq++;
        atomic_store_explicit(&r->generated, seq, memory_order_relaxed);
        if (is_injected(c->seed, c->sensors, rd.seq))
            atomic_fetch_add_explicit(&r->injected, 1, memory_order_relaxed);
    }
    return RK_OK;
}

/* Copies m's payload, which must be len bytes, to out: RK_OK or
 * RK_EDECODE. */
static int
decode(const rk_msg_view *m, void *out, size_t len)
{
    if (m->len != len)
        return RK_EDECODE;
    memcpy(out, m->data, len);
    return RK_OK;
}

/* The cpu backend's detector (on the cuda backend anomaly_dev.h's actor
 * runs instead, with the same cli_and_detect). */
static int
detector_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    run *r = rk_ctx_user(ctx);
    reading rd;
    double z = 0;

    if (decode(m, &rd, sizeof(rd)) != RK_OK)
        return RK_EDECODE;
    int hit
        = cli_and_detect(&r->win[rd.sensor % r->cfg->sensors], rd.value, &z);
    rk_histogram_record(r->verdict, rk_now_ns() - rd.t_ns);
    set_verdict(r, rd.seq, hit ? CLI_VERDICT_ANOMALY : CLI_VERDICT_NORMAL);
    if (!hit)
        return RK_OK;
    alert a = { rd.seq, rd.t_ns, z, rd.sensor, 0 };
    return rk_ctx_send(ctx, CLI_AND_ALERT_TYPE, &a, sizeof(a));
}

/* A cuda batch's verdict record: its readings are decided (those not
 * alerted are normal) and what it cost is added up. */
static void
take_verdicts(run *r, const cli_and_verdicts *v)
{
    cli_anomaly_xfer *x = &r->xfer;
    uint64_t now = rk_now_ns();

    if (v->n == 0 || v->last_seq < v->first_seq
        || v->last_seq - v->first_seq + 1 != v->n || v->alerts > v->n
        || v->newest_t_ns < v->oldest_t_ns || now < v->newest_t_ns) {
        x->bad++;
        return;
    }
    x->batches++;
    x->readings += v->n;
    x->h2d_ns += v->h2d_ns;
    x->compute_ns += v->compute_ns;
    if (x->batches > 1) {
        x->d2h_ns += v->prev_d2h_ns;
        x->d2h_batches++;
    }
    x->stage_ns += now - v->newest_t_ns;
    rk_histogram_record(r->stage, now - v->newest_t_ns);
    rk_histogram_record(r->verdict, now - v->oldest_t_ns);
    for (uint64_t s = v->first_seq; s <= v->last_seq; s++)
        set_verdict(r, s, CLI_VERDICT_NORMAL);
}

static int
alerter_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    run *r = rk_ctx_user(ctx);
    int rc;

    if (m->hdr->type_id == CLI_AND_VERDICTS_TYPE) {
        cli_and_verdicts v;
        if ((rc = decode(m, &v, sizeof(v))) == RK_OK)
            take_verdicts(r, &v);
        return rc;
    }
    if (r->cfg->cuda) {
        alert a;
        if ((rc = decode(m, &a, sizeof(a))) != RK_OK)
            return rc;
        set_verdict(r, a.seq, CLI_VERDICT_ANOMALY);
    }
    /* Alerts go out in the HIGH band, above the readings' priority. */
    if ((rc = rk_ctx_set_priority(ctx, PRIO_HIGH)) != RK_OK)
        return rc;
    return rk_ctx_publish(ctx, "alerts", 0, m->data, m->len);
}

/* An alert's reading and z-score bits, mixed. */
static uint64_t
alert_mix(const alert *a)
{
    uint64_t zb, h;

    memcpy(&zb, &a->z, sizeof(zb));
    h = a->seq ^ (zb * UINT64_C(0x9E3779B97F4A7C15));
    return cli_splitmix64(&h);
}

static int
sink_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    run *r = rk_ctx_user(ctx);
    alert a;

    if (decode(m, &a, sizeof(a)) != RK_OK)
        return RK_EDECODE;
    rk_histogram_record(r->alert, rk_now_ns() - a.t_ns);
    r->zhash ^= alert_mix(&a);
    atomic_fetch_add_explicit(&r->alerts, 1, memory_order_relaxed);
    if (is_injected(r->cfg->seed, r->cfg->sensors, a.seq))
        atomic_fetch_add_explicit(&r->true_alerts, 1, memory_order_relaxed);
    return RK_OK;
}

static const char *const stages[]
    = { "source", "detector", "alerter", "sink" };

static int
start(rk_runtime *rt, run *r)
{
    rk_kernel_def defs[4] = {
        { .id = "source", .actor = source_actor },
        { .id = "detector", .handler = detector_handler },
        { .id = "alerter", .handler = alerter_handler },
        { .id = "sink", .handler = sink_handler },
    };
    int rc = RK_OK;

    for (int i = 0; i < 4; i++)
        defs[i].config.user = r;
    defs[1].config.input_capacity = 4096;
    /* Only the source's route feeds the detector and only the detector's
     * the alerter (on cuda: the detector's relay), so both inputs can be
     * SPSC lanes; the cuda detector also takes the host's init. */
    defs[1].config.single_producer = true;
    defs[2].config.single_producer = true;
    if (r->cfg->cuda
        && (rc = cli_anomaly_cuda_config(r->cfg->sensors, &defs[1].config,
                &r->dev, &r->threads, &r->dev_win, &r->dev_win_addr))
            != RK_OK)
        return rc;
    for (int i = 0; i < 4 && rc == RK_OK; i++)
        if ((rc = rk_runtime_register(rt, &defs[i])) == RK_OK)
            rc = rk_kernel_launch(rt, defs[i].id);
    if (rc == RK_OK)
        rc = rk_connect(rt, "source", "detector");
    if (rc == RK_OK)
        rc = rk_connect(rt, "detector", "alerter");
    if (rc == RK_OK)
        rc = rk_subscribe(rt, "sink", "alerts");
    /* Downstream first, so nothing waits on a paused stage; the device
     * detector has its windows before the first reading. */
    for (int i = 3; i >= 1 && rc == RK_OK; i--)
        rc = rk_kernel_activate(rt, stages[i]);
    if (rc == RK_OK && r->cfg->cuda)
        rc = cli_anomaly_cuda_init(
            rt, "detector", r->dev_win_addr, r->cfg->sensors);
    if (rc == RK_OK)
        rc = rk_kernel_activate(rt, stages[0]);
    return rc;
}

static int
start_metrics(rk_runtime *rt, const char *addr, rk_metrics **m)
{
    static const char *const topics[] = { "alerts", NULL };
    rk_metrics_config mc = { .topics = topics };
    int rc;

    if ((rc = rk_metrics_create(m, rt, &mc)) != RK_OK)
        return rc;
    return rk_metrics_listen(*m, addr);
}

/* Every stage ended without failing. */
static int
check_states(rk_runtime *rt)
{
    for (int i = 0; i < 4; i++) {
        rk_kernel_state st;
        if (rk_kernel_state_get(rt, stages[i], &st) == RK_OK
            && st == RK_KERNEL_FAILED)
            return RK_EFAILED;
    }
    return RK_OK;
}

int
cli_anomaly_run(const cli_anomaly_cfg *cfg, cli_anomaly_result *out)
{
    rk_runtime_config rcfg = { .no_static_kernels = true, .backend = "cpu" };
    rk_runtime *rt = NULL;
    rk_metrics *met = NULL;
    run r = { .cfg = cfg };
    uint64_t t0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((r.win = calloc(cfg->sensors, sizeof(*r.win))) == NULL)
        return RK_ENOMEM;
    if ((rc = rk_histogram_create(&r.verdict)) != RK_OK
        || (rc = rk_histogram_create(&r.alert)) != RK_OK
        || (rc = rk_histogram_create(&r.stage)) != RK_OK
        || (rc = rk_runtime_create(&rt, &rcfg)) != RK_OK)
        goto out;
    if (cfg->metrics_addr
        && (rc = start_metrics(rt, cfg->metrics_addr, &met)) != RK_OK)
        goto out;
    out->metrics_port = rk_metrics_port(met);
    if (met)
        printf("metrics: http://127.0.0.1:%u/metrics (and /stats.json)\n",
            (unsigned)out->metrics_port);
    t0 = rk_now_ns();
    if ((rc = start(rt, &r)) != RK_OK)
        goto out;
    /* The wait doubles as the progress clock: it returns RK_ETIMEDOUT
     * every progress_ms while the source still runs. */
    for (;;) {
        int64_t step
            = (int64_t)(cfg->progress_ms ? cfg->progress_ms : 250) * 1000000;
        rc = rk_kernel_wait(rt, "source", step);
        if (rc != RK_ETIMEDOUT)
            break;
        if (cfg->progress)
            cfg->progress(cfg->progress_arg,
                atomic_load_explicit(&r.generated, memory_order_relaxed),
                atomic_load_explicit(&r.alerts, memory_order_relaxed),
                (double)(rk_now_ns() - t0) / 1e9);
    }
    /* Graceful stop in pipeline order; each stage drains its queue. */
    for (int i = 1; i < 4 && rc == RK_OK; i++)
        rc = rk_kernel_terminate(rt, stages[i], TIMEOUT_NS);
    out->elapsed_s = (double)(rk_now_ns() - t0) / 1e9;
    if (rc == RK_OK)
        rc = check_states(rt);
    out->readings = atomic_load(&r.generated);
    out->injected = atomic_load(&r.injected);
    out->alerts = atomic_load(&r.alerts);
    out->true_alerts = atomic_load(&r.true_alerts);
    out->zhash = r.zhash;
    out->dev = r.dev;
    out->threads = r.threads;
    out->xfer = r.xfer;
    rk_histogram_summary(r.verdict, &out->verdict);
    rk_histogram_summary(r.alert, &out->alert);
    rk_histogram_summary(r.stage, &out->xfer.stage);
    if (cfg->table) {
        printf("\nper-kernel telemetry (queue latency: send -> start of "
               "processing):\n");
        cli_print_kernel_table(stdout, rt, stages, 4);
        rk_topic_stats ts;
        if (rk_topic_stats_get(rt, "alerts", &ts) == RK_OK)
            printf("topic alerts: published %" PRIu64 " delivered %" PRIu64
                   " failed %" PRIu64 " subscribers %u\n",
                ts.published, ts.delivered, ts.failed, ts.subscribers);
    }
out:
    rk_metrics_destroy(met); /* before the runtime it reads */
    rk_runtime_destroy(rt);
    /* The device kernel has returned with the runtime: now its memory
     * may go (docs/cuda-robustness.md). */
    rk_buffer_destroy(r.dev_win);
    out->verdict_hist = r.verdict;
    rk_histogram_destroy(r.alert);
    rk_histogram_destroy(r.stage);
    free(r.win);
    return rc;
}

void
cli_anomaly_result_free(cli_anomaly_result *r)
{
    rk_histogram_destroy(r->verdict_hist);
    r->verdict_hist = NULL;
}

int
cli_anomaly_batch(uint32_t sensors, uint64_t readings, uint64_t seed,
    uint32_t wsize, double rate, cli_batch_result *out)
{
    window *win = calloc(sensors, sizeof(*win));
    reading *buf = calloc(wsize, sizeof(*buf));
    uint64_t rng = seed, seq = 0, t0;
    int rc = RK_ENOMEM;

    memset(out, 0, sizeof(*out));
    if (win == NULL || buf == NULL
        || (rc = rk_histogram_create(&out->hist)) != RK_OK)
        goto out;
    t0 = rk_now_ns();
    while (seq < readings) {
        uint32_t n = 0;
        /* Collect one window as it arrives, then process it at once. */
        for (; n < wsize && seq < readings; n++, seq++) {
            pace(t0, seq, rate);
            buf[n] = generate(seed, sensors, seq, &rng);
            out->injected += is_injected(seed, sensors, seq);
        }
        for (uint32_t i = 0; i < n; i++) {
            double z;
            if (cli_and_detect(&win[buf[i].sensor], buf[i].value, &z)) {
                out->alerts++;
                out->true_alerts += is_injected(seed, sensors, buf[i].seq);
            }
        }
        uint64_t done = rk_now_ns();
        for (uint32_t i = 0; i < n; i++)
            rk_histogram_record(out->hist, done - buf[i].t_ns);
    }
    out->elapsed_s = (double)(rk_now_ns() - t0) / 1e9;
    out->readings = seq;
    rk_histogram_summary(out->hist, &out->latency);
out:
    free(win);
    free(buf);
    return rc;
}
