/*
 * src/common/spin.h - the adaptive spin every blocking wait runs before it
 * parks: a full or empty queue usually changes within microseconds when
 * the other side is running, and a park costs a futex wait, a wake-up
 * syscall on the other side and (for the runtime's handshakes) a
 * membarrier. Parking on every transient "full" made the runtime's
 * batched sends park about once per 500 messages.
 *
 * The spin is measured in time rather than iterations (a PAUSE costs 10
 * to 140 cycles depending on the CPU, and more under a hypervisor). A spin
 * that succeeds raises the budget to twice what it needed; one that ends
 * in a park lowers it by a quarter. The floor stays above a futex
 * wake-up's latency: with a shorter budget a ping-pong in which one side
 * has parked settles into both sides parking on every message, because
 * each spinner gives up before the sleeper is back. An idle waiter still
 * parks within RK__SPIN_MAX_NS.
 *
 * The budget is a hint shared by the callers of one wait site (relaxed,
 * racy updates are harmless). The caller owns it; initialise it with
 * rk__spin_init.
 */
#ifndef RK_SRC_COMMON_SPIN_H
#define RK_SRC_COMMON_SPIN_H

#include <stdatomic.h>
#include <stdint.h>

#define RK__SPIN_MIN_NS  20000u
#define RK__SPIN_INIT_NS 50000u
#define RK__SPIN_MAX_NS  200000u

typedef struct rk__spin {
    _Atomic uint32_t budget_ns;
} rk__spin;

static inline void
rk__spin_init(rk__spin *s)
{
    atomic_init(&s->budget_ns, RK__SPIN_INIT_NS);
}

/* One try of the operation being waited for: returns `again` while it
 * cannot proceed, anything else ends the wait. */
typedef int (*rk__spin_attempt)(void *ctx);

/*
 * Calls attempt(ctx) until it returns something other than `again`,
 * pausing between tries, for at most the current budget and never past
 * deadline (absolute, rk_now_ns; UINT64_MAX: none). Does not try first:
 * the caller has just seen `again`. Returns attempt's last result, which
 * is `again` if the spin ran out (the caller then parks).
 */
int rk__spin_wait(rk__spin *s, rk__spin_attempt attempt, void *ctx, int again,
    uint64_t deadline);

#endif /* RK_SRC_COMMON_SPIN_H */
