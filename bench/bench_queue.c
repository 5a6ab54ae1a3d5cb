/*
 * bench/bench_queue.c - the queue layer against Concurrency Kit's ck_ring.
 *
 * Suite "queue". For ringkernel (rk_spsc, rk_mpsc, rk_mqueue) and ck_ring
 * (SPSC and MPSC rings of pointers) in the same run:
 *   *_same_thread      one enqueue + one dequeue on one thread (ns)
 *   *_pingpong_p50/p99 cross-thread round trip over two rings (ns)
 *   *_oneway[_batch]   one producer thread to one consumer thread (msgs/s)
 * Elements are 8 bytes (ck_ring stores a pointer). Threads are pinned to
 * two distinct CPUs when the process may use two. RK_BENCH_SCALE scales the
 * iteration counts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ck_ref.h"
#include "ringkernel/queue.h"

#define SUITE "queue"
#define RING  1024u
#define BATCH 32u

/* The typed SPSC view for 8-byte elements (rk_u64q_try_enqueue, ...). */
RK_SPSC_TYPED(rk_u64q, uint64_t)

static int cpu_main, cpu_peer;
static size_t n_ops, n_rtt, n_flow;

/* Keeps the compiler from discarding a result. */
static volatile uint64_t sink;

static void
emit(const char *name, const char *impl, double v, const char *unit)
{
    char extra[64];
    snprintf(extra, sizeof(extra), "\"elem_bytes\":8,\"cpus\":[%d,%d]",
        cpu_main, cpu_peer);
    bench_emit(SUITE, name, impl, v, unit, extra);
}

/* ---------------------------------------------------------- same thread */

/*
 * The two SPSC same-thread loops are separate non-inlined functions so
 * that they compare like with like: both get the ring through a pointer
 * argument that nothing else can see (a pointer whose address escaped
 * would be re-read after every store), the count in a register, the whole
 * queue operation inlined, 8-byte elements, one enqueue + one dequeue +
 * one add per iteration. They are also what `valgrind --tool=callgrind
 * --toggle-collect=rk_spsc_loop` (or ck_spsc_loop) counts.
 */
__attribute__((noinline)) static uint64_t
rk_spsc_loop(rk_spsc *s, size_t n)
{
    uint64_t sum = 0, v = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t m = i; /* &i would pin the loop counter to memory */
        rk_spsc_try_enqueue(s, &m);
        rk_spsc_try_dequeue(s, &v);
        sum += v;
    }
    return sum;
}

/* The same loop through the typed view: the element passes by value. */
__attribute__((noinline)) static uint64_t
rk_spsc_typed_loop(rk_spsc *s, size_t n)
{
    uint64_t sum = 0, v = 0;
    rk_u64q_prod p; /* local handles: their state stays in registers */
    rk_u64q_cons c;
    if (rk_u64q_prod_bind(&p, s) != RK_OK || rk_u64q_cons_bind(&c, s) != RK_OK)
        abort();
    for (uint64_t i = 0; i < n; i++) {
        rk_u64q_try_enqueue(&p, i);
        rk_u64q_try_dequeue(&c, &v);
        sum += v;
    }
    return sum;
}

#ifdef RK_HAVE_CK
__attribute__((noinline)) static uint64_t
ck_spsc_loop(ck_ring_t *r, ck_ring_buffer_t *buf, size_t n)
{
    uint64_t sum = 0;
    void *p = NULL;
    for (uint64_t i = 0; i < n; i++) {
        ck_ring_enqueue_spsc(r, buf, (void *)(uintptr_t)i);
        ck_ring_dequeue_spsc(r, buf, &p);
        sum += (uintptr_t)p;
    }
    return sum;
}
#endif

/*
 * Paired same-thread rounds: 41 rounds of rk_spsc_loop, rk_spsc_typed_loop
 * and ck_spsc_loop back to back (n_ops / 41 pairs each); the ratio to
 * ck_ring is taken within each round and the medians are printed
 * (spsc_same_thread_paired, spsc_same_thread_ratio). Each loop runs a
 * fresh ring.
 */
#define SAME_ROUNDS 41

static uint64_t
same_thread_paired(void)
{
    uint64_t sum = 0;
#ifdef RK_HAVE_CK
    size_t n = n_ops / SAME_ROUNDS < 1000 ? 1000 : n_ops / SAME_ROUNDS;
    double ns[3][SAME_ROUNDS], ratio[2][SAME_ROUNDS];
    static const char *const impl[3]
        = { "ringkernel", "ringkernel_typed", "ck_ring" };
    rk_spsc *s[2];
    ck_ring_t r;
    ck_ring_buffer_t *buf = aligned_alloc(64, RING * sizeof(*buf));
    char extra[64];

    if (buf == NULL || rk_spsc_create(&s[0], RING, 8) != RK_OK
        || rk_u64q_create(&s[1], RING) != RK_OK)
        abort();
    ck_ring_init(&r, RING);
    for (int k = 0; k < SAME_ROUNDS; k++) {
        uint64_t t0 = bench_now_ns();
        sum += rk_spsc_loop(s[0], n);
        uint64_t t1 = bench_now_ns();
        sum += rk_spsc_typed_loop(s[1], n);
        uint64_t t2 = bench_now_ns();
        sum += ck_spsc_loop(&r, buf, n);
        uint64_t t3 = bench_now_ns();
        ns[0][k] = (double)(t1 - t0) / (double)n;
        ns[1][k] = (double)(t2 - t1) / (double)n;
        ns[2][k] = (double)(t3 - t2) / (double)n;
        for (int j = 0; j < 2; j++)
            ratio[j][k] = ns[j][k] / ns[2][k];
    }
    snprintf(extra, sizeof(extra), "\"rounds\":%d,\"n\":%zu", SAME_ROUNDS, n);
    for (int j = 0; j < 3; j++)
        bench_emit(SUITE, "spsc_same_thread_paired", impl[j],
            bench_median(ns[j], SAME_ROUNDS), "ns", extra);
    for (int j = 0; j < 2; j++)
        bench_emit(SUITE, "spsc_same_thread_ratio", impl[j],
            bench_median(ratio[j], SAME_ROUNDS), "x", extra);
    rk_spsc_destroy(s[0]);
    rk_spsc_destroy(s[1]);
    free(buf);
#endif
    return sum;
}

static void
same_thread(void)
{
    uint64_t t0, sum = 0, v;

    rk_spsc *s;
    if (rk_spsc_create(&s, RING, 8) != RK_OK)
        abort();
    t0 = bench_now_ns();
    sum += rk_spsc_loop(s, n_ops);
    emit("spsc_same_thread", "ringkernel",
        (double)(bench_now_ns() - t0) / (double)n_ops, "ns");
    rk_spsc_destroy(s);

    if (rk_u64q_create(&s, RING) != RK_OK)
        abort();
    t0 = bench_now_ns();
    sum += rk_spsc_typed_loop(s, n_ops);
    emit("spsc_same_thread", "ringkernel_typed",
        (double)(bench_now_ns() - t0) / (double)n_ops, "ns");
    rk_spsc_destroy(s);

    rk_mpsc *m;
    if (rk_mpsc_create(&m, RING, 8) != RK_OK)
        abort();
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n_ops; i++) {
        uint64_t e = i;
        rk_mpsc_try_enqueue(m, &e);
        rk_mpsc_try_dequeue(m, &v);
        sum += v;
    }
    emit("mpsc_same_thread", "ringkernel",
        (double)(bench_now_ns() - t0) / (double)n_ops, "ns");
    rk_mpsc_destroy(m);

    rk_mqueue *q;
    rk_mqueue_config cfg = { RING, 8, RK_BP_REJECT, false, false };
    if (rk_mqueue_create(&q, &cfg) != RK_OK)
        abort();
    size_t len;
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n_ops / 4; i++) {
        rk_mqueue_send(q, &i, 8, 0, RK_NO_WAIT);
        rk_mqueue_recv(q, &v, 8, &len, RK_NO_WAIT);
        sum += v;
    }
    emit("mqueue_same_thread", "ringkernel",
        (double)(bench_now_ns() - t0) / (double)(n_ops / 4), "ns");
    rk_mqueue_destroy(q);

#ifdef RK_HAVE_CK
    ck_ring_t r;
    ck_ring_buffer_t *buf = aligned_alloc(64, RING * sizeof(*buf));
    void *p = NULL;
    ck_ring_init(&r, RING);
    t0 = bench_now_ns();
    sum += ck_spsc_loop(&r, buf, n_ops);
    emit("spsc_same_thread", "ck_ring",
        (double)(bench_now_ns() - t0) / (double)n_ops, "ns");
    ck_ring_init(&r, RING);
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < n_ops; i++) {
        ck_ring_enqueue_mpsc(&r, buf, (void *)(uintptr_t)i);
        ck_ring_dequeue_mpsc(&r, buf, &p);
        sum += (uintptr_t)p;
    }
    emit("mpsc_same_thread", "ck_ring",
        (double)(bench_now_ns() - t0) / (double)n_ops, "ns");
    free(buf);
#endif
    sink = sum;
}

/* ---------------------------------------------------------- ping-pong */

typedef struct rk_pp {
    rk_spsc *ab, *ba;
    rk_mqueue *qab, *qba;
    size_t rounds;
} rk_pp;

static void *
rk_echo(void *arg)
{
    rk_pp *p = arg;
    ck_ref_pin(cpu_peer);
    uint64_t v;
    for (size_t i = 0; i < p->rounds; i++) {
        while (rk_spsc_try_dequeue(p->ab, &v) != RK_OK)
            ;
        while (rk_spsc_try_enqueue(p->ba, &v) != RK_OK)
            ;
    }
    return NULL;
}

/* The same echo through the typed handles. */
static void *
rk_typed_echo(void *arg)
{
    rk_pp *p = arg;
    rk_u64q_cons c;
    rk_u64q_prod o;
    if (rk_u64q_cons_bind(&c, p->ab) != RK_OK
        || rk_u64q_prod_bind(&o, p->ba) != RK_OK)
        abort();
    ck_ref_pin(cpu_peer);
    uint64_t v;
    for (size_t i = 0; i < p->rounds; i++) {
        while (rk_u64q_try_dequeue(&c, &v) != RK_OK)
            ;
        while (rk_u64q_try_enqueue(&o, v) != RK_OK)
            ;
    }
    return NULL;
}

static void *
mq_echo(void *arg)
{
    rk_pp *p = arg;
    ck_ref_pin(cpu_peer);
    uint64_t v;
    size_t len;
    for (size_t i = 0; i < p->rounds; i++) {
        if (rk_mqueue_recv(p->qab, &v, 8, &len, RK_WAIT_FOREVER) != RK_OK
            || rk_mqueue_send(p->qba, &v, 8, 0, RK_WAIT_FOREVER) != RK_OK)
            abort();
    }
    return NULL;
}

static void
emit_rtt(const char *prefix, const char *impl, uint64_t *rtt)
{
    char name[64];
    snprintf(name, sizeof(name), "%s_pingpong_p50", prefix);
    emit(name, impl, (double)bench_percentile(rtt, n_rtt, 50), "ns");
    snprintf(name, sizeof(name), "%s_pingpong_p99", prefix);
    emit(name, impl, (double)bench_percentile(rtt, n_rtt, 99), "ns");
}

/* One rk_spsc ping-pong of n round trips into rtt[], through the untyped
 * calls or the typed handles. */
static void
spsc_pingpong_run(uint64_t *rtt, size_t n, bool typed)
{
    rk_pp p = { NULL, NULL, NULL, NULL, n };
    rk_u64q_prod o;
    rk_u64q_cons c;
    if (rk_spsc_create(&p.ab, RING, 8) || rk_spsc_create(&p.ba, RING, 8)
        || rk_u64q_prod_bind(&o, p.ab) || rk_u64q_cons_bind(&c, p.ba))
        abort();
    ck_ref_pin(cpu_main);
    pthread_t t;
    pthread_create(&t, NULL, typed ? rk_typed_echo : rk_echo, &p);
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns(), v = i;
        if (typed) {
            while (rk_u64q_try_enqueue(&o, v) != RK_OK)
                ;
            while (rk_u64q_try_dequeue(&c, &v) != RK_OK)
                ;
        } else {
            while (rk_spsc_try_enqueue(p.ab, &v) != RK_OK)
                ;
            while (rk_spsc_try_dequeue(p.ba, &v) != RK_OK)
                ;
        }
        rtt[i] = bench_now_ns() - t0;
    }
    pthread_join(t, NULL);
    rk_spsc_destroy(p.ab);
    rk_spsc_destroy(p.ba);
}

/*
 * Paired rounds: on a VM whose vCPUs move between physical cores (at times
 * onto SMT siblings, where a round trip is several times cheaper), a
 * ck_ring figure taken a second before or after ours can sit in another
 * regime. Nine rounds each run rk_spsc and then ck_ring back to back; the
 * ratio is taken within each round and the medians are printed
 * (spsc_pingpong_p50_paired, spsc_pingpong_p50_ratio).
 */
static void
pingpong_paired(uint64_t *rtt)
{
#ifdef RK_HAVE_CK
    size_t n = n_rtt / 9 < 1000 ? 1000 : n_rtt / 9;
    double rk[2][9], ck[9], ratio[2][9];
    static const char *const impl[2] = { "ringkernel", "ringkernel_typed" };
    char extra[64];

    if (n > n_rtt)
        n = n_rtt;
    for (int r = 0; r < 9; r++) {
        for (int k = 0; k < 2; k++) {
            spsc_pingpong_run(rtt, n, k == 1);
            rk[k][r] = (double)bench_percentile(rtt, n, 50);
        }
        if (ck_ref_pingpong_run(rtt, n, cpu_main, cpu_peer) != 0)
            return;
        ck[r] = (double)bench_percentile(rtt, n, 50);
        for (int k = 0; k < 2; k++)
            ratio[k][r] = rk[k][r] / ck[r];
    }
    snprintf(extra, sizeof(extra), "\"rounds\":9,\"n\":%zu", n);
    for (int k = 0; k < 2; k++)
        bench_emit(SUITE, "spsc_pingpong_p50_paired", impl[k],
            bench_median(rk[k], 9), "ns", extra);
    bench_emit(SUITE, "spsc_pingpong_p50_paired", "ck_ring",
        bench_median(ck, 9), "ns", extra);
    for (int k = 0; k < 2; k++)
        bench_emit(SUITE, "spsc_pingpong_p50_ratio", impl[k],
            bench_median(ratio[k], 9), "x", extra);
#else
    (void)rtt;
    fprintf(stderr, "bench_queue: built without ck, no paired ping-pong\n");
#endif
}

static void
pingpong(void)
{
    uint64_t *rtt = malloc(n_rtt * sizeof(*rtt));
    if (rtt == NULL)
        abort();
    rk_pp p = { NULL, NULL, NULL, NULL, n_rtt };
    pthread_t t;
    spsc_pingpong_run(rtt, n_rtt, false);
    emit_rtt("spsc", "ringkernel", rtt);

    /* The blocking inbox, parking allowed: what a kernel round trip pays. */
    rk_mqueue_config cfg = { 64, 8, RK_BP_BLOCK, false, true };
    if (rk_mqueue_create(&p.qab, &cfg) || rk_mqueue_create(&p.qba, &cfg))
        abort();
    p.rounds = n_rtt / 4;
    pthread_create(&t, NULL, mq_echo, &p);
    for (size_t i = 0; i < p.rounds; i++) {
        uint64_t t0 = bench_now_ns(), v = i;
        size_t len;
        rk_mqueue_send(p.qab, &v, 8, 0, RK_WAIT_FOREVER);
        rk_mqueue_recv(p.qba, &v, 8, &len, RK_WAIT_FOREVER);
        rtt[i] = bench_now_ns() - t0;
    }
    pthread_join(t, NULL);
    size_t keep = n_rtt;
    n_rtt = p.rounds;
    emit_rtt("mqueue", "ringkernel", rtt);
    n_rtt = keep;
    rk_mqueue_destroy(p.qab);
    rk_mqueue_destroy(p.qba);

#ifdef RK_HAVE_CK
    if (ck_ref_pingpong_run(rtt, n_rtt, cpu_main, cpu_peer) == 0)
        emit_rtt("spsc", "ck_ring", rtt);
#endif
    pingpong_paired(rtt);
    free(rtt);
}

/* ---------------------------------------------------------- one way */

static double last_rate; /* the last one_way's msgs/s */
static bool flow_quiet;  /* paired rounds: measure, print nothing */

typedef struct flow {
    int kind; /* 0 rk_spsc, 1 rk_spsc batch, 2 rk_mpsc, 3 ck spsc, 4 ck mpsc,
                5 typed rk_spsc, 6 typed rk_spsc batch */
    rk_spsc *s;
    rk_mpsc *m;
#ifdef RK_HAVE_CK
    ck_ring_t r;
    ck_ring_buffer_t *buf;
#endif
    _Atomic int go;
} flow;

static void *
flow_producer(void *arg)
{
    flow *f = arg;
    rk_u64q_prod tp = { 0 }; /* the typed producer's handle (kinds 5, 6) */
    if (f->kind >= 5 && rk_u64q_prod_bind(&tp, f->s) != RK_OK)
        abort();
    ck_ref_pin(cpu_peer);
    while (!atomic_load_explicit(&f->go, memory_order_acquire))
        ;
    uint64_t b[BATCH];
    for (uint64_t i = 1; i <= n_flow;) {
        switch (f->kind) {
        case 0:
            i += rk_spsc_try_enqueue(f->s, &i) == RK_OK;
            break;
        case 1: {
            uint32_t k
                = n_flow - i + 1 < BATCH ? (uint32_t)(n_flow - i + 1) : BATCH;
            for (uint32_t j = 0; j < k; j++)
                b[j] = i + j;
            i += rk_spsc_enqueue_batch(f->s, b, k);
            break;
        }
        case 2:
            i += rk_mpsc_try_enqueue(f->m, &i) == RK_OK;
            break;
        case 5:
            i += rk_u64q_try_enqueue(&tp, i) == RK_OK;
            break;
        case 6: {
            uint32_t k
                = n_flow - i + 1 < BATCH ? (uint32_t)(n_flow - i + 1) : BATCH;
            for (uint32_t j = 0; j < k; j++)
                b[j] = i + j;
            i += rk_u64q_enqueue_batch(&tp, b, k);
            break;
        }
#ifdef RK_HAVE_CK
        case 3:
            i += ck_ring_enqueue_spsc(&f->r, f->buf, (void *)(uintptr_t)i);
            break;
        case 4:
            i += ck_ring_enqueue_mpsc(&f->r, f->buf, (void *)(uintptr_t)i);
            break;
#endif
        }
    }
    return NULL;
}

static void
one_way(int kind, const char *name, const char *impl)
{
    flow f = { .kind = kind };
    if ((kind <= 1 || kind >= 5) && rk_spsc_create(&f.s, RING, 8) != RK_OK)
        abort();
    if (kind == 2 && rk_mpsc_create(&f.m, RING, 8) != RK_OK)
        abort();
    rk_u64q_cons tc = { 0 }; /* the typed consumer's handle (kinds 5, 6) */
    if (kind >= 5 && rk_u64q_cons_bind(&tc, f.s) != RK_OK)
        abort();
#ifdef RK_HAVE_CK
    f.buf = aligned_alloc(64, RING * sizeof(*f.buf));
    ck_ring_init(&f.r, RING);
#endif
    atomic_init(&f.go, 0);
    ck_ref_pin(cpu_main);
    pthread_t t;
    pthread_create(&t, NULL, flow_producer, &f);
    uint64_t t0 = bench_now_ns(), sum = 0, got = 0, b[BATCH];
    atomic_store_explicit(&f.go, 1, memory_order_release);
    while (got < n_flow) {
        uint64_t v = 0;
        int ok = 0;
        switch (kind) {
        case 0:
            ok = rk_spsc_try_dequeue(f.s, &v) == RK_OK;
            break;
        case 1: {
            uint32_t k = rk_spsc_dequeue_batch(f.s, b, BATCH);
            for (uint32_t j = 0; j < k; j++)
                sum += b[j];
            got += k;
            continue;
        }
        case 2:
            ok = rk_mpsc_try_dequeue(f.m, &v) == RK_OK;
            break;
        case 5:
            ok = rk_u64q_try_dequeue(&tc, &v) == RK_OK;
            break;
        case 6: {
            uint32_t k = rk_u64q_dequeue_batch(&tc, b, BATCH);
            for (uint32_t j = 0; j < k; j++)
                sum += b[j];
            got += k;
            continue;
        }
#ifdef RK_HAVE_CK
        case 3:
        case 4: {
            void *p = NULL;
            ok = kind == 3 ? ck_ring_dequeue_spsc(&f.r, f.buf, &p)
                           : ck_ring_dequeue_mpsc(&f.r, f.buf, &p);
            v = (uintptr_t)p;
            break;
        }
#endif
        }
        sum += v;
        got += (uint64_t)ok;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    pthread_join(t, NULL);
    if (sum != n_flow * (n_flow + 1) / 2)
        fprintf(stderr, "bench_queue: %s/%s lost messages\n", name, impl);
    last_rate = (double)n_flow / secs;
    if (!flow_quiet)
        emit(name, impl, last_rate, "msgs/s");
    rk_spsc_destroy(f.s);
    rk_mpsc_destroy(f.m);
#ifdef RK_HAVE_CK
    free(f.buf);
#endif
}

/*
 * Paired one-way rounds (as pingpong_paired): nine rounds of the single-
 * element flow through rk_spsc, the typed handles and ck_ring back to
 * back, n_flow / 9 messages each, the ratio to ck_ring taken within each
 * round; medians printed as spsc_oneway_paired and spsc_oneway_ratio.
 */
static void
one_way_paired(void)
{
#ifdef RK_HAVE_CK
    static const int kinds[3] = { 0, 5, 3 };
    static const char *const impl[3]
        = { "ringkernel", "ringkernel_typed", "ck_ring" };
    double rate[3][9], ratio[2][9];
    size_t keep = n_flow;
    char extra[64];

    n_flow = n_flow / 9 < 10000 ? 10000 : n_flow / 9;
    flow_quiet = true;
    for (int r = 0; r < 9; r++) {
        for (int k = 0; k < 3; k++) {
            one_way(kinds[k], "spsc_oneway", impl[k]);
            rate[k][r] = last_rate;
        }
        for (int k = 0; k < 2; k++)
            ratio[k][r] = rate[k][r] / rate[2][r];
    }
    flow_quiet = false;
    snprintf(extra, sizeof(extra), "\"rounds\":9,\"n\":%zu", n_flow);
    n_flow = keep;
    for (int k = 0; k < 3; k++)
        bench_emit(SUITE, "spsc_oneway_paired", impl[k],
            bench_median(rate[k], 9), "msgs/s", extra);
    for (int k = 0; k < 2; k++)
        bench_emit(SUITE, "spsc_oneway_ratio", impl[k],
            bench_median(ratio[k], 9), "x", extra);
#endif
}

int
main(int argc, char **argv)
{
    /* `bench_queue same` runs only the same-thread part (for callgrind). */
    int only_same_thread = argc > 1 && strcmp(argv[1], "same") == 0;
    double sc = bench_scale();
    n_ops = (size_t)(20e6 * sc) + 1000;
    n_rtt = (size_t)(200e3 * sc) + 1000;
    n_flow = (size_t)(20e6 * sc) + 1000;
    cpu_main = ck_ref_cpu(0);
    cpu_peer = ck_ref_cpu(1);
    fprintf(stderr, "bench_queue: CPUs %d and %d\n", cpu_main, cpu_peer);

    same_thread();
    if (only_same_thread)
        return 0;
    if (same_thread_paired() == 42)
        fprintf(stderr, "bench_queue: (sum)\n"); /* keeps the loops live */
    pingpong();
    one_way(0, "spsc_oneway", "ringkernel");
    one_way(1, "spsc_oneway_batch", "ringkernel");
    one_way(5, "spsc_oneway", "ringkernel_typed");
    one_way(6, "spsc_oneway_batch", "ringkernel_typed");
    one_way(2, "mpsc_oneway", "ringkernel");
#ifdef RK_HAVE_CK
    one_way(3, "spsc_oneway", "ck_ring");
    /* ck_ring has no batch calls: its batched figure is single calls. */
    one_way(3, "spsc_oneway_batch", "ck_ring");
    one_way(4, "mpsc_oneway", "ck_ring");
    one_way_paired();
#endif
    return 0;
}
