/*
 * tests/mpi/cluster_ranks_request.c - part of the cluster_ranks test
 * program (cluster_ranks.c has main and the modes): rk_cluster_request,
 * the requesting thread's own path to a remote kernel.
 *
 *   direct  two threads at once, a refusal, a reply too big, a timeout,
 *           a local id, bad arguments
 *   call    direct calls at the owning rank, a stream then a request
 *           (order), a big reply, a late reply
 */
#include "cluster_ranks.h"

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

void
test_direct(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster *cl;
    rk_cluster_stats st0, st1;
    char id[64];
    int rank, n;

    my_rank = launcher_rank();
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

/* -------------------------------------------------------------- call */

/* Copies m's payload into *v: RK_EINVAL unless it is one msg whose rank
 * is below MAXR. */
static int
rank_msg(const rk_msg_view *m, msg *v)
{
    if (m->len != sizeof(*v))
        return RK_EINVAL;
    memcpy(v, m->data, sizeof(*v));
    return v->rank < 0 || v->rank >= MAXR ? RK_EINVAL : RK_OK;
}

/* tally: counts one-way messages per sender rank; a T_REQ (the fence)
 * is answered with the count of its sender's messages so far. */
static _Atomic uint64_t tally[MAXR];

static int
tally_h(rk_ctx *ctx, const rk_msg_view *m)
{
    msg v;
    uint64_t n;

    if (rank_msg(m, &v) != RK_OK)
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

    if (rank_msg(m, &v) != RK_OK)
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
void
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

    my_rank = launcher_rank();
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
