/*
 * A fault test of the reliability suite (issue 10): poison messages under
 * RESTART, while producers send flat out. Every poison is dead-lettered
 * exactly once, every other message processed exactly once and in order,
 * and the books balance. The other fault tests live in
 * test_runtime_shutdown.c (destroy while busy and blocked, an actor that
 * never returns), test_runtime_fork.c and test_runtime_terminate_race.c
 * (terminate during flat-out sends; it found a send answered RK_OK and
 * then stranded in the closed queue).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ringkernel/ringkernel.h"
#include "rt_fault.h"
#include "rt_helpers.h"

#define NPROD     2
#define PER_PROD  (5000 * RT_SCALE)
#define POISON_EV 97 /* every 97th message of a producer is poison */

typedef struct tagged {
    uint32_t producer;
    uint32_t poison;
    uint64_t seq;
} tagged;

/* ------------------------------------------------- poison + RESTART */

static _Atomic uint64_t sink_count;
static _Atomic uint64_t sink_dups; /* out-of-order or repeated seqs */
static uint64_t sink_last[NPROD];  /* next seq at least; sink thread */

static int
poison_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    tagged t;

    memcpy(&t, m->data, sizeof(t));
    if (t.poison)
        return RK_EDECODE;
    return rk_ctx_send(ctx, 0, &t, sizeof(t)); /* routed to the sink */
}

static int
sink_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    tagged t;

    (void)ctx;
    memcpy(&t, m->data, sizeof(t));
    /* One producer's messages keep their order along the route, so a
     * repeat shows as a seq that does not increase. */
    if (t.seq < sink_last[t.producer])
        atomic_fetch_add(&sink_dups, 1);
    sink_last[t.producer] = t.seq + 1;
    atomic_fetch_add(&sink_count, 1);
    return RK_OK;
}

typedef struct producer {
    pthread_t th;
    rk_runtime *rt;
    rk_kernel k;
    uint32_t id;
    uint64_t ok, refused, poisons;
    int last_rc;
} producer;

static void *
poison_producer(void *arg)
{
    producer *p = arg;

    for (uint64_t i = 0; i < PER_PROD; i++) {
        tagged t = { p->id, (i % POISON_EV) == POISON_EV - 1, i };
        int rc = rk_send(p->rt, p->k, 0, &t, sizeof(t), 128, RT_LONG);
        if (rc == RK_OK) {
            p->ok++;
            p->poisons += t.poison;
        } else {
            p->refused++;
            p->last_rc = rc;
        }
    }
    return NULL;
}

static void
test_poison_under_restart(void **state)
{
    rk_runtime *rt = NULL;
    rk_runtime_config cfg = { .no_static_kernels = true,
        .dead_letter_capacity = 2 * NPROD * PER_PROD / POISON_EV + 16 };
    rk_kernel_def work = { .id = "work", .handler = poison_handler };
    rk_kernel_def sink = { .id = "sink", .handler = sink_handler };
    producer p[NPROD];
    rk_kernel_stats sw, ss;
    uint64_t ok = 0, poisons = 0, dead = 0;
    rk_dead_letter dl;
    tagged t;
    rk_kernel k;

    (void)state;
    assert_int_equal(rk_runtime_create(&rt, &cfg), RK_OK);
    work.config.input_capacity = 256;
    work.config.supervision = (rk_supervision) {
        .policy = RK_SUPERVISE_RESTART,
        .max_restarts = UINT32_MAX,
        .backoff_ns = 1000,
        .backoff_max_ns = 1000,
    };
    sink.config.input_capacity = 256;
    assert_int_equal(rk_runtime_register(rt, &sink), RK_OK);
    assert_int_equal(rk_runtime_register(rt, &work), RK_OK);
    assert_int_equal(rk_connect(rt, "work", "sink"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "sink"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "sink"), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "work"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "work"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "work", &k), RK_OK);
    atomic_store(&sink_count, 0);
    atomic_store(&sink_dups, 0);
    memset(sink_last, 0, sizeof(sink_last));
    for (uint32_t i = 0; i < NPROD; i++) {
        p[i] = (producer) { .rt = rt, .k = k, .id = i };
        assert_int_equal(
            pthread_create(&p[i].th, NULL, poison_producer, &p[i]), 0);
    }
    for (uint32_t i = 0; i < NPROD; i++) {
        pthread_join(p[i].th, NULL);
        assert_int_equal(p[i].refused, 0);
        ok += p[i].ok;
        poisons += p[i].poisons;
    }
    /* Terminate with the backlog still queued: a poison met while
     * draining on STOP is restarted at once too, so everything queued is
     * still processed (and each poison dead-lettered). */
    /* Terminate in route order: each drains what it was given. */
    assert_int_equal(rk_kernel_terminate(rt, "work", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_terminate(rt, "sink", RT_LONG), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "work", &sw), RK_OK);
    assert_int_equal(rk_kernel_stats_get(rt, "sink", &ss), RK_OK);

    assert_int_equal(atomic_load(&sink_dups), 0);
    assert_int_equal(atomic_load(&sink_count), ok - poisons);
    assert_int_equal(sw.offered, ok);
    assert_int_equal(sw.processed, ok - poisons);
    assert_int_equal(sw.dead_lettered, poisons);
    assert_int_equal(sw.errors, poisons);
    assert_int_equal(sw.restarts, poisons);
    assert_int_equal(sw.pending, 0);
    assert_int_equal(sw.offered,
        sw.processed + sw.dropped + sw.rejected + sw.dead_lettered);
    assert_int_equal(ss.offered, ok - poisons);
    assert_int_equal(ss.processed, ok - poisons);
    /* Every dead letter is a poison, failed by the handler's error. */
    while (rk_dead_letter_recv(rt, &dl, &t, sizeof(t), RK_NO_WAIT) == RK_OK) {
        assert_string_equal(dl.kernel_id, "work");
        assert_int_equal(dl.reason, RK_DEAD_FAILED);
        assert_int_equal(dl.error, RK_EDECODE);
        assert_int_equal(t.poison, 1);
        dead++;
    }
    assert_int_equal(dead, poisons);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poison_under_restart),
    };
    rt_test_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
