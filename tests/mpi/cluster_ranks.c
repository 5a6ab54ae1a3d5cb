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
 *
 * The program is one binary built from several files, one theme each:
 *   cluster_ranks.c          the shared kernels and helpers, and main
 *   cluster_ranks_flow.c     basic, stress, streamd
 *   cluster_ranks_policy.c   policy, badjoin, kill
 *   cluster_ranks_names.c    exportall, late
 *   cluster_ranks_request.c  direct, call
 * cluster_ranks.h declares what they share.
 */
#include "cluster_ranks.h"

/* The mode this run was started with (argv[1]). */
const char *mode;

/* ---------------------------------------------------------- kernels */

/* echo: replies with the request's payload and this rank in .producer. */
int my_rank;

int
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
int
sink_h(rk_ctx *ctx, const rk_msg_view *m)
{
    rk_ctx_set_priority(ctx, m->hdr->priority);
    return rk_ctx_send(ctx, m->hdr->type_id, m->data, m->len);
}

/* fwd: the upstream of a route; forwards its input as T_ROUTE. */
int
fwd_h(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_send(ctx, T_ROUTE, m->data, m->len);
}

/* count: checks per-(rank, producer) order; T_DONE goes out. */
int
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

rk_runtime *
runtime(void)
{
    rk_runtime *rt;
    rk_runtime_config rc = { .no_static_kernels = true };

    assert_int_equal(rk_runtime_create(&rt, &rc), RK_OK);
    return rt;
}

void
handler(rk_runtime *rt, const char *id, rk_handler_fn h, rk_kernel_config c,
    bool activate)
{
    rk_kernel_def d = { .id = id, .handler = h, .config = c };

    assert_int_equal(rk_runtime_register(rt, &d), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, id), RK_OK);
    if (activate)
        assert_int_equal(rk_kernel_activate(rt, id), RK_OK);
}

void
id_of(char *out, size_t cap, int rank, const char *id)
{
    snprintf(out, cap, "%d/%s", rank, id);
}

/* This rank as the launcher numbers it (mpirun's OMPI_COMM_WORLD_RANK; 0
 * without one), known before the join. */
int
launcher_rank(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");

    return r != NULL ? atoi(r) : 0;
}

/* Receives one output of local kernel id into *v (rk_cluster_recv, at
 * most sizeof(msg); h may be NULL), asserting that it came within
 * timeout_ns; returns its length. */
size_t
recv_msg(rk_cluster *cl, const char *id, rk_msg_header *h, msg *v,
    int64_t timeout_ns)
{
    size_t len;

    assert_int_equal(
        rk_cluster_recv(cl, id, h, v, sizeof(*v), &len, timeout_ns), RK_OK);
    return len;
}

/* Waits (bounded) until local proxy id has handled every message offered
 * to it: its books balance with nothing pending (a proxy counts a message
 * processed once it has been forwarded). */
void
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

int
main(int argc, char **argv)
{
    /* The modes: argv[1] picks one (streamd is test_stress's other way). */
    const struct {
        const char *mode;
        struct CMUnitTest test;
    } modes[] = {
        { "basic", cmocka_unit_test(test_basic) },
        { "stress", cmocka_unit_test(test_stress) },
        { "streamd", cmocka_unit_test(test_stress) },
        { "policy", cmocka_unit_test(test_policy) },
        { "kill", cmocka_unit_test(test_kill) },
        { "badjoin", cmocka_unit_test(test_badjoin) },
        { "exportall", cmocka_unit_test(test_exportall) },
        { "direct", cmocka_unit_test(test_direct) },
        { "late", cmocka_unit_test(test_late) },
        { "call", cmocka_unit_test(test_call) },
    };

    mode = argc > 1 ? argv[1] : "basic";
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(mode, modes[i].mode) == 0) {
            const struct CMUnitTest tests[] = { modes[i].test };
            return cmocka_run_group_tests(tests, NULL, NULL);
        }
    }
    fprintf(stderr,
        "usage: cluster_ranks "
        "basic|stress|streamd|policy|badjoin|kill|exportall|direct|late|"
        "call\n");
    return 2;
}
