/*
 * tests/mpi/cluster_ranks_policy.c - part of the cluster_ranks test
 * program (cluster_ranks.c has main and the modes): backpressure across
 * ranks, and joins and ranks that fail.
 *
 *   policy   BLOCK, REJECT, DROP_NEW and DROP_OLDEST across ranks
 *   badjoin  a join that fails on every rank, with nobody left waiting
 *   kill     a rank dies mid-run; the survivors cope and leave
 */
#include "cluster_ranks.h"

/* ------------------------------------------------------------ policy */

#define K_BLOCK  2000
#define K_BURST  40
#define CAP_FULL 8

void
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
        rk_msg_header h;
        recv_msg(cl, "ctl", &h, &fin, 120 * SEC);
        assert_int_equal(h.type_id, T_FINAL);
        /* blk's done came before the final through the same link; once
         * blk puts it out, blk has processed everything before it. */
        {
            msg d;
            recv_msg(cl, "blk", &h, &d, 120 * SEC);
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

/* ----------------------------------------------------------- badjoin */

void
test_badjoin(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export ex[] = { { .id = "echo" }, { .id = "missing" } };
    int rank = launcher_rank();
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

void
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
    my_rank = launcher_rank();
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
