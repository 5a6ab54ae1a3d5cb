/*
 * The anomaly pipeline's device detector (tools/ringkernel/anomaly_dev.h),
 * written once:
 *
 *   - the host-C build of the actor runs on a CPU thread (one block, real
 *     ring_proto.h lanes, tests/support/dev_host.h), fed a stream of
 *     several sensors with injected spikes, the host's init arriving in
 *     the same batch as the first readings; its verdicts are compared
 *     reading by reading with the CPU pipeline's detection (the same
 *     cli_and_detect, run here in stream order): an alert exactly for
 *     each anomaly, in reading order, with bit-identical z-scores, and
 *     every reading in exactly one verdict record whose counts and
 *     generation times match its readings; for a batch of 64 and an odd
 *     batch of 7;
 *   - bad input (a reading before the init, a message of another type, a
 *     short reading, an init without windows) faults the block with
 *     RK_EINVAL, and after a restart a new init and readings are handled;
 *   - NVRTC compiles the file's text as the cuda backend does; the PTX has
 *     the entry, %globaltimer, IEEE double arithmetic without fused
 *     multiply-adds (so a GPU computes the host's z-scores), system-scope
 *     acquire/release on the lanes, and neither an atomic
 *     read-modify-write (atom./red.) nor a non-coherent load of the
 *     windows, which change while the kernel runs.
 *
 * The backend's real host code runs the same kernel through the stand-in
 * driver in the ctest entries cli_*anomaly*cuda_sim* and cli_demo_cuda_sim
 * (tests/CMakeLists.txt), where `ringkernel bench` compares the cuda
 * pipeline's verdicts with the CPU pipeline's reading by reading. Nothing
 * here runs on a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devhost.h"
#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"

/* The detector, as host C. */
#include "../tools/ringkernel/anomaly_dev.h"

#include "dev_host.h"

_Static_assert(sizeof(cli_and_reading) == 32, "reading layout");
_Static_assert(sizeof(cli_and_alert) == 32, "alert layout");
_Static_assert(sizeof(cli_and_verdicts) == 64, "verdicts layout");
_Static_assert(sizeof(cli_and_init) == 16, "init layout");

#define SENSORS  5
#define READINGS 6000u

/* ------------------------------------------------------------ the stream */

static uint64_t
lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

static double
uniform(uint64_t *s)
{
    return ((double)lcg(s) + 1.0) * 0x1.0p-53;
}

/* Readings of SENSORS sensors in turn: a level per sensor plus Gaussian
 * noise, with 12-sigma spikes (either sign) every 97 readings once the
 * windows are full. */
static void
stream_make(cli_and_reading *r, uint32_t n)
{
    uint64_t s = 12345;
    for (uint32_t i = 0; i < n; i++) {
        double g = sqrt(-2.0 * log(uniform(&s)))
            * cos(2.0 * 3.14159265358979323846 * uniform(&s));
        r[i] = (cli_and_reading) { .seq = i,
            .t_ns = 1000000u + i, /* increasing, like rk_now_ns() */
            .value = 10.0 * (i % SENSORS) + g,
            .sensor = i % SENSORS };
        if (i >= 4u * CLI_AND_WINDOW * SENSORS && i % 97 == 0)
            r[i].value += (i & 1) ? 12.0 : -12.0;
    }
}

/* The CPU pipeline's verdicts: cli_and_detect in stream order. */
static void
reference(const cli_and_reading *r, uint32_t n, unsigned char *hit, double *z)
{
    cli_and_window *w = calloc(SENSORS, sizeof(*w));
    assert_non_null(w);
    for (uint32_t i = 0; i < n; i++) {
        z[i] = 0;
        hit[i] = (unsigned char)cli_and_detect(
            &w[r[i].sensor % SENSORS], r[i].value, &z[i]);
    }
    free(w);
}

/* ------------------------------------------------------------ the host */

/* What came back, checked against the reference as it arrives. */
typedef struct seen {
    const cli_and_reading *r;
    const unsigned char *hit;
    const double *z;
    uint32_t decided;    /* readings covered by records so far */
    uint32_t alerted;    /* alerts so far */
    uint32_t batch_al;   /* alerts since the last record */
    uint64_t next_alert; /* alerts come in reading order */
    uint32_t records;
} seen;

static void
take(seen *v, const unsigned char *f, size_t len)
{
    rk_msg_header h;
    memcpy(&h, f, sizeof(h));
    if (h.type_id == CLI_AND_ALERT_TYPE) {
        cli_and_alert a;
        assert_int_equal(len, 64 + sizeof(a));
        memcpy(&a, f + 64, sizeof(a));
        assert_true(a.seq < READINGS);
        assert_true(a.seq >= v->next_alert);
        /* Exactly the reference's anomalies, none skipped in between. */
        for (uint64_t s = v->next_alert; s < a.seq; s++)
            assert_false(v->hit[s]);
        assert_true(v->hit[a.seq]);
        assert_int_equal(a.t_ns, v->r[a.seq].t_ns);
        assert_int_equal(a.sensor, v->r[a.seq].sensor);
        assert_memory_equal(&a.z, &v->z[a.seq], sizeof(double));
        v->next_alert = a.seq + 1;
        v->alerted++;
        v->batch_al++;
        return;
    }
    cli_and_verdicts rec;
    assert_int_equal(h.type_id, CLI_AND_VERDICTS_TYPE);
    assert_int_equal(len, 64 + sizeof(rec));
    memcpy(&rec, f + 64, sizeof(rec));
    /* Batches in order, each reading in exactly one. */
    assert_int_equal(rec.first_seq, v->decided);
    assert_int_equal(rec.last_seq, rec.first_seq + rec.n - 1);
    assert_true(rec.n >= 1 && rec.n <= RK_DEV_MAX_BATCH);
    assert_int_equal(rec.oldest_t_ns, v->r[rec.first_seq].t_ns);
    assert_int_equal(rec.newest_t_ns, v->r[rec.last_seq].t_ns);
    assert_int_equal(rec.alerts, v->batch_al);
    if (v->records++ == 0)
        assert_int_equal(rec.prev_d2h_ns, 0);
    /* The batch's alerts came before its record. */
    for (uint64_t s = v->next_alert; s <= rec.last_seq; s++)
        assert_false(v->hit[s]);
    if (v->next_alert < rec.last_seq + 1)
        v->next_alert = rec.last_seq + 1;
    v->decided += rec.n;
    v->batch_al = 0;
}

static void
drain(inst *in, seen *v)
{
    unsigned char buf[256];
    size_t len;
    while (rk__dh_recv(&in->d, 0, buf, sizeof(buf), &len) == RK_OK)
        take(v, buf, len);
}

/* The stream and the CPU pipeline's verdicts on it: the group's state,
 * made once for every batch size. */
typedef struct stream {
    cli_and_reading *r;
    unsigned char *hit;
    double *z;
    uint32_t anomalies;
} stream;

static int
stream_teardown(void **state)
{
    stream *s = *state;
    if (s != NULL) {
        free(s->r);
        free(s->hit);
        free(s->z);
        free(s);
    }
    return 0;
}

static int
stream_setup(void **state)
{
    stream *s = calloc(1, sizeof(*s));

    *state = s;
    if (s == NULL || (s->r = calloc(READINGS, sizeof(*s->r))) == NULL
        || (s->hit = calloc(READINGS, 1)) == NULL
        || (s->z = calloc(READINGS, sizeof(double))) == NULL) {
        stream_teardown(state);
        return -1;
    }
    stream_make(s->r, READINGS);
    reference(s->r, READINGS, s->hit, s->z);
    for (uint32_t i = 0; i < READINGS; i++)
        s->anomalies += s->hit[i];
    return 0;
}

static void
run_stream(const stream *s, uint32_t batch)
{
    const cli_and_reading *r = s->r;
    cli_and_window *win = calloc(SENSORS, sizeof(*win));
    seen v = { .r = r, .hit = s->hit, .z = s->z };
    cli_and_init init = { .windows = (uintptr_t)win, .sensors = SENSORS };
    uint32_t sent = 0, anomalies = s->anomalies;
    uint64_t until = deadline();
    rk__dh_status st;
    inst in;

    assert_non_null(win);
    assert_true(anomalies >= 30); /* the spikes, not noise */
    /* Garbage the init must clear. */
    memset(win, 0x5a, SENSORS * sizeof(*win));

    inst_make(&in, &rk_dev_host_kernel_cli_and_kernel, 1, 1, 0, 64, batch);
    /* The init and the first readings are queued before the block runs,
     * so its first batch holds both. */
    assert_int_equal(try_send_bytes(&in, 0, CLI_AND_INIT_TYPE, &init, sizeof(init)),
        RK_OK);
    for (; sent < 10; sent++)
        assert_int_equal(
            try_send_bytes(&in, 0, CLI_AND_READING_TYPE, &r[sent], sizeof(*r)), RK_OK);
    inst_start(&in, 1);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    while (sent < READINGS || v.decided < READINGS) {
        assert_true(rk_now_ns() < until);
        while (sent < READINGS
            && try_send_bytes(&in, 0, CLI_AND_READING_TYPE, &r[sent], sizeof(*r))
                == RK_OK)
            sent++;
        drain(&in, &v);
        sched_yield();
    }
    inst_stop(&in);
    drain(&in, &v);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, RK_OK);
    assert_int_equal(st.processed, READINGS + 1); /* and the init */
    assert_int_equal(st.errors, 0);
    inst_join(&in);
    assert_int_equal(v.decided, READINGS);
    assert_int_equal(v.alerted, anomalies);
    print_message("batch %u: %u readings in %u batches, %u anomalies, "
                  "verdicts and z-scores as the CPU detector's\n",
        batch, READINGS, v.records, anomalies);
    free(win);
}

static void
test_verdicts_batch_64(void **state)
{
    run_stream(*state, 64);
}

static void
test_verdicts_batch_7(void **state)
{
    run_stream(*state, 7);
}

/* ------------------------------------------------------------ bad input */

static void
test_bad_input_faults(void **state)
{
    cli_and_window win[2];
    cli_and_reading rd = { .seq = 0, .t_ns = 5, .value = 1.0, .sensor = 1 };
    cli_and_init none = { .windows = 0, .sensors = 2 };
    cli_and_init init = { .windows = (uintptr_t)win, .sensors = 2 };
    unsigned char buf[256];
    uint32_t nf = 0;
    size_t len;
    uint64_t until;
    rk_msg_header h;
    inst in_bad;
    (void)state;

    inst_make(&in_bad, &rk_dev_host_kernel_cli_and_kernel, 1, 1, 0, 8, 8);
    inst_start(&in_bad, 1);
    rk__dh_post(&in_bad.d, RK_DEV_CMD_RUN);
    /* Each fault holds the bad message; a restart skips it, and the
     * restarted actor needs a new init. */
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_READING_TYPE, &rd, sizeof(rd)), RK_OK);
    assert_int_equal(inst_wait_fault(&in_bad, ++nf), RK_EINVAL);
    rk__dh_verdict(&in_bad.d, RK_DEV_VERDICT(0, nf));
    assert_int_equal(try_send_bytes(&in_bad, 0, 0x1234, &rd, sizeof(rd)), RK_OK);
    assert_int_equal(inst_wait_fault(&in_bad, ++nf), RK_EINVAL);
    rk__dh_verdict(&in_bad.d, RK_DEV_VERDICT(0, nf));
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_INIT_TYPE, &none, sizeof(none)), RK_OK);
    assert_int_equal(inst_wait_fault(&in_bad, ++nf), RK_EINVAL);
    rk__dh_verdict(&in_bad.d, RK_DEV_VERDICT(0, nf));
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_INIT_TYPE, &init, sizeof(init)), RK_OK);
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_READING_TYPE, &rd, sizeof(rd) - 8), RK_OK);
    assert_int_equal(inst_wait_fault(&in_bad, ++nf), RK_EINVAL);
    rk__dh_verdict(&in_bad.d, RK_DEV_VERDICT(0, nf));
    /* Restarted: init, then a reading is decided. */
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_INIT_TYPE, &init, sizeof(init)), RK_OK);
    assert_int_equal(
        try_send_bytes(&in_bad, 0, CLI_AND_READING_TYPE, &rd, sizeof(rd)), RK_OK);
    until = deadline();
    while (rk__dh_recv(&in_bad.d, 0, buf, sizeof(buf), &len) != RK_OK) {
        assert_true(rk_now_ns() < until);
        sched_yield();
    }
    memcpy(&h, buf, sizeof(h));
    assert_int_equal(h.type_id, CLI_AND_VERDICTS_TYPE);
    assert_int_equal(win[1].len, 1); /* the reading entered its window */
    inst_stop(&in_bad);
    inst_join(&in_bad);
}

/* ------------------------------------------------------------ NVRTC */

static void
test_nvrtc_ptx(void **state)
{
    rk__nvrtc_image img;
    /* The sm_90 cubin names the entry, and the PTX: */
    const char *ptx = cuda_tree_ptx("tools/ringkernel/anomaly_dev.h", "cli_and_kernel", &img);

    (void)state;
    /* The timing around the batch. */
    assert_non_null(strstr(ptx, "%globaltimer"));
    /* The detection in IEEE double, one rounding per operation: never a
     * fused multiply-add, so the z-scores are the host's bits. */
    assert_true(cuda_count_op(ptx, "sqrt.rn.f64") > 0);
    assert_true(cuda_count_op(ptx, "div.rn.f64") > 0);
    assert_true(cuda_count_op(ptx, "mul.rn.f64") > 0);
    assert_true(cuda_count_op(ptx, "sub.rn.f64") > 0);
    assert_int_equal(cuda_count_op(ptx, "fma."), 0);
    assert_int_equal(cuda_count_op(ptx, "sqrt.approx"), 0);
    assert_int_equal(cuda_count_op(ptx, "div.approx"), 0);
    /* The block's verdicts meet in shared memory behind barriers. */
    assert_true(
        cuda_count_op(ptx, "bar.sync") > 0 || cuda_count_op(ptx, "barrier.sync") > 0);
    /* The lanes' protocol; and the windows change while the kernel runs:
     * never read through the non-coherent path. */
    cuda_assert_lane_ptx(ptx);
    rk__nvrtc_image_free(&img);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts_batch_64),
        cmocka_unit_test(test_verdicts_batch_7),
        cmocka_unit_test(test_bad_input_faults),
        cmocka_unit_test(test_nvrtc_ptx),
    };
    return cmocka_run_group_tests(tests, stream_setup, stream_teardown);
}
