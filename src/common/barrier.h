/*
 * src/common/barrier.h - asymmetric barriers for the parking handshakes.
 *
 * Every park in the runtime is a Dekker handshake: the waiter publishes
 * "parked" and re-checks the queue; the sender publishes a message and
 * checks "parked". Each side needs a store->load barrier between the two,
 * and on the sender's side that barrier sits on the hot path of every
 * message: a seq_cst fence there stalls until the sender's slot stores
 * leave the store buffer, which costs a cross-core cache-line transfer per
 * message (most of the runtime's share of a round trip).
 *
 * With Linux membarrier(2) the cost moves to the rare side: the sender
 * issues only a compiler barrier (rk__light_barrier), and the waiter,
 * which is about to sleep anyway, issues membarrier(PRIVATE_EXPEDITED)
 * (rk__heavy_barrier), which makes every running thread of the process
 * execute a full barrier (a thread not running has passed one at its
 * context switch). Either the waiter's re-check sees the message, or the
 * sender's later load sees parked. Where membarrier is unavailable both
 * fall back to seq_cst fences.
 */
#ifndef RK_SRC_COMMON_BARRIER_H
#define RK_SRC_COMMON_BARRIER_H

#include <stdatomic.h>
#include <stdbool.h>

/* Registers the process for expedited membarrier (once; thread-safe).
 * Called by rk_runtime_create before any kernel thread exists. */
void rk__barrier_init(void);

/* True once membarrier is registered (then constant). */
extern _Atomic bool rk__barrier_asym;

/* The hot side: between publishing a message and loading "parked". */
static inline void
rk__light_barrier(void)
{
    if (atomic_load_explicit(&rk__barrier_asym, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* The parking side: between publishing "parked" and re-checking. */
void rk__heavy_barrier(void);

#endif /* RK_SRC_COMMON_BARRIER_H */
