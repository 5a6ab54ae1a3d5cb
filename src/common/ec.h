/*
 * src/common/ec.h - the eventcount: the one wait primitive under every
 * blocking call in the library (queues, the kernel's inbox, the output
 * queue, lifecycle acknowledgements).
 *
 * A waiter sleeps until "something changed" without the notifier paying a
 * fence or a read-modify-write when nobody sleeps. The condition itself
 * (a queue not empty, a command posted) lives in the caller's data; the
 * eventcount only makes the sleep safe.
 *
 * Waiter                                  Notifier
 *   key = rk__ec_prepare(ec)                make the condition true
 *     (seq read, waiters++, HEAVY barrier)  rk__ec_notify(ec)
 *   if condition true: rk__ec_cancel(ec)      (LIGHT barrier, load waiters,
 *   else rk__ec_wait(ec, key, deadline)        if != 0: seq++, futex wake)
 *
 * Why no wake-up is lost. The waiter's increment of `waiters` and its
 * re-check of the condition are separated by the heavy barrier; the
 * notifier's publication of the condition and its load of `waiters` by the
 * light one. The pair (common/barrier.h) acts as a full fence on both
 * sides, so by the Dekker argument at least one side sees the other's
 * store: either the waiter's re-check sees the condition (it cancels), or
 * the notifier sees waiters != 0 and bumps seq. The bump happens after the
 * waiter read its key (the key was read before the increment), so the
 * futex wait, which sleeps only while seq == key, either does not sleep or
 * is woken. A notify that sees waiters != 0 but races with a cancel costs
 * one spurious futex wake, never a lost one.
 *
 * Cost on the hot path: rk__ec_notify with no waiter is a compiler
 * barrier and one load of a line nobody writes in the steady state.
 *
 * A device backend never waits on an eventcount: GPU code polls. Its
 * notify side is then only ever that one load of a zero.
 *
 * Threads: any number of waiters and notifiers. Caller-owned storage;
 * rk__ec_init or zero-initialisation makes one ready.
 */
#ifndef RK_SRC_COMMON_EC_H
#define RK_SRC_COMMON_EC_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/barrier.h"

typedef struct rk__ec {
    _Atomic uint32_t seq;     /* the futex word: bumped by a notify that sees a waiter */
    _Atomic uint32_t waiters; /* threads between prepare and wait/cancel */
} rk__ec;

static inline void
rk__ec_init(rk__ec *ec)
{
    atomic_init(&ec->seq, 0);
    atomic_init(&ec->waiters, 0);
}

/* Announces a wait: returns the key to pass to rk__ec_wait. Afterwards the
 * caller re-checks its condition and calls exactly one of rk__ec_cancel
 * or rk__ec_wait. Out of line: it issues the heavy barrier. */
uint32_t rk__ec_prepare(rk__ec *ec);

/* The condition turned true after prepare: withdraw without sleeping. */
static inline void
rk__ec_cancel(rk__ec *ec)
{
    atomic_fetch_sub_explicit(&ec->waiters, 1, memory_order_relaxed);
}

/* Sleeps until a notify after the prepare that returned key, or until the
 * absolute rk_now_ns() deadline (UINT64_MAX: none). RK_OK (woken, or a
 * notify had already come) or RK_ETIMEDOUT. Spurious returns are RK_OK:
 * the caller re-checks its condition. Withdraws the prepare. */
int rk__ec_wait(rk__ec *ec, uint32_t key, uint64_t deadline);

/* Out of line slow path of the notifies. */
void rk__ec_wake(rk__ec *ec, int n);

/* The condition changed: wakes one waiter, if any. Call after the store
 * that makes the condition true. */
static inline void
rk__ec_notify(rk__ec *ec)
{
    /* Orders the caller's publication before the load of waiters; pairs
     * with the heavy barrier in rk__ec_prepare. */
    rk__light_barrier();
    if (__builtin_expect(
            atomic_load_explicit(&ec->waiters, memory_order_relaxed) != 0, 0))
        rk__ec_wake(ec, 1);
}

/* As rk__ec_notify, for every waiter (close, commands, shutdown). */
static inline void
rk__ec_notify_all(rk__ec *ec)
{
    rk__light_barrier();
    if (atomic_load_explicit(&ec->waiters, memory_order_relaxed) != 0)
        rk__ec_wake(ec, INT32_MAX);
}

#endif /* RK_SRC_COMMON_EC_H */
