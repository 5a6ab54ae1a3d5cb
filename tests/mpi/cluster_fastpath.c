/*
 * tests/mpi/cluster_fastpath.c - rk_cluster_request's waiting slots
 * under concurrency (docs/cluster.md, "Direct requests"), run by ctest
 * under mpirun on 2 and 3 ranks: `cluster_fastpath` on every rank.
 *
 * A request by the caller's own MPI calls is answered in one of two
 * ways: the caller receives a small answer itself and claims its slot
 * without a lock, or the owning rank stages the answer (a reply bigger
 * than the caller's MPI receive, a refusal) and the caller's progress
 * thread claims the slot and writes it. Both may race for a slot (a
 * refusal and the caller's own polling), and a slot is reused at once by
 * the next request. NTHR threads on every rank ask every other rank's
 * kernels at once, each request of a size and kind chosen by its
 * sequence number:
 *
 *   - "echo" (direct_calls, run by the owning rank's progress thread)
 *     and "echot" (on its own thread) answer with a reply of the size
 *     the request asks for (64 bytes, 3000: back by MPI; 6000: staged
 *     back through the progress threads), every byte derived from the
 *     asker, the thread and the sequence number;
 *   - "closed" refuses every message: the request returns RK_EREJECTED.
 *
 * Every reply is checked byte for byte, its length and type; an answer
 * written into the wrong slot, or half written, or a slot freed while an
 * answer is written, fails a check (or ASan/TSan in their builds).
 * Afterwards no answer is late (late_replies: each came to the request
 * that waited for it).
 *
 * Every rank runs the same cmocka test; a failed assertion fails that
 * rank, and mpirun's exit status fails the ctest entry.
 */
#include <pthread.h>
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

#define SEC   1000000000LL
#define NTHR  8
#define NREQ  500
#define BIG   6000 /* more than the 4 KiB an MPI answer may have */
#define T_ASK 1

static int my_rank, n_ranks;
static rk_cluster *the_cl;

typedef struct ask {
    int32_t rank, thread;
    int64_t seq;
    uint32_t reply_len;
} ask;

/* The byte at i of the reply to a. */
static uint8_t
pattern(const ask *a, size_t i)
{
    return (uint8_t)(a->rank * 131 + a->thread * 31 + a->seq * 7 + (int64_t)i);
}

static int
answer_h(rk_ctx *ctx, const rk_msg_view *m)
{
    static _Thread_local uint8_t out[BIG];
    ask a;

    if (m->len != sizeof(a))
        return RK_EINVAL;
    memcpy(&a, m->data, sizeof(a));
    if (a.reply_len > sizeof(out) || a.reply_len < sizeof(a))
        return RK_EINVAL;
    memcpy(out, &a, sizeof(a));
    for (size_t i = sizeof(a); i < a.reply_len; i++)
        out[i] = pattern(&a, i);
    return rk_ctx_reply(ctx, m, T_ASK, out, a.reply_len);
}

static void
start(rk_runtime *rt, const char *id, bool direct, rk_backpressure bp)
{
    rk_kernel_def d = { .id = id, .handler = answer_h };

    d.config.input_capacity = 1024;
    d.config.max_payload = BIG;
    d.config.direct_calls = direct;
    d.config.backpressure = bp;
    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
    if (bp == RK_BP_REJECT) /* "closed": refuses every message */
        assert_int_equal(
            rk_kernel_refuse(rt, id, RK_EREJECTED, "closed"), RK_OK);
}

typedef struct worker {
    int thread;
    int failures;
    char why[160];
} worker;

static void
note_failure(worker *w, const char *what, int64_t seq, long got, long want)
{
    if (w->failures++ == 0)
        snprintf(w->why, sizeof(w->why),
            "rank %d thread %d request %lld: %s: %ld, want %ld (%s)", my_rank,
            w->thread, (long long)seq, what, got, want, rk_errdetail());
}

static void *
worker_main(void *arg)
{
    static const uint32_t sizes[] = { 64, 3000, BIG };
    static _Thread_local uint8_t buf[BIG];
    worker *w = arg;
    rk_request_options o = RK_REQUEST_OPTIONS_INIT;

    o.type_id = T_ASK;
    o.timeout_ns = 30 * SEC;
    for (int64_t seq = 0; seq < NREQ; seq++) {
        int r = (int)(seq + w->thread) % n_ranks;
        const char *kind = seq % 5 == 4 ? "closed"
            : seq % 2 == 0              ? "echo"
                                        : "echot";
        ask a = { my_rank, w->thread, seq, sizes[(seq / 2) % 3] };
        rk_msg_header h;
        size_t len = 0;
        char id[64];
        int rc;

        if (r == my_rank)
            r = (r + 1) % n_ranks;
        snprintf(id, sizeof(id), "%d/%s", r, kind);
        memset(buf, 0xee, sizeof(buf));
        rc = rk_cluster_request(
            the_cl, id, &o, &a, sizeof(a), &h, buf, sizeof(buf), &len);
        if (kind[0] == 'c') {
            if (rc != RK_EREJECTED)
                note_failure(w, "refusal", seq, rc, RK_EREJECTED);
            continue;
        }
        if (rc != RK_OK) {
            note_failure(w, "rc", seq, rc, RK_OK);
            continue;
        }
        if (len != a.reply_len || h.type_id != T_ASK) {
            note_failure(w, "reply length", seq, (long)len, (long)a.reply_len);
            continue;
        }
        if (memcmp(buf, &a, sizeof(a)) != 0) {
            note_failure(w, "reply is another request's", seq, 0, 1);
            continue;
        }
        for (size_t i = sizeof(a); i < len; i++)
            if (buf[i] != pattern(&a, i)) {
                note_failure(w, "reply byte", seq, (long)i, -1);
                break;
            }
    }
    return NULL;
}

static void
test_slots(void **state)
{
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true };
    rk_cluster_export ex[]
        = { { .id = "echo" }, { .id = "echot" }, { .id = "closed" } };
    /* A peer is declared dead after 60 s of silence, not 3: 8 threads
     * per rank polling MPI under TSan on 2 cores can starve a progress
     * thread that long, and this test is about the slots. */
    rk_cluster_config cc = { .exports = ex,
        .n_exports = 3,
        .leave_timeout_ns = 60 * SEC,
        .heartbeat_ns = 60 * SEC };
    rk_cluster_stats st;
    pthread_t th[NTHR];
    static worker w[NTHR];

    (void)state;
    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    for (size_t i = 0; i < cc.n_exports; i++)
        start(rt, ex[i].id, i == 0, i == 2 ? RK_BP_REJECT : RK_BP_BLOCK);
    assert_int_equal(rk_cluster_mpi(rt, NULL, &cc, &the_cl), RK_OK);
    my_rank = rk_cluster_rank(the_cl);
    n_ranks = rk_cluster_size(the_cl);
    assert_true(n_ranks >= 2);
    for (int i = 0; i < NTHR; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].thread = i;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NTHR; i++) {
        pthread_join(th[i], NULL);
        if (w[i].failures != 0)
            fprintf(stderr, "cluster_fastpath: %d failures, first: %s\n",
                w[i].failures, w[i].why);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(rk_cluster_stats_get(the_cl, &st), RK_OK);
    assert_int_equal(st.late_replies, 0);
    assert_int_equal(rk_cluster_leave(the_cl), RK_OK);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
