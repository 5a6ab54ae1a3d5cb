/*
 * tests/mpi/cluster_handle.c - the runtime's own calls on a remote
 * kernel's handle take the direct path (docs/cluster.md, "Proxies"), run
 * by ctest under mpirun on 2 and 3 ranks: `cluster_handle` on every rank.
 *
 *   - rk_request on "R/echo" is a direct call on the proxy (its
 *     direct_calls counts it): the request goes out on the calling
 *     thread, no proxy thread forwards it, and the reply is the owner's;
 *   - rk_kernel_call_reply on the handle hands the remote reply back;
 *   - order: a request on a handle after one-way rk_sends on it never
 *     overtakes them (the owning kernel answers with how many it got from
 *     this rank, and that is all of them), round after round;
 *   - a remote refusal comes back through the direct path as the
 *     request's code (RK_EREJECTED).
 *
 * Every rank runs the same cmocka test; a failed assertion fails that
 * rank, and mpirun's exit status fails the ctest entry.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <mpi.h>

#include "ringkernel/ringkernel.h"

#define SEC    1000000000LL
#define MAXR   8
#define K_SEND 300
#define ROUNDS 5

enum { T_ECHO = 1, T_SEND, T_COUNT };

static int my_rank;

typedef struct q {
    int32_t rank; /* the asker */
    int32_t owner;
    int64_t seq;
} q;

static int
echo_h(rk_ctx *ctx, const rk_msg_view *m)
{
    q r;

    if (m->len != sizeof(r))
        return RK_EINVAL;
    memcpy(&r, m->data, sizeof(r));
    r.owner = my_rank;
    return rk_ctx_reply(ctx, m, T_ECHO, &r, sizeof(r));
}

/* tally: counts T_SEND per sending rank; T_COUNT answers with the count
 * of the asker's rank. */
static _Atomic int64_t tally_n[MAXR];

static int
tally_h(rk_ctx *ctx, const rk_msg_view *m)
{
    q v;

    if (m->len != sizeof(v))
        return RK_EINVAL;
    memcpy(&v, m->data, sizeof(v));
    if (v.rank < 0 || v.rank >= MAXR)
        return RK_EINVAL;
    if (m->hdr->type_id == T_SEND) {
        atomic_fetch_add(&tally_n[v.rank], 1);
        return RK_OK;
    }
    v.seq = atomic_load(&tally_n[v.rank]);
    v.owner = my_rank;
    return rk_ctx_reply(ctx, m, T_COUNT, &v, sizeof(v));
}

static void
start(rk_runtime *rt, const char *id, rk_handler_fn h, rk_backpressure bp)
{
    rk_kernel_def d = { .id = id, .handler = h };

    d.config.input_capacity = 1024;
    d.config.backpressure = bp;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

static uint64_t
direct_calls(rk_runtime *rt, const char *id)
{
    rk_kernel_stats s;

    assert_int_equal(rk_kernel_stats_get(rt, id, &s), RK_OK);
    return s.direct_calls;
}

static void
ask(rk_runtime *rt, rk_kernel k, int owner, int64_t seq)
{
    q a = { my_rank, -1, seq }, r;
    rk_msg_header h;
    size_t len = 0;

    assert_int_equal(rk_request(rt, k, T_ECHO, &a, sizeof(a), &h, &r,
                         sizeof(r), &len, 10 * SEC),
        RK_OK);
    assert_int_equal(len, sizeof(r));
    assert_int_equal(h.type_id, T_ECHO);
    assert_int_equal(r.seq, seq);
    assert_int_equal(r.owner, owner);
}

static void
test_handle(void **state)
{
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true };
    rk_cluster_export ex[] = { { .id = "echo" },
        { .id = "tally", .input_capacity = 1024 }, { .id = "closed" } };
    rk_cluster_config cc
        = { .exports = ex, .n_exports = 3, .leave_timeout_ns = 60 * SEC };
    rk_cluster *cl;
    int n;

    (void)state;
    {
        /* Before the join: the kernels answer from then on. */
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    start(rt, "echo", echo_h, RK_BP_BLOCK);
    start(rt, "tally", tally_h, RK_BP_BLOCK);
    start(rt, "closed", echo_h, RK_BP_REJECT);
    assert_int_equal(
        rk_kernel_refuse(rt, "closed", RK_EREJECTED, "closed for the test"),
        RK_OK);
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &cl), RK_OK);
    assert_int_equal(rk_cluster_rank(cl), my_rank);
    n = rk_cluster_size(cl);
    assert_true(n <= MAXR);
    for (int r = 0; r < n; r++) {
        char id[64];
        rk_kernel k;
        int64_t seq = 0;
        uint64_t until = rk_now_ns() + 20 * (uint64_t)SEC;

        if (r == my_rank)
            continue;
        /* rk_request on the proxy's handle: a direct call (the proxy's
         * thread may still hold its context at first). */
        snprintf(id, sizeof(id), "%d/echo", r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        do {
            ask(rt, k, r, seq++);
            if (direct_calls(rt, id) != 0)
                break;
            sched_yield();
        } while (rk_now_ns() < until);
        assert_int_not_equal(direct_calls(rt, id), 0);
        for (int i = 0; i < 50; i++)
            ask(rt, k, r, seq++);

        /* rk_kernel_call_reply on the handle: the remote reply. */
        {
            q a = { my_rank, -1, 4242 }, got;
            rk_msg_header h;
            rk_call_reply cr = { .buf = &got, .cap = sizeof(got) };
            int rc2;

            memset(&h, 0, sizeof(h));
            h.type_id = T_ECHO;
            h.priority = 128;
            h.flags = RK_MSG_F_REQUEST;
            h.message_id = rk_uuid_v7();
            while ((rc2 = rk_kernel_call_reply(rt, k, &h, &a, sizeof(a), &cr))
                    == RK_EBUSY
                && rk_now_ns() < until + 20 * (uint64_t)SEC)
                sched_yield();
            assert_int_equal(rc2, RK_OK);
            assert_true(cr.got);
            assert_int_equal(cr.len, sizeof(got));
            assert_int_equal(got.seq, 4242);
            assert_int_equal(got.owner, r);
        }

        /* Order: sends, then a request on the same handle. */
        snprintf(id, sizeof(id), "%d/tally", r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        for (int round = 1; round <= ROUNDS; round++) {
            q a = { my_rank, -1, 0 }, got;
            rk_msg_header h;
            size_t len = 0;

            for (int i = 0; i < K_SEND; i++)
                assert_int_equal(
                    rk_send(rt, k, T_SEND, &a, sizeof(a), 128, 10 * SEC),
                    RK_OK);
            assert_int_equal(rk_request(rt, k, T_COUNT, &a, sizeof(a), &h,
                                 &got, sizeof(got), &len, 30 * SEC),
                RK_OK);
            assert_int_equal(got.owner, r);
            assert_int_equal(got.seq, (int64_t)round * K_SEND);
        }

        /* A remote refusal, as the request's code. */
        snprintf(id, sizeof(id), "%d/closed", r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        {
            q a = { my_rank, -1, 1 }, got;
            rk_msg_header h;
            size_t len = 0;

            assert_int_equal(rk_request(rt, k, T_ECHO, &a, sizeof(a), &h, &got,
                                 sizeof(got), &len, 10 * SEC),
                RK_EREJECTED);
        }
    }
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_handle) };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
