/*
 * src/runtime/kstats.c - per-kernel telemetry: the counters the runtime,
 * the senders and the instance (its control block's counter line) keep,
 * gathered into rk_kernel_stats and rk_stats snapshots.
 */
#include <string.h>

#include "runtime/internal.h"

/* ---------------------------------------------------------- telemetry */

#define KSTATS(X)                                                             \
    X(offered, COUNTER, "messages_offered",                                   \
        "sends attempted into the kernel's input")                            \
    X(processed, COUNTER, "messages_processed", "messages handled")           \
    X(dropped, COUNTER, "messages_dropped",                                   \
        "messages dropped by the backpressure policy")                        \
    X(rejected, COUNTER, "messages_rejected",                                 \
        "sends refused (backpressure, state, type)")                          \
    X(dead_lettered, COUNTER, "messages_dead_lettered",                       \
        "messages sent to the dead-letter queue")                             \
    X(pending, GAUGE, "messages_pending", "messages queued or being handled") \
    X(errors, COUNTER, "errors", "actor or handler failures")                 \
    X(restarts, COUNTER, "restarts", "supervisor restarts")                   \
    X(sent, COUNTER, "messages_sent", "messages the kernel sent")             \
    X(queue_depth, GAUGE, "queue_depth", "messages in the input queue")       \
    X(queue_high_water, GAUGE, "queue_high_water",                            \
        "largest input queue depth seen")                                     \
    X(queue_capacity, GAUGE, "queue_capacity",                                \
        "messages the input queue holds (per band), as configured")           \
    X(output_capacity, GAUGE, "output_capacity",                              \
        "messages the output queue holds, as configured")                     \
    X(direct_calls, COUNTER, "messages_direct",                               \
        "messages taken on the caller's own path (direct calls and sends)")   \
    X(relay_handoffs, COUNTER, "relay_handoffs",                              \
        "frames a device instance's host relay moved to or from its lanes")

static const rk_stat_desc kstat_desc[] = {
#define D(f, kind, name, desc)                                                \
    { name, desc, RK_STAT_##kind, RK_UNIT_MESSAGES },
    KSTATS(D)
#undef D
};
static const rk_stat_desc lat_desc = { "latency_ns",
    "send timestamp to the start of processing", RK_STAT_GAUGE, RK_UNIT_NS };

static void
fill_stats(rk__kernel *k, rk__inst *inst, rk_kernel_stats *s)
{
    rk_queue_stats q;
    rk_latency_summary lat;
    uint64_t start, held, direct, now = rk_now_ns();

    memset(s, 0, sizeof(*s));
    s->state = (rk_kernel_state)rk__state_of(k);
    /* As asked for: the rings inside may be larger (queue/inbox.h). */
    s->queue_capacity = k->def.config.input_capacity;
    s->output_capacity = k->def.config.output_capacity;
    if (inst == NULL)
        return;
    rk__inbox_stats(inst->in, &q);
    s->processed = rk__counter_get(&inst->ctl->processed);
    s->dead_lettered = rk__counter_get(&inst->dead_lettered);
    s->errors = rk__counter_get(&inst->ctl->errors);
    s->restarts = rk__counter_get(&inst->restarts);
    s->sent = rk__counter_get(&inst->ctl->sent);
    s->dropped = q.dropped + rk__counter_get(&inst->lane_dropped);
    s->rejected = q.rejected + rk__counter_get(&inst->rejected);
    /* Dequeued but neither processed nor dead-lettered: prefetched or in
     * flight in the kernel (transiently off while the kernel runs). */
    direct = rk__counter_get(&inst->direct);
    s->direct_calls = direct;
    held = q.dequeued + direct - s->processed - s->dead_lettered;
    s->pending = q.depth + (held > q.dequeued + direct ? 0 : held);
    s->queue_depth = q.depth;
    s->queue_high_water = q.high_water;
    /* Every attempt ends in exactly one of these (docs/runtime.md). */
    /* A direct call is taken at once: offered, never queued. */
    s->offered = q.enqueued + direct + (q.dropped - q.evicted) + s->rejected;
    rk__hist_summary(&inst->latency, &lat);
    s->latency_count = lat.count;
    s->latency_p50_ns = lat.p50_ns;
    s->latency_p99_ns = lat.p99_ns;
    s->latency_p999_ns = lat.p999_ns;
    s->latency_max_ns = lat.max_ns;
    start = atomic_load_explicit(&inst->start_ns, memory_order_relaxed);
    s->uptime_ns = start != 0 && now > start ? now - start : 0;
    s->throughput = rk_rate_per_sec(s->processed, s->uptime_ns);
    s->cpu_time_ns
        = inst->be->cpu_time != NULL ? inst->be->cpu_time(inst->bi) : 0;
    /* The backend's state lives as long as the instance (until the
     * runtime is destroyed, or a launch that failed dropped it). */
    s->relay_handoffs = inst->be->relayed != NULL && inst->bi != NULL
        ? inst->be->relayed(inst->bi)
        : 0;
}

int
rk_kernel_stats_get(rk_runtime *rt, const char *id, rk_kernel_stats *out)
{
    int rc;
    rk__kernel *k = rk__kernel_for_get(rt, id, out, __func__, &rc);

    if (k == NULL)
        return rc;
    /* The instance is never freed before the runtime, so no lock. */
    fill_stats(k, atomic_load_explicit(&k->inst, memory_order_acquire), out);
    return RK_OK;
}

int
rk_kernel_telemetry(rk_runtime *rt, const char *id, rk_stats *out)
{
    rk__kernel *k;
    rk__inst *inst;
    rk_kernel_stats s;
    rk__counter v[RK__ARRAY_LEN(kstat_desc)];
    size_t i = 0;
    int rc;

    if ((k = rk__kernel_for_get(rt, id, out, __func__, &rc)) == NULL)
        return rc;
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    fill_stats(k, inst, &s);
#define V(f, kind, name, desc) atomic_init(&v[i++], s.f);
    KSTATS(V)
#undef V
    rk__stats_begin(out, k->id,
        inst ? atomic_load_explicit(&inst->start_ns, memory_order_relaxed)
             : 0);
    rc = rk__stats_add_counters(out, kstat_desc, v, RK__ARRAY_LEN(v));
    if (rc == RK_OK && inst != NULL)
        rc = rk__stats_add_latency(out, &lat_desc, &inst->latency);
    return rc;
}

