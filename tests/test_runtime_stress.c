/*
 * Conservation through the runtime: many producers, kernels with every
 * backpressure policy, mixed priorities, failures with restarts and a K2K
 * route. Afterwards every counter must reconcile exactly:
 *   offered == processed + dropped + rejected + dead_lettered + pending
 * and the host's own tally of send results must match the kernels'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_helpers.h"

#define NKERNELS     6
#define NPRODUCERS   3
#define PER_PRODUCER (5000 * RT_SCALE)
#define POISON_EVERY 101

static const char *const ids[NKERNELS]
    = { "sink", "reject", "oldest", "dropnew", "fragile", "forward" };

static int
sink_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK)
        ;
    return rc;
}

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    return RK_OK;
}

static int
fragile_actor(rk_ctx *ctx)
{
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint64_t v;
        memcpy(&v, m.data, sizeof(v));
        if (v % POISON_EVERY == 0)
            return RK_EINTERNAL;
    }
    return rc;
}

static int
forward_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    return rk_ctx_send(ctx, 0, m->data, m->len);
}

typedef struct tally {
    uint64_t attempts, ok, dropped, rejected, other;
} tally;

/* Files one send result the way the runtime's counters do. */
static void
tally_add(tally *t, int rc)
{
    t->attempts++;
    if (rc == RK_OK)
        t->ok++;
    else if (rc == RK_EDROPPED)
        t->dropped++;
    else if (rc == RK_EREJECTED || rc == RK_ETIMEDOUT || rc == RK_EFULL)
        t->rejected++;
    else
        t->other++;
}

typedef struct producer {
    pthread_t thread;
    rk_runtime *rt;
    rk_kernel k[NKERNELS];
    unsigned seed;
    tally t[NKERNELS];
} producer;

static void *
produce(void *arg)
{
    producer *p = arg;

    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        unsigned r = (unsigned)rand_r(&p->seed);
        int ki = (int)(r % NKERNELS);
        uint8_t prio = (uint8_t)(r >> 8);
        int64_t timeout = (r >> 16) % 4 == 0 ? RK_NO_WAIT : 200000;
        uint64_t v = i + 1;
        int rc = rk_send(p->rt, p->k[ki], 0, &v, sizeof(v), prio, timeout);
        tally_add(&p->t[ki], rc);
    }
    return NULL;
}

static void
test_conservation(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg
        = { .no_static_kernels = true, .dead_letter_capacity = 1 << 14 };
    rk_kernel_def defs[NKERNELS] = {
        { .id = ids[0], .actor = sink_actor },
        { .id = ids[1], .handler = count_handler },
        { .id = ids[2], .handler = count_handler },
        { .id = ids[3], .handler = count_handler },
        { .id = ids[4], .actor = fragile_actor },
        { .id = ids[5], .handler = forward_handler },
    };
    producer prod[NPRODUCERS];
    tally total[NKERNELS];
    rk_kernel_stats st[NKERNELS];
    uint64_t dead_total = 0, dlq_seen = 0;
    rk_dead_letter dl;

    (void)state;
    defs[0].config
        = (rk_kernel_config) { .input_capacity = 64, .priority_bands = true };
    defs[1].config = (rk_kernel_config) {
        .input_capacity = 16, .backpressure = RK_BP_REJECT, .batch = 4
    };
    defs[2].config = (rk_kernel_config) { .input_capacity = 16,
        .backpressure = RK_BP_DROP_OLDEST,
        .priority_bands = true };
    defs[3].config = (rk_kernel_config) { .input_capacity = 16,
        .backpressure = RK_BP_DROP_NEW };
    defs[4].config = (rk_kernel_config) { .input_capacity = 32,
        .supervision = { .policy = RK_SUPERVISE_RESTART,
            .max_restarts = 1000000,
            .backoff_ns = 1000,
            .backoff_max_ns = 1000 } };
    defs[5].config = (rk_kernel_config) { .input_capacity = 32, .batch = 8 };

    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    for (int i = 0; i < NKERNELS; i++) {
        assert_int_equal(rk_runtime_register(rt, &defs[i]), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, ids[i]), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, ids[i]), RK_OK);
    }
    assert_int_equal(rk_connect(rt, "forward", "sink"), RK_OK);
    memset(prod, 0, sizeof(prod));
    for (int p = 0; p < NPRODUCERS; p++) {
        prod[p].rt = rt;
        prod[p].seed = 1234u + (unsigned)p;
        for (int i = 0; i < NKERNELS; i++)
            assert_int_equal(
                rk_kernel_lookup(rt, ids[i], &prod[p].k[i]), RK_OK);
        assert_int_equal(
            pthread_create(&prod[p].thread, NULL, produce, &prod[p]), 0);
    }
    for (int p = 0; p < NPRODUCERS; p++)
        assert_int_equal(pthread_join(prod[p].thread, NULL), 0);
    /* Upstream first, so the route still has its target. */
    assert_int_equal(rk_kernel_terminate(rt, "forward", RT_LONG), RK_OK);
    for (int i = 0; i < NKERNELS - 1; i++)
        assert_int_equal(rk_kernel_terminate(rt, ids[i], RT_LONG), RK_OK);

    memset(total, 0, sizeof(total));
    for (int i = 0; i < NKERNELS; i++) {
        for (int p = 0; p < NPRODUCERS; p++) {
            total[i].attempts += prod[p].t[i].attempts;
            total[i].ok += prod[p].t[i].ok;
            total[i].dropped += prod[p].t[i].dropped;
            total[i].rejected += prod[p].t[i].rejected;
            total[i].other += prod[p].t[i].other;
        }
        assert_int_equal(rk_kernel_stats_get(rt, ids[i], &st[i]), RK_OK);
        fprintf(stderr,
            "%-8s offered %6llu processed %6llu dropped %5llu rejected "
            "%5llu dead %3llu\n",
            ids[i], (unsigned long long)st[i].offered,
            (unsigned long long)st[i].processed,
            (unsigned long long)st[i].dropped,
            (unsigned long long)st[i].rejected,
            (unsigned long long)st[i].dead_lettered);
        assert_int_equal(st[i].state, RK_KERNEL_TERMINATED);
        assert_int_equal(total[i].other, 0);
        /* The runtime's books balance... */
        assert_int_equal(st[i].offered,
            st[i].processed + st[i].dropped + st[i].rejected
                + st[i].dead_lettered + st[i].pending);
        assert_int_equal(st[i].pending, 0);
        /* ...and agree with what the senders were told. */
        assert_int_equal(st[i].rejected, total[i].rejected);
        dead_total += st[i].dead_lettered;
    }
    /* The sink also took everything "forward" passed on. */
    assert_int_equal(st[0].offered, total[0].attempts + st[5].sent);
    assert_int_equal(st[5].sent, st[5].processed);
    for (int i = 1; i < NKERNELS; i++)
        assert_int_equal(st[i].offered, total[i].attempts);
    /* DROP_NEW tells the sender; DROP_OLDEST evicts accepted messages. */
    assert_int_equal(st[3].dropped, total[3].dropped);
    assert_int_equal(total[2].ok, st[2].processed + st[2].dropped);
    assert_int_equal(total[1].ok, st[1].processed);
    /* Every poison was dead-lettered, and nothing else was. */
    assert_true(st[4].errors > 0);
    assert_int_equal(st[4].dead_lettered, st[4].errors);
    assert_int_equal(st[4].restarts, st[4].errors);
    assert_int_equal(total[4].ok, st[4].processed + st[4].dead_lettered);
    while (rk_dead_letter_recv(rt, &dl, NULL, 0, RK_NO_WAIT) == RK_OK) {
        assert_string_equal(dl.kernel_id, "fragile");
        dlq_seen++;
    }
    assert_int_equal(dlq_seen, dead_total);
    rk_runtime_destroy(rt);
}

/* The single-producer lane: one producer thread per kernel, every policy
 * the lane supports, small queues; the same books must balance. */
typedef struct lane_producer {
    pthread_t thread;
    rk_runtime *rt;
    rk_kernel k;
    unsigned seed;
    tally t;
} lane_producer;

static void *
lane_produce(void *arg)
{
    lane_producer *p = arg;

    for (uint64_t i = 0; i < PER_PRODUCER; i++) {
        unsigned r = (unsigned)rand_r(&p->seed);
        int64_t timeout = r % 4 == 0 ? RK_NO_WAIT : 100000;
        uint64_t v = i + 1;
        int rc = rk_send(p->rt, p->k, 0, &v, sizeof(v), 128, timeout);

        tally_add(&p->t, rc);
    }
    return NULL;
}

static void
test_conservation_lane(void **state)
{
    static const char *const lids[] = { "block", "reject", "dropnew" };
    static const rk_backpressure bps[]
        = { RK_BP_BLOCK, RK_BP_REJECT, RK_BP_DROP_NEW };
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true };
    lane_producer prod[3];

    (void)state;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    memset(prod, 0, sizeof(prod));
    for (int i = 0; i < 3; i++) {
        rk_kernel_def def = { .id = lids[i], .handler = count_handler };
        def.config.input_capacity = 8;
        def.config.batch = 4;
        def.config.single_producer = true;
        def.config.backpressure = bps[i];
        assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
        assert_int_equal(rk_kernel_launch(rt, lids[i]), RK_OK);
        assert_int_equal(rk_kernel_activate(rt, lids[i]), RK_OK);
        prod[i].rt = rt;
        prod[i].seed = 99u + (unsigned)i;
        assert_int_equal(rk_kernel_lookup(rt, lids[i], &prod[i].k), RK_OK);
        assert_int_equal(
            pthread_create(&prod[i].thread, NULL, lane_produce, &prod[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        rk_kernel_stats st;
        assert_int_equal(pthread_join(prod[i].thread, NULL), 0);
        assert_int_equal(rk_kernel_terminate(rt, lids[i], RT_LONG), RK_OK);
        assert_int_equal(rk_kernel_stats_get(rt, lids[i], &st), RK_OK);
        assert_int_equal(prod[i].t.other, 0);
        assert_int_equal(st.offered, prod[i].t.attempts);
        assert_int_equal(st.offered,
            st.processed + st.dropped + st.rejected + st.dead_lettered
                + st.pending);
        assert_int_equal(st.pending, 0);
        assert_int_equal(st.processed, prod[i].t.ok);
        assert_int_equal(st.dropped, prod[i].t.dropped);
        assert_int_equal(st.rejected, prod[i].t.rejected);
        assert_true(st.queue_high_water <= 8);
    }
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conservation),
        cmocka_unit_test(test_conservation_lane),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
