/*
 * tests/mpi/cluster_idle.c - an idle progress thread parks, and still
 * hears the first message after the silence (docs/cluster.md "Batching,
 * idle, threads"), run by ctest under mpirun on 2 and 3 ranks:
 * `cluster_idle` on every rank.
 *
 *   - over IDLE_S seconds of silence a rank's progress thread wakes (its
 *     idle_sleeps counter) at most as often as naps doubling from 2 us up
 *     to idle_park_ns allow, with slack: polling every millisecond, as
 *     it did before it could park, would be thousands;
 *   - after the silence rank 0 asks each peer, by the direct path and
 *     through a proxy after one-way sends, with a timeout of ASK_NS: the
 *     peers' (and rank 0's own) progress threads are then in the middle
 *     of a nap of about 2 s (naps double: the one under way at 3 s runs
 *     from about 2.1 s to 4.2 s), so only a wake-up, a poke from the
 *     peer or the local producer's, gets the answers back in time.
 *
 *   - an idle proxy (a remote kernel's stand-in here) looks at its
 *     peer's state 100 ms after its queue ran dry and then ever less
 *     often (proxy_wakeups), not every 100 ms;
 *   - test_idle_beats: with heartbeats every 200 ms, a bare heartbeat
 *     neither pokes the peer nor sets either progress thread polling:
 *     the wake-ups stay within the same nap bound (each heartbeat used
 *     to restart the naps from 2 us after a millisecond of polling).
 *
 * Every rank runs the same cmocka tests; a failed assertion fails that
 * rank, and mpirun's exit status fails the ctest entry. The test
 * initialises MPI itself, so that each test joins and leaves a cluster
 * of its own.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <mpi.h>

#include "ringkernel/ringkernel.h"

#define SEC     1000000000LL
#define MAXR    8
#define IDLE_S  3
#define PARK_NS (10 * SEC)
#define ASK_NS  (SEC / 2)
#define K_SEND  10

enum { T_ECHO = 1, T_SEND, T_COUNT };

static int my_rank;
static _Atomic int64_t tally_n[MAXR];

static int
echo_h(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_reply(ctx, m, T_ECHO, m->data, m->len);
}

/* T_SEND: counts per sending rank (payload: the rank); T_COUNT answers
 * with the asker's count. */
static int
tally_h(rk_ctx *ctx, const rk_msg_view *m)
{
    int32_t r;
    int64_t n;

    if (m->len != sizeof(r))
        return RK_EINVAL;
    memcpy(&r, m->data, sizeof(r));
    if (r < 0 || r >= MAXR)
        return RK_EINVAL;
    if (m->hdr->type_id == T_SEND) {
        atomic_fetch_add(&tally_n[r], 1);
        return RK_OK;
    }
    n = atomic_load(&tally_n[r]);
    return rk_ctx_reply(ctx, m, T_COUNT, &n, sizeof(n));
}

static void
start(rk_runtime *rt, const char *id, rk_handler_fn h, bool direct)
{
    rk_kernel_def d = { .id = id, .handler = h };

    d.config.input_capacity = 256;
    d.config.direct_calls = direct;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

/* Asks every peer: an echo on its direct-call kernel (this thread sends
 * by MPI), then K_SEND one-way sends and a count on its tally (staged:
 * both progress threads carry them), each answer within timeout. */
static void
ask_all(rk_runtime *rt, int n, int round, int64_t timeout)
{
    for (int r = 0; r < n; r++) {
        char id[64];
        rk_kernel k;
        rk_msg_header h;
        int32_t me = my_rank, got = -1;
        int64_t count = -1;
        size_t len = 0;

        if (r == my_rank)
            continue;
        snprintf(id, sizeof(id), "%d/echo", r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        assert_int_equal(rk_request(rt, k, T_ECHO, &me, sizeof(me), &h, &got,
                             sizeof(got), &len, timeout),
            RK_OK);
        assert_int_equal(got, my_rank);
        snprintf(id, sizeof(id), "%d/tally", r);
        assert_int_equal(rk_kernel_lookup(rt, id, &k), RK_OK);
        for (int i = 0; i < K_SEND; i++)
            assert_int_equal(
                rk_send(rt, k, T_SEND, &me, sizeof(me), 128, timeout), RK_OK);
        assert_int_equal(rk_request(rt, k, T_COUNT, &me, sizeof(me), &h,
                             &count, sizeof(count), &len, timeout),
            RK_OK);
        assert_int_equal(count, (int64_t)round * K_SEND);
    }
}

/* Silence: the progress thread's wake-ups (naps double from 2 us up to
 * park: reaching it takes log2(park / 2 us) + 1 naps, and IDLE_S / park
 * more at most follow; twice that allows for the ramp after the last
 * traffic and a stray wake-up; a thread that napped 1 ms at most would
 * wake IDLE_S * 1000 times) and the idle proxies' (100 ms, 200 ms, ...:
 * log2(IDLE_S / 100 ms) + 1 each, with the same slack; every 100 ms
 * would be IDLE_S * 10). */
static void
silence(rk_cluster *cl, int n, int64_t park)
{
    rk_cluster_stats s0, s1;
    struct timespec idle = { IDLE_S, 0 };
    uint64_t naps, bound, woke, wbound;

    assert_int_equal(rk_cluster_stats_get(cl, &s0), RK_OK);
    nanosleep(&idle, NULL); /* the silence measured, not a wait for others */
    assert_int_equal(rk_cluster_stats_get(cl, &s1), RK_OK);
    naps = s1.idle_sleeps - s0.idle_sleeps;
    bound = 2 * ((uint64_t)ceil(log2((double)park / 2000.0)) + 1
                    + (uint64_t)(IDLE_S * SEC / park));
    woke = s1.proxy_wakeups - s0.proxy_wakeups;
    /* A proxy for each of every peer's two exports. */
    wbound = 2 * (uint64_t)(n - 1) * 2
        * ((uint64_t)ceil(log2(IDLE_S * 10.0)) + 1);
    if (naps > bound || woke > wbound)
        fprintf(stderr,
            "rank %d: %llu wake-ups (bound %llu), proxies %llu (bound %llu) "
            "in %d s of silence\n",
            my_rank, (unsigned long long)naps, (unsigned long long)bound,
            (unsigned long long)woke, (unsigned long long)wbound, IDLE_S);
    assert_true(naps <= bound);
    assert_true(woke <= wbound);
}

/* Joins rt to a cluster exporting echo and tally, asks every peer once. */
static rk_cluster *
join_warm(rk_runtime **rt, int64_t heartbeat_ns, int64_t park_ns, int *n)
{
    rk_runtime_config rc = { .no_static_kernels = true };
    static rk_cluster_export ex[] = { { .id = "echo" }, { .id = "tally" } };
    rk_cluster_config cc = { .exports = ex,
        .n_exports = 2,
        .leave_timeout_ns = 60 * SEC,
        .heartbeat_ns = heartbeat_ns,
        .idle_park_ns = park_ns };
    rk_cluster *cl;

    for (int r = 0; r < MAXR; r++)
        atomic_store(&tally_n[r], 0);
    assert_int_equal(rk_runtime_create(rt, &rc), RK_OK);
    start(*rt, "echo", echo_h, true);
    start(*rt, "tally", tally_h, false);
    assert_int_equal(rk_cluster_mpi(*rt, NULL, &cc, &cl), RK_OK);
    *n = rk_cluster_size(cl);
    assert_true(*n <= MAXR);
    ask_all(*rt, *n, 1, 30 * SEC);
    MPI_Barrier(MPI_COMM_WORLD);
    return cl;
}

static void
test_idle(void **state)
{
    rk_runtime *rt;
    rk_cluster *cl;
    int n;

    (void)state;
    /* No heartbeat within the test (every 30 s): the only traffic is the
     * test's. */
    cl = join_warm(&rt, 120 * SEC, PARK_NS, &n);
    silence(cl, n, PARK_NS);

    /* The first messages after it: rank 0 asks, the others stay idle. */
    if (my_rank == 0)
        ask_all(rt, n, 2, ASK_NS);
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

/* Heartbeats every BEAT_NS / 4: naps park at BEAT_NS / 8 (the cap the
 * join sets), and the beats themselves add no wake-up. */
#define BEAT_NS (800 * INT64_C(1000000))

static void
test_idle_beats(void **state)
{
    rk_runtime *rt;
    rk_cluster *cl;
    int n;

    (void)state;
    cl = join_warm(&rt, BEAT_NS, BEAT_NS / 8, &n);
    silence(cl, n, BEAT_NS / 8);
    if (my_rank == 0)
        ask_all(rt, n, 2, 30 * SEC);
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(rk_cluster_leave(cl), RK_OK);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_idle),
        cmocka_unit_test(test_idle_beats) };
    int level = 0, rc;

    {
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        my_rank = r != NULL ? atoi(r) : 0;
    }
    /* Ours: each test's cluster joins and leaves without finalising. */
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
