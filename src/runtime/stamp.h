/*
 * src/runtime/stamp.h - latency sampling at the sender.
 *
 * A send carries a timestamp (rk_msg_header.send_ns) or 0, and the
 * receiving kernel times exactly the stamped messages, so an unstamped
 * send and its handling read no clock. Each sending thread decides with a
 * countdown: it stamps one send, skips the next `every - 1`, stamps again.
 *
 * By count alone (every = latency_sample, 16 by default) a quiet kernel
 * got few samples: at 100 messages a second, six a second, and a short
 * test or a scrape saw percentiles of a handful of messages. So the stride
 * also follows time: at each stamp the thread has the time now (it reads
 * the clock for the stamp anyway) and the time of its previous stamp,
 * which were `every` sends apart, so it knows how fast it sends, and picks
 * the next stride as the number of its sends that fit in RK__STAMP_QUIET_NS
 * (1 ms), between 1 and latency_sample. A thread whose sends come 1 ms or
 * more apart stamps every send; a busier one stamps about once a
 * millisecond; a busy one (more than latency_sample sends a millisecond)
 * keeps one in latency_sample. The unstamped send does exactly what it
 * did before this rule (a thread-local decrement and compare; no clock),
 * so the hot path costs what it did; the rule's arithmetic runs only on
 * the stamped sends, which read the clock already. The price: a thread
 * that turns quiet after a busy spell keeps its busy stride until its
 * next stamp, so it stamps again at most latency_sample sends later.
 *
 * The state is per thread and shared across the kernels it sends to, as
 * the countdown always was. The functions below take the state and the
 * clock reading as arguments, so tests drive them with a clock of their
 * own (tests/test_runtime_latency_sample.c).
 */
#ifndef RK_SRC_RUNTIME_STAMP_H
#define RK_SRC_RUNTIME_STAMP_H

#include <stdbool.h>
#include <stdint.h>

#include "ringkernel/clock.h"

#define RK__LATENCY_SAMPLE_DEFAULT 16u
#define RK__STAMP_QUIET_NS                                                    \
    1000000u /* a thread this long between                                    \
                sends stamps every one */

typedef struct rk__stamp_state {
    uint32_t left;    /* sends to skip before the next stamp */
    uint32_t every;   /* the stride since the last stamp (0: none yet) */
    uint64_t last_ns; /* the last stamp's time (0: none yet) */
} rk__stamp_state;

/* The calling thread's state; hidden as rk__id_gen is. */
extern _Thread_local rk__stamp_state rk__stamp_tls
    __attribute__((visibility("hidden")));

/* True if this send skips the stamp (and counts it). A countdown left
 * over from a kernel with a sparser rate does not delay this kernel's. */
static inline bool
rk__stamp_skip(rk__stamp_state *s, uint32_t sample)
{
    if (s->left != 0 && s->left < sample) {
        s->left--;
        return true;
    }
    return false;
}

/* This send is stamped now_ns: picks the stride to the next stamp from
 * how long the last stride took (see above). */
static inline void
rk__stamp_taken(rk__stamp_state *s, uint32_t sample, uint64_t now_ns)
{
    uint64_t sends = s->every != 0 ? s->every : 1;
    uint64_t took = now_ns - s->last_ns, every;

    if (s->last_ns == 0 || now_ns < s->last_ns
        || took >= sends * RK__STAMP_QUIET_NS)
        every = 1;
    else if (took == 0)
        every = sample;
    else
        every = sends * RK__STAMP_QUIET_NS / took;
    if (every > sample)
        every = sample;
    s->every = (uint32_t)every;
    s->left = (uint32_t)every - 1;
    s->last_ns = now_ns;
}

/* A stamped send (deliver.c): reads the clock and picks the next stride.
 * Out of line, so that the inline skip below keeps nothing live across a
 * call (the unstamped send compiles as it did before the time rule). */
uint64_t rk__stamp_now(uint32_t sample) __attribute__((visibility("hidden")));

/* The send timestamp for a kernel with latency_sample sample (0: the
 * default): rk_now_ns(), or 0 when this send is not sampled. */
static inline uint64_t
rk__stamp(uint32_t sample)
{
    if (sample == 0)
        sample = RK__LATENCY_SAMPLE_DEFAULT;
    if (rk__stamp_skip(&rk__stamp_tls, sample))
        return 0;
    return rk__stamp_now(sample);
}

#endif /* RK_SRC_RUNTIME_STAMP_H */
