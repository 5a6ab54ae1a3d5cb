/*
 * bench/bench_runtime.c - the ring-kernel runtime on the CPU backend
 * (suite "runtime"; impl "ringkernel", and "ck_ring" for the floor).
 *
 * Results, one JSON line each:
 *   pingpong_rtt_p50/_p99/_mean  host -> echo actor -> host through
 *                                rk_send + rk_recv (ns), with the kernel's
 *                                input a general MPSC queue ("producers":
 *                                "multi") or single_producer ("single",
 *                                the SPSC lane); the same rows for
 *                                impl "ck_ring": two pinned threads and two
 *                                ck_ring SPSC rings (bench/ck_ref.h)
 *   request_rtt_p50/_p99         the same through rk_request (correlation)
 *   oneway_throughput            64-byte payloads, one rk_send each, to a
 *                                counting handler (msgs/s)
 *   oneway_batched_throughput    the same with rk_send_batch (256 per call);
 *                                extra "telemetry":"on"/"off", and
 *                                "producers":"single" for a kernel
 *                                configured single_producer
 *   pipeline3_throughput         host -> A -> B -> C, K2K routed, batched
 *   pingpong_rtt_p50_paired, rtt_p50_ratio
 *                                paired rounds (see bench_rtt_paired): the
 *                                tuned kernels ("config":"tuned": single
 *                                producer, telemetry off) and the default
 *                                one ("config":"default": general inbox,
 *                                telemetry on), each over the ck_ring floors
 *   oneway_batched_paired, oneway_batched_ratio
 *                                paired rounds of rk_send_batch into the
 *                                default kernel (general inbox) and into a
 *                                single-producer lane, telemetry on; the
 *                                ratio is general / lane within a round
 *   pingpong_rtt_p50_capacity, oneway_batched_capacity,
 *   capacity_npot_ratio          paired rounds of the default kernel with a
 *                                capacity that is not a power of two
 *                                against the next one (1000/1024 round
 *                                trip, 4000/4096 batched), and the cost
 *                                ratio within a round
 *   idle_cpu_percent             CPU time an active, idle kernel thread
 *                                used over an idle period, as % of it
 * RK_BENCH_SCALE scales the iteration counts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ck_ref.h"
#include "ringkernel/ringkernel.h"

#define SUITE   "runtime"
#define PAYLOAD 64
#define BATCH   256

static double scale;
/* Queue capacities for the capacity rows (0: the case's own). */
static uint32_t cap_in, cap_out;

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
        fprintf(stderr, "bench_runtime: %s: %s (%s)\n", what, rk_err_name(rc),
            rk_errdetail());
        exit(1);
    }
}

/* ------------------------------------------------------------ kernels */

/* CPUs picked once, before anything pins the main thread (ck_ref_cpu
 * reads the calling thread's affinity). */
static int main_cpu = -1, echo_cpu = -1, kernel_cpu = -1;
static cpu_set_t start_cpus; /* the main thread's affinity at start */

/* Gives the main thread its starting affinity back. A kernel thread
 * inherits its creator's: after a pinned round-trip case, a throughput
 * case's kernel would otherwise share the host's one CPU. */
static void
unpin_main(void)
{
    pthread_setaffinity_np(pthread_self(), sizeof(start_cpus), &start_cpus);
}

static int
echo_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    ck_ref_pin(echo_cpu);
    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK)
        if ((rc = rk_ctx_reply(ctx, &m, m.hdr->type_id, m.data, m.len))
            != RK_OK)
            return rc;
    return rc;
}

/* The same echo as a handler (the runtime owns the loop and lends lane
 * slots in place). */
static int
echo_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    static _Thread_local bool pinned;

    if (!pinned) { /* the kernel thread inherited the main thread's CPU */
        ck_ref_pin(echo_cpu);
        pinned = true;
    }
    return rk_ctx_reply(ctx, m, m->hdr->type_id, m->data, m->len);
}

/* Counts messages; at `target` it tells the host (a one-byte output). */
typedef struct counter {
    uint64_t seen, target;
} counter;

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    counter *c = rk_ctx_user(ctx);

    (void)m;
    if (++c->seen == c->target) {
        uint8_t done = 1;
        return rk_ctx_send(ctx, 0, &done, 1);
    }
    return RK_OK;
}

static int
pass_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_send(ctx, m->hdr->type_id, m->data, m->len);
}

static rk_kernel
start(rk_runtime *rt, const rk_kernel_def *def)
{
    rk_kernel k;

    check(rk_runtime_register(rt, def), "register");
    check(rk_kernel_launch(rt, def->id), "launch");
    check(rk_kernel_activate(rt, def->id), "activate");
    check(rk_kernel_lookup(rt, def->id, &k), "lookup");
    return k;
}

static rk_runtime *
new_rt(void)
{
    rk_runtime *rt;
    rk_runtime_config cfg = { .no_static_kernels = true };

    check(rk_runtime_create(&rt, &cfg), "create");
    return rt;
}

/* ---------------------------------------------------------- round trip */

static uint64_t last_p50; /* the last emit_rtt's p50 */
static bool rtt_quiet;    /* paired rounds: collect p50s, print nothing */

static void
emit_rtt(const char *name, const char *impl, uint64_t *v, size_t n,
    const char *extra)
{
    char nm[64];
    double mean = 0;

    last_p50 = bench_percentile(v, n, 50);
    if (rtt_quiet)
        return;
    for (size_t i = 0; i < n; i++)
        mean += (double)v[i];
    mean /= (double)n;
    snprintf(nm, sizeof(nm), "%s_p50", name);
    bench_emit(
        SUITE, nm, impl, (double)bench_percentile(v, n, 50), "ns", extra);
    snprintf(nm, sizeof(nm), "%s_p99", name);
    bench_emit(
        SUITE, nm, impl, (double)bench_percentile(v, n, 99), "ns", extra);
    snprintf(nm, sizeof(nm), "%s_mean", name);
    bench_emit(SUITE, nm, impl, mean, "ns", extra);
}

static void
bench_ck_floor(size_t n)
{
#ifdef RK_HAVE_CK
    uint64_t *v = calloc(n, sizeof(*v));
    if (v != NULL && ck_ref_pingpong_run(v, n, main_cpu, kernel_cpu) == 0)
        emit_rtt("pingpong_rtt", "ck_ring", v, n, "\"frame\":8");
    free(v);
#else
    (void)n;
    fprintf(stderr, "bench_runtime: built without ck, no ck_ring floor\n");
#endif
}

/*
 * The same-frame-size floor: a ck_ring ping-pong that carries a 128-byte
 * frame (a 64-byte header and the 64-byte payload) by value each way, as
 * the runtime does, instead of an 8-byte pointer.
 */
#define FRAME (64 + PAYLOAD)

typedef struct frame128 {
    _Alignas(64) unsigned char b[FRAME];
} frame128;

#ifdef RK_HAVE_CK
CK_RING_PROTOTYPE(frame128, frame128)

typedef struct ck_frames {
    ck_ring_t ab, ba;
    frame128 *buf_ab, *buf_ba;
    size_t rounds;
} ck_frames;

static void *
ck_frame_echo(void *arg)
{
    ck_frames *p = arg;
    frame128 f;

    ck_ref_pin(kernel_cpu);
    for (size_t i = 0; i < p->rounds; i++) {
        while (!ck_ring_dequeue_spsc_frame128(&p->ab, p->buf_ab, &f))
            ;
        while (!ck_ring_enqueue_spsc_frame128(&p->ba, p->buf_ba, &f))
            ;
    }
    return NULL;
}

static void
bench_ck_frames(size_t n)
{
    ck_frames p = { .rounds = n + n / 10 };
    uint64_t *v = calloc(n, sizeof(*v));
    frame128 f;
    pthread_t t;

    memset(&f, 0, sizeof(f));
    p.buf_ab = aligned_alloc(64, CK_REF_RING_SIZE * sizeof(frame128));
    p.buf_ba = aligned_alloc(64, CK_REF_RING_SIZE * sizeof(frame128));
    if (v == NULL || p.buf_ab == NULL || p.buf_ba == NULL)
        goto out;
    ck_ring_init(&p.ab, CK_REF_RING_SIZE);
    ck_ring_init(&p.ba, CK_REF_RING_SIZE);
    ck_ref_pin(main_cpu);
    if (pthread_create(&t, NULL, ck_frame_echo, &p) != 0)
        goto out;
    for (size_t i = 0; i < p.rounds; i++) {
        uint64_t t0 = bench_now_ns();
        f.b[0] = (unsigned char)i;
        while (!ck_ring_enqueue_spsc_frame128(&p.ab, p.buf_ab, &f))
            ;
        while (!ck_ring_dequeue_spsc_frame128(&p.ba, p.buf_ba, &f))
            ;
        if (i >= n / 10)
            v[i - n / 10] = bench_now_ns() - t0;
    }
    pthread_join(t, NULL);
    emit_rtt("pingpong_rtt", "ck_ring", v, n, "\"frame\":128");
out:
    free(v);
    free(p.buf_ab);
    free(p.buf_ba);
}
#endif

/*
 * The copy floor for one-way batched 128-byte frames: two threads, a ring
 * of 128-byte slots, the producer copies BATCH frames in and publishes them
 * with one index store, the consumer copies whatever is there out and
 * hands it back with one store. No ids, no counters, no parking: what two
 * copies per message and the cross-core line transfers cost on this
 * machine. impl "raw_copy".
 */
#define RAW_SLOTS 4096u

typedef struct raw_ring {
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) frame128 *slots;
    uint64_t n;
} raw_ring;

static void *
raw_consumer(void *arg)
{
    raw_ring *r = arg;
    static frame128 out[BATCH];
    uint64_t pos = 0, sum = 0;

    ck_ref_pin(kernel_cpu);
    while (pos < r->n) {
        /* Acquire pairs with the producer's release store of tail. */
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        uint64_t k = t - pos > BATCH ? BATCH : t - pos;
        for (uint64_t i = 0; i < k; i++)
            memcpy(&out[i], &r->slots[(pos + i) % RAW_SLOTS], FRAME);
        for (uint64_t i = 0; i < k; i++)
            sum += out[i].b[0];
        pos += k;
        /* Release pairs with the producer's acquire load of head. */
        atomic_store_explicit(&r->head, pos, memory_order_release);
    }
    return (void *)(uintptr_t)sum;
}

static void
bench_raw_copy(size_t n)
{
    raw_ring r = { .n = n };
    static frame128 src[BATCH];
    uint64_t pos = 0, t0, t1;
    pthread_t t;
    char extra[64];

    r.slots = aligned_alloc(64, RAW_SLOTS * sizeof(frame128));
    if (r.slots == NULL)
        return;
    ck_ref_pin(main_cpu);
    if (pthread_create(&t, NULL, raw_consumer, &r) != 0) {
        free(r.slots);
        return;
    }
    t0 = bench_now_ns();
    while (pos < n) {
        uint64_t h = atomic_load_explicit(&r.head, memory_order_acquire);
        uint64_t room = RAW_SLOTS - (pos - h), k = n - pos;
        k = k > BATCH ? BATCH : k;
        k = k > room ? room : k;
        for (uint64_t i = 0; i < k; i++)
            memcpy(&r.slots[(pos + i) % RAW_SLOTS], &src[i], FRAME);
        pos += k;
        atomic_store_explicit(&r.tail, pos, memory_order_release);
    }
    pthread_join(t, NULL);
    t1 = bench_now_ns();
    snprintf(extra, sizeof(extra), "\"frame\":%d,\"n\":%zu", FRAME, n);
    bench_emit(SUITE, "oneway_batched_throughput", "raw_copy",
        (double)n * 1e9 / (double)(t1 - t0), "msgs/s", extra);
    free(r.slots);
}

static void
bench_rtt(size_t n, bool telemetry, bool request, bool sp, bool handler)
{
    rk_runtime *rt = new_rt();
    rk_kernel_def def = { .id = "echo" };
    uint64_t *v = calloc(n, sizeof(*v));
    unsigned char msg[PAYLOAD] = { 0 }, back[PAYLOAD];
    size_t len;
    rk_kernel k;
    char extra[96];

    if (handler)
        def.handler = echo_handler;
    else
        def.actor = echo_actor;
    def.config.telemetry_off = !telemetry;
    def.config.single_producer = sp; /* only this thread sends */
    def.config.input_capacity = cap_in;
    def.config.output_capacity = cap_out;
    echo_cpu = kernel_cpu;
    ck_ref_pin(main_cpu);
    k = start(rt, &def);
    for (size_t i = 0; i < n + n / 10; i++) {
        uint64_t t0 = bench_now_ns();
        if (request) {
            check(rk_request(rt, k, 0, msg, sizeof(msg), NULL, back,
                      sizeof(back), &len, RK_WAIT_FOREVER),
                "request");
        } else {
            check(rk_send(rt, k, 0, msg, sizeof(msg), 128, RK_WAIT_FOREVER),
                "send");
            check(rk_recv(
                      rt, k, NULL, back, sizeof(back), &len, RK_WAIT_FOREVER),
                "recv");
        }
        if (i >= n / 10) /* the first tenth warms up */
            v[i - n / 10] = bench_now_ns() - t0;
    }
    snprintf(extra, sizeof(extra),
        "\"payload\":%d,\"telemetry\":\"%s\",\"producers\":\"%s\","
        "\"kernel\":\"%s\"",
        PAYLOAD, telemetry ? "on" : "off", sp ? "single" : "multi",
        handler ? "handler" : "actor");
    emit_rtt(
        request ? "request_rtt" : "pingpong_rtt", "ringkernel", v, n, extra);
    free(v);
    rk_runtime_destroy(rt);
}

/*
 * Paired round trips. On this kind of VM the two vCPUs move between
 * physical cores (at times onto SMT siblings, where a cross-CPU round
 * trip is 5x cheaper), so a floor measured a second before or after the
 * runtime can sit in another regime. Each round runs the ck_ring floors
 * and the runtime back to back, and the ratio is taken within the round;
 * the medians over rounds are printed (name pingpong_rtt_p50_paired, and
 * rtt_p50_ratio with the floor named in "floor").
 */
#define PAIRED_ROUNDS 9

static void
bench_rtt_paired(size_t n)
{
#ifdef RK_HAVE_CK
    enum { CK8, CK128, ACTOR, HANDLER, DEF_ACTOR, DEF_HANDLER, NCASE };
    static const char *const impl[NCASE] = { "ck_ring", "ck_ring",
        "ringkernel", "ringkernel", "ringkernel", "ringkernel" };
    /* The tuned rows keep their original labels (kernel only); the
     * default configuration's rows say so. */
    static const char *const what[NCASE] = { "\"frame\":8", "\"frame\":128",
        "\"kernel\":\"actor\"", "\"kernel\":\"handler\"",
        "\"kernel\":\"actor\",\"config\":\"default\"",
        "\"kernel\":\"handler\",\"config\":\"default\"" };
    enum { NK = NCASE - ACTOR };
    double p50[NCASE][PAIRED_ROUNDS], ratio[NK][2][PAIRED_ROUNDS];
    char extra[160];

    int rounds = 0;

    rtt_quiet = true;
    for (int r = 0; r < PAIRED_ROUNDS; r++) {
        double v[NCASE];
        for (int c = 0; c < NCASE; c++) {
            last_p50 = 0; /* stays 0 if the case could not run */
            if (c == CK8)
                bench_ck_floor(n);
            else if (c == CK128)
                bench_ck_frames(n);
            else if (c <= HANDLER) /* tuned: single producer, no telemetry */
                bench_rtt(n, false, false, true, c == HANDLER);
            else /* the default kernel config: general inbox, telemetry */
                bench_rtt(n, true, false, false, c == DEF_HANDLER);
            v[c] = (double)last_p50;
        }
        bool failed = false;
        for (int c = 0; c < NCASE; c++)
            failed = failed || v[c] == 0;
        if (failed)
            continue; /* a failed case: the round is not counted */
        for (int c = 0; c < NCASE; c++)
            p50[c][rounds] = v[c];
        for (int k = 0; k < NK; k++)
            for (int f = 0; f < 2; f++)
                ratio[k][f][rounds] = v[ACTOR + k] / v[CK8 + f];
        rounds++;
    }
    rtt_quiet = false;
    if (rounds == 0) {
        fprintf(stderr, "bench_runtime: no paired round could run\n");
        return;
    }
    for (int c = 0; c < NCASE; c++) {
        snprintf(extra, sizeof(extra),
            "%s,\"payload\":%d,\"rounds\":%d,\"n\":%zu", what[c],
            c >= ACTOR ? PAYLOAD : 0, rounds, n);
        bench_emit(SUITE, "pingpong_rtt_p50_paired", impl[c],
            bench_median(p50[c], (size_t)rounds), "ns", extra);
    }
    for (int k = 0; k < NK; k++)
        for (int f = 0; f < 2; f++) {
            snprintf(extra, sizeof(extra),
                "%s,\"floor\":\"ck_ring_%s\",\"rounds\":%d", what[ACTOR + k],
                f == 0 ? "8" : "128", rounds);
            bench_emit(SUITE, "rtt_p50_ratio", "ringkernel",
                bench_median(ratio[k][f], (size_t)rounds), "x", extra);
        }
#else
    (void)n;
    fprintf(stderr, "bench_runtime: built without ck, no paired rounds\n");
#endif
}

/*
 * A capacity that is not a power of two against the next power of two
 * (issue 27): the default kernel (general inbox, telemetry on), round trip
 * with input and output capacity 1000 against 1024, and batched one-way
 * with input capacity 4000 against 4096, back to back in each round. The
 * rows carry "capacity"; capacity_npot_ratio is the cost of the odd size
 * within a round (round trip p50 1000/1024; batched rate 4096/4000: above
 * 1 is slower), as medians over the rounds; the order within a round
 * alternates.
 */
static void bench_oneway(size_t n, bool batched, bool telemetry, bool sp);
static double last_rate;
static bool oneway_quiet;

static void
bench_capacity_paired(size_t n_rtt, size_t n_batched)
{
    enum { ROUNDS = 9 };
    static const uint32_t rtt_cap[2] = { 1024, 1000 };
    static const uint32_t bat_cap[2] = { 4096, 4000 };
    double p50[2][ROUNDS], rate[2][ROUNDS], r_rtt[ROUNDS], r_bat[ROUNDS];
    char extra[160];

    rtt_quiet = oneway_quiet = true;
    for (int r = 0; r < ROUNDS; r++) {
        /* Which size goes first alternates, so neither always runs on
         * the other's warm (or cooling) machine. */
        for (int i = 0; i < 2; i++) {
            int c = (i + r) % 2;
            cap_in = cap_out = rtt_cap[c];
            bench_rtt(n_rtt, true, false, false, false);
            p50[c][r] = (double)last_p50;
            cap_in = bat_cap[c];
            cap_out = 0;
            bench_oneway(n_batched, true, true, false);
            rate[c][r] = last_rate;
        }
        r_rtt[r] = p50[1][r] / p50[0][r];
        r_bat[r] = rate[0][r] / rate[1][r];
    }
    cap_in = cap_out = 0;
    rtt_quiet = oneway_quiet = false;
    for (int c = 0; c < 2; c++) {
        snprintf(extra, sizeof(extra),
            "\"kernel\":\"actor\",\"config\":\"default\",\"capacity\":%u,"
            "\"rounds\":%d,\"n\":%zu",
            rtt_cap[c], ROUNDS, n_rtt);
        bench_emit(SUITE, "pingpong_rtt_p50_capacity", "ringkernel",
            bench_median(p50[c], ROUNDS), "ns", extra);
        snprintf(extra, sizeof(extra),
            "\"payload\":%d,\"telemetry\":\"on\",\"producers\":\"multi\","
            "\"capacity\":%u,\"rounds\":%d,\"n\":%zu",
            PAYLOAD, bat_cap[c], ROUNDS, n_batched);
        bench_emit(SUITE, "oneway_batched_capacity", "ringkernel",
            bench_median(rate[c], ROUNDS), "msgs/s", extra);
    }
    snprintf(extra, sizeof(extra),
        "\"of\":\"pingpong_rtt_p50\",\"capacity\":1000,\"over\":1024,"
        "\"rounds\":%d",
        ROUNDS);
    bench_emit(SUITE, "capacity_npot_ratio", "ringkernel",
        bench_median(r_rtt, ROUNDS), "x", extra);
    snprintf(extra, sizeof(extra),
        "\"of\":\"oneway_batched\",\"capacity\":4000,\"over\":4096,"
        "\"rounds\":%d",
        ROUNDS);
    bench_emit(SUITE, "capacity_npot_ratio", "ringkernel",
        bench_median(r_bat, ROUNDS), "x", extra);
}

/* ---------------------------------------------------------- throughput */

/* Sends n 64-byte payloads into k (batched or not), waits for the `done`
 * output of kernel d, returns msgs/s. */
static double
pump(rk_runtime *rt, rk_kernel k, rk_kernel d, size_t n, bool batched)
{
    static unsigned char msgs[BATCH][PAYLOAD];
    uint8_t done;
    size_t len, sent;
    uint64_t t0 = bench_now_ns(), t1;

    for (size_t i = 0; i < n;) {
        if (batched) {
            size_t want = n - i < BATCH ? n - i : BATCH;
            check(rk_send_batch(rt, k, 0, msgs, PAYLOAD, want, 128,
                      RK_WAIT_FOREVER, &sent),
                "send_batch");
            i += sent;
        } else {
            check(rk_send(rt, k, 0, msgs[0], PAYLOAD, 128, RK_WAIT_FOREVER),
                "send");
            i++;
        }
    }
    check(rk_recv(rt, d, NULL, &done, 1, &len, RK_WAIT_FOREVER), "done");
    t1 = bench_now_ns();
    return (double)n * 1e9 / (double)(t1 - t0);
}

/* last_rate: the last bench_oneway's rate; oneway_quiet: paired rounds
 * collect rates and print nothing (declared above). */

static void
bench_oneway(size_t n, bool batched, bool telemetry, bool sp)
{
    unpin_main();
    rk_runtime *rt = new_rt();
    counter c = { 0, n };
    rk_kernel_def def = { .id = "sink", .handler = count_handler };
    char extra[128];
    rk_kernel k;
    double rate;

    def.config.user = &c;
    def.config.telemetry_off = !telemetry;
    def.config.input_capacity = cap_in != 0 ? cap_in : 4096;
    def.config.batch = 256;
    def.config.max_payload = PAYLOAD;
    def.config.single_producer = sp;
    k = start(rt, &def);
    rate = pump(rt, k, k, n, batched);
    last_rate = rate;
    if (oneway_quiet) {
        rk_runtime_destroy(rt);
        return;
    }
    snprintf(extra, sizeof(extra),
        "\"payload\":%d,\"telemetry\":\"%s\",\"producers\":\"%s\","
        "\"n\":%zu",
        PAYLOAD, telemetry ? "on" : "off", sp ? "single" : "multi", n);
    bench_emit(SUITE,
        batched ? "oneway_batched_throughput" : "oneway_throughput",
        "ringkernel", rate, "msgs/s", extra);
    rk_runtime_destroy(rt);
}

/*
 * Paired batched one-way: the default kernel (general inbox) and a
 * single-producer lane, telemetry on in both, back to back in each round;
 * the ratio general / lane is taken within the round and the medians are
 * printed.
 */
static void
bench_batched_paired(size_t n)
{
    enum { ROUNDS = 5 };
    double rate[2][ROUNDS], ratio[ROUNDS];
    char extra[160];

    oneway_quiet = true;
    for (int r = 0; r < ROUNDS; r++) {
        for (int sp = 0; sp < 2; sp++) {
            bench_oneway(n, true, true, sp == 1);
            rate[sp][r] = last_rate;
        }
        ratio[r] = rate[0][r] / rate[1][r];
    }
    oneway_quiet = false;
    for (int sp = 0; sp < 2; sp++) {
        snprintf(extra, sizeof(extra),
            "\"payload\":%d,\"telemetry\":\"on\",\"producers\":\"%s\","
            "\"config\":\"%s\",\"rounds\":%d,\"n\":%zu",
            PAYLOAD, sp ? "single" : "multi", sp ? "lane" : "default",
            ROUNDS, n);
        bench_emit(SUITE, "oneway_batched_paired", "ringkernel",
            bench_median(rate[sp], ROUNDS), "msgs/s", extra);
    }
    snprintf(extra, sizeof(extra),
        "\"of\":\"multi\",\"over\":\"single\",\"rounds\":%d", ROUNDS);
    bench_emit(SUITE, "oneway_batched_ratio", "ringkernel",
        bench_median(ratio, ROUNDS), "x", extra);
}

static void
bench_pipeline(size_t n)
{
    unpin_main();
    rk_runtime *rt = new_rt();
    counter c = { 0, n };
    rk_kernel_def a = { .id = "a", .handler = pass_handler };
    rk_kernel_def b = { .id = "b", .handler = pass_handler };
    rk_kernel_def d = { .id = "c", .handler = count_handler };
    rk_kernel ka, kc;
    char extra[64];

    a.config.input_capacity = b.config.input_capacity = 4096;
    d.config.input_capacity = 4096;
    a.config.max_payload = b.config.max_payload = PAYLOAD;
    d.config.max_payload = PAYLOAD;
    d.config.user = &c;
    /* Each stage has one producer (the host, then one upstream kernel). */
    a.config.single_producer = b.config.single_producer = true;
    d.config.single_producer = true;
    ka = start(rt, &a);
    (void)start(rt, &b);
    kc = start(rt, &d);
    check(rk_connect(rt, "a", "b"), "connect");
    check(rk_connect(rt, "b", "c"), "connect");
    snprintf(extra, sizeof(extra),
        "\"payload\":%d,\"producers\":\"single\",\"n\":%zu", PAYLOAD, n);
    bench_emit(SUITE, "pipeline3_throughput", "ringkernel",
        pump(rt, ka, kc, n, true), "msgs/s", extra);
    rk_runtime_destroy(rt);
}

/* -------------------------------------------------------------- idle */

static void
bench_idle(double seconds)
{
    rk_runtime *rt = new_rt();
    rk_kernel_def def = { .id = "idle", .actor = echo_actor };
    rk_kernel_stats s0, s1;
    unsigned char msg[8] = { 0 };
    size_t len;
    rk_kernel k;
    struct timespec ts;
    uint64_t t0, t1;
    char extra[64];

    echo_cpu = -1;
    k = start(rt, &def);
    /* One round trip so the kernel has run, then let it go idle. */
    check(rk_send(rt, k, 0, msg, sizeof(msg), 128, RK_WAIT_FOREVER), "send");
    check(
        rk_recv(rt, k, NULL, msg, sizeof(msg), &len, RK_WAIT_FOREVER), "recv");
    check(rk_kernel_stats_get(rt, "idle", &s0), "stats");
    t0 = bench_now_ns();
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
    check(rk_kernel_stats_get(rt, "idle", &s1), "stats");
    t1 = bench_now_ns();
    snprintf(extra, sizeof(extra), "\"idle_ns\":%llu,\"cpu_ns\":%llu",
        (unsigned long long)(t1 - t0),
        (unsigned long long)(s1.cpu_time_ns - s0.cpu_time_ns));
    bench_emit(SUITE, "idle_cpu_percent", "ringkernel",
        100.0 * (double)(s1.cpu_time_ns - s0.cpu_time_ns) / (double)(t1 - t0),
        "%", extra);
    rk_runtime_destroy(rt);
}

/* RK_BENCH_ONLY=word runs only the cases whose tag contains word (for
 * callgrind: "rtt_sp", "batched_sp", ...). */
static bool
want(const char *tag)
{
    const char *only = getenv("RK_BENCH_ONLY");
    return only == NULL || only[0] == '\0' || strstr(tag, only) != NULL;
}

int
main(void)
{
    scale = bench_scale();
    if (sched_getaffinity(0, sizeof(start_cpus), &start_cpus) != 0)
        CPU_ZERO(&start_cpus);
    main_cpu = ck_ref_cpu(0);
    kernel_cpu = ck_ref_cpu(1);
    if (want("floor_ck"))
        bench_ck_floor(scaled(200000));
#ifdef RK_HAVE_CK
    if (want("floor_ck128"))
        bench_ck_frames(scaled(200000));
#endif
    if (want("rtt_mp_tel"))
        bench_rtt(scaled(200000), true, false, false, false);
    if (want("rtt_mp_notel"))
        bench_rtt(scaled(200000), false, false, false, false);
    if (want("rtt_sp_tel"))
        bench_rtt(scaled(200000), true, false, true, false);
    if (want("rtt_sp_notel"))
        bench_rtt(scaled(200000), false, false, true, false);
    if (want("rtt_handler_sp_notel"))
        bench_rtt(scaled(200000), false, false, true, true);
    if (want("rtt_paired"))
        bench_rtt_paired(scaled(20000));
    if (want("request"))
        bench_rtt(scaled(100000), true, true, false, false);
    if (want("oneway_single"))
        bench_oneway(scaled(2000000), false, true, false);
    if (want("floor_raw_copy"))
        bench_raw_copy(scaled(10000000));
    if (want("batched_mp_tel"))
        bench_oneway(scaled(10000000), true, true, false);
    if (want("batched_mp_notel"))
        bench_oneway(scaled(10000000), true, false, false);
    if (want("batched_sp_tel"))
        bench_oneway(scaled(10000000), true, true, true);
    if (want("batched_sp_notel"))
        bench_oneway(scaled(10000000), true, false, true);
    if (want("batched_paired"))
        bench_batched_paired(scaled(2000000));
    if (want("pipeline"))
        bench_pipeline(scaled(3000000));
    if (want("capacity"))
        bench_capacity_paired(scaled(20000), scaled(2000000));
    if (want("idle"))
        bench_idle(scale < 1 ? 0.2 : 1.0);
    return 0;
}
