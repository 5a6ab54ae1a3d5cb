/*
 * src/common/ec.c - the eventcount's out-of-line paths (see ec.h for the
 * protocol and the no-lost-wake-up argument).
 */
#include "common/ec.h"
#include "common/common.h"
#include "common/futex.h"

uint32_t
rk__ec_prepare(rk__ec *ec)
{
    /* The key is read before the increment: a notify that sees the
     * increment bumps seq past the key. Acquire pairs with the release
     * bump in rk__ec_wake. */
    uint32_t key = atomic_load_explicit(&ec->seq, memory_order_acquire);

    atomic_fetch_add_explicit(&ec->waiters, 1, memory_order_seq_cst);
    /* Orders the increment before the caller's re-check of its condition;
     * pairs with the light barrier in rk__ec_notify. */
    rk__heavy_barrier();
    return key;
}

int
rk__ec_wait(rk__ec *ec, uint32_t key, uint64_t deadline)
{
    int rc = rk__futex_wait(&ec->seq, key, deadline);

    atomic_fetch_sub_explicit(&ec->waiters, 1, memory_order_relaxed);
    return rc;
}

void
rk__ec_wake(rk__ec *ec, int n)
{
    /* Release pairs with the acquire load of the key in prepare. */
    atomic_fetch_add_explicit(&ec->seq, 1, memory_order_release);
    rk__futex_wake(&ec->seq, n);
}
