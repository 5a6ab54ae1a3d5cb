/*
 * ctl_proto.h run as host C: one thread plays the host, one the instance
 * (as a GPU kernel would, polling, with no futex and no read-modify-write
 * on the block). Under ThreadSanitizer this checks that every handoff the
 * protocol promises is ordered: data the host wrote before a command is
 * visible to the instance that sees the command, and data the instance
 * wrote before an ack (its counters, the fail slot, its exit code) is
 * visible to the host that sees the ack.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "ringkernel/ctl_proto.h"

_Static_assert(sizeof(rk_ctl) == 3 * RK_RING_LINE, "rk_ctl is three lines");
_Static_assert(offsetof(rk_ctl, ack) == RK_RING_LINE, "ack on line 1");
_Static_assert(offsetof(rk_ctl, processed) == 2 * RK_RING_LINE,
    "counters on line 2");

#define ROUNDS 2000

static rk_ctl ctl;
static unsigned host_data[ROUNDS];   /* plain: ordered by cmd */
static unsigned fail_slot[ROUNDS];   /* plain: ordered by the FAULTED ack */
static unsigned seen_sum;

static unsigned
wait_cmd_change(unsigned from)
{
    unsigned c;

    while ((c = rk_ctl_cmd(&ctl)) == from)
        sched_yield();
    return c;
}

/* The instance: HELD; then for each round, wait for RUN/PAUSE toggles,
 * read the host's data, report a fault with a fail-slot word, wait for
 * the verdict; finally drain-and-exit on STOP. */
static void *
instance(void *arg)
{
    unsigned cmd = RK_CTL_HOLD;
    (void)arg;

    rk_ctl_ack(&ctl, RK_CTL_ACK_HELD);
    for (unsigned i = 0; i < ROUNDS; i++) {
        cmd = wait_cmd_change(cmd);
        if (cmd == RK_CTL_STOP)
            break;
        seen_sum += host_data[i]; /* written before the command */
        rk_ctl_count(&ctl.processed, 1);
        fail_slot[i] = i * 3u + 1;
        unsigned n = rk_ctl_fault(&ctl, 7, 4);
        while (rk_ctl_verdict_get(&ctl) != n)
            sched_yield();
        rk_ctl_ack(&ctl, cmd == RK_CTL_RUN ? RK_CTL_ACK_RUNNING
                                           : RK_CTL_ACK_PAUSED);
    }
    while (rk_ctl_cmd(&ctl) != RK_CTL_STOP)
        sched_yield();
    rk_ctl_exit(&ctl, 0, 0);
    return NULL;
}

static void
test_handoffs_are_ordered(void **state)
{
    pthread_t t;
    unsigned expect = 0;
    (void)state;

    rk_ctl_init(&ctl);
    assert_int_equal(pthread_create(&t, NULL, instance, NULL), 0);
    while (rk_ctl_ack_get(&ctl) != RK_CTL_ACK_HELD)
        sched_yield();
    assert_false(rk_ctl_was_activated(&ctl));
    for (unsigned i = 0; i < ROUNDS; i++) {
        host_data[i] = i + 1;
        expect += i + 1;
        rk_ctl_post(&ctl, i % 2 == 0 ? RK_CTL_RUN : RK_CTL_PAUSE);
        while (rk_ctl_ack_get(&ctl) != RK_CTL_ACK_FAULTED)
            sched_yield();
        /* Everything before the FAULTED release is visible. */
        assert_int_equal(rk_ctl_load_relaxed(&ctl.faults), i + 1);
        assert_int_equal(rk_ctl_load_relaxed(&ctl.exit_code), 7);
        assert_int_equal(rk_ctl_load_relaxed(&ctl.failed_len), 4);
        assert_int_equal(fail_slot[i], i * 3u + 1);
        rk_ctl_verdict_post(&ctl, i + 1);
        while (rk_ctl_ack_get(&ctl) == RK_CTL_ACK_FAULTED)
            sched_yield();
    }
    assert_true(rk_ctl_was_activated(&ctl));
    rk_ctl_post(&ctl, RK_CTL_STOP);
    while (rk_ctl_ack_get(&ctl) != RK_CTL_ACK_EXITED)
        sched_yield();
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(seen_sum, expect);
    assert_int_equal(rk_ring_load_relaxed(&ctl.processed), ROUNDS);
    assert_int_equal(rk_ctl_load_relaxed(&ctl.left_n), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoffs_are_ordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
