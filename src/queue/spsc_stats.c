/*
 * src/queue/spsc_stats.c - rk_spsc_stats: counters read from the shared
 * positions, so the inline hot paths pay nothing for them.
 */
#include <string.h>

#include "ringkernel/queue.h"

void
rk_spsc_stats(const rk_spsc *q, rk_queue_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof(*out));
    if (q == NULL)
        return;
    /* Head first: it never passes tail, so depth cannot go negative. */
    out->dequeued = rk_ring_load_relaxed(&q->ctrl.head);
    out->enqueued = rk_ring_load_relaxed(&q->ctrl.tail);
    out->depth = out->enqueued - out->dequeued;
}
