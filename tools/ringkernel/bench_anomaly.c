/*
 * tools/ringkernel/bench_anomaly.c - `ringkernel bench anomaly`: the
 * streaming pipeline (anomaly.c) against batch processing of the same
 * stream in fixed windows, and, when the cuda backend is usable, the same
 * pipeline with its detector stage on the device (anomaly_dev.h).
 *
 * Each round (as fast as each takes the stream, then paced) runs the
 * stream through the CPU pipeline, the cuda pipeline and the batch loop:
 * per-reading latency (generated -> verdict, generated -> alert) and
 * throughput, recall and precision; for the cuda pipeline also what
 * moving each batch between host and device cost against deciding it
 * (cli_anomaly_xfer), which measures the seeds' "transfer overhead
 * 16-28 % of batch processing time". The CPU and cuda pipelines must
 * reach the same verdict on every reading, with the same z-scores, and
 * streaming and batch must flag the same readings: otherwise the run
 * counts as failed. Under the test-only stand-in driver the cuda rows
 * are labelled cuda_sim: CPU threads, never GPU figures.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void
cdf(FILE *f, const char *label, const rk_histogram *h)
{
    static const double ps[] = { 0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90,
        95, 99, 99.5, 99.9, 99.99, 100 };

    if (f == NULL || h == NULL)
        return;
    fprintf(f, "# %s\n", label);
    for (size_t i = 0; i < sizeof(ps) / sizeof(*ps); i++)
        fprintf(f, "%.3f %.5f\n",
            (double)rk_histogram_percentile(h, ps[i]) / 1e3, ps[i] / 100);
    fprintf(f, "\n\n");
}

static double
ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 1;
}

/* One streaming run's table row and JSON line. */
static void
stream_row(bench_sink *s, const bench_opts *o, const char *config,
    const char *rate_s, double rate, const cli_anomaly_result *st)
{
    char mode[48];
    bool cuda = strcmp(config, "cpu") != 0;

    snprintf(
        mode, sizeof(mode), "streaming %s", cuda ? config : "(4 kernels)");
    fprintf(s->out,
        "%-22s %10s %12.0f %10.2f %10.2f %10.2f %10.2f %7.1f%% %8.1f%%\n",
        mode, rate_s, (double)st->readings / st->elapsed_s,
        (double)st->verdict.p50_ns / 1e3, (double)st->verdict.p99_ns / 1e3,
        (double)st->alert.p50_ns / 1e3, (double)st->alert.p99_ns / 1e3,
        100 * ratio(st->true_alerts, st->injected),
        100 * ratio(st->true_alerts, st->alerts));
    fprintf(s->json,
        "{\"bench\":\"anomaly\",\"mode\":\"streaming\",\"config\":\"%s\","
        "\"offered_rate\":%.0f,\"readings\":%" PRIu64 ",\"sensors\":%" PRIu64
        ",\"readings_per_s\":%.6g,\"verdict_p50_ns\":%" PRIu64
        ",\"verdict_p99_ns\":%" PRIu64 ",\"alert_p50_ns\":%" PRIu64
        ",\"alert_p99_ns\":%" PRIu64 ",\"injected\":%" PRIu64
        ",\"alerts\":%" PRIu64 ",\"recall\":%.6f,\"precision\":%.6f",
        config, rate, st->readings, o->sensors,
        (double)st->readings / st->elapsed_s, st->verdict.p50_ns,
        st->verdict.p99_ns, st->alert.p50_ns, st->alert.p99_ns, st->injected,
        st->alerts, ratio(st->true_alerts, st->injected),
        ratio(st->true_alerts, st->alerts));
    if (cuda)
        fprintf(s->json,
            ",\"simulated\":%s,\"device\":\"%s\",\"verdict_latency\":"
            "\"per batch, its oldest reading\"",
            st->dev.simulated ? "true" : "false", st->dev.name);
    fprintf(s->json, "}\n");
}

/* The cuda run's transfer against compute: the table's lines and one
 * JSON line. */
static void
xfer_row(bench_sink *s, const bench_opts *o, double rate,
    const cli_anomaly_result *st)
{
    const cli_anomaly_xfer *x = &st->xfer;
    cli_xfer_means m;
    double pb;

    cli_anomaly_xfer_means(x, &m);
    pb = m.per_batch > 0 ? m.per_batch : 1;
    cli_anomaly_xfer_print(s->out, st);
    fprintf(s->json,
        "{\"bench\":\"anomaly\",\"mode\":\"transfer\",\"config\":\"%s\","
        "\"simulated\":%s,\"device\":\"%s\",\"offered_rate\":%.0f,"
        "\"sensors\":%" PRIu64 ",\"threads\":%u,\"batches\":%" PRIu64
        ",\"readings\":%" PRIu64 ",\"readings_per_batch\":%.3f,"
        "\"h2d_ns_per_batch\":%.1f,\"compute_ns_per_batch\":%.1f,"
        "\"d2h_ns_per_batch\":%.1f,\"relay_ns_per_batch\":%.1f,"
        "\"stage_ns_per_batch\":%.1f,\"stage_p50_ns\":%" PRIu64
        ",\"stage_p99_ns\":%" PRIu64 ",\"h2d_ns_per_reading\":%.1f,"
        "\"compute_ns_per_reading\":%.1f,\"d2h_ns_per_reading\":%.1f,"
        "\"relay_ns_per_reading\":%.1f,\"transfer_share_stage\":%.4f,"
        "\"transfer_share_device\":%.4f}\n",
        cli_cuda_label(st->dev.simulated),
        st->dev.simulated ? "true" : "false", st->dev.name, rate, o->sensors,
        st->threads, x->batches, x->readings, m.per_batch, m.h2d, m.compute,
        m.d2h, m.relay, m.stage, x->stage.p50_ns, x->stage.p99_ns, m.h2d / pb,
        m.compute / pb, m.d2h / pb, m.relay / pb, m.share_stage,
        m.share_device);
}

/* The CPU and cuda pipelines' verdicts, reading by reading: every
 * reading decided by both, the same way, the same alerts with the same
 * z-scores, and every verdict record well-formed. */
static void
compare_verdicts(bench_sink *s, uint64_t n, const uint8_t *cpu,
    const uint8_t *dev, const cli_anomaly_result *a,
    const cli_anomaly_result *b)
{
    const char *label = cli_cuda_label(b->dev.simulated);
    uint64_t differ = 0, undecided = 0, first = UINT64_MAX, anomalies = 0;

    for (uint64_t i = 0; i < n; i++) {
        undecided += cpu[i] == CLI_VERDICT_NONE || dev[i] == CLI_VERDICT_NONE;
        anomalies += cpu[i] == CLI_VERDICT_ANOMALY;
        if (cpu[i] != dev[i]) {
            differ++;
            if (first == UINT64_MAX)
                first = i;
        }
    }
    if (differ == 0 && undecided == 0 && b->xfer.bad == 0
        && b->xfer.readings == n && a->readings == n && b->readings == n
        && a->alerts == b->alerts && a->zhash == b->zhash) {
        fprintf(s->out,
            "verdicts: %s and cpu agree on each of the %" PRIu64
            " readings (%" PRIu64 " anomalies, the same z-scores)\n",
            label, n, anomalies);
        return;
    }
    fprintf(stderr,
        "ringkernel bench: %s and cpu verdicts differ: %" PRIu64 " of %" PRIu64
        " readings differ (first: reading %" PRIu64 "), %" PRIu64
        " undecided, %" PRIu64 " malformed records or alerts, %" PRIu64
        " readings in records, "
        "alerts %" PRIu64 " vs %" PRIu64 ", z-scores %s\n",
        label, differ, n, first == UINT64_MAX ? 0 : first, undecided,
        b->xfer.bad, b->xfer.readings, a->alerts, b->alerts,
        a->zhash == b->zhash ? "equal" : "differ");
    s->failed++;
}

/* The cuda pipeline on the same stream, compared with the CPU run. */
static int
cuda_round(bench_sink *s, const bench_opts *o, const cli_anomaly_cfg *cpu_cfg,
    const cli_anomaly_result *cpu, const char *rate_s)
{
    cli_anomaly_cfg cfg = *cpu_cfg;
    cli_anomaly_result st;
    int rc;

    cfg.cuda = true;
    if ((cfg.verdicts = calloc(cfg.readings ? cfg.readings : 1, 1)) == NULL)
        return RK_ENOMEM;
    if ((rc = cli_anomaly_run(&cfg, &st)) != RK_OK) {
        /* The CPU rows stand; the failure is reported and counted. */
        cli_report_error("bench", "anomaly with the detector on cuda", rc);
        s->failed++;
    } else {
        stream_row(
            s, o, cli_cuda_label(st.dev.simulated), rate_s, cfg.rate, &st);
        xfer_row(s, o, cfg.rate, &st);
        compare_verdicts(
            s, cfg.readings, cpu_cfg->verdicts, cfg.verdicts, cpu, &st);
    }
    cli_anomaly_result_free(&st);
    free(cfg.verdicts);
    return RK_OK;
}

/* One round at one arrival rate (0: as fast as each takes it). */
static int
anomaly_round(
    bench_sink *s, const bench_opts *o, double rate, uint64_t readings)
{
    cli_anomaly_cfg cfg = { .sensors = (uint32_t)o->sensors,
        .readings = readings,
        .seed = 20240601,
        .rate = rate };
    cli_anomaly_result st;
    cli_batch_result bt;
    char mode[48], rate_s[24];
    int rc;

    if (rate > 0)
        snprintf(rate_s, sizeof(rate_s), "%.0f", rate);
    else
        snprintf(rate_s, sizeof(rate_s), "max");
    if (o->cuda && (cfg.verdicts = calloc(readings ? readings : 1, 1)) == NULL)
        return RK_ENOMEM;
    if ((rc = cli_anomaly_run(&cfg, &st)) != RK_OK) {
        cli_anomaly_result_free(&st);
        free(cfg.verdicts);
        return rc;
    }
    if ((rc = cli_anomaly_batch(
             cfg.sensors, readings, cfg.seed, (uint32_t)o->window, rate, &bt))
        != RK_OK) {
        cli_anomaly_result_free(&st);
        rk_histogram_destroy(bt.hist);
        free(cfg.verdicts);
        return rc;
    }
    stream_row(s, o, "cpu", rate_s, rate, &st);
    snprintf(mode, sizeof(mode), "batch (window %" PRIu64 ")", o->window);
    fprintf(s->out,
        "%-22s %10s %12.0f %10.2f %10.2f %10s %10s %7.1f%% %8.1f%%\n", mode,
        rate_s, (double)bt.readings / bt.elapsed_s,
        (double)bt.latency.p50_ns / 1e3, (double)bt.latency.p99_ns / 1e3, "-",
        "-", 100 * ratio(bt.true_alerts, bt.injected),
        100 * ratio(bt.true_alerts, bt.alerts));
    fprintf(s->json,
        "{\"bench\":\"anomaly\",\"mode\":\"batch\",\"window\":%" PRIu64
        ",\"offered_rate\":%.0f,\"readings\":%" PRIu64 ",\"sensors\":%" PRIu64
        ",\"readings_per_s\":%.6g,\"latency_p50_ns\":%" PRIu64
        ",\"latency_p99_ns\":%" PRIu64 ",\"injected\":%" PRIu64
        ",\"alerts\":%" PRIu64 ",\"recall\":%.6f,\"precision\":%.6f}\n",
        o->window, rate, bt.readings, o->sensors,
        (double)bt.readings / bt.elapsed_s, bt.latency.p50_ns,
        bt.latency.p99_ns, bt.injected, bt.alerts,
        ratio(bt.true_alerts, bt.injected), ratio(bt.true_alerts, bt.alerts));
    /* The CDF plot compares latency where it means something: at an
     * arrival rate both keep up with. */
    if (rate > 0) {
        char label[80];
        snprintf(label, sizeof(label), "streaming at %s/s", rate_s);
        cdf(s->cdf_dat, label, st.verdict_hist);
        snprintf(label, sizeof(label), "%s at %s/s", mode, rate_s);
        cdf(s->cdf_dat, label, bt.hist);
    }
    /* Both see the same stream through the same detector. */
    if (st.readings != readings || st.alerts != bt.alerts
        || st.true_alerts != bt.true_alerts) {
        fprintf(stderr, "ringkernel bench: streaming and batch disagree\n");
        s->failed++;
    }
    if (o->cuda)
        rc = cuda_round(s, o, &cfg, &st, rate_s);
    cli_anomaly_result_free(&st);
    rk_histogram_destroy(bt.hist);
    free(cfg.verdicts);
    return rc;
}

int
cli_bench_anomaly(bench_sink *s, const bench_opts *o)
{
    uint64_t paced = (uint64_t)(o->rate * o->paced_s);
    int rc;

    fprintf(s->out,
        "\nanomaly: %" PRIu64
        " sensors; latency from a reading's generation to the detector's "
        "verdict\n(streaming: per reading; batch: when its window is "
        "done; the detector on cuda: per batch, its oldest reading, when "
        "its verdicts\nreach the host) and to the alert at the sink\n",
        o->sensors);
    if (!o->cuda)
        fprintf(s->out, "cuda: not run (%s)\n", o->cuda_why);
    fprintf(s->out, "%-22s %10s %12s %10s %10s %10s %10s %8s %9s\n", "mode",
        "offered/s", "readings/s", "p50 us", "p99 us", "alert p50",
        "alert p99", "recall", "precision");
    rc = anomaly_round(s, o, 0, o->readings);
    if (rc == RK_OK && paced > 0)
        rc = anomaly_round(s, o, o->rate, paced);
    if (rc == RK_OK && !o->cuda)
        fprintf(s->json,
            "{\"bench\":\"anomaly\",\"config\":\"cuda\",\"ran\":false}\n");
    return rc;
}
