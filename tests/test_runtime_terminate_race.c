/*
 * Terminate while threads send flat out (issue 10, fault tests): every
 * send the runtime answered RK_OK is handled or dead-lettered, none lost.
 *
 * Pending: about one run in eight (ASan build) strands one message. A
 * send that found the input queue open (mqueue.c's send_attempt checks
 * `closed`, then claims and publishes) publishes its slot after the ending
 * kernel closed the queue and took what was there; the message stays
 * queued in the ended instance (stats: pending 1, depth 1) while its
 * sender was told RK_OK. The close has to wait for sends already past
 * their check (queue rework).
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

static _Atomic uint64_t count_handled;

static int
count_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    (void)ctx;
    (void)m;
    atomic_fetch_add_explicit(&count_handled, 1, memory_order_relaxed);
    return RK_OK;
}

typedef struct producer {
    pthread_t th;
    rk_runtime *rt;
    rk_kernel k;
    uint32_t id;
    uint64_t ok;
    int last_rc;
} producer;

typedef struct tagged {
    uint32_t producer;
    uint32_t poison;
    uint64_t seq;
} tagged;

#define NPROD 2

static void *
flat_out_producer(void *arg)
{
    producer *p = arg;

    /* Until the kernel refuses: it is terminating or has ended. */
    for (uint64_t i = 0;; i++) {
        tagged t = { p->id, 0, i };
        int rc = rk_send(p->rt, p->k, 0, &t, sizeof(t), 128, RT_LONG);
        if (rc != RK_OK) {
            p->last_rc = rc;
            break;
        }
        p->ok++;
    }
    return NULL;
}

static void
test_terminate_during_flat_out_sends(void **state)
{
    rk_runtime *rt = rt_new_runtime();
    rk_kernel_def def = { .id = "flat", .handler = count_handler };
    producer p[NPROD];
    rk_kernel_stats st;
    uint64_t ok = 0, dead = 0;
    rk_dead_letter dl;
    rk_kernel k;

    (void)state;
    def.config.input_capacity = 128;
    assert_int_equal(rk_runtime_register(rt, &def), RK_OK);
    assert_int_equal(rk_kernel_launch(rt, "flat"), RK_OK);
    assert_int_equal(rk_kernel_activate(rt, "flat"), RK_OK);
    assert_int_equal(rk_kernel_lookup(rt, "flat", &k), RK_OK);
    atomic_store(&count_handled, 0);
    for (uint32_t i = 0; i < NPROD; i++) {
        p[i] = (producer) { .rt = rt, .k = k, .id = i };
        assert_int_equal(
            pthread_create(&p[i].th, NULL, flat_out_producer, &p[i]), 0);
    }
    /* Terminate once the kernel is well into the stream. */
    while (atomic_load_explicit(&count_handled, memory_order_relaxed)
        < 2000u * RT_SCALE)
        sched_yield();
    assert_int_equal(rk_kernel_terminate(rt, "flat", RT_LONG), RK_OK);
    for (uint32_t i = 0; i < NPROD; i++) {
        pthread_join(p[i].th, NULL);
        ok += p[i].ok;
        /* Refused as terminating, ended (closed), or by a stale handle. */
        if (p[i].last_rc != RK_ETERMINATED && p[i].last_rc != RK_ESTALE)
            fail_msg(
                "producer %u stopped with %s", i, rk_err_name(p[i].last_rc));
    }
    assert_int_equal(rk_kernel_stats_get(rt, "flat", &st), RK_OK);
    while (rk_dead_letter_recv(rt, &dl, NULL, 0, RK_NO_WAIT) == RK_OK) {
        assert_int_equal(dl.reason, RK_DEAD_TERMINATED);
        dead++;
    }
    /* Every message the runtime took was handled or dead-lettered. */
    if (atomic_load(&count_handled) + dead != ok)
        fail_msg("%lu sends answered RK_OK, %lu handled + %lu dead-lettered "
                 "(stats: offered %lu processed %lu dead %lu rejected %lu "
                 "pending %lu depth %lu)",
            (unsigned long)ok, (unsigned long)atomic_load(&count_handled),
            (unsigned long)dead, (unsigned long)st.offered,
            (unsigned long)st.processed, (unsigned long)st.dead_lettered,
            (unsigned long)st.rejected, (unsigned long)st.pending,
            (unsigned long)st.queue_depth);
    assert_int_equal(st.processed, atomic_load(&count_handled));
    assert_int_equal(st.dead_lettered, dead);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.offered,
        st.processed + st.dropped + st.rejected + st.dead_lettered);
    rk_runtime_destroy(rt);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terminate_during_flat_out_sends),
    };
    rt_test_filter();
    /* One lost message shows about once in eight runs: repeat. */
    for (int i = 0; i < 8; i++)
        if (cmocka_run_group_tests(tests, NULL, NULL) != 0)
            return 1;
    return 0;
}
