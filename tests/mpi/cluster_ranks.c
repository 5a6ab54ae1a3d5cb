/*
 * tests/mpi/cluster_ranks.c - the cluster across MPI ranks, run by ctest
 * under mpirun (tests/CMakeLists.txt): `cluster_ranks MODE` on every rank.
 *
 *   basic   cross-rank send (envelope kept), request/reply by "R/id" and
 *           by bare name, a K2K route into a remote kernel, a topic with
 *           subscribers on several ranks (each copy exactly once), a
 *           clean leave on every rank
 *   stress  2 producers per rank send sequence-numbered messages to every
 *           other rank's BLOCK kernel with a small credit window: every
 *           message arrives once, in order per producer (conservation)
 *   streamd the stress case with rk_cluster_send_batch (frames staged by
 *           the producers themselves, batches of 1-7, no proxy thread),
 *           plus its fallbacks, bad arguments and a remote refusal
 *   policy  BLOCK (slow kernel, nothing lost), REJECT (errors come back
 *           to the sender), DROP_NEW and DROP_OLDEST (counted where they
 *           drop) across ranks, with the books balanced on both sides
 *   badjoin rank 1 exports a kernel it does not have: its join fails with
 *           RK_ENOTFOUND, every other rank's with RK_EINTERNAL, and all
 *           return (nobody is left in a collective)
 *   kill    the last rank kills itself mid-run: survivors' requests to it
 *           (rank 1's by rk_cluster_request) end with RK_EUNREACHABLE
 *           and they leave within their timeout
 *   direct  rk_cluster_request from two threads at once (each gets its
 *           own replies, none through the proxy), a remote refusal, a
 *           reply too big, a timeout, a local id, bad arguments
 *   late    a kernel launched after the join and exported with
 *           rk_cluster_announce is reached from every other rank by
 *           "R/id", bare name and rk_cluster_request; bad announcements
 *           are refused
 *   exportall export_all: every kernel registered at join is reached
 *           by "R/id" and bare name, but not the cluster's own kernels,
 *           ids with a '/', or a rank that passed an empty list
 *
 * Every rank runs the same cmocka test; a failed assertion fails that
 * rank, and mpirun's exit status fails the ctest entry.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <mpi.h>

#include "ringkernel/ringkernel.h"

#define SEC 1000000000LL

static const char *mode;

typedef struct msg {
    int32_t rank;     /* sender's rank */
    int32_t producer; /* producer thread, or -1 */
    int64_t seq;
} msg;

enum { T_SEND = 1, T_ROUTE, T_NEWS, T_DONE, T_REQ, T_FINAL };

/* ---------------------------------------------------------- kernels */

/* echo: replies with the request's payload and this rank in .producer. */
static int my_rank;

static int
echo_h(rk_ctx *ctx, const rk_msg_view *m)
{
    msg r;

    if (m->len != sizeof(r))
        return RK_EINVAL;
    memcpy(&r, m->data, sizeof(r));
    if (strcmp(mode, "kill") == 0 && r.rank == 0 && r.seq == 40)
        raise(SIGKILL); /* the rank dies with requests in flight */
    r.producer = my_rank;
    return rk_ctx_reply(ctx, m, T_REQ, &r, sizeof(r));
}

/* sink: puts out every input unchanged (the host reads it with
 * rk_cluster_recv), with the input's type and priority. */
static int
sink_h(rk_ctx *ctx, const rk_msg_view *m)
{
    rk_ctx_set_priority(ctx, m->hdr->priority);
    return rk_ctx_send(ctx, m->hdr->type_id, m->data, m->len);
}

/* fwd: the upstream of a route; forwards its input as T_ROUTE. */
static int
fwd_h(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_send(ctx, T_ROUTE, m->data, m->len);
}

/* count: checks per-(rank, producer) order; T_DONE goes out. */
#define MAXR  8
#define NPROD 2
typedef struct counter {
    int64_t next[MAXR][NPROD];
    _Atomic uint64_t got;
    _Atomic uint64_t bad;
    useconds_t delay_us;
} counter;

static int
count_h(rk_ctx *ctx, const rk_msg_view *m)
{
    counter *c = rk_ctx_user(ctx);
    msg v;

    if (m->len != sizeof(v))
        return RK_EINVAL;
    memcpy(&v, m->data, sizeof(v));
    if (m->hdr->type_id == T_DONE || m->hdr->type_id == T_FINAL)
        return rk_ctx_send(ctx, m->hdr->type_id, &v, sizeof(v));
    if (c->delay_us != 0) {
        /* A slow consumer, so that the sender feels backpressure. */
        struct timespec ts = { 0, (long)c->delay_us * 1000 };
        nanosleep(&ts, NULL);
    }
    if (v.rank < 0 || v.rank >= MAXR || v.producer < 0 || v.producer >= NPROD
        || c->next[v.rank][v.producer] != v.seq)
        atomic_fetch_add(&c->bad, 1);
    else
        c->next[v.rank][v.producer]++;
    atomic_fetch_add(&c->got, 1);
    return RK_OK;
}

/* ----------------------------------------------------------- helpers */

static rk_runtime *
runtime(void)
{
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true };

    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    return rt;
}

static void
handler(rk_runtime *rt, const char *id, rk_handler_fn h, rk_kernel_config c,
    bool activate)
{
    rk_kernel_def d = { .id = id, .handler = h, .config = c };

    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    if (activate)
        assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

static void
id_of(char *out, size_t cap, int rank, const char *id)
{
    snprintf(out, cap, "%d/%s", rank, id);
}

/* Waits (bounded) until local proxy id has handled every message offered
 * to it: its books balance with nothing pending (a proxy counts a message
 * processed once it has been forwarded). */
static void
wait_forwarded(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s;
    int64_t until = (int64_t)rk_now_ns() + 20 * SEC;

    for (;;) {
        assert_int_equal(rk_kernel_stats_get(rt, id, &s), RK_OK);
        if (s.pending == 0
            && s.offered
                == s.processed + s.dropped + s.rejected + s.dead_lettered)
            return;
        assert_true((int64_t)rk_now_ns() < until);
        sched_yield();
    }
}

/* ------------------------------------------------------------- basic */

#define K_SEND 200
#define K_NEWS 50
#define K_REQ  100

static void
test_basic(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 4096, .output_capacity = 4096 };
    rk_cluster *cl;
    char only[32], id[64];
    const char *topics[] = { "news" };
    int rank, n;

    /* Every rank: echo, sink, fwd; a kernel with a name of its own. */
    handler(rt, "echo", echo_h, any, true);
    handler(rt, "sink", sink_h, any, true);
    handler(rt, "fwd", fwd_h, any, true);
    {
        char env[16];
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        snprintf(env, sizeof(env), "%s", r ? r : "0");
        snprintf(only, sizeof(only), "only%s", env);
    }
    handler(rt, only, echo_h, any, true);
    /* The proxies mirror what the kernels were registered with, read
     * from the runtime (the export's own fields are ignored). */
    rk_cluster_export ex[] = {
        { .id = "echo" },
        { .id = "sink", .input_capacity = 7 },
        { .id = only, .backpressure = RK_BP_DROP_NEW },
    };
    rk_cluster_config cc = { .exports = ex,
        .n_exports = 3,
        .topics = topics,
        .n_topics = 1,
        .leave_timeout_ns = 60 * SEC };

    /* echo answers with my_rank, possibly before our join returns: set
     * it from the launcher now, check it against the cluster below. */
    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    /* Every rank but 0 has a subscriber to "news" at join. */
    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        if (r != NULL && atoi(r) != 0)
            assert_int_equal(rk_subscribe(rt, "sink", "news"), RK_OK);
    }
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    rank = rk_cluster_rank(cl);
    assert_int_equal(rank, my_rank);
    n = rk_cluster_size(cl);
    assert_true(n >= 2 && n <= MAXR);
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    {
        rk_kernel_config pc;
        snprintf(id, sizeof(id), "%d/sink", next);
        assert_int_equal(rk_kernel_config_get(rt, id, &pc), RK_OK);
        assert_int_equal(pc.input_capacity, 4096);
        assert_int_equal(pc.backpressure, RK_BP_BLOCK);
        snprintf(id, sizeof(id), "%d/only%d", next, next);
        assert_int_equal(rk_kernel_config_get(rt, id, &pc), RK_OK);
        assert_int_equal(pc.input_capacity, 4096);
        assert_int_equal(pc.backpressure, RK_BP_BLOCK);
    }

    /* request/reply: "R/echo" and the bare "onlyR" of the next rank */
    for (int i = 0; i < K_REQ; i++) {
        msg q = { rank, -1, i }, r;
        rk_msg_header h;
        rk_kernel k;
        size_t len;

        if (i % 2)
            id_of(id, sizeof(id), next, "echo");
        else
            snprintf(id, sizeof(id), "only%d", next);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        assert_int_equal(rk_request(rt, k, T_REQ, &q, sizeof(q), &h, &r,
                             sizeof(r), &len, 10 * SEC),
            RK_OK);
        assert_int_equal(len, sizeof(r));
        assert_int_equal(h.type_id, T_REQ);
        assert_int_equal(r.producer, next); /* answered by that rank */
        assert_int_equal(r.seq, i);
        assert_false(rk_uuid_is_nil(&h.correlation_id));
    }

    /* send with priorities, and a route fwd -> next's sink */
    id_of(id, sizeof(id), next, "sink");
    assert_int_equal(rk_connect(rt, "fwd", id), RK_OK);
    for (int i = 0; i < K_SEND; i++) {
        msg v = { rank, -1, i };
        assert_int_equal(rk_send_id(rt, id, T_SEND, &v, sizeof(v),
                             (uint8_t)(i % 256), RK_WAIT_FOREVER),
            RK_OK);
        assert_int_equal(
            rk_send_id(rt, "fwd", T_SEND, &v, sizeof(v), 7, RK_WAIT_FOREVER),
            RK_OK);
    }
    /* rank 0 publishes; each subscriber rank gets every copy once */
    if (rank == 0) {
        for (int i = 0; i < K_NEWS; i++) {
            msg v = { rank, -1, i };
            size_t got = 0;
            assert_int_equal(rk_publish(rt, "news", T_NEWS, &v, sizeof(v), 128,
                                 RK_WAIT_FOREVER, &got),
                RK_OK);
            assert_int_equal(got, (size_t)(n - 1)); /* one proxy per rank */
        }
        /* Frames of one link keep the order in which proxies handed them
         * over; once the topic proxies have forwarded everything, a done
         * sent afterwards comes after the last copy. */
        for (int r = 1; r < n; r++) {
            id_of(id, sizeof(id), r, "#news");
            wait_forwarded(rt, id);
        }
    }
    /* Done, through the same proxies as what came before (FIFO): to
     * every other rank's sink, directly and through the route. */
    for (int r = 0; r < n; r++) {
        msg v = { rank, -1, -1 };
        if (r == rank)
            continue;
        id_of(id, sizeof(id), r, "sink");
        assert_int_equal(
            rk_send_id(rt, id, T_DONE, &v, sizeof(v), 128, RK_WAIT_FOREVER),
            RK_OK);
    }

    /* Read our sink until every other rank said done. */
    int done = 0, sends = 0, routes = 0, news = 0;
    while (done < n - 1) {
        msg v;
        rk_msg_header h;
        size_t len;

        assert_int_equal(
            rk_cluster_recv(cl, "sink", &h, &v, sizeof(v), &len, 30 * SEC),
            RK_OK);
        assert_int_equal(len, sizeof(v));
        switch (h.type_id) {
        case T_SEND:
            assert_int_equal(v.rank, prev);
            assert_int_equal(v.seq, sends);
            assert_int_equal(h.priority, sends % 256);
            sends++;
            break;
        case T_ROUTE:
            assert_int_equal(v.rank, prev);
            assert_int_equal(v.seq, routes);
            routes++;
            break;
        case T_NEWS:
            assert_int_equal(v.rank, 0);
            assert_int_equal(v.seq, news);
            news++;
            break;
        case T_DONE:
            done++;
            break;
        default:
            fail_msg("unexpected type %u", h.type_id);
        }
    }
    assert_int_equal(sends, K_SEND);
    /* The route's messages may still be behind the last done only if
     * prev's fwd had not forwarded them yet: read the rest. */
    while (routes < K_SEND) {
        msg v;
        rk_msg_header h;
        size_t len;
        assert_int_equal(
            rk_cluster_recv(cl, "sink", &h, &v, sizeof(v), &len, 30 * SEC),
            RK_OK);
        assert_int_equal(h.type_id, T_ROUTE);
        assert_int_equal(v.seq, routes);
        routes++;
    }
    assert_int_equal(news, rank == 0 ? 0 : K_NEWS);

    rk_cluster_stats st;
    assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
    assert_int_equal(st.replies_received, K_REQ);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(st.unreachable, 0);

    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------------------ stress */

#define K_STRESS 10000

typedef struct producer {
    rk_runtime *rt;
    rk_cluster *cl; /* streamd: rk_cluster_send_batch; NULL: rk_send_id */
    int rank, n, index;
    int failures;
} producer;

/* streamd: the same sequence as produce, in direct batches of 1-7. */
static void *
produce_direct(void *arg)
{
    producer *p = arg;
    char id[64];

    for (int64_t i = 0; i < K_STRESS;) {
        int64_t k = 1 + i % 7;
        msg v[7];

        k = i + k > K_STRESS ? K_STRESS - i : k;
        for (int64_t j = 0; j < k; j++)
            v[j] = (msg) { p->rank, p->index, i + j };
        for (int r = 0; r < p->n; r++) {
            size_t sent = 0;
            if (r == p->rank)
                continue;
            id_of(id, sizeof(id), r, "count");
            if (rk_cluster_send_batch(p->cl, id, T_SEND, v, sizeof(v[0]),
                    (size_t)k, 128, RK_WAIT_FOREVER, &sent)
                    != RK_OK
                || sent != (size_t)k)
                p->failures++;
        }
        i += k;
    }
    return NULL;
}

static void *
produce(void *arg)
{
    producer *p = arg;
    char id[64];

    if (p->cl != NULL)
        return produce_direct(arg);
    for (int64_t i = 0; i < K_STRESS; i++) {
        for (int r = 0; r < p->n; r++) {
            msg v = { p->rank, p->index, i };
            if (r == p->rank)
                continue;
            id_of(id, sizeof(id), r, "count");
            if (rk_send_id(
                    p->rt, id, T_SEND, &v, sizeof(v), 128, RK_WAIT_FOREVER)
                != RK_OK)
                p->failures++;
        }
    }
    return NULL;
}

static void
test_stress(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    counter *c = calloc(1, sizeof(*c));
    rk_kernel_config cfg = { .input_capacity = 64, .user = c };
    rk_cluster_export ex[2]
        = { { .id = "count", .input_capacity = 64 }, { .id = "closed" } };
    rk_cluster_config cc = { .exports = ex,
        .n_exports = 1,
        .credits = 32,
        .leave_timeout_ns = 60 * SEC };
    rk_cluster *cl;
    producer prod[NPROD];
    pthread_t th[NPROD];

    bool direct = strcmp(mode, "streamd") == 0;

    handler(rt, "count", count_h, cfg, true);
    if (direct) { /* "closed" refuses every message */
        handler(rt, "closed", echo_h, (rk_kernel_config) { 0 }, true);
        assert_int_equal(rk_kernel_refuse(rt, "closed", RK_EREJECTED,
                             "closed for the test"),
            RK_OK);
        cc.n_exports = 2;
    }
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    int rank = rk_cluster_rank(cl), n = rk_cluster_size(cl);
    assert_true(n <= MAXR);
    if (direct) {
        size_t sent = 7;
        msg v = { rank, -1, -1 };
        /* Bad arguments, an unknown id, and no remote kernel (no MPI:
         * nothing is sent); a local id would go through rk_send_batch. */
        assert_int_equal(rk_cluster_send_batch(cl, NULL, T_SEND, &v, sizeof(v),
                             1, 128, RK_NO_WAIT, &sent),
            RK_EINVAL);
        assert_int_equal(sent, 0);
        assert_int_equal(rk_cluster_send_batch(cl, "9/none", T_SEND, &v,
                             sizeof(v), 1, 128, RK_NO_WAIT, &sent),
            RK_ENOTFOUND);
        assert_int_equal(rk_cluster_send_batch(cl, "count", T_SEND, NULL,
                             sizeof(v), 1, 128, RK_NO_WAIT, &sent),
            RK_EINVAL);
    }
    for (int i = 0; i < NPROD; i++) {
        prod[i] = (producer) { rt, direct ? cl : NULL, rank, n, i, 0 };
        assert_int_equal(pthread_create(&th[i], NULL, produce, &prod[i]), 0);
    }
    for (int i = 0; i < NPROD; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(prod[i].failures, 0);
    }
    for (int r = 0; r < n; r++) {
        char id[64];
        msg v = { rank, -1, -1 };
        if (r == rank)
            continue;
        id_of(id, sizeof(id), r, "count");
        if (direct) {
            size_t sent = 0;
            assert_int_equal(rk_cluster_send_batch(cl, id, T_DONE, &v,
                                 sizeof(v), 1, 128, RK_WAIT_FOREVER, &sent),
                RK_OK);
            assert_int_equal(sent, 1);
        } else {
            assert_int_equal(rk_send_id(rt, id, T_DONE, &v, sizeof(v), 128,
                                 RK_WAIT_FOREVER),
                RK_OK);
        }
    }
    /* Done from every other rank: it came after that rank's producers'
     * messages through the same path (the proxy, or the staging buffer
     * for streamd), so all of them are counted. */
    for (int d = 0; d < n - 1; d++) {
        msg v;
        size_t len;
        assert_int_equal(
            rk_cluster_recv(cl, "count", NULL, &v, sizeof(v), &len, 120 * SEC),
            RK_OK);
    }
    assert_int_equal(atomic_load(&c->bad), 0);
    assert_int_equal(
        atomic_load(&c->got), (uint64_t)(n - 1) * NPROD * K_STRESS);
    for (int r = 0; r < n; r++)
        for (int p = 0; p < NPROD; p++)
            assert_int_equal(c->next[r][p], r == rank ? 0 : K_STRESS);

    rk_kernel_stats ks;
    rk_cluster_stats st;
    assert_int_equal(rk_kernel_stats_get(rt, "count", &ks), RK_OK);
    assert_int_equal(ks.dropped + ks.rejected, 0);
    assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
    if (getenv("RK_CLUSTER_DEBUG"))
        fprintf(stderr,
            "rank %d: fwd %llu frames %llu batches %llu stalls %llu sleeps "
            "%llu delivered %llu\n",
            rank, (unsigned long long)st.forwarded,
            (unsigned long long)st.sent_frames,
            (unsigned long long)st.sent_batches,
            (unsigned long long)st.credit_stalls,
            (unsigned long long)st.idle_sleeps,
            (unsigned long long)st.delivered);
    assert_int_equal(st.delivered, (uint64_t)(n - 1) * (NPROD * K_STRESS + 1));
    assert_int_equal(st.dropped + st.unreachable, 0);
    /* streamd: the one message sent to this rank's "closed" (below, by the
     * previous rank) may already be refused. */
    assert_true(st.rejected <= (direct ? 1u : 0u));
    if (direct) { /* every direct message counts as forwarded */
        assert_int_equal(
            st.forwarded, (uint64_t)(n - 1) * (NPROD * K_STRESS + 1));
        /* A refusal of a direct send comes back as a proxied send's
         * does: an error, with the message's id, out of the proxy. */
        char id[64];
        msg v = { rank, -1, -1 };
        size_t sent = 0, len;
        rk_msg_header h;
        uint8_t le[4];
        id_of(id, sizeof(id), (rank + 1) % n, "closed");
        assert_int_equal(rk_cluster_send_batch(cl, id, T_SEND, &v, sizeof(v),
                             1, 128, RK_WAIT_FOREVER, &sent),
            RK_OK);
        assert_int_equal(sent, 1);
        assert_int_equal(
            rk_recv_id(rt, id, &h, le, sizeof(le), &len, 30 * SEC), RK_OK);
        assert_int_equal(h.type_id, RK_CLUSTER_TYPE_ERROR);
        assert_int_equal(len, 4);
        assert_int_equal(le[0] | le[1] << 8, RK_EREJECTED);
        assert_false(rk_uuid_is_nil(&h.correlation_id));
        assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
        assert_int_equal(st.remote_errors, 1);
        /* And the previous rank's message to our "closed" is refused here
         * exactly once. */
        for (uint64_t until = rk_now_ns() + 30 * (uint64_t)SEC;;) {
            assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
            if (st.rejected == 1)
                break;
            assert_true(st.rejected == 0 && rk_now_ns() < until);
            sched_yield();
        }
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
    free(c);
}

/* ------------------------------------------------------------ policy */

#define K_BLOCK  2000
#define K_BURST  40
#define CAP_FULL 8

static void
test_policy(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    counter *c = calloc(1, sizeof(*c));
    rk_kernel_config slow = { .input_capacity = CAP_FULL, .user = c };
    rk_kernel_config big = { .input_capacity = 256 };
    rk_cluster_export ex[] = {
        { .id = "blk", .input_capacity = CAP_FULL },
        { .id = "rej",
            .input_capacity = CAP_FULL,
            .backpressure = RK_BP_REJECT },
        { .id = "dnew",
            .input_capacity = CAP_FULL,
            .backpressure = RK_BP_DROP_NEW },
        { .id = "dold",
            .input_capacity = CAP_FULL,
            .backpressure = RK_BP_DROP_OLDEST },
        { .id = "ctl", .input_capacity = 256 },
    };
    const char *full[] = { "rej", "dnew", "dold" };
    rk_backpressure bp[] = { RK_BP_REJECT, RK_BP_DROP_NEW, RK_BP_DROP_OLDEST };
    rk_cluster_config cc = { .exports = ex,
        .n_exports = 5,
        .credits = 16,
        .leave_timeout_ns = 60 * SEC };
    rk_cluster *cl;

    c->delay_us = 20;
    handler(rt, "blk", count_h, slow, true);
    /* Launched, never activated: their queues fill at CAP_FULL. */
    for (int i = 0; i < 3; i++) {
        rk_kernel_config f
            = { .input_capacity = CAP_FULL, .backpressure = bp[i] };
        handler(rt, full[i], sink_h, f, false);
    }
    handler(rt, "ctl", sink_h, big, true);
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    int rank = rk_cluster_rank(cl);
    assert_int_equal(rk_cluster_size(cl), 2);

    if (rank == 0) {
        /* BLOCK: a slow remote kernel, nothing lost, all in order. */
        for (int64_t i = 0; i < K_BLOCK; i++) {
            msg v = { 0, 0, i };
            assert_int_equal(rk_send_id(rt, "1/blk", T_SEND, &v, sizeof(v),
                                 128, RK_WAIT_FOREVER),
                RK_OK);
        }
        msg end = { 0, -1, -1 };
        assert_int_equal(rk_send_id(rt, "1/blk", T_DONE, &end, sizeof(end),
                             128, RK_WAIT_FOREVER),
            RK_OK);
        wait_forwarded(rt, "1/blk");
        /* The others: a burst each, counting what the proxy said. */
        msg fin = { 0, -1, 0 };
        int64_t ok[3] = { 0 }, refused[3] = { 0 };
        for (int k = 0; k < 3; k++) {
            char id[64];
            id_of(id, sizeof(id), 1, full[k]);
            for (int64_t i = 0; i < K_BURST; i++) {
                msg v = { 0, 0, i };
                int rc = rk_send_id(
                    rt, id, T_SEND, &v, sizeof(v), 128, RK_NO_WAIT);
                if (rc == RK_OK)
                    ok[k]++;
                else if (rc == (k == 0 ? RK_EREJECTED : RK_EDROPPED))
                    refused[k]++;
                else
                    fail_msg("%s: %s", id, rk_err_name(rc));
            }
            assert_int_equal(ok[k] + refused[k], K_BURST);
            wait_forwarded(rt, id);
            /* What the proxy forwarded (DROP_OLDEST may also have dropped
             * some of the accepted ones in the proxy's own queue). */
            rk_kernel_stats ps;
            assert_int_equal(rk_kernel_stats_get(rt, id, &ps), RK_OK);
            assert_int_equal(ps.offered, K_BURST);
            assert_int_equal(ps.processed + ps.dropped + ps.rejected, K_BURST);
            assert_true(ps.processed <= (uint64_t)ok[k]);
            ok[k] = (int64_t)ps.processed;
        }
        /* Tell rank 1 what went out: seq = ok counts packed. */
        fin.seq = ok[0] | ok[1] << 16 | ok[2] << 32;
        assert_int_equal(rk_send_id(rt, "1/ctl", T_FINAL, &fin, sizeof(fin),
                             128, RK_WAIT_FOREVER),
            RK_OK);
        /* REJECT: each message the remote kernel refused comes back to
         * the sending proxy's output as an error carrying its id. */
        int64_t expect = ok[0] > CAP_FULL ? ok[0] - CAP_FULL : 0;
        for (int64_t i = 0; i < expect; i++) {
            rk_msg_header h;
            uint8_t le[4];
            size_t len;
            assert_int_equal(
                rk_recv_id(rt, "1/rej", &h, le, sizeof(le), &len, 30 * SEC),
                RK_OK);
            assert_int_equal(h.type_id, RK_CLUSTER_TYPE_ERROR);
            assert_int_equal(len, 4);
            assert_int_equal(le[0] | le[1] << 8, RK_EREJECTED);
            assert_false(rk_uuid_is_nil(&h.correlation_id));
        }
        rk_cluster_stats st;
        assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
        assert_int_equal(st.remote_errors, expect);
    } else {
        msg fin;
        size_t len;
        rk_msg_header h;
        assert_int_equal(
            rk_cluster_recv(cl, "ctl", &h, &fin, sizeof(fin), &len, 120 * SEC),
            RK_OK);
        assert_int_equal(h.type_id, T_FINAL);
        /* blk's done came before the final through the same link; once
         * blk puts it out, blk has processed everything before it. */
        {
            msg d;
            assert_int_equal(
                rk_cluster_recv(cl, "blk", &h, &d, sizeof(d), &len, 120 * SEC),
                RK_OK);
            assert_int_equal(h.type_id, T_DONE);
        }
        assert_int_equal(atomic_load(&c->bad), 0);
        assert_int_equal(atomic_load(&c->got), K_BLOCK);
        int64_t ok[3]
            = { fin.seq & 0xffff, (fin.seq >> 16) & 0xffff, fin.seq >> 32 };
        rk_cluster_stats st;
        assert_int_equal(rk_cluster_stats_get(cl, &st), RK_OK);
        uint64_t rej = 0, drop = 0;
        for (int k = 0; k < 3; k++) {
            rk_kernel_stats ks;
            assert_int_equal(rk_kernel_stats_get(rt, full[k], &ks), RK_OK);
            /* every message forwarded is offered exactly once here */
            assert_int_equal(ks.offered, ok[k]);
            assert_int_equal(
                ks.pending, ok[k] < CAP_FULL ? (uint64_t)ok[k] : CAP_FULL);
            uint64_t over = ok[k] > CAP_FULL ? (uint64_t)ok[k] - CAP_FULL : 0;
            if (k == 0) {
                assert_int_equal(ks.rejected, over);
                rej += over;
            } else {
                assert_int_equal(ks.dropped, over);
                drop += k == 1 ? over : 0; /* DROP_NEW reports it */
            }
        }
        assert_int_equal(st.rejected, rej);
        assert_int_equal(st.dropped, drop);
        rk_kernel_stats bs;
        assert_int_equal(rk_kernel_stats_get(rt, "blk", &bs), RK_OK);
        assert_int_equal(bs.dropped + bs.rejected, 0);
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
    free(c);
}

/* --------------------------------------------------------- exportall */

/* Requests one echo-style kernel by id and checks that rank `owner`
 * answered. */
static void
request_from(rk_runtime *rt, const char *id, int rank, int owner)
{
    msg q = { rank, -1, 7 }, r;
    rk_msg_header h;
    rk_kernel k;
    size_t len;

    assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
    assert_int_equal(rk_request(rt, k, T_REQ, &q, sizeof(q), &h, &r, sizeof(r),
                         &len, 10 * SEC),
        RK_OK);
    assert_int_equal(len, sizeof(r));
    assert_int_equal(r.seq, 7);
    assert_int_equal(r.producer, owner);
}

static void
test_exportall(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export none[1] = { { .id = "echo" } };
    rk_cluster *cl;
    char only[32], id[96];
    int rank, n;

    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    /* Every rank: echo, a kernel of its own, and one whose id holds a
     * '/' (not exported by default: it reads as a remote name). */
    snprintf(only, sizeof(only), "only%d", my_rank);
    handler(rt, "echo", echo_h, any, true);
    handler(rt, only, echo_h, any, true);
    handler(rt, "a/b", echo_h, any, true);
    /* export_all: every kernel registered now is exported. Rank 1 leaves
     * it unset with an empty list, which exports nothing. */
    rk_cluster_config cc = { .leave_timeout_ns = 60 * SEC };
    if (my_rank == 1)
        cc.exports = none; /* n_exports 0 */
    else
        cc.export_all = true;
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    rank = rk_cluster_rank(cl);
    n = rk_cluster_size(cl);
    assert_int_equal(rank, my_rank);
    for (int r = 0; r < n; r++) {
        rk_kernel_state st;

        if (r == rank)
            continue;
        snprintf(id, sizeof(id), "%d/echo", r);
        if (r == 1) {
            /* Rank 1 exported nothing: no proxy for any of its kernels. */
            assert_int_equal(rk_kernel_state_get(rt, id, &st), RK_ENOTFOUND);
            snprintf(id, sizeof(id), "only%d", r);
            assert_int_equal(rk_kernel_state_get(rt, id, &st), RK_ENOTFOUND);
            continue;
        }
        request_from(rt, id, rank, r);
        /* By "R/id" and by the bare name no local kernel has. */
        snprintf(id, sizeof(id), "%d/only%d", r, r);
        request_from(rt, id, rank, r);
        snprintf(id, sizeof(id), "only%d", r);
        request_from(rt, id, rank, r);
        /* Neither the cluster's own kernels nor ids with a '/'. */
        snprintf(id, sizeof(id), "%d/rk.cluster", r);
        assert_int_equal(rk_kernel_state_get(rt, id, &st), RK_ENOTFOUND);
        snprintf(id, sizeof(id), "%d/a/b", r);
        assert_int_equal(rk_kernel_state_get(rt, id, &st), RK_ENOTFOUND);
        /* Nor another rank's proxies ("R/S/echo"). */
        for (int s = 0; s < n; s++) {
            snprintf(id, sizeof(id), "%d/%d/echo", r, s);
            assert_int_equal(rk_kernel_state_get(rt, id, &st), RK_ENOTFOUND);
        }
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

/* ------------------------------------------------------------ direct */

#define K_DIRECT 200

typedef struct direct_arg {
    rk_cluster *cl;
    int rank, to, producer;
    _Atomic int bad;
} direct_arg;

/* K_DIRECT direct requests to "R/echo": each reply is this thread's own. */
static void *
direct_main(void *p)
{
    direct_arg *a = p;
    rk_request_options o = RK_REQUEST_OPTIONS_INIT;
    char id[32];

    o.type_id = T_REQ;
    o.timeout_ns = 30 * SEC;
    snprintf(id, sizeof(id), "%d/echo", a->to);
    for (int64_t i = 0; i < K_DIRECT; i++) {
        msg q = { a->rank, a->producer, i }, r;
        rk_msg_header h;
        size_t len = 0;
        int rc = rk_cluster_request(
            a->cl, id, &o, &q, sizeof(q), &h, &r, sizeof(r), &len);
        if (rc != RK_OK || len != sizeof(r) || r.seq != i || r.rank != a->rank
            || r.producer != a->to || h.type_id != T_REQ
            || h.payload_len != sizeof(r))
            atomic_fetch_add(&a->bad, 1);
    }
    return NULL;
}

static void
test_direct(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster *cl;
    rk_cluster_stats st0, st1;
    char id[64];
    int rank, n;

    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    /* echo answers; sink never does (its output is not a reply); closed
     * refuses every message with RK_EREJECTED. All exported (export_all). */
    handler(rt, "echo", echo_h, any, true);
    handler(rt, "sink", sink_h, any, true);
    handler(rt, "closed", echo_h, any, true);
    assert_int_equal(
        rk_kernel_refuse(rt, "closed", RK_EREJECTED, "closed for the test"),
        RK_OK);
    rk_cluster_config cc
        = { .export_all = true, .leave_timeout_ns = 60 * SEC };
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    rank = rk_cluster_rank(cl);
    n = rk_cluster_size(cl);
    int next = (rank + 1) % n;
    rk_request_options o = RK_REQUEST_OPTIONS_INIT;
    o.type_id = T_REQ;
    o.timeout_ns = 30 * SEC;
    msg q = { rank, -1, 5 }, r;
    rk_msg_header h;
    size_t len;

    /* Two threads at once, each to the next rank's echo: every reply
     * reaches the thread that asked, by the direct path (the proxy sees
     * none of them). */
    assert_int_equal(rk_cluster_stats_get(cl, &st0), RK_OK);
    {
        direct_arg a[2];
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            a[i].cl = cl;
            a[i].rank = rank;
            a[i].to = next;
            a[i].producer = i;
            atomic_init(&a[i].bad, 0);
            assert_int_equal(
                pthread_create(&t[i], NULL, direct_main, &a[i]), 0);
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(t[i], NULL);
            assert_int_equal(atomic_load(&a[i].bad), 0);
        }
    }
    assert_int_equal(rk_cluster_stats_get(cl, &st1), RK_OK);
    assert_int_equal(
        st1.replies_received - st0.replies_received, 2 * K_DIRECT);
    assert_int_equal(st1.forwarded - st0.forwarded, 2 * K_DIRECT);
    {
        rk_kernel_stats ps;
        snprintf(id, sizeof(id), "%d/echo", next);
        assert_int_equal(rk_kernel_stats_get(rt, id, &ps), RK_OK);
        assert_int_equal(ps.offered, 0);
    }

    /* "echo" is a local kernel here: the ordinary request (this rank
     * answers). */
    q.seq = 6;
    assert_int_equal(rk_cluster_request(cl, "echo", &o, &q, sizeof(q), &h, &r,
                         sizeof(r), &len),
        RK_OK);
    assert_int_equal(r.producer, rank);
    assert_int_equal(r.seq, 6);

    /* A remote refusal comes back as its code. */
    snprintf(id, sizeof(id), "%d/closed", next);
    assert_int_equal(
        rk_cluster_request(cl, id, &o, &q, sizeof(q), &h, &r, sizeof(r), &len),
        RK_EREJECTED);
    assert_non_null(strstr(rk_errdetail(), "closed"));

    /* A reply bigger than the buffer: RK_EMSGSIZE with its size. */
    snprintf(id, sizeof(id), "%d/echo", next);
    assert_int_equal(
        rk_cluster_request(cl, id, &o, &q, sizeof(q), &h, &r, 4, &len),
        RK_EMSGSIZE);
    assert_int_equal(len, sizeof(r));

    /* No reply: the wait ends at the timeout, and the slot serves the
     * next request. */
    {
        rk_request_options shortwait = o;
        shortwait.timeout_ns = SEC / 5;
        snprintf(id, sizeof(id), "%d/sink", next);
        assert_int_equal(rk_cluster_request(cl, id, &shortwait, &q, sizeof(q),
                             &h, &r, sizeof(r), &len),
            RK_ETIMEDOUT);
    }
    snprintf(id, sizeof(id), "%d/echo", next);
    q.seq = 8;
    assert_int_equal(
        rk_cluster_request(cl, id, &o, &q, sizeof(q), &h, &r, sizeof(r), &len),
        RK_OK);
    assert_int_equal(r.seq, 8);
    assert_int_equal(r.producer, next);

    /* No such kernel; bad arguments. */
    assert_int_equal(rk_cluster_request(cl, "nobody", &o, &q, sizeof(q), &h,
                         &r, sizeof(r), &len),
        RK_ENOTFOUND);
    assert_int_equal(
        rk_cluster_request(cl, id, &o, &q, sizeof(q), &h, &r, sizeof(r), NULL),
        RK_EINVAL);
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

/* -------------------------------------------------------------- late */

/* Waits (bounded) until the local proxy id is active: the announcement
 * of a later export has reached this rank, whose progress thread then
 * registers, launches and activates the proxy. */
static void
wait_proxy(rk_runtime *rt, const char *id)
{
    rk_kernel_state st;
    int64_t until = (int64_t)rk_now_ns() + 20 * SEC;

    while (
        rk_kernel_state_get(rt, id, &st) != RK_OK || st != RK_KERNEL_ACTIVE) {
        assert_true((int64_t)rk_now_ns() < until);
        sched_yield();
    }
}

static void
test_late(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export ex = { .id = "echo" };
    rk_cluster *cl;
    char late[32], id[64];
    int rank, n;

    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    handler(rt, "echo", echo_h, any, true);
    rk_cluster_config cc
        = { .exports = &ex, .n_exports = 1, .leave_timeout_ns = 60 * SEC };
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    rank = rk_cluster_rank(cl);
    n = rk_cluster_size(cl);

    /* A kernel launched after the join, then exported. */
    snprintf(late, sizeof(late), "late%d", rank);
    handler(rt, late, echo_h, any, true);
    rk_cluster_export lx = { .id = late };
    assert_int_equal(rk_cluster_announce(cl, &lx), RK_OK);
    /* Refused: twice, no such kernel, a remote-looking id, NULL. */
    assert_int_equal(rk_cluster_announce(cl, &lx), RK_EEXIST);
    rk_cluster_export bad = { .id = "nobody" };
    assert_int_equal(rk_cluster_announce(cl, &bad), RK_ENOTFOUND);
    bad.id = "0/echo";
    assert_int_equal(rk_cluster_announce(cl, &bad), RK_EINVAL);
    assert_int_equal(rk_cluster_announce(cl, NULL), RK_EINVAL);

    for (int r = 0; r < n; r++) {
        msg q = { rank, -1, 3 }, rep;
        rk_msg_header h;
        size_t len;
        rk_kernel k;
        rk_kernel_config pc;

        if (r == rank)
            continue;
        /* "R/lateR" appears here once R's announcement arrived; then it
         * answers by "R/id", by bare name, and by rk_cluster_request. */
        snprintf(id, sizeof(id), "%d/late%d", r, r);
        wait_proxy(rt, id);
        assert_int_equal(rk_kernel_config_get(rt, id, &pc), RK_OK);
        assert_int_equal(pc.input_capacity, 64);
        request_from(rt, id, rank, r);
        {
            char bare[32];
            snprintf(bare, sizeof(bare), "late%d", r);
            wait_proxy(rt, bare);
            request_from(rt, bare, rank, r);
        }
        rk_request_options o = RK_REQUEST_OPTIONS_INIT;
        o.type_id = T_REQ;
        o.timeout_ns = 30 * SEC;
        assert_int_equal(rk_cluster_request(cl, id, &o, &q, sizeof(q), &h,
                             &rep, sizeof(rep), &len),
            RK_OK);
        assert_int_equal(rep.producer, r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

/* -------------------------------------------------------------- call */

/* tally: counts one-way messages per sender rank; a T_REQ (the fence)
 * is answered with the count of its sender's messages so far. */
static _Atomic uint64_t tally[MAXR];

static int
tally_h(rk_ctx *ctx, const rk_msg_view *m)
{
    msg v;
    uint64_t n;

    if (m->len != sizeof(v))
        return RK_EINVAL;
    memcpy(&v, m->data, sizeof(v));
    if (v.rank < 0 || v.rank >= MAXR)
        return RK_EINVAL;
    if (m->hdr->type_id != T_REQ) {
        atomic_fetch_add(&tally[v.rank], 1);
        return RK_OK;
    }
    n = atomic_load(&tally[v.rank]);
    return rk_ctx_reply(ctx, m, T_REQ, &n, sizeof(n));
}

#define K_CALL  300
#define K_FENCE 2000
#define BIG     6000 /* a reply too big for the requester's own receive */

/* bigc: answers a msg with BIG bytes: the msg, then bytes i % 251. */
static int
big_h(rk_ctx *ctx, const rk_msg_view *m)
{
    static _Thread_local uint8_t out[BIG];

    if (m->len != sizeof(msg))
        return RK_EINVAL;
    memcpy(out, m->data, sizeof(msg));
    for (size_t i = sizeof(msg); i < BIG; i++)
        out[i] = (uint8_t)(i % 251);
    return rk_ctx_reply(ctx, m, T_REQ, out, BIG);
}

/* holdc: holds a T_REQ unanswered (one per asking rank) until that rank
 * sends T_FINAL, then answers the held request, then the T_FINAL. The
 * held request's asker has given up by then: its reply comes late. */
static rk_msg_header held_hdr[MAXR];
static msg held_msg[MAXR];

static int
hold_h(rk_ctx *ctx, const rk_msg_view *m)
{
    msg v;

    if (m->len != sizeof(v))
        return RK_EINVAL;
    memcpy(&v, m->data, sizeof(v));
    if (v.rank < 0 || v.rank >= MAXR)
        return RK_EINVAL;
    if (m->hdr->type_id == T_REQ) {
        held_hdr[v.rank] = *m->hdr;
        held_msg[v.rank] = v;
        return RK_OK;
    }
    rk_msg_view held
        = { &held_hdr[v.rank], &held_msg[v.rank], sizeof(held_msg[v.rank]) };
    int rc = rk_ctx_reply(ctx, &held, T_REQ, held.data, held.len);
    return rc != RK_OK ? rc : rk_ctx_reply(ctx, m, T_REQ, m->data, m->len);
}

/* rk_cluster_request by the requesting thread's own MPI calls, to a
 * kernel run by the owning rank's progress thread (direct_calls), and
 * the order between a stream and a request: every rank asks every other
 * one K_CALL times (each answer checked), then streams K_FENCE messages
 * with rk_cluster_send_batch and asks for the count: a request that
 * overtook the stream would see fewer. A reply of BIG bytes (more than
 * the requester's own receive takes: it comes back through the progress
 * threads) arrives whole. A request that times out at holdc gets its
 * reply late, just ahead of the next request's in the same slot: that
 * request receives it, drops and counts it, and still gets its own. At the end
 * each rank's echoc has handled every request, most of them as direct calls.
 */
static void
test_call(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config cc_echo = { .input_capacity = 256, .direct_calls = true };
    rk_kernel_config cc_tally = { .input_capacity = 4096 };
    rk_kernel_config cc_big
        = { .input_capacity = 64, .max_payload = BIG, .direct_calls = true };
    rk_kernel_config cc_hold = { .input_capacity = 64 };
    rk_cluster_export ex[] = { { .id = "echoc" }, { .id = "tally" },
        { .id = "bigc" }, { .id = "holdc" } };
    rk_cluster_config cc
        = { .exports = ex, .n_exports = 4, .leave_timeout_ns = 60 * SEC };
    static uint8_t big[BIG];
    rk_cluster *cl;
    rk_kernel_stats ks;
    rk_cluster_stats cs;
    int rank, n;

    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    handler(rt, "echoc", echo_h, cc_echo, true);
    handler(rt, "tally", tally_h, cc_tally, true);
    handler(rt, "bigc", big_h, cc_big, true);
    handler(rt, "holdc", hold_h, cc_hold, true);
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    rank = rk_cluster_rank(cl);
    n = rk_cluster_size(cl);
    for (int r = 0; r < n; r++) {
        char id[64], tid[64];
        rk_request_options o = RK_REQUEST_OPTIONS_INIT;
        rk_msg_header h;
        size_t len, sent;
        msg many[100];
        uint64_t count = 0;

        if (r == rank)
            continue;
        id_of(id, sizeof(id), r, "echoc");
        id_of(tid, sizeof(tid), r, "tally");
        o.type_id = T_REQ;
        o.timeout_ns = 30 * SEC;
        for (int i = 0; i < K_CALL; i++) {
            msg q = { rank, -1, i }, rep;
            assert_int_equal(rk_cluster_request(cl, id, &o, &q, sizeof(q), &h,
                                 &rep, sizeof(rep), &len),
                RK_OK);
            assert_int_equal(len, sizeof(rep));
            assert_int_equal(rep.rank, rank);
            assert_int_equal(rep.seq, i);
            assert_int_equal(rep.producer, r);
            assert_int_equal(h.type_id, T_REQ);
        }
        for (int i = 0; i < 100; i++)
            many[i] = (msg) { rank, 0, i };
        for (int i = 0; i < K_FENCE / 100; i++) {
            assert_int_equal(rk_cluster_send_batch(cl, tid, T_SEND, many,
                                 sizeof(msg), 100, 128, 30 * SEC, &sent),
                RK_OK);
            assert_int_equal(sent, 100);
        }
        msg q = { rank, -1, 0 };
        assert_int_equal(rk_cluster_request(cl, tid, &o, &q, sizeof(q), &h,
                             &count, sizeof(count), &len),
            RK_OK);
        assert_int_equal(count, K_FENCE);

        /* A big reply, whole. */
        id_of(id, sizeof(id), r, "bigc");
        q.seq = 77;
        memset(big, 0, sizeof(big));
        assert_int_equal(rk_cluster_request(cl, id, &o, &q, sizeof(q), &h, big,
                             sizeof(big), &len),
            RK_OK);
        assert_int_equal(len, BIG);
        assert_memory_equal(big, &q, sizeof(q));
        for (size_t i = sizeof(msg); i < BIG; i++)
            if (big[i] != (uint8_t)(i % 251))
                fail_msg("big reply: byte %zu is %u", i, big[i]);

        /* A late reply: dropped and counted by the next request in the
         * slot, which gets its own. */
        rk_cluster_stats before, now;
        rk_request_options shortwait = o;
        msg rep;
        shortwait.timeout_ns = SEC / 20;
        id_of(id, sizeof(id), r, "holdc");
        assert_int_equal(rk_cluster_stats_get(cl, &before), RK_OK);
        q.seq = 1000;
        assert_int_equal(rk_cluster_request(cl, id, &shortwait, &q, sizeof(q),
                             &h, &rep, sizeof(rep), &len),
            RK_ETIMEDOUT);
        o.type_id = T_FINAL;
        q.seq = 1001;
        assert_int_equal(rk_cluster_request(cl, id, &o, &q, sizeof(q), &h,
                             &rep, sizeof(rep), &len),
            RK_OK);
        o.type_id = T_REQ;
        assert_int_equal(rep.seq, 1001);
        assert_int_equal(rk_cluster_stats_get(cl, &now), RK_OK);
        assert_int_equal(now.late_replies, before.late_replies + 1);
    }
    /* Everyone asked everyone: wait for the others before counting. */
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "echoc", &ks), RK_OK);
    assert_int_equal(ks.processed, (uint64_t)K_CALL * (uint64_t)(n - 1));
    assert_int_equal(ks.offered, ks.processed);
    printf("cluster_ranks call: rank %d: %llu of %llu requests run as "
           "direct calls\n",
        rank, (unsigned long long)ks.direct_calls,
        (unsigned long long)ks.processed);
    assert_true(ks.direct_calls > 0);
    (void)cs;
    rk_runtime_destroy(rt);
}

/* ----------------------------------------------------------- badjoin */

static void
test_badjoin(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export ex[] = { { .id = "echo" }, { .id = "missing" } };
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    int rank = r != NULL ? atoi(r) : 0;
    rk_cluster_config cc = { .exports = ex, .n_exports = rank == 1 ? 2 : 1 };
    rk_cluster *cl = NULL;

    handler(rt, "echo", echo_h, any, true);
    int rc = rk_cluster_mpi(rt, NULL, &cc, &cl);
    assert_null(cl);
    if (rank == 1) {
        assert_int_equal(rc, RK_ENOTFOUND);
        assert_non_null(strstr(rk_errdetail(), "missing"));
    } else {
        assert_int_equal(rc, RK_EINTERNAL);
        assert_non_null(strstr(rk_errdetail(), "another rank"));
    }
    /* The runtime is untouched: no cluster kernel was left behind. */
    rk_kernel_state st;
    assert_int_equal(rk_kernel_state_get(rt, "rk.cluster", &st), RK_ENOTFOUND);
    rk_runtime_destroy(rt);
    /* The join started MPI and left it running: end it, as a program that
     * gives up would. */
    MPI_Finalize();
}

/* -------------------------------------------------------------- kill */

static void
test_kill(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 256 };
    rk_cluster_export ex = { .id = "echo", .input_capacity = 256 };
    rk_cluster_config cc = { .exports = &ex,
        .n_exports = 1,
        .heartbeat_ns = SEC,
        .leave_timeout_ns = 10 * SEC };
    rk_cluster *cl;
    char id[64];

    handler(rt, "echo", echo_h, any, true);
    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    int rank = rk_cluster_rank(cl), n = rk_cluster_size(cl);
    assert_int_equal(rank, my_rank);
    int victim = n - 1;
    assert_true(n >= 3);
    if (rank == victim) {
        /* Serve until a request with seq 40 kills this process. If the
         * others stop first (they failed), do not outlive them: end when
         * they are all unreachable, and fail. */
        int64_t until = (int64_t)rk_now_ns() + 120 * SEC;
        for (;;) {
            struct timespec ts = { 0, 50 * 1000000 };
            int live = 0;
            for (int r = 0; r < victim; r++)
                live += rk_cluster_peer_status(cl, r) == RK_OK;
            if (live == 0 || (int64_t)rk_now_ns() > until)
                break;
            nanosleep(&ts, NULL);
        }
        fail_msg("rank %d was never killed", rank);
    }
    id_of(id, sizeof(id), victim, "echo");
    char died[64];
    snprintf(died, sizeof(died), "rank %d died", victim);
    int64_t failed_at = -1;
    for (int64_t i = 0; i < 100000 && failed_at < 0; i++) {
        msg q = { rank, -1, i }, r;
        rk_msg_header h;
        rk_kernel k;
        size_t len;

        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        int rc;
        if (rank == 1) {
            /* Rank 1 asks directly (rk_cluster_request): its waiting
             * request fails when the rank dies, as a proxy's does. */
            rk_request_options o = RK_REQUEST_OPTIONS_INIT;
            o.type_id = T_REQ;
            o.timeout_ns = 30 * SEC;
            rc = rk_cluster_request(
                cl, id, &o, &q, sizeof(q), &h, &r, sizeof(r), &len);
        } else {
            rc = rk_request(rt, k, T_REQ, &q, sizeof(q), &h, &r, sizeof(r),
                &len, 30 * SEC);
        }
        if (rc == RK_OK) {
            assert_int_equal(r.seq, i);
            continue;
        }
        /* Never a timeout: the rank's error, naming it. */
        assert_int_equal(rc, RK_EUNREACHABLE);
        if (strstr(rk_errdetail(), died) == NULL)
            fail_msg("detail: %s", rk_errdetail());
        failed_at = i;
        if (rank == 0) {
            /* Request 40 of rank 0 killed it: that request was pending
             * and fails with the error reply of its proxy. */
            assert_int_equal(i, 40);
            assert_int_equal(h.type_id, RK_CLUSTER_TYPE_ERROR);
            assert_non_null(strstr(rk_errdetail(), "kernel '"));
        }
    }
    assert_true(failed_at >= 0);
    assert_int_equal(rk_cluster_peer_status(cl, victim), RK_EUNREACHABLE);
    assert_int_equal(rk_cluster_peer_status(cl, (rank + 1) % (n - 1)), RK_OK);
    /* Later sends and requests are refused at once by the proxy's
     * admission, with the same error, and counted. */
    {
        msg q = { rank, -1, -1 }, r;
        rk_msg_header h;
        size_t len;
        rk_kernel k;
        rk_kernel_stats ks;
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        assert_int_equal(rk_request(rt, k, T_REQ, &q, sizeof(q), &h, &r,
                             sizeof(r), &len, 30 * SEC),
            RK_EUNREACHABLE);
        assert_non_null(strstr(rk_errdetail(), "request refused by kernel"));
        assert_non_null(strstr(rk_errdetail(), died));
        assert_int_equal(rk_send(rt, k, T_REQ, &q, sizeof(q), 128, 30 * SEC),
            RK_EUNREACHABLE);
        {
            rk_request_options o = RK_REQUEST_OPTIONS_INIT;
            o.timeout_ns = 30 * SEC;
            assert_int_equal(rk_cluster_request(cl, id, &o, &q, sizeof(q), &h,
                                 &r, sizeof(r), &len),
                RK_EUNREACHABLE);
            assert_non_null(strstr(rk_errdetail(), died));
        }
        assert_int_equal(rk_kernel_stats_get(rt, id, &ks), RK_OK);
        assert_true(ks.rejected >= 2);
    }
    uint64_t t0 = rk_now_ns();
    /* Not clean (a peer died), but it ends within its timeout. */
    assert_int_equal(rk_cluster_leave(cl), RK_EUNREACHABLE);
    assert_true(rk_now_ns() - t0 < (uint64_t)(cc.leave_timeout_ns + 5 * SEC));
    rk_runtime_destroy(rt);
    printf("cluster_ranks kill: rank %d survived\n", rank);
    fflush(stdout);
    /* MPI cannot be finalised with a dead peer: leave without it. */
    _exit(0);
}

int
main(int argc, char **argv)
{
    const struct CMUnitTest basic[] = { cmocka_unit_test(test_basic) };
    const struct CMUnitTest stress[] = { cmocka_unit_test(test_stress) };
    const struct CMUnitTest policy[] = { cmocka_unit_test(test_policy) };
    const struct CMUnitTest kill[] = { cmocka_unit_test(test_kill) };
    const struct CMUnitTest badjoin[] = { cmocka_unit_test(test_badjoin) };
    const struct CMUnitTest exportall[] = { cmocka_unit_test(test_exportall) };
    const struct CMUnitTest direct[] = { cmocka_unit_test(test_direct) };
    const struct CMUnitTest late[] = { cmocka_unit_test(test_late) };
    const struct CMUnitTest call[] = { cmocka_unit_test(test_call) };

    mode = argc > 1 ? argv[1] : "basic";
    if (strcmp(mode, "basic") == 0)
        return cmocka_run_group_tests(basic, NULL, NULL);
    if (strcmp(mode, "stress") == 0 || strcmp(mode, "streamd") == 0)
        return cmocka_run_group_tests(stress, NULL, NULL);
    if (strcmp(mode, "policy") == 0)
        return cmocka_run_group_tests(policy, NULL, NULL);
    if (strcmp(mode, "kill") == 0)
        return cmocka_run_group_tests(kill, NULL, NULL);
    if (strcmp(mode, "badjoin") == 0)
        return cmocka_run_group_tests(badjoin, NULL, NULL);
    if (strcmp(mode, "exportall") == 0)
        return cmocka_run_group_tests(exportall, NULL, NULL);
    if (strcmp(mode, "direct") == 0)
        return cmocka_run_group_tests(direct, NULL, NULL);
    if (strcmp(mode, "late") == 0)
        return cmocka_run_group_tests(late, NULL, NULL);
    if (strcmp(mode, "call") == 0)
        return cmocka_run_group_tests(call, NULL, NULL);
    fprintf(stderr,
        "usage: cluster_ranks "
        "basic|stress|streamd|policy|badjoin|kill|exportall|direct|late|"
        "call\n");
    return 2;
}
