/*
 * tests/mpi/cluster_ranks_flow.c - part of the cluster_ranks test program
 * (cluster_ranks.c has main and the modes): messages flowing between
 * ranks.
 *
 *   basic    send, request/reply, a K2K route and a topic across ranks
 *   stress   conservation and per-producer order under a small credit
 *            window, through the proxies
 *   streamd  the same with rk_cluster_send_batch (no proxy thread)
 */
#include "cluster_ranks.h"

/* ------------------------------------------------------------- basic */

#define K_SEND 200
#define K_NEWS 50
#define K_REQ  100

void
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
    my_rank = launcher_rank();
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

        assert_int_equal(recv_msg(cl, "sink", &h, &v, 30 * SEC), sizeof(v));
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
        recv_msg(cl, "sink", &h, &v, 30 * SEC);
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

void
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
        recv_msg(cl, "count", NULL, &v, 120 * SEC);
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
