/*
 * tools/ringkernel/anomaly_dev.h - the anomaly pipeline's detector stage
 * as a device actor, written once: this file compiles as host C (the CPU
 * detector of anomaly.c uses its detection function, the tests and the
 * stand-in driver run its actor on CPU threads) and as CUDA under NVRTC or
 * nvcc. The `ringkernel` command hands this file's text (embedded at build
 * time) to the cuda backend as the detector's device_source; the backend
 * compiles it with NVRTC after ringkernel/dev_kernel.h at launch.
 *
 *   source (cpu) --route--> detector (cuda, this file) --route--> alerter
 *
 * The detector is one thread block (the relay deals a kernel's input
 * round robin over its blocks, and a sensor's readings must be decided
 * in order by one owner). Data parallel over the block's threads: thread
 * t owns the sensors s with s % blockDim == t, and within a batch each
 * thread decides its own sensors' readings in batch order, so every
 * sensor sees its readings in stream order, as on the CPU. A reading is
 * an anomaly when it lies beyond CLI_AND_Z_THRESHOLD sigma of its
 * sensor's rolling window (CLI_AND_WINDOW readings); an anomaly stays out
 * of the window.
 *
 * Messages (fixed layouts, the same for every compiler):
 *   in   CLI_AND_INIT_TYPE      cli_and_init: the device address of the
 *                               windows (sensors of them, device memory
 *                               the host allocated) and the sensor count;
 *                               the block empties the windows. Sent by
 *                               the host once, before any reading.
 *   in   CLI_AND_READING_TYPE   cli_and_reading.
 *   out  CLI_AND_ALERT_TYPE     cli_and_alert: one per anomaly, in the
 *                               order of the readings.
 *   out  CLI_AND_VERDICTS_TYPE  cli_and_verdicts: one per batch, after its
 *                               alerts: the batch's reading range (every
 *                               reading in it not alerted is normal) and
 *                               what the batch cost on the device.
 *
 * Timing. Around each batch, on the block's own clock (rk_dev_now_ns:
 * %globaltimer on a GPU, CLOCK_MONOTONIC in the host build), thread 0
 * reads: h2d, the receive that found the batch (the lane's tail read and
 * the copy of the batch from the lane, mapped host memory, into shared
 * memory); compute, the detection over the batch; d2h, staging the
 * batch's outputs and the receive's hand-back (their copy into the output
 * lane, mapped host memory, the fence and the index stores; it includes
 * waiting for room in the output lane). A batch's record carries its own
 * h2d and compute and the previous batch's d2h (its own is not over when
 * the record is written). Only differences of the device clock leave
 * the device: it is not the host's clock.
 *
 * Floating point. On the device every operation of the detection is an
 * IEEE round-to-nearest intrinsic (__dadd_rn, __dmul_rn, ...), which the
 * compiler never contracts into a fused multiply-add, so a GPU computes
 * the same bits as the host build: the same z-scores and the same
 * verdicts as the CPU pipeline, reading by reading.
 *
 * Memory. The windows are device memory the host allocated (rk_buffer)
 * before launch and frees after the kernel returned; the kernel never
 * allocates. They change while the kernel runs: nothing is declared
 * restrict, and the test checks the PTX has no non-coherent loads. No
 * read-modify-write crosses PCIe (none at all here).
 *
 * Bad input (a reading before the init, a message of another type or
 * length, an init with no windows) makes the actor return RK_EINVAL: the
 * block faults with that message at its lane's head and supervision
 * decides; a restart calls the actor again, which then needs a new init.
 * An init carries a raw device address the kernel cannot check: only the
 * host code that made the buffer (anomaly_cuda.c) may send one; the
 * kernel is the command's own, registered by it and reachable by nothing
 * else.
 */
#ifndef RK_CLI_ANOMALY_DEV_H
#define RK_CLI_ANOMALY_DEV_H

#include "ringkernel/dev_kernel.h"

#define CLI_AND_WINDOW        64  /**< readings per sensor window */
#define CLI_AND_Z_THRESHOLD   6.0 /**< |x - mean| beyond this many sigma */
#define CLI_AND_READING_TYPE  0x414E0001u /**< cli_and_reading */
#define CLI_AND_ALERT_TYPE    0x414E0002u /**< cli_and_alert */
#define CLI_AND_VERDICTS_TYPE 0x414E0003u /**< cli_and_verdicts */
#define CLI_AND_INIT_TYPE     0x414E0004u /**< cli_and_init */

/* One reading (source -> detector). 32 bytes. */
typedef struct cli_and_reading {
    rk_dev_u64 seq;
    rk_dev_u64 t_ns; /* host clock (rk_now_ns) when generated */
    double value;
    rk_dev_u32 sensor, pad;
} cli_and_reading;

/* One anomaly (detector -> alerter -> topic -> sink). 32 bytes. */
typedef struct cli_and_alert {
    rk_dev_u64 seq;
    rk_dev_u64 t_ns; /* the reading's generation time */
    double z;
    rk_dev_u32 sensor, pad;
} cli_and_alert;

/* A batch's verdicts and costs (device detector -> alerter). 64 bytes. */
typedef struct cli_and_verdicts {
    rk_dev_u64 first_seq, last_seq;      /* the batch's readings, in order */
    rk_dev_u64 oldest_t_ns, newest_t_ns; /* their generation, host clock */
    rk_dev_u64 h2d_ns;                   /* this batch, device clock */
    rk_dev_u64 compute_ns;               /* this batch, device clock */
    rk_dev_u64 prev_d2h_ns; /* the previous batch (0 for the first) */
    rk_dev_u32 n, alerts;   /* readings in the batch; anomalies among them */
} cli_and_verdicts;

/* The host's init (host -> detector). 16 bytes. */
typedef struct cli_and_init {
    rk_dev_u64 windows; /* device address of sensors cli_and_window */
    rk_dev_u32 sensors, reserved;
} cli_and_init;

/* A sensor's rolling window. */
typedef struct cli_and_window {
    double v[CLI_AND_WINDOW];
    double sum, sumsq;
    rk_dev_u32 len, head;
} cli_and_window;

/* The detection's arithmetic: one IEEE rounding per operation everywhere
 * (see "Floating point" above). */
#if defined(RK_DEV_ON_DEVICE)
#define CLI_AND_ADD(a, b) __dadd_rn((a), (b))
#define CLI_AND_SUB(a, b) __dsub_rn((a), (b))
#define CLI_AND_MUL(a, b) __dmul_rn((a), (b))
#define CLI_AND_DIV(a, b) __ddiv_rn((a), (b))
#define CLI_AND_SQRT(a)   __dsqrt_rn(a)
#else
#include <math.h>
#define CLI_AND_ADD(a, b) ((a) + (b))
#define CLI_AND_SUB(a, b) ((a) - (b))
#define CLI_AND_MUL(a, b) ((a) * (b))
#define CLI_AND_DIV(a, b) ((a) / (b))
#define CLI_AND_SQRT(a)   sqrt(a)
#endif

/* Decides one reading of the window's sensor: 1 (and *z set) when it is
 * an anomaly, which stays out of the window; else 0, and the reading
 * enters the window (*z is set once the window is full). The CPU detector
 * and the batch baseline (anomaly.c) call this same function. */
RK_DEV_FN int
cli_and_detect(cli_and_window *w, double value, double *z)
{
    double old;

    if (w->len == CLI_AND_WINDOW) {
        double mean = CLI_AND_DIV(w->sum, (double)CLI_AND_WINDOW);
        double var
            = CLI_AND_DIV(CLI_AND_SUB(w->sumsq, CLI_AND_MUL(w->sum, mean)),
                (double)(CLI_AND_WINDOW - 1));
        double d = CLI_AND_SUB(value, mean);
        *z = CLI_AND_DIV(
            d < 0 ? -d : d, CLI_AND_SQRT(var > 1e-12 ? var : 1e-12));
        if (*z > CLI_AND_Z_THRESHOLD)
            return 1;
        old = w->v[w->head];
        w->sum = CLI_AND_SUB(w->sum, old);
        w->sumsq = CLI_AND_SUB(w->sumsq, CLI_AND_MUL(old, old));
    } else {
        w->len++;
    }
    w->v[w->head] = value;
    w->sum = CLI_AND_ADD(w->sum, value);
    w->sumsq = CLI_AND_ADD(w->sumsq, CLI_AND_MUL(value, value));
    w->head = (w->head + 1) % CLI_AND_WINDOW;
    return 0;
}

/* The host program that only drives the kernel (anomaly.c, anomaly_cuda.c)
 * needs the layouts and cli_and_detect, not a host build of the kernel. */
#if !defined(CLI_AND_LAYOUT_ONLY)

/* Message i of the batch, if it is a well-formed reading. */
RK_DEV_FN const cli_and_reading *
cli_and_reading_at(const rk_dev_ctx *x, rk_dev_u32 i)
{
    rk_dev_msg m = rk_dev_msg_at(x, i);

    if (m.hdr->type_id != CLI_AND_READING_TYPE
        || m.len != (rk_dev_u32)sizeof(cli_and_reading))
        return 0;
    return (const cli_and_reading *)(const void *)m.data;
}

RK_DEV_ACTOR(cli_and_detector)(rk_dev_ctx *x)
{
    /* Block-shared: the init's windows and sensor count, the batch's
     * verdicts and alerts (each written by the reading's owner), the
     * batch's record, and thread 0's clock readings. */
    RK_DEV_SHARED cli_and_window *win;
    RK_DEV_SHARED rk_dev_u32 sensors;
    RK_DEV_SHARED unsigned char hit[RK_DEV_MAX_BATCH];
    RK_DEV_SHARED cli_and_alert al[RK_DEV_MAX_BATCH];
    RK_DEV_SHARED cli_and_verdicts rec;
    RK_DEV_SHARED rk_dev_u64 t0, t1, t2, prev_d2h;
    rk_dev_u32 tid = rk_dev_thread_idx(), bd = rk_dev_block_dim();

    if (rk_dev_thread0()) {
        win = 0;
        sensors = 0;
        prev_d2h = 0;
    }
    rk_dev_sync_block();
    while (!rk_dev_should_terminate(x)) {
        rk_dev_u32 n, k, i, nal = 0;
        int rc;

        if (rk_dev_thread0())
            t0 = rk_dev_now_ns();
        n = rk_dev_recv_batch(x);
        if (n == 0)
            continue;
        if (rk_dev_thread0())
            t1 = rk_dev_now_ns();
        /* The batch's leading readings; an init (or anything else) is
         * taken alone, so each batch is one or the other. */
        for (k = 0; k < n && cli_and_reading_at(x, k) != 0; k++)
            ;
        if (k == 0) {
            /* Read in place: the batch is in the block's shared stage. */
            rk_dev_msg m = rk_dev_msg_at(x, 0);
            const cli_and_init *in
                = (const cli_and_init *)(const void *)m.data;
            if (m.hdr->type_id != CLI_AND_INIT_TYPE
                || m.len != (rk_dev_u32)sizeof(*in) || in->windows == 0
                || in->sensors == 0)
                return RK_EINVAL;
            if (rk_dev_thread0()) {
                win = (cli_and_window *)(rk_dev_size)in->windows;
                sensors = in->sensors;
            }
            rk_dev_sync_block();
            for (i = tid; i < sensors; i += bd) {
                win[i].len = 0;
                win[i].head = 0;
                win[i].sum = 0;
                win[i].sumsq = 0;
            }
            rk_dev_sync_block();
            rk_dev_recv_done(x, 1);
            continue;
        }
        if (win == 0)
            return RK_EINVAL; /* a reading before the init */
        /* Each thread decides its own sensors' readings, in batch order. */
        for (i = 0; i < k; i++) {
            const cli_and_reading *r = cli_and_reading_at(x, i);
            rk_dev_u32 s = r->sensor % sensors;
            double z = 0;
            if (s % bd != tid)
                continue;
            hit[i] = (unsigned char)cli_and_detect(&win[s], r->value, &z);
            if (hit[i]) {
                al[i].seq = r->seq;
                al[i].t_ns = r->t_ns;
                al[i].z = z;
                al[i].sensor = r->sensor;
                al[i].pad = 0;
            }
        }
        rk_dev_sync_block(); /* every verdict is in hit[] and al[] */
        if (rk_dev_thread0())
            t2 = rk_dev_now_ns();
        for (i = 0; i < k; i++)
            if (hit[i]) {
                nal++;
                rc = rk_dev_send(
                    x, CLI_AND_ALERT_TYPE, &al[i], (rk_dev_u32)sizeof(al[i]));
                if (rc != RK_OK)
                    return rc;
            }
        if (rk_dev_thread0()) {
            const cli_and_reading *r = cli_and_reading_at(x, 0);
            rec.first_seq = r->seq;
            rec.oldest_t_ns = rec.newest_t_ns = r->t_ns;
            for (i = 0; i < k; i++) {
                r = cli_and_reading_at(x, i);
                rec.last_seq = r->seq;
                if (r->t_ns < rec.oldest_t_ns)
                    rec.oldest_t_ns = r->t_ns;
                if (r->t_ns > rec.newest_t_ns)
                    rec.newest_t_ns = r->t_ns;
            }
            rec.h2d_ns = t1 - t0;
            rec.compute_ns = t2 - t1;
            rec.prev_d2h_ns = prev_d2h;
            rec.n = k;
            rec.alerts = nal;
        }
        rk_dev_sync_block();
        rc = rk_dev_send(
            x, CLI_AND_VERDICTS_TYPE, &rec, (rk_dev_u32)sizeof(rec));
        if (rc != RK_OK)
            return rc;
        rk_dev_recv_done(x, k);
        if (rk_dev_thread0())
            prev_d2h = rk_dev_now_ns() - t2;
    }
    return RK_OK;
}
RK_DEV_ACTOR_KERNEL(cli_and_kernel, cli_and_detector)
#endif /* CLI_AND_LAYOUT_ONLY */

#endif /* RK_CLI_ANOMALY_DEV_H */
