/*
 * src/common/spin.c - the adaptive spin before a park (see spin.h).
 */
#include "common/spin.h"

#include <sched.h>

#include "common/common.h"
#include "ringkernel/clock.h"

#define SPIN_CHECK 32u   /* tries between clock reads */
#define SPIN_YIELD 1024u /* tries between yields */

int
rk__spin_wait(rk__spin *s, rk__spin_attempt attempt, void *ctx, int again,
    uint64_t deadline)
{
    uint32_t budget
        = atomic_load_explicit(&s->budget_ns, memory_order_relaxed);
    uint64_t start = rk_now_ns();
    int rc;

    for (uint32_t i = 1;; i++) {
        rk__cpu_relax();
        if ((rc = attempt(ctx)) != again) {
            uint64_t want = 2 * (rk_now_ns() - start);
            if (want > budget)
                atomic_store_explicit(&s->budget_ns,
                    want > RK__SPIN_MAX_NS ? RK__SPIN_MAX_NS : (uint32_t)want,
                    memory_order_relaxed);
            return rc;
        }
        if (i % SPIN_CHECK == 0) {
            uint64_t now = rk_now_ns();
            if (now - start >= budget || now >= deadline)
                break;
            /* On a busy machine the other side may be waiting for this
             * very CPU. */
            if (i % SPIN_YIELD == 0)
                sched_yield();
        }
    }
    if (budget > RK__SPIN_MIN_NS) {
        uint32_t b = budget - budget / 4;
        atomic_store_explicit(&s->budget_ns,
            b < RK__SPIN_MIN_NS ? RK__SPIN_MIN_NS : b, memory_order_relaxed);
    }
    return again;
}
