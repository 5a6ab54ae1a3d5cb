/*
 * tests/mpi/cluster_ranks_names.c - part of the cluster_ranks test
 * program (cluster_ranks.c has main and the modes): which kernels a rank
 * exports and how the others name them.
 *
 *   exportall  export_all at join, and what it leaves out
 *   late       a kernel exported after the join with rk_cluster_announce
 */
#include "cluster_ranks.h"

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

void
test_exportall(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export none[1] = { { .id = "echo" } };
    rk_cluster *cl;
    char only[32], id[96];
    int rank, n;

    my_rank = launcher_rank();
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

void
test_late(void **state)
{
    (void)state;
    rk_runtime *rt = runtime();
    rk_kernel_config any = { .input_capacity = 64 };
    rk_cluster_export ex = { .id = "echo" };
    rk_cluster *cl;
    char late[32], id[64];
    int rank, n;

    my_rank = launcher_rank();
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
