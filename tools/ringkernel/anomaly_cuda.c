/*
 * tools/ringkernel/anomaly_cuda.c - the anomaly pipeline's detector on the
 * cuda backend: the device actor of anomaly_dev.h, one thread block, fed
 * by the CPU source through the runtime and the backend's relay, its
 * alerts and per-batch verdict records routed to the CPU alerter the
 * same way (anomaly.c wires the pipeline).
 *
 * The sensors' windows are device memory (an rk_buffer on the CUDA
 * device) made before the kernel is launched and destroyed by the caller
 * after the runtime that ran it (docs/cuda-robustness.md: nothing is
 * freed while a persistent kernel is resident); the kernel empties them
 * at its init.
 */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

#define CLI_AND_LAYOUT_ONLY
#include "anomaly_dev.h"

_Static_assert(sizeof(cli_and_reading) == 32, "reading layout");
_Static_assert(sizeof(cli_and_alert) == 32, "alert layout");
_Static_assert(sizeof(cli_and_verdicts) == 64, "verdicts layout");
_Static_assert(sizeof(cli_and_init) == 16, "init layout");

#define MAX_THREADS 256u /* the block: one thread per sensor, up to this */
#define TIMEOUT_NS  (60 * INT64_C(1000000000))

/* anomaly_dev.h's text (generated from it at build time: embed.cmake). */
extern const char *const cli_and_dev_source;

int
cli_anomaly_cuda_config(uint32_t sensors, rk_kernel_config *c,
    cli_cuda_dev *dev, uint32_t *threads, rk_buffer **win, uint64_t *win_dev)
{
    int rc;

    *win = NULL;
    if ((rc = cli_cuda_device(dev)) != RK_OK)
        return rc;
    /* A window is 536 bytes of doubles and words: bytes, uploaded never
     * (the kernel empties them at its init). */
    if ((rc = cli_device_array(win, RK_DTYPE_U8,
             (size_t)sensors * sizeof(cli_and_window), NULL, dev->ordinal,
             win_dev))
        != RK_OK)
        return rc;
    /* Whole warps, no more threads than sensors need. */
    *threads = cli_pow2_at_least(sensors < 32 ? 32 : sensors);
    if (*threads > MAX_THREADS)
        *threads = MAX_THREADS;
    c->backend = "cuda";
    c->device_source = cli_and_dev_source;
    c->device_entry = "cli_and_kernel";
    c->device_source_name = "anomaly_dev.h";
    /* One block: the relay deals a kernel's input round robin over its
     * blocks, and each sensor's readings must stay with one owner. */
    c->grid_size = 1;
    c->block_size = *threads;
    /* The relay's take and the device's batch: a verdict record each. */
    c->batch = RK_DEV_MAX_BATCH;
    c->max_payload = (uint32_t)sizeof(cli_and_verdicts);
    /* The host's init and the source's route feed it: two producers,
     * though never at once. */
    c->single_producer = false;
    return RK_OK;
}

int
cli_anomaly_cuda_init(
    rk_runtime *rt, const char *id, uint64_t win_dev, uint32_t sensors)
{
    cli_and_init in = { .windows = win_dev, .sensors = sensors };
    rk_kernel k;
    int rc;

    if ((rc = rk_kernel_lookup(rt, id, &k)) != RK_OK)
        return rc;
    return rk_send(rt, k, CLI_AND_INIT_TYPE, &in, sizeof(in), 128, TIMEOUT_NS);
}

static double
per(uint64_t sum, uint64_t n)
{
    return n ? (double)sum / (double)n : 0;
}

void
cli_anomaly_xfer_means(const cli_anomaly_xfer *x, cli_xfer_means *m)
{
    double dev;

    m->per_batch = per(x->readings, x->batches);
    m->h2d = per(x->h2d_ns, x->batches);
    m->compute = per(x->compute_ns, x->batches);
    m->d2h = per(x->d2h_ns, x->d2h_batches);
    m->stage = per(x->stage_ns, x->batches);
    dev = m->h2d + m->compute + m->d2h;
    m->relay = m->stage - dev;
    m->share_stage = m->stage > 0 ? (m->stage - m->compute) / m->stage : 0;
    m->share_device = dev > 0 ? (m->h2d + m->d2h) / dev : 0;
}

void
cli_anomaly_xfer_print(FILE *f, const cli_anomaly_result *r)
{
    const cli_anomaly_xfer *x = &r->xfer;
    double pb;
    cli_xfer_means m;

    cli_anomaly_xfer_means(x, &m);
    pb = m.per_batch > 0 ? m.per_batch : 1;
    fprintf(f,
        "detector on %s (%s), 1 block x %u threads: %" PRIu64
        " batches, %.1f readings a batch\n",
        cli_cuda_label(r->dev.simulated), r->dev.name, r->threads, x->batches,
        m.per_batch);
    fprintf(f, "  %-15s %13s %10s %13s %13s %13s\n", "ns", "h2d lanes",
        "compute", "d2h lanes", "relay+queues", "stage (host)");
    fprintf(f, "  %-15s %13.0f %10.0f %13.0f %13.0f %13.0f\n", "per batch",
        m.h2d, m.compute, m.d2h, m.relay, m.stage);
    fprintf(f, "  %-15s %13.0f %10.0f %13.0f %13.0f %13.0f\n", "per reading",
        m.h2d / pb, m.compute / pb, m.d2h / pb, m.relay / pb, m.stage / pb);
    /* The stage split three ways (the relay part may come out slightly
     * negative where it is small: two clocks). */
    fprintf(f,
        "  of the stage (newest reading generated -> verdicts at the host, "
        "p50 %" PRIu64 " ns): compute %.1f %%, lanes %.1f %%, relay and "
        "queues %.1f %%;\n  the lanes are %.1f %% of the device's time "
        "(the seeds claim transfer is 16-28 %% of batch time)\n",
        x->stage.p50_ns, m.stage > 0 ? 100 * m.compute / m.stage : 0,
        m.stage > 0 ? 100 * (m.h2d + m.d2h) / m.stage : 0,
        m.stage > 0 ? 100 * m.relay / m.stage : 0, 100 * m.share_device);
    if (r->dev.simulated)
        fprintf(f, "%s\n", CLI_CUDA_SIM_NOTE);
}
