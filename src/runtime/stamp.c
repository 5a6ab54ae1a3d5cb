/*
 * src/runtime/stamp.c - the latency sampler's per-thread state and its
 * stamped path (stamp.h): out of line, so that the unstamped send, the
 * common one, stays a countdown and a predicted branch.
 */
#include "common/common.h"
#include "runtime/stamp.h"

_Thread_local rk__stamp_state rk__stamp_tls;

/* Not inlined into the senders here (see stamp.h). */
__attribute__((noinline)) uint64_t
rk__stamp_now(uint32_t sample)
{
    uint64_t now = rk_now_ns();

    rk__stamp_taken(&rk__stamp_tls, sample, now);
    return now;
}
