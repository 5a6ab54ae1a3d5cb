/*
 * bench_cuda - the cuda backend end to end, through the runtime API.
 *
 * Rows (JSON lines, bench.h):
 *   cuda_rtt_p50 / cuda_rtt_p99   host -> persistent kernel -> host round
 *                                 trip (rk_send, rk_recv) through the
 *                                 host relay (the kernel launched with
 *                                 RK_CUDA_DIRECT=0), ns
 *   cuda_direct_rtt_p50 / _p99    the same kernel on the caller's own
 *                                 path: rk_request writes the lane and
 *                                 polls the reply itself, ns; "direct"
 *                                 and "relay_handoffs" per round trip
 *   cuda_direct_send_rtt_p50 / _p99  rk_send + rk_recv on the caller's
 *                                 own path (the sender writes the lane,
 *                                 the receiver reads the output lanes
 *                                 while the relay is idle), ns
 *   cuda_batched_throughput       rk_send_batch of echo messages while a
 *                                 second thread receives them, msgs/s,
 *                                 for grids of 1 and 8 blocks ("grid"),
 *                                 through the relay
 *   cuda_direct_batched_throughput  the same with the caller's own path
 *                                 (sends and receives take the lanes when
 *                                 the relay is idle)
 *   cuda_launch_sync_p50          baseline (real GPU only): an empty
 *                                 kernel launched with cuLaunchKernel and
 *                                 waited for with cuStreamSynchronize, ns
 *   cuda_lane_rtt_p50 / _p99      the device loop alone (real GPU only):
 *                                 the echo kernel launched by hand on
 *                                 its lanes, the host writing a request
 *                                 and polling for the reply itself (no
 *                                 runtime, no relay thread), ns
 *   cuda_graph_launch_p50         baseline (real GPU only): the same
 *                                 kernel captured in a CUDA Graph,
 *                                 cuGraphLaunch + cuStreamSynchronize, ns
 *   cuda_k2k_rtt_p50              device kernel-to-kernel round trip: two
 *                                 kernels joined both ways by rk_connect
 *                                 (K2K lanes in device memory) bounce a
 *                                 message K2K_ROUNDS times; the kernels
 *                                 stamp the first and last hop with the
 *                                 device clock (%globaltimer on a GPU),
 *                                 so it is timed on the device; p50 over
 *                                 messages of (last - first) / rounds, ns
 *   cuda_topic_fanout_rtt_p50     device topic fan-out round trip: the host
 *                                 sends to a publisher kernel (rk_pub),
 *                                 which publishes on a topic whose two
 *                                 subscribers are cuda kernels (K2K lanes,
 *                                 docs/cuda-k2k.md); both echo to the
 *                                 host; p50 of send -> both replies, ns;
 *                                 "relay_handoffs": the publisher's per
 *                                 round trip (0 when the send went
 *                                 direct and the publish stayed on the
 *                                 device)
 *
 * impl says what ran: "cuda" on a real GPU (the device name is in "gpu"),
 * "cuda_sim" when RK_CUDA_DRIVER points at the test-only stand-in driver
 * (tests/fake_cuda: the device code on CPU threads). cuda_sim figures
 * measure the host relay and the loop on CPUs, never a GPU. Without a
 * usable CUDA backend it prints one "skipped" row with the reason.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devhost.h"
#include "backend/cuda/kcache.h"
#include "bench.h"
#include "device/cuda_driver.h"
#include "ringkernel/ringkernel.h"

/* The echo kernel; its entry has the name of the stand-in's host build
 * (tests/kernels/test_kernels.cu), so the same source runs on both. */
static const char echo_src[]
    = "RK_DEV_HANDLER(echo_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);\n"
      "}\n"
      "RK_DEV_KERNEL(rk_echo, echo_h)\n";

/* rk_pong of tests/kernels/test_kernels.cu (the stand-in runs that host
 * build by the entry's name, so the text must do the same): bytes 0..3
 * the hops left, 4..11 the device clock at the first hop, 12..19 at the
 * last; with hops left, on K2K route 0 with one fewer, else to the host. */
static const char pong_src[]
    = "RK_DEV_HANDLER(pong_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    RK_DEV_SHARED unsigned char buf[64];\n"
      "    RK_DEV_SHARED rk_dev_u32 left;\n"
      "    rk_dev_u32 n = m->len > 64 ? 64 : m->len;\n"
      "    int rc;\n"
      "    rk_dev_copy_block(buf, m->data, n);\n"
      "    rk_dev_sync_block();\n"
      "    if (rk_dev_thread0()) {\n"
      "        rk_dev_u64 now = rk_dev_now_ns(), t0 = 0;\n"
      "        int i;\n"
      "        left = n < 20 ? 0 : (rk_dev_u32)buf[0] | (rk_dev_u32)buf[1] << 8\n"
      "            | (rk_dev_u32)buf[2] << 16 | (rk_dev_u32)buf[3] << 24;\n"
      "        for (i = 0; n >= 20 && i < 8; i++)\n"
      "            t0 |= (rk_dev_u64)buf[4 + i] << (8 * i);\n"
      "        for (i = 0; n >= 20 && i < 8; i++) {\n"
      "            if (t0 == 0)\n"
      "                buf[4 + i] = (unsigned char)(now >> (8 * i));\n"
      "            buf[12 + i] = (unsigned char)(now >> (8 * i));\n"
      "        }\n"
      "        if (left != 0)\n"
      "            for (i = 0; i < 4; i++)\n"
      "                buf[i] = (unsigned char)((left - 1) >> (8 * i));\n"
      "    }\n"
      "    rk_dev_sync_block();\n"
      "    if (left == 0)\n"
      "        return rk_dev_reply_host(x, m, m->hdr->type_id, buf, n);\n"
      "    rc = rk_dev_send_to(x, 0, m->hdr->type_id, buf, n);\n"
      "    return rc == RK_ECLOSED ? RK_OK : rc;\n"
      "}\n"
      "RK_DEV_KERNEL(rk_pong, pong_h)\n";

/* rk_pub of tests/kernels/test_kernels.cu (same entry name, as above):
 * publishes each message on the topic index in its first byte. */
static const char pub_src[]
    = "RK_DEV_HANDLER(pub_h)(rk_dev_ctx *x, const rk_dev_msg *m)\n"
      "{\n"
      "    if (m->len == 0)\n"
      "        return RK_EINVAL;\n"
      "    return rk_dev_publish(x, m->data[0], m->hdr->type_id, m->data,\n"
      "        m->len);\n"
      "}\n"
      "RK_DEV_KERNEL(rk_pub, pub_h)\n";

#define K2K_ROUNDS 1000u /* round trips per message */
#define K2K_MSGS   21u   /* messages, one at a time */

static const char noop_src[] = "extern \"C\" __global__ void "
                               "rk_bench_noop(int *p) { if (p) *p = 1; }\n";

static int
noop_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

typedef struct rx_arg {
    rk_runtime *rt;
    rk_kernel k;
    size_t n;
    int rc;
} rx_arg;

static void *
rx_main(void *p)
{
    rx_arg *a = p;
    unsigned char buf[256];
    size_t len;
    for (size_t i = 0; i < a->n; i++)
        if ((a->rc = rk_recv(a->rt, a->k, NULL, buf, sizeof(buf), &len,
                 INT64_C(30000000000)))
            != RK_OK)
            return NULL;
    return NULL;
}

typedef void *cu_graph;
typedef int (*capture_begin_fn)(rk__cu_stream, int);
typedef int (*capture_end_fn)(rk__cu_stream, cu_graph *);
typedef int (*instantiate_fn)(cu_graph *, cu_graph, unsigned long long);
typedef int (*graph_launch_fn)(cu_graph, rk__cu_stream);

/* The p50 of n launches of the empty kernel, each waited for: plain
 * (graph NULL) or as a CUDA Graph. */
static double
launch_p50(const struct rk__cuda_driver *d, rk__cu_function fn,
    rk__cu_stream st, cu_graph exec, graph_launch_fn glaunch, size_t n)
{
    static uint64_t t[2000];
    int *null_arg = NULL;
    void *params[1] = { &null_arg };

    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        if (exec != NULL)
            glaunch(exec, st);
        else
            d->cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, st, params, NULL);
        d->cuStreamSynchronize(st);
        t[i] = bench_now_ns() - t0;
    }
    return (double)bench_percentile(t, n, 50);
}

/* Baselines: launch + synchronise of an empty kernel, plain and as a
 * CUDA Graph (real GPUs only). */
static void
launch_baselines(const char *impl, const char *extra, int cc)
{
    const struct rk__cuda_driver *d;
    rk__nvrtc_src s
        = { .name = "noop.cu", .source = noop_src, .cc = cc, .raw = 1 };
    rk__nvrtc_image img;
    rk__cu_module mod;
    rk__cu_function fn;
    rk__cu_stream st;
    cu_graph graph = NULL, exec = NULL;
    capture_begin_fn begin;
    capture_end_fn end;
    instantiate_fn inst;
    graph_launch_fn glaunch;
    int *null_arg = NULL;
    void *params[1] = { &null_arg };
    size_t n = (size_t)(2000 * bench_scale());

    if (n > 2000)
        n = 2000;
    if (n < 10)
        n = 10;
    if (rk__cuda_enter(0, &d) != RK_OK || rk__nvrtc_compile(&s, &img) != RK_OK
        || d->cuModuleLoadData(&mod, img.data) != RK__CUDA_SUCCESS
        || d->cuModuleGetFunction(&fn, mod, "rk_bench_noop")
            != RK__CUDA_SUCCESS
        || d->cuStreamCreate(&st, RK__CU_STREAM_NON_BLOCKING)
            != RK__CUDA_SUCCESS) {
        bench_emit("cuda", "cuda_launch_sync_p50", impl, 0, "ns",
            "\"skipped\":\"could not load the baseline kernel\"");
        return;
    }
    rk__nvrtc_image_free(&img);
    bench_emit("cuda", "cuda_launch_sync_p50", impl,
        launch_p50(d, fn, st, NULL, NULL, n), "ns", extra);

    *(void **)&begin = dlsym(d->lib, "cuStreamBeginCapture_v2");
    *(void **)&end = dlsym(d->lib, "cuStreamEndCapture");
    *(void **)&inst = dlsym(d->lib, "cuGraphInstantiateWithFlags");
    *(void **)&glaunch = dlsym(d->lib, "cuGraphLaunch");
    if (begin != NULL && end != NULL && inst != NULL && glaunch != NULL
        && begin(st, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0
        && d->cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, st, params, NULL) == 0
        && end(st, &graph) == 0 && inst(&exec, graph, 0) == 0)
        bench_emit("cuda", "cuda_graph_launch_p50", impl,
            launch_p50(d, fn, st, exec, glaunch, n), "ns", extra);
    else
        bench_emit("cuda", "cuda_graph_launch_p50", impl, 0, "ns",
            "\"skipped\":\"no CUDA Graph entry points\"");
    d->cuStreamDestroy(st);
    d->cuModuleUnload(mod);
}

/* The device loop alone: the echo kernel on lanes the bench places and
 * drives itself, one thread writing the request and polling the reply
 * lane. What the runtime's path adds is the difference from cuda_rtt. */
static void
lane_rtt(const char *impl, const char *extra, int cc)
{
    const struct rk__cuda_driver *d;
    rk__nvrtc_src s = { .name = "echo.cu", .source = echo_src, .cc = cc };
    rk__dh_cfg cfg = { .nblocks = 1,
        .nin = 1,
        .capacity = 64,
        .slot_size = 128,
        .batch = 64,
        .kernel_id = 1 };
    rk__nvrtc_image img;
    rk__cu_module mod;
    rk__cu_function fn;
    rk__cu_stream st;
    rk__cu_dptr dev = 0;
    rk__dh dh;
    rk_msg_header h;
    void *host = NULL, *params[1];
    unsigned char buf[128], msg[8] = { 0 };
    size_t len, n = (size_t)(20000 * bench_scale());
    uint64_t *t;

    if (n < 100)
        n = 100;
    t = malloc(n * sizeof(*t));
    if (t == NULL || rk__cuda_enter(0, &d) != RK_OK
        || rk__nvrtc_compile(&s, &img) != RK_OK
        || d->cuModuleLoadData(&mod, img.data) != RK__CUDA_SUCCESS
        || d->cuModuleGetFunction(&fn, mod, "rk_echo") != RK__CUDA_SUCCESS
        || d->cuMemHostAlloc(&host, rk__dh_size(&cfg),
               RK__CU_MEMHOSTALLOC_DEVICEMAP | RK__CU_MEMHOSTALLOC_PORTABLE)
            != RK__CUDA_SUCCESS
        || d->cuMemHostGetDevicePointer(&dev, host, 0) != RK__CUDA_SUCCESS
        || rk__dh_place(&dh, &cfg, host, dev, NULL) != RK_OK
        || d->cuStreamCreate(&st, RK__CU_STREAM_NON_BLOCKING)
            != RK__CUDA_SUCCESS) {
        bench_emit("cuda", "cuda_lane_rtt_p50", impl, 0, "ns",
            "\"skipped\":\"could not set up the lanes\"");
        free(t);
        return;
    }
    rk__nvrtc_image_free(&img);
    params[0] = &dh.kargs;
    d->cuLaunchKernel(
        fn, 1, 1, 1, 32, 1, 1, dh.kargs.stage_bytes, st, params, NULL);
    rk__dh_post(&dh, RK_DEV_CMD_RUN);
    memset(&h, 0, sizeof(h));
    for (size_t i = 0; i < n + 100; i++) {
        uint64_t t0 = bench_now_ns();
        while (rk__dh_send(&dh, 0, &h, msg, sizeof(msg)) != RK_OK)
            ;
        while (rk__dh_recv(&dh, 0, buf, sizeof(buf), &len) != RK_OK)
            ;
        if (i >= 100)
            t[i - 100] = bench_now_ns() - t0;
    }
    bench_emit("cuda", "cuda_lane_rtt_p50", impl,
        (double)bench_percentile(t, n, 50), "ns", extra);
    bench_emit("cuda", "cuda_lane_rtt_p99", impl,
        (double)bench_percentile(t, n, 99), "ns", extra);
    rk__dh_post(&dh, RK_DEV_CMD_STOP);
    d->cuStreamSynchronize(st);
    d->cuStreamDestroy(st);
    rk__dh_fini(&dh);
    d->cuMemFreeHost(host);
    d->cuModuleUnload(mod);
    free(t);
}

/* Batched throughput through a kernel of `grid` blocks: one sender, one
 * receiver thread. */
static int
throughput(rk_runtime *rt, const char *id, uint32_t grid, size_t total,
    const char *impl, const char *extra, const char *row)
{
    rk_kernel_def def = { .id = id, .handler = noop_handler };
    size_t chunk = 256, sent = 0;
    unsigned char *payloads = calloc(chunk, 16);
    rx_arg rx = { .rt = rt, .n = total };
    char more[400];
    pthread_t th;
    uint64_t t0;
    int rc = RK_OK;

    def.config.device_source = echo_src;
    def.config.device_entry = "rk_echo";
    def.config.grid_size = grid;
    def.config.block_size = 32;
    def.config.batch = 64;
    def.config.max_payload = 64;
    def.config.input_capacity = 4096;
    def.config.output_capacity = 4096;
    if (payloads == NULL || rk_runtime_register(rt, &def) != RK_OK
        || (rc = rk_kernel_launch(rt, id)) != RK_OK
        || rk_kernel_activate(rt, id) != RK_OK
        || rk_kernel_lookup(rt, id, &rx.k) != RK_OK
        || pthread_create(&th, NULL, rx_main, &rx) != 0) {
        free(payloads);
        if (rc == RK_ENOTSUP) { /* this device cannot hold the grid */
            snprintf(more, sizeof(more), "%s,\"grid\":%u,\"skipped\":\"%s\"",
                extra, grid, "the grid cannot be resident here");
            bench_emit("cuda", row, impl, 0, "msg/s", more);
            return 0;
        }
        fprintf(stderr, "bench_cuda: %s: %s\n", id, rk_errdetail());
        return 1;
    }
    t0 = bench_now_ns();
    for (size_t done = 0; done < total; done += sent)
        if (rk_send_batch(rt, rx.k, 1, payloads, 16,
                total - done < chunk ? total - done : chunk, 128,
                INT64_C(30000000000), &sent)
            != RK_OK) {
            fprintf(stderr, "bench_cuda: send: %s\n", rk_errdetail());
            return 1;
        }
    pthread_join(th, NULL);
    free(payloads);
    if (rx.rc != RK_OK)
        return 1;
    snprintf(more, sizeof(more), "%s,\"grid\":%u", extra, grid);
    bench_emit("cuda", row, impl,
        (double)total * 1e9 / (double)(bench_now_ns() - t0), "msg/s", more);
    return rk_kernel_terminate(rt, id, INT64_C(30000000000)) == RK_OK ? 0 : 1;
}

/* The device K2K round trip (cuda_k2k_rtt_p50). Registers its kernels
 * while none is resident (code loads only then). */
static int
k2k_rtt(rk_runtime *rt, const char *impl, const char *extra)
{
    const char *ids[2] = { "pong_a", "pong_b" };
    uint64_t per[K2K_MSGS];
    unsigned char p[20], buf[128];
    char more[400];
    size_t len;
    rk_kernel k;
    int rc = RK_OK;

    for (int i = 0; i < 2 && rc == RK_OK; i++) {
        rk_kernel_def def = { .id = ids[i], .handler = noop_handler };
        def.config.device_source = pong_src;
        def.config.device_entry = "rk_pong";
        def.config.block_size = 32;
        def.config.batch = 1;
        def.config.max_payload = 64;
        rc = rk_runtime_register(rt, &def);
    }
    if (rc == RK_OK && (rc = rk_connect(rt, ids[0], ids[1])) == RK_OK
        && (rc = rk_connect(rt, ids[1], ids[0])) == RK_OK)
        for (int i = 0; i < 2 && rc == RK_OK; i++)
            if ((rc = rk_kernel_launch(rt, ids[i])) == RK_OK)
                rc = rk_kernel_activate(rt, ids[i]);
    if (rc == RK_OK)
        rc = rk_kernel_lookup(rt, ids[0], &k);
    for (uint32_t m = 0; rc == RK_OK && m < K2K_MSGS; m++) {
        uint64_t t0 = 0, t1 = 0;
        memset(p, 0, sizeof(p));
        for (int i = 0; i < 4; i++)
            p[i] = (unsigned char)((2 * K2K_ROUNDS) >> (8 * i));
        rc = rk_send(rt, k, 1, p, 20, 128, INT64_C(30000000000));
        if (rc == RK_OK)
            rc = rk_recv(
                rt, k, NULL, buf, sizeof(buf), &len, INT64_C(30000000000));
        for (int i = 7; rc == RK_OK && i >= 0; i--) {
            t0 = t0 << 8 | buf[4 + i];
            t1 = t1 << 8 | buf[12 + i];
        }
        per[m] = (t1 - t0) / K2K_ROUNDS;
    }
    if (rc != RK_OK) {
        fprintf(stderr, "bench_cuda: k2k: %s\n", rk_errdetail());
        return 1;
    }
    snprintf(more, sizeof(more),
        "%s,\"rounds\":%u,\"clock\":\"%s\"", extra, K2K_ROUNDS,
        strcmp(impl, "cuda") == 0 ? "%globaltimer" : "CLOCK_MONOTONIC");
    bench_emit("cuda", "cuda_k2k_rtt_p50", impl,
        (double)bench_percentile(per, K2K_MSGS, 50), "ns", more);
    for (int i = 0; i < 2; i++)
        if (rk_kernel_terminate(rt, ids[i], INT64_C(30000000000)) != RK_OK)
            return 1;
    return 0;
}

/* The device topic fan-out round trip (cuda_topic_fanout_rtt_p50):
 * rk_pub -> two rk_echo subscribers over K2K lanes -> the host. */
static int
topic_rtt(rk_runtime *rt, size_t n, const char *impl, const char *extra)
{
    static const char *const topics[] = { "bench_t" };
    const char *ids[3] = { "tsub1", "tsub2", "tpub" };
    uint64_t *rtt = malloc(n * sizeof(*rtt));
    rk_kernel_stats s0 = { 0 }, s1 = { 0 };
    rk_kernel k[3];
    unsigned char msg[8] = { 0 }, buf[128];
    char more[400];
    size_t len;
    int rc = rtt != NULL ? RK_OK : RK_ENOMEM;

    for (int i = 0; i < 3 && rc == RK_OK; i++) {
        rk_kernel_def def = { .id = ids[i], .handler = noop_handler };
        def.config.device_source = i < 2 ? echo_src : pub_src;
        def.config.device_entry = i < 2 ? "rk_echo" : "rk_pub";
        def.config.block_size = 32;
        def.config.batch = 1;
        def.config.max_payload = 64;
        def.config.device_topics = i < 2 ? NULL : topics;
        def.config.ndevice_topics = i < 2 ? 0 : 1;
        rc = rk_runtime_register(rt, &def);
        if (rc == RK_OK && i < 2)
            rc = rk_subscribe(rt, ids[i], "bench_t");
    }
    /* The subscribers first: the publisher starts with its lanes wired. */
    for (int i = 0; i < 3 && rc == RK_OK; i++)
        if ((rc = rk_kernel_launch(rt, ids[i])) == RK_OK
            && (rc = rk_kernel_activate(rt, ids[i])) == RK_OK)
            rc = rk_kernel_lookup(rt, ids[i], &k[i]);
    for (size_t i = 0; rc == RK_OK && i < n + 100; i++) {
        uint64_t t0;
        if (i == 100)
            rc = rk_kernel_stats_get(rt, "tpub", &s0);
        t0 = bench_now_ns();
        if (rc == RK_OK)
            rc = rk_send(rt, k[2], 1, msg, 8, 128, INT64_C(30000000000));
        for (int s = 0; s < 2 && rc == RK_OK; s++)
            rc = rk_recv(rt, k[s], NULL, buf, sizeof(buf), &len,
                INT64_C(30000000000));
        if (i >= 100)
            rtt[i - 100] = bench_now_ns() - t0; /* after 100 warm-ups */
    }
    if (rc == RK_OK)
        rc = rk_kernel_stats_get(rt, "tpub", &s1);
    if (rc != RK_OK) {
        fprintf(stderr, "bench_cuda: topic: %s\n", rk_errdetail());
        free(rtt);
        return 1;
    }
    snprintf(more, sizeof(more),
        "%s,\"subscribers\":2,\"relay_handoffs\":%.3f", extra,
        (double)(s1.relay_handoffs - s0.relay_handoffs) / (double)n);
    bench_emit("cuda", "cuda_topic_fanout_rtt_p50", impl,
        (double)bench_percentile(rtt, n, 50), "ns", more);
    free(rtt);
    for (int i = 2; i >= 0; i--)
        if (rk_kernel_terminate(rt, ids[i], INT64_C(30000000000)) != RK_OK)
            return 1;
    return 0;
}

/* The throughput rows for grids 1 and 8, through the relay or (direct)
 * with the caller's own path. */
static int
throughputs(rk_runtime *rt, size_t total, const char *impl, const char *extra,
    int direct)
{
    static const char *const ids[2][2]
        = { { "echo1", "echo8" }, { "echo1d", "echo8d" } };
    static const uint32_t grids[2] = { 1, 8 };

    for (int i = 0; i < 2; i++)
        if (throughput(rt, ids[direct][i], grids[i], total, impl, extra,
                direct ? "cuda_direct_batched_throughput"
                       : "cuda_batched_throughput")
            != 0)
            return 1;
    return 0;
}

/* Round trips on the caller's own path: rk_request (sends == 0) or
 * rk_send + rk_recv (sends == 1), n after 100 warm-ups; rows with the
 * share of messages that went direct and the relay hand-offs per round
 * trip beside the latency. */
static int
direct_rtt(rk_runtime *rt, rk_kernel k, uint64_t *rtt, size_t n, int sends,
    const char *impl, const char *extra)
{
    unsigned char buf[256], msg[32] = { 0 };
    rk_kernel_stats s0 = { 0 }, s1 = { 0 };
    const char *row = sends ? "cuda_direct_send_rtt" : "cuda_direct_rtt";
    char name[64], more[400];
    size_t len;

    for (size_t i = 0; i < n + 100; i++) {
        uint64_t t0;
        int rc;

        if (i == 100 && rk_kernel_stats_get(rt, "echo", &s0) != RK_OK)
            return 1;
        t0 = bench_now_ns();
        rc = sends ? rk_send(rt, k, 1, msg, 8, 128, INT64_C(30000000000))
                   : rk_request(rt, k, 1, msg, 8, NULL, buf, sizeof(buf), &len,
                       INT64_C(30000000000));
        if (rc == RK_OK && sends)
            rc = rk_recv(
                rt, k, NULL, buf, sizeof(buf), &len, INT64_C(30000000000));
        if (rc != RK_OK) {
            fprintf(stderr, "bench_cuda: %s: %s\n", row, rk_errdetail());
            return 1;
        }
        if (i >= 100)
            rtt[i - 100] = bench_now_ns() - t0;
    }
    if (rk_kernel_stats_get(rt, "echo", &s1) != RK_OK)
        return 1;
    snprintf(more, sizeof(more), "%s,\"direct\":%.3f,\"relay_handoffs\":%.3f",
        extra, (double)(s1.direct_calls - s0.direct_calls) / (double)n,
        (double)(s1.relay_handoffs - s0.relay_handoffs) / (double)n);
    snprintf(name, sizeof(name), "%s_p50", row);
    bench_emit(
        "cuda", name, impl, (double)bench_percentile(rtt, n, 50), "ns", more);
    snprintf(name, sizeof(name), "%s_p99", row);
    bench_emit(
        "cuda", name, impl, (double)bench_percentile(rtt, n, 99), "ns", more);
    return 0;
}

int
main(void)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true, .backend = "cuda" };
    rk_kernel_def def = { .id = "echo", .handler = noop_handler };
    rk_device_list *list = NULL;
    const rk_device_info *gpu = NULL;
    const char *impl;
    char extra[300];
    unsigned char buf[256], msg[32] = { 0 };
    size_t len, n = (size_t)(20000 * bench_scale());
    uint64_t *rtt;
    rk_kernel k;
    int rc, sim;

    if ((rc = rk_runtime_create(&rt, &cfg)) != RK_OK) {
        bench_skip("cuda", "cuda_backend", rk_errdetail());
        return 0;
    }
    if (rk_devices_query(&list) != RK_OK
        || rk_device_select(list, RK_DEVICE_CUDA, 0, &gpu) != RK_OK) {
        bench_emit("cuda", "cuda_backend", "skipped", 0, "",
            "\"reason\":\"no CUDA device\"");
        return 0;
    }
    sim = strstr(gpu->name, "fake") != NULL;
    impl = sim ? "cuda_sim" : "cuda";
    snprintf(extra, sizeof(extra), "\"gpu\":\"%s\",\"cc\":\"%d.%d\"",
        sim ? "none (stand-in driver, CPU threads)" : gpu->name, gpu->cc_major,
        gpu->cc_minor);

    def.config.device_source = echo_src;
    def.config.device_entry = "rk_echo";
    def.config.block_size = 32;
    def.config.batch = 64;
    def.config.max_payload = 64;
    def.config.input_capacity = 4096;
    def.config.output_capacity = 4096;
    /* The relayed rows first: every message through the host relay. */
    setenv("RK_CUDA_DIRECT", "0", 1);
    if (rk_runtime_register(rt, &def) != RK_OK
        || rk_kernel_launch(rt, "echo") != RK_OK
        || rk_kernel_activate(rt, "echo") != RK_OK
        || rk_kernel_lookup(rt, "echo", &k) != RK_OK) {
        fprintf(stderr, "bench_cuda: %s\n", rk_errdetail());
        return 1;
    }

    /* Round trips. */
    if (n < 100)
        n = 100;
    rtt = malloc(n * sizeof(*rtt));
    if (rtt == NULL)
        return 1;
    for (size_t i = 0; i < n + 100; i++) {
        uint64_t t0 = bench_now_ns();
        if (rk_send(rt, k, 1, msg, 8, 128, INT64_C(30000000000)) != RK_OK
            || rk_recv(
                   rt, k, NULL, buf, sizeof(buf), &len, INT64_C(30000000000))
                != RK_OK) {
            fprintf(stderr, "bench_cuda: round trip: %s\n", rk_errdetail());
            return 1;
        }
        if (i >= 100)
            rtt[i - 100] = bench_now_ns() - t0; /* after 100 warm-ups */
    }
    bench_emit("cuda", "cuda_rtt_p50", impl,
        (double)bench_percentile(rtt, n, 50), "ns", extra);
    bench_emit("cuda", "cuda_rtt_p99", impl,
        (double)bench_percentile(rtt, n, 99), "ns", extra);
    rk_kernel_terminate(rt, "echo", INT64_C(30000000000));
    if (throughputs(rt, n * 10, impl, extra, 0) != 0)
        return 1;

    /* The caller's own path: the same kernel launched again without
     * RK_CUDA_DIRECT, in the same process as the relayed rows. */
    unsetenv("RK_CUDA_DIRECT");
    if (rk_kernel_launch(rt, "echo") != RK_OK
        || rk_kernel_activate(rt, "echo") != RK_OK
        || rk_kernel_lookup(rt, "echo", &k) != RK_OK
        || direct_rtt(rt, k, rtt, n, 0, impl, extra) != 0
        || direct_rtt(rt, k, rtt, n, 1, impl, extra) != 0)
        return 1;
    free(rtt);
    rk_kernel_terminate(rt, "echo", INT64_C(30000000000));
    if (throughputs(rt, n * 10, impl, extra, 1) != 0
        || k2k_rtt(rt, impl, extra) != 0 || topic_rtt(rt, n, impl, extra) != 0)
        return 1;

    if (!sim) {
        launch_baselines(impl, extra, gpu->cc_major * 10 + gpu->cc_minor);
        lane_rtt(impl, extra, gpu->cc_major * 10 + gpu->cc_minor);
    } else
        bench_emit("cuda", "cuda_launch_sync_p50", impl, 0, "ns",
            "\"skipped\":\"the stand-in driver has no real launch\"");
    rk_device_list_free(list);
    rk_runtime_destroy(rt);
    return 0;
}
