/*
 * bench/bench_cluster.c - the cluster across two MPI ranks against raw MPI
 * with the same 64-byte payloads, in the same run:
 *
 *   mpirun -np 2 --oversubscribe build/bench/bench_cluster
 *
 *   rtt_p50 / rtt_p99       host -> remote kernel -> host (rk_request on
 *                           "1/echo", the call a user writes first: a
 *                           direct call on the proxy, which sends by MPI
 *                           on this thread), against an MPI_Send/MPI_Recv
 *                           ping-pong between the same ranks, and
 *                           (ratio_to_cluster_request) against rtt_direct
 *   rtt_direct_p50 / _p99   the same round trip with rk_cluster_request
 *                           (no proxy: the host sends the request with
 *                           its own MPI calls and receives the reply;
 *                           the echo kernel's thread handles it)
 *   rtt_call_p50 / _p99     the same to "echoc", the same echo handler
 *                           registered with direct_calls: the remote
 *                           progress thread runs it (rk_kernel_call).
 *                           The target row: its raw MPI figures come
 *                           from blocks alternating with the cluster's
 *                           (rtt_interleaved); RK_BENCH_BLOCKS=1 prints
 *                           each block's p50s on stderr
 *   rtt_handle_call_p50/_p99 rk_request on the "1/echoc" handle, in the
 *                           same interleaved blocks (a third turn in
 *                           each), against raw MPI and (ratio_to_
 *                           cluster_request) against rtt_call
 *   oneway_throughput       64-byte messages to "1/sink" (rk_send_batch,
 *                           256 a call; batched again on the wire by the
 *                           progress thread), ended by a request to the
 *                           same kernel that answers with its count,
 *                           against MPI_Send streaming of the same
 *                           payloads ended by a one-byte ack
 *   oneway_direct_throughput the same with rk_cluster_send_batch (the
 *                           host stages the frames: no proxy thread) and
 *                           an rk_cluster_request fence
 *   idle_cpu_percent        CPU time of each whole process (kernels,
 *                           proxies, progress thread) over an idle second
 *   rtt_after_idle_p50      the first rtt_call round trip after 100 ms of
 *                           silence (both ranks idle), with the one
 *                           right after it (warm_p50, ratio_to_warm),
 *                           against raw MPI's first ping-pong after as
 *                           long
 * Rank 0 prints JSON lines (bench.h); RK_BENCH_SCALE scales the counts.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"
#include "ringkernel/ringkernel.h"

#define SUITE   "cluster"
#define PAYLOAD 64
#define T_FENCE 9
#define T_DONE  10

static double scale;
static int call_only;
static int tp_only;
static int blocks_verbose;
static int rank;

static size_t
scaled(double n)
{
    double v = n * scale;
    return v < 10 ? 10 : (size_t)v;
}

static void
check(int rc, const char *what)
{
    if (rc != RK_OK) {
        fprintf(stderr, "bench_cluster rank %d: %s: %s (%s)\n", rank, what,
            rk_err_name(rc), rk_errdetail());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static int
echo_h(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, 1, m->data, m->len);
}

static _Atomic uint64_t sunk;

static int
sink_h(rk_ctx *ctx, const rk_msg_view *m)
{
    uint64_t n;

    if (m->hdr->type_id == T_DONE)
        return rk_ctx_send(ctx, T_DONE, NULL, 0);
    if (m->hdr->type_id != T_FENCE) {
        atomic_fetch_add_explicit(&sunk, 1, memory_order_relaxed);
        return RK_OK;
    }
    n = atomic_exchange(&sunk, 0);
    return rk_ctx_reply(ctx, m, T_FENCE, &n, sizeof(n));
}

static void
emit_pair(const char *name, double rk, double mpi, const char *unit,
    const char *ratio_name)
{
    char extra[160];

    bench_emit(SUITE, name, "mpi", mpi, unit, "\"ranks\":2");
    snprintf(extra, sizeof(extra), "\"ranks\":2,\"%s\":%.3f", ratio_name,
        mpi > 0 ? rk / mpi : 0.0);
    bench_emit(SUITE, name, "ringkernel", rk, unit, extra);
}

/* A thread that wakes every millisecond while ticking is set. On the
 * 2-vCPU VM of record a raw MPI stream runs at 0.2-0.4 M msgs/s in
 * processes that have no other thread to wake, and at 1.4-4.7 M msgs/s
 * when each process also has one that wakes every millisecond (a bare
 * MPI program shows it, with mpi_yield_when_idle on or off), and its
 * first ping-pong after 100 ms of silence takes 2-4 ms instead of 25 us.
 * The raw stream and that ping-pong get such a thread on both ranks:
 * raw MPI's faster figures. */
static _Atomic int ticking;

static void *
ticker(void *arg)
{
    struct timespec ms = { 0, 1000000 };

    (void)arg;
    while (atomic_load_explicit(&ticking, memory_order_relaxed))
        nanosleep(&ms, NULL);
    return NULL;
}

static pthread_t tick_thread;
static int ticked;

static void
tick_start(void)
{
    atomic_store_explicit(&ticking, 1, memory_order_relaxed);
    ticked = pthread_create(&tick_thread, NULL, ticker, NULL) == 0;
}

static void
tick_stop(void)
{
    atomic_store_explicit(&ticking, 0, memory_order_relaxed);
    if (ticked)
        pthread_join(tick_thread, NULL);
    ticked = 0;
}

/* Raw MPI streaming of n 64-byte messages, rank 0 to rank 1, ended by
 * an ack: messages per second (rank 0; 0 on rank 1). */
static double
mpi_stream(size_t n, uint8_t *buf)
{
    uint64_t t0;
    uint8_t ack = 0;
    double rate;

    tick_start();
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (rank == 0)
            MPI_Send(buf, PAYLOAD, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
        else
            MPI_Recv(buf, PAYLOAD, MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
    }
    if (rank == 0)
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    rate = (double)n / ((double)(bench_now_ns() - t0) / 1e9);
    tick_stop();
    return rate;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The cost of one thread hand-off where the receiver has parked: a
 * local request to a kernel that never spins, from a host that never
 * spins, is two such hand-offs (host -> kernel -> host). p50 / 2, in the
 * same run as the cross-rank round trip, for the floor in
 * docs/cluster.md. */
static double
parked_handoff_ns(size_t n, uint64_t *lat)
{
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true, .host_spin_ns = -1 };
    rk_kernel_def d = { .id = "lecho", .handler = echo_h };
    rk_kernel k;
    rk_msg_header h;
    uint8_t b[PAYLOAD] = { 0 };
    size_t len;
    double p50;

    d.config.spin = 1;
    d.config.telemetry_off = true;
    check(rk_runtime_create(&rt, &rc), "local runtime");
    check(rk_runtime_register(rt, &d), "register lecho");
    check(rk_kernel_launch(rt, "lecho"), "launch lecho");
    check(rk_kernel_activate(rt, "lecho"), "activate lecho");
    check(rk_kernel_lookup(rt, "lecho", &k), "lookup lecho");
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        check(rk_request(
                  rt, k, 1, b, PAYLOAD, &h, b, sizeof(b), &len, 10000000000LL),
            "local request");
        lat[i] = bench_now_ns() - t0;
    }
    p50 = (double)bench_percentile(lat, n, 50) / 2;
    rk_runtime_destroy(rt);
    return p50;
}

/* n raw MPI_Send/MPI_Recv round trips of PAYLOAD bytes between ranks 0
 * and 1; rank 0 records their latencies in lat. */
static void
pingpong(size_t n, uint64_t *lat)
{
    uint8_t buf[PAYLOAD];

    memset(buf, 0xab, sizeof(buf));
    for (size_t i = 0; i < n; i++) {
        if (rank == 0) {
            uint64_t t0 = bench_now_ns();
            MPI_Send(buf, PAYLOAD, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, PAYLOAD, MPI_BYTE, 1, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
            lat[i] = bench_now_ns() - t0;
        } else {
            MPI_Recv(buf, PAYLOAD, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
                MPI_STATUS_IGNORE);
            MPI_Send(buf, PAYLOAD, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
}

/* n round trips with rk_cluster_request to id (after n / 10 to warm
 * up), their latencies in lat. */
/* One round trip to id: rk_cluster_request, or (rt not NULL) rk_request
 * on the kernel's handle k. */
static int
one_request(rk_runtime *rt, rk_kernel k, rk_cluster *cl, const char *id,
    const rk_request_options *o, uint8_t *buf)
{
    rk_msg_header h;
    size_t len;

    if (rt != NULL)
        return rk_request_opts(rt, k, o, buf, PAYLOAD, &h, buf, PAYLOAD, &len);
    return rk_cluster_request(cl, id, o, buf, PAYLOAD, &h, buf, PAYLOAD, &len);
}

/* n round trips to id (after n / 10 to warm up), their latencies in
 * lat: by rk_cluster_request, or with rt by rk_request on the handle. */
static void
requests(rk_runtime *rt, rk_cluster *cl, const char *id,
    const rk_request_options *o, size_t n, uint64_t *lat)
{
    uint8_t buf[PAYLOAD];
    rk_kernel k = { 0, 0 };

    memset(buf, 0xab, sizeof(buf));
    if (rt != NULL)
        check(rk_kernel_lookup(rt, id, &k), "lookup");
    for (size_t i = 0; i < n / 10; i++)
        check(one_request(rt, k, cl, id, o, buf), "warm-up request");
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        check(one_request(rt, k, cl, id, o, buf), "request");
        lat[i] = bench_now_ns() - t0;
    }
}

/* name_p50 and name_p99 of the n latencies in lat (sorted) against raw
 * MPI's figures. */
static void
rtt_emit(
    const char *name, uint64_t *lat, size_t n, double mpi_p50, double mpi_p99)
{
    char row[64];

    snprintf(row, sizeof(row), "%s_p50", name);
    emit_pair(row, (double)bench_percentile(lat, n, 50), mpi_p50, "ns",
        "ratio_to_mpi");
    snprintf(row, sizeof(row), "%s_p99", name);
    emit_pair(row, (double)bench_percentile(lat, n, 99), mpi_p99, "ns",
        "ratio_to_mpi");
}

/* The ratio of rk_request on a handle to rk_cluster_request to the same
 * kernel in the same run (p50s): the first target of docs/cluster.md's
 * table. */
static void
handle_ratio_emit(const char *name, double handle_p50, double cluster_p50)
{
    char extra[120];

    snprintf(extra, sizeof(extra),
        "\"ranks\":2,\"rk_cluster_request_p50\":%.0f,"
        "\"ratio_to_cluster_request\":%.3f",
        cluster_p50, cluster_p50 > 0 ? handle_p50 / cluster_p50 : 0.0);
    bench_emit(SUITE, name, "ringkernel", handle_p50, "ns", extra);
}

/* The target round trip with its raw MPI baseline interleaved: BLOCKS
 * blocks, each n / BLOCKS raw MPI_Send/MPI_Recv round trips, then as
 * many rk_cluster_requests to id (after a tenth as many to warm up).
 * Over a whole run this VM's speed drifts by more than the difference
 * being measured: both sides of the ratio must see the same machine.
 * Before each block the ranks meet and wait SETTLE_NS, longer than the
 * progress threads' poll window, so that they nap through the raw MPI
 * turn. Rank 1 answers the raw turn and waits parked (rk_cluster_recv
 * on sink) through the cluster's, which rank 0 ends with a T_DONE.
 * Rank 0 emits name_p50 and name_p99 for both. */
#define BLOCKS    10
#define SETTLE_NS 3000000L

static void
rtt_interleaved(rk_runtime *rt, rk_cluster *cl, const char *id,
    const char *name, const char *hname, const rk_request_options *o, size_t n,
    uint64_t *lat, uint64_t *mlat, uint64_t *hlat)
{
    size_t per = n / BLOCKS;
    rk_msg_header h;
    rk_kernel ks;
    size_t len;

    if (rank == 0)
        check(rk_kernel_lookup(rt, "1/sink", &ks), "lookup sink");
    for (size_t blk = 0; blk < BLOCKS; blk++) {
        struct timespec settle = { 0, SETTLE_NS };

        MPI_Barrier(MPI_COMM_WORLD);
        nanosleep(&settle, NULL);
        pingpong(per, mlat + blk * per);
        if (rank != 0) {
            check(
                rk_cluster_recv(cl, "sink", &h, NULL, 0, &len, 600000000000LL),
                "wait for rank 0");
            continue;
        }
        requests(NULL, cl, id, o, per, lat + blk * per);
        requests(rt, cl, id, o, per, hlat + blk * per);
        check(rk_send(rt, ks, T_DONE, NULL, 0, 128, RK_WAIT_FOREVER), "done");
        if (blocks_verbose) /* sorts this block's latencies in place */
            fprintf(stderr, "%s block %zu: p50 %llu ns, raw MPI %llu ns\n",
                name, blk,
                (unsigned long long)bench_percentile(lat + blk * per, per, 50),
                (unsigned long long)bench_percentile(
                    mlat + blk * per, per, 50));
    }
    if (rank != 0)
        return;
    n = per * BLOCKS;
    {
        double m50 = (double)bench_percentile(mlat, n, 50);
        double m99 = (double)bench_percentile(mlat, n, 99);
        char row[64];

        rtt_emit(name, lat, n, m50, m99);
        rtt_emit(hname, hlat, n, m50, m99);
        snprintf(row, sizeof(row), "%s_vs_cluster_request", hname);
        handle_ratio_emit(row, (double)bench_percentile(hlat, n, 50),
            (double)bench_percentile(lat, n, 50));
    }
}

/* The first round trip after IDLE_MS of silence, against the one right
 * after it (warm), AFTER_IDLE times: rk_cluster_request to "1/echoc",
 * the direct-call kernel. Before each, the ranks meet; rank 0 then
 * stays idle for IDLE_MS, rank 1 waits parked (rk_cluster_recv on sink)
 * until rank 0 sends T_DONE, so both progress threads go idle. Raw MPI
 * the same way, rank 1 waiting in MPI_Recv. Rank 0 emits
 * rtt_after_idle_p50 (the first round trips) with the warm p50. */
#define AFTER_IDLE 20
#define IDLE_MS    100

static void
after_idle(rk_runtime *rt, rk_cluster *cl, uint64_t *lat, uint64_t *warm,
    uint64_t *mlat)
{
    struct timespec idle = { 0, IDLE_MS * 1000000L };
    rk_request_options o = RK_REQUEST_OPTIONS_INIT;
    uint8_t buf[PAYLOAD];
    rk_kernel ks = { 0, 0 };
    rk_msg_header h;
    size_t len;

    o.type_id = 1;
    o.timeout_ns = 10000000000LL;
    memset(buf, 0xab, sizeof(buf));
    if (rank == 0)
        check(rk_kernel_lookup(rt, "1/sink", &ks), "lookup sink");
    for (int i = 0; i < AFTER_IDLE; i++) {
        tick_start(); /* raw MPI's faster figure (see ticker) */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            nanosleep(&idle, NULL);
        pingpong(1, mlat + i);
        tick_stop();
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank != 0) {
            check(
                rk_cluster_recv(cl, "sink", &h, NULL, 0, &len, 600000000000LL),
                "wait for rank 0");
            continue;
        }
        nanosleep(&idle, NULL);
        for (int j = 0; j < 2; j++) {
            uint64_t t0 = bench_now_ns();
            check(one_request(NULL, ks, cl, "1/echoc", &o, buf), "request");
            (j == 0 ? lat : warm)[i] = bench_now_ns() - t0;
        }
        check(rk_send(rt, ks, T_DONE, NULL, 0, 128, RK_WAIT_FOREVER), "done");
    }
    if (rank == 0) {
        char extra[200];
        double first = (double)bench_percentile(lat, AFTER_IDLE, 50);
        double w = (double)bench_percentile(warm, AFTER_IDLE, 50);
        double m = (double)bench_percentile(mlat, AFTER_IDLE, 50);

        snprintf(extra, sizeof(extra), "\"ranks\":2,\"idle_ms\":%d", IDLE_MS);
        bench_emit(SUITE, "rtt_after_idle_p50", "mpi", m, "ns", extra);
        snprintf(extra, sizeof(extra),
            "\"ranks\":2,\"idle_ms\":%d,\"warm_p50\":%.0f,"
            "\"ratio_to_warm\":%.3f,\"max\":%llu,\"ratio_to_mpi\":%.3f",
            IDLE_MS, w, w > 0 ? first / w : 0.0,
            (unsigned long long)lat[AFTER_IDLE - 1], m > 0 ? first / m : 0.0);
        bench_emit(
            SUITE, "rtt_after_idle_p50", "ringkernel", first, "ns", extra);
    }
}

static double
cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec
        + ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) / 1e6;
}

int
main(int argc, char **argv)
{
    int level, size;
    size_t n_rtt, n_tp, n_call;
    uint64_t *lat, *mlat, *hlat;
    uint8_t buf[PAYLOAD];
    double mpi_p50, mpi_p99, rk_p50, rk_p99;
    enum { ROUNDS = 3 };
    double mpi_tp[ROUNDS], rk_tp[ROUNDS], ratio[ROUNDS];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "bench_cluster: run with mpirun -np 2\n");
        MPI_Finalize();
        return 2;
    }
    scale = bench_scale();
    /* RK_BENCH_CALL_ONLY=1: the rtt_call rows at full length, the other
     * round trips short, no throughput (for profiling). */
    call_only = getenv("RK_BENCH_CALL_ONLY") != NULL
        && atoi(getenv("RK_BENCH_CALL_ONLY")) != 0;
    /* RK_BENCH_TP_ONLY=1: the one-way throughput rows alone (for
     * profiling the stream). */
    tp_only = getenv("RK_BENCH_TP_ONLY") != NULL
        && atoi(getenv("RK_BENCH_TP_ONLY")) != 0;
    /* RK_BENCH_BLOCKS=1: each interleaved block's p50s on stderr. */
    blocks_verbose = getenv("RK_BENCH_BLOCKS") != NULL
        && atoi(getenv("RK_BENCH_BLOCKS")) != 0;
    n_rtt = scaled(20000);
    n_tp = scaled(500000);
    lat = calloc(n_rtt, sizeof(*lat));
    mlat = calloc(n_rtt, sizeof(*mlat));
    hlat = calloc(n_rtt, sizeof(*hlat));
    memset(buf, 0xab, sizeof(buf));

    /* ---- raw MPI baselines */
    MPI_Barrier(MPI_COMM_WORLD);
    pingpong(n_rtt, lat);
    mpi_p50 = (double)bench_percentile(lat, n_rtt, 50);
    mpi_p99 = (double)bench_percentile(lat, n_rtt, 99);
    /* ---- the cluster */
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true };
    rk_kernel_config kc = { .input_capacity = 4096, .telemetry_off = true };
    rk_kernel_def echo = { .id = "echo", .handler = echo_h, .config = kc };
    rk_kernel_def sink = { .id = "sink", .handler = sink_h, .config = kc };
    rk_kernel_def echoc = { .id = "echoc", .handler = echo_h, .config = kc };
    rk_cluster_export ex[] = { { .id = "echo", .input_capacity = 4096 },
        { .id = "sink", .input_capacity = 4096 }, { .id = "echoc" } };
    rk_cluster_config cc = { .leave_timeout_ns = 120000000000LL };
    rk_cluster *cl;

    /* RK_BENCH_POLL_NS: the progress thread's poll window (cluster.h). */
    if (getenv("RK_BENCH_POLL_NS") != NULL)
        cc.poll_ns = atoll(getenv("RK_BENCH_POLL_NS"));
    /* RK_BENCH_IDLE_PARK_NS: the longest idle park (cluster.h). */
    if (getenv("RK_BENCH_IDLE_PARK_NS") != NULL)
        cc.idle_park_ns = atoll(getenv("RK_BENCH_IDLE_PARK_NS"));
    /* RK_BENCH_CREDITS, RK_BENCH_BATCH: credits and batch_bytes. */
    if (getenv("RK_BENCH_CREDITS") != NULL)
        cc.credits = (uint32_t)atoll(getenv("RK_BENCH_CREDITS"));
    if (getenv("RK_BENCH_BATCH") != NULL)
        cc.batch_bytes = (uint32_t)atoll(getenv("RK_BENCH_BATCH"));
    /* RK_BENCH_NOSPIN=1: nothing spins before parking (host receives,
     * kernels): the setting for ranks that share cores. */
    if (getenv("RK_BENCH_NOSPIN") != NULL && atoi(getenv("RK_BENCH_NOSPIN"))) {
        rc.host_spin_ns = -1;
        echo.config.spin = 1;
        sink.config.spin = 1;
    }
    /* RK_BENCH_HOST_SPIN_NS, RK_BENCH_KSPIN: the host's receive spin and
     * the exported kernels' spin alone (what RK_BENCH_NOSPIN sets). */
    if (getenv("RK_BENCH_HOST_SPIN_NS") != NULL)
        rc.host_spin_ns = atoll(getenv("RK_BENCH_HOST_SPIN_NS"));
    if (getenv("RK_BENCH_KSPIN") != NULL) {
        echo.config.spin = (uint32_t)atoll(getenv("RK_BENCH_KSPIN"));
        sink.config.spin = echo.config.spin;
    }
    echoc.config = echo.config;
    echoc.config.direct_calls = true;
    check(rk_runtime_create(&rt, &rc), "runtime");
    if (rank == 1) {
        cc.exports = ex;
        cc.n_exports = 3;
        check(rk_runtime_register(rt, &echo), "register echo");
        check(rk_runtime_register(rt, &sink), "register sink");
        check(rk_runtime_register(rt, &echoc), "register echoc");
        for (int i = 0; i < 3; i++) {
            check(rk_kernel_launch(rt, ex[i].id), "launch");
            check(rk_kernel_activate(rt, ex[i].id), "activate");
        }
    }
    check(rk_cluster_mpi(rt, NULL, &cc, &cl), "join");
    n_call = n_rtt;
    if (tp_only)
        goto throughput;
    if (rank == 0) {
        rk_kernel ke, ks;
        rk_msg_header h;
        size_t len;

        check(rk_kernel_lookup(rt, "1/echo", &ke), "lookup echo");
        check(rk_kernel_lookup(rt, "1/sink", &ks), "lookup sink");
        if (call_only)
            n_rtt /= 20; /* the other round trips, cut short */
        for (size_t i = 0; i < n_rtt / 10; i++) /* warm up */
            check(rk_request(rt, ke, 1, buf, PAYLOAD, &h, buf, sizeof(buf),
                      &len, 10000000000LL),
                "warm-up request");
        for (size_t i = 0; i < n_rtt; i++) {
            uint64_t t0 = bench_now_ns();
            check(rk_request(rt, ke, 1, buf, PAYLOAD, &h, buf, sizeof(buf),
                      &len, 10000000000LL),
                "request");
            lat[i] = bench_now_ns() - t0;
        }
        rk_p50 = (double)bench_percentile(lat, n_rtt, 50);
        rk_p99 = (double)bench_percentile(lat, n_rtt, 99);
        emit_pair("rtt_p50", rk_p50, mpi_p50, "ns", "ratio_to_mpi");
        {
            /* How many of them went by the direct path (a direct call on
             * the proxy) rather than through the proxy's thread. */
            rk_kernel_stats ps;
            char extra[120];

            check(rk_kernel_stats_get(rt, "1/echo", &ps), "proxy stats");
            snprintf(extra, sizeof(extra),
                "\"rank\":0,\"requests\":%zu,\"offered\":%llu",
                n_rtt + n_rtt / 10, (unsigned long long)ps.offered);
            bench_emit(SUITE, "rtt_proxy_direct_calls", "ringkernel",
                (double)ps.direct_calls, "calls", extra);
        }
        {
            char extra[120];
            double ho = parked_handoff_ns(n_rtt / 4, lat);
            snprintf(extra, sizeof(extra),
                "\"rank\":0,\"rtt_p50_in_handoffs\":%.1f", rk_p50 / ho);
            bench_emit(
                SUITE, "parked_handoff_p50", "ringkernel", ho, "ns", extra);
        }
        emit_pair("rtt_p99", rk_p99, mpi_p99, "ns", "ratio_to_mpi");

        /* The same round trip with rk_cluster_request: no proxy hops. */
        {
            rk_request_options o = RK_REQUEST_OPTIONS_INIT;
            o.type_id = 1;
            o.timeout_ns = 10000000000LL;
            requests(NULL, cl, "1/echo", &o, n_rtt, lat);
            rtt_emit("rtt_direct", lat, n_rtt, mpi_p50, mpi_p99);
            handle_ratio_emit("rtt_vs_cluster_request", rk_p50,
                (double)bench_percentile(lat, n_rtt, 50));
        }
        /* Rank 1 waits (parked) for this before the interleaved round
         * trips. */
        check(rk_send(rt, ks, T_DONE, NULL, 0, 128, RK_WAIT_FOREVER), "done");
    } else {
        /* Wait (parked, not polling MPI) while rank 0 measures. */
        rk_msg_header h;
        size_t len;
        check(rk_cluster_recv(cl, "sink", &h, NULL, 0, &len, 600000000000LL),
            "wait for rank 0");
    }
    /* The target: the kernel run by the remote progress thread, against
     * raw MPI in alternating blocks. */
    {
        rk_request_options o = RK_REQUEST_OPTIONS_INIT;
        o.type_id = 1;
        o.timeout_ns = 10000000000LL;
        rtt_interleaved(rt, cl, "1/echoc", "rtt_call", "rtt_handle_call", &o,
            n_call, lat, mlat, hlat);
    }
    if (call_only)
        goto idle;
throughput:
    if (rank == 0) {
        rk_kernel ks;
        rk_msg_header h;
        size_t len;
        uint64_t count = 0;

        check(rk_kernel_lookup(rt, "1/sink", &ks), "lookup sink");

        /* Throughput: ROUNDS alternating pairs, raw MPI streaming then
         * the cluster, so both see the same machine load. The host hands
         * messages over 256 at a time (rk_send_batch); the proxy and the
         * progress thread batch them on the wire. Rank 1 waits parked
         * (rk_cluster_recv) while the cluster runs. */
        static uint8_t many[256 * PAYLOAD];
        for (int direct = 0; direct < 2; direct++) {
            for (int r = 0; r < ROUNDS; r++) {
                mpi_tp[r] = mpi_stream(n_tp, buf);
                uint64_t t0 = bench_now_ns();
                for (size_t i = 0; i < n_tp;) {
                    size_t n = n_tp - i < 256 ? n_tp - i : 256, sent = 0;
                    if (direct)
                        check(rk_cluster_send_batch(cl, "1/sink", 1, many,
                                  PAYLOAD, n, 128, RK_WAIT_FOREVER, &sent),
                            "direct send");
                    else
                        check(rk_send_batch(rt, ks, 1, many, PAYLOAD, n, 128,
                                  RK_WAIT_FOREVER, &sent),
                            "send");
                    i += sent;
                }
                if (direct) {
                    rk_request_options o = RK_REQUEST_OPTIONS_INIT;
                    o.type_id = T_FENCE;
                    o.timeout_ns = 120000000000LL;
                    check(rk_cluster_request(cl, "1/sink", &o, NULL, 0, &h,
                              &count, sizeof(count), &len),
                        "direct fence");
                } else {
                    check(rk_request(rt, ks, T_FENCE, NULL, 0, &h, &count,
                              sizeof(count), &len, 120000000000LL),
                        "fence");
                }
                rk_tp[r]
                    = (double)n_tp / ((double)(bench_now_ns() - t0) / 1e9);
                ratio[r] = rk_tp[r] / mpi_tp[r];
                if (count != n_tp) {
                    fprintf(stderr,
                        "bench_cluster: sink counted %llu of %zu\n",
                        (unsigned long long)count, n_tp);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                check(rk_send(rt, ks, T_DONE, NULL, 0, 128, RK_WAIT_FOREVER),
                    "done");
            }
            qsort(mpi_tp, ROUNDS, sizeof(double), cmp_d);
            qsort(rk_tp, ROUNDS, sizeof(double), cmp_d);
            qsort(ratio, ROUNDS, sizeof(double), cmp_d);
            {
                const char *name = direct ? "oneway_direct_throughput_64B"
                                          : "oneway_throughput_64B";
                char extra[200];
                bench_emit(SUITE, name, "mpi", mpi_tp[ROUNDS / 2], "msgs/s",
                    "\"ranks\":2,\"rounds\":3");
                snprintf(extra, sizeof(extra),
                    "\"ranks\":2,\"rounds\":3,\"ratio_to_mpi\":%.3f,"
                    "\"ratio_min\":%.3f,\"ratio_max\":%.3f",
                    ratio[ROUNDS / 2], ratio[0], ratio[ROUNDS - 1]);
                bench_emit(SUITE, name, "ringkernel", rk_tp[ROUNDS / 2],
                    "msgs/s", extra);
            }
        }
    } else {
        /* Each round: raw MPI, then wait (parked, not polling MPI)
         * until rank 0's cluster round is done. */
        rk_msg_header h;
        size_t len;
        for (int r = 0; r < 2 * ROUNDS; r++) { /* proxied, then direct */
            mpi_stream(n_tp, buf);
            check(
                rk_cluster_recv(cl, "sink", &h, NULL, 0, &len, 600000000000LL),
                "wait for rank 0");
        }
    }

    if (tp_only)
        goto leave;
    /* Idle: both processes joined, nothing sent, for one second; each
     * rank measures itself. */
idle:
    MPI_Barrier(MPI_COMM_WORLD);
    {
        double c0, c1;
        uint64_t t0, t1;
        struct timespec one = { 1, 0 };
        rk_cluster_stats s0, s1;
        /* Let the last replies and credits settle first. */
        struct timespec settle = { 0, 200000000 };

        nanosleep(&settle, NULL);
        rk_cluster_stats_get(cl, &s0);
        c0 = cpu_s();
        t0 = bench_now_ns();
        nanosleep(&one, NULL);
        c1 = cpu_s();
        t1 = bench_now_ns();
        rk_cluster_stats_get(cl, &s1);
        {
            char extra[160];
            snprintf(extra, sizeof(extra),
                "\"rank\":%d,\"idle_ns\":%llu,\"progress_sleeps\":%llu", rank,
                (unsigned long long)(t1 - t0),
                (unsigned long long)(s1.idle_sleeps - s0.idle_sleeps));
            bench_emit(SUITE, "idle_cpu_percent", "ringkernel",
                100.0 * (c1 - c0) / ((double)(t1 - t0) / 1e9), "%", extra);
        }
    }
    after_idle(rt, cl, lat, hlat, mlat);
leave:
    check(rk_cluster_leave(cl), "leave");
    rk_runtime_destroy(rt);
    free(lat);
    free(mlat);
    free(hlat);
    MPI_Finalize();
    return 0;
}
