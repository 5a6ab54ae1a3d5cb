/*
 * src/runtime/calls.c - host calls in flight and fork detection: the
 * guard every host call passes (rk__call_enter/leave), which lets
 * rk_runtime_destroy refuse new calls, wake blocked ones and wait until
 * they have left before it frees anything; and the fork generation that
 * makes a runtime inherited by a forked child refuse every call.
 */
#include <pthread.h>

#include "runtime/internal.h"

/* ------------------------------------------------------- host calls */

/*
 * fork(): the child has one thread, none of its parent's kernel threads,
 * and whatever locks parent threads held at the fork. A runtime it
 * inherited cannot work there, so every host call on it is refused with
 * RK_EFORKED; a runtime the child creates is of the new generation, and
 * the forking thread's message ids start a new block.
 */
static _Atomic uint32_t fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void
fork_child(void)
{
    atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
    rk__id_fork_child();
}

static void
fork_register(void)
{
    (void)pthread_atfork(NULL, NULL, fork_child);
}

uint32_t
rk__fork_gen(void)
{
    (void)pthread_once(&fork_once, fork_register);
    return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

int
rk__fork_check(const rk_runtime *rt, const char *op)
{
    if (rk__unlikely(rt->fork_gen
            != atomic_load_explicit(&fork_gen, memory_order_relaxed)))
        return rk__fail(RK_EFORKED,
            "%s: this runtime was created before a fork(); it works only "
            "in the process that created it (create a new one here)",
            op);
    return RK_OK;
}

int
rk__host_check(const rk_runtime *rt, bool args_ok, const char *op)
{
    if (rt == NULL || !args_ok)
        return rk__fail(RK_EINVAL, "%s: NULL argument", op);
    return rk__fork_check(rt, op);
}

/* The calling thread's index among the threads that ever called in
 * (assigned once): below RK__CALL_SLOTS it owns call_slots[index] of every
 * runtime, else it shares calls[index % RK__CALL_SHARDS]. */
static _Thread_local uint32_t call_index = UINT32_MAX;
static _Atomic uint32_t call_index_next;

static uint32_t
my_index(void)
{
    if (rk__unlikely(call_index == UINT32_MAX))
        call_index = atomic_fetch_add_explicit(
            &call_index_next, 1, memory_order_relaxed);
    return call_index;
}

/*
 * Entering a call publishes it (the count goes up), then reads closing;
 * rk_runtime_destroy stores closing, then reads the counts. That is a
 * Dekker pair: either the call sees closing and backs out, or destroy
 * sees the call and waits for it. On an owned slot the count is a plain
 * store and the store->load order comes from the asymmetric barrier pair
 * (common/barrier.h): a compiler barrier here, membarrier in destroy. On
 * a shared counter both sides are seq_cst.
 */
int
rk__call_enter(rk_runtime *rt, const char *op)
{
    uint32_t i;
    int rc;

    if (rk__unlikely(rt == NULL))
        return rk__fail(RK_EINVAL, "%s: runtime is NULL", op);
    if ((rc = rk__fork_check(rt, op)) != RK_OK)
        return rc;
    i = my_index();
    if (rk__likely(i < RK__CALL_SLOTS)) {
        _Atomic uint64_t *n = &rt->call_slots[i].n;
        atomic_store_explicit(n,
            atomic_load_explicit(n, memory_order_relaxed) + 1,
            memory_order_relaxed);
        /* Pairs with the heavy barrier in rk_runtime_destroy. */
        rk__light_barrier();
    } else {
        atomic_fetch_add_explicit(&rt->calls[i % RK__CALL_SHARDS].n, 1,
            memory_order_seq_cst);
    }
    if (rk__unlikely(
            atomic_load_explicit(&rt->closing, memory_order_seq_cst))) {
        rk__call_leave(rt);
        return rk__fail(RK_ECLOSED, "%s: the runtime is being destroyed", op);
    }
    return RK_OK;
}

void
rk__call_leave(rk_runtime *rt)
{
    uint32_t i = call_index;

    /* Release: the call's uses of the runtime happen before destroy's
     * acquire load sees the count drop. */
    if (rk__likely(i < RK__CALL_SLOTS)) {
        _Atomic uint64_t *n = &rt->call_slots[i].n;
        atomic_store_explicit(n,
            atomic_load_explicit(n, memory_order_relaxed) - 1,
            memory_order_release);
    } else {
        atomic_fetch_sub_explicit(&rt->calls[i % RK__CALL_SHARDS].n, 1,
            memory_order_release);
    }
    rk__ec_notify_all(&rt->calls_ec);
}

static uint64_t
calls_in_flight(rk_runtime *rt)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < RK__CALL_SLOTS; i++)
        n += atomic_load_explicit(&rt->call_slots[i].n, memory_order_acquire);
    for (uint32_t i = 0; i < RK__CALL_SHARDS; i++)
        n += atomic_load_explicit(&rt->calls[i].n, memory_order_acquire);
    return n;
}

void
rk__calls_wait(rk_runtime *rt)
{
    for (;;) {
        uint32_t key = rk__ec_prepare(&rt->calls_ec);
        if (calls_in_flight(rt) == 0) {
            rk__ec_cancel(&rt->calls_ec);
            return;
        }
        (void)rk__ec_wait(&rt->calls_ec, key, UINT64_MAX);
    }
}

