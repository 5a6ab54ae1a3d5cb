/*
 * src/runtime/supervisor.c - supervision, decided on the host.
 *
 * One thread per runtime waits on rt->events, which backends notify when
 * an instance reports FAULTED or EXITED (backends that cannot notify set
 * event_poll_ns and are rescanned that often). For a fault it dead-letters
 * the failed frame and decides, by the kernel's supervision policy,
 * whether to restart (after the backoff, which doubles up to its cap) or
 * to give up; the instance waits for that verdict in its control block.
 * For an exit it accounts for the instance (rk__reap): dead letters,
 * final state, new generation.
 *
 * The instance never calls up into the runtime: the control block and
 * the eventcount are the whole channel.
 */
#include <string.h>

#include "runtime/internal.h"

/* A fault the supervisor has not answered yet. */
static void
on_fault(rk__inst *inst, uint64_t now)
{
    const rk_supervision *sv = &inst->k->def.config.supervision;
    rk_ctl *c = inst->ctl;
    uint32_t faults = rk_ctl_load_relaxed(&c->faults);

    if (faults == inst->answered
        || (inst->restart_at != 0 && inst->restart_fault == faults))
        return; /* answered (the instance has not resumed yet) or due */
    rk__fault_dead_letter(inst, faults);
    if (sv->policy == RK_SUPERVISE_RESTART
        && inst->restarts_done < sv->max_restarts) {
        int64_t b = inst->backoff_ns;
        /* Draining on STOP: restart at once, so the drain goes on and
         * what was queued before terminate is still processed. */
        inst->restart_at = rk_ctl_load_relaxed(&c->cmd) == RK_CTL_STOP
            ? now
            : now + (uint64_t)(b > 0 ? b : 0);
        inst->restart_fault = faults;
        inst->backoff_ns = b > sv->backoff_max_ns / 2 ? sv->backoff_max_ns
                                                      : b * 2;
        return;
    }
    inst->answered = faults;
    rk_ctl_verdict_post(c, RK_CTL_GIVE_UP);
    rk__inst_signal(inst);
}

/* Looks at one kernel; returns when it next needs looking at. */
static uint64_t
visit(rk__kernel *k, uint64_t now)
{
    rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    uint32_t ack;

    if (inst == NULL || inst->detached
        || atomic_load_explicit(&inst->reaped, memory_order_acquire))
        return UINT64_MAX;
    /* Acquire pairs with the instance's release store of its ack. */
    ack = rk_ctl_ack_get(inst->ctl);
    if (ack == RK_CTL_ACK_EXITED) {
        /* A lifecycle call holding the lock reaps it itself. */
        if (pthread_mutex_trylock(&k->lock) != 0)
            return now + 1000000;
        rk__reap(k, inst);
        pthread_mutex_unlock(&k->lock);
        return UINT64_MAX;
    }
    if (ack != RK_CTL_ACK_FAULTED)
        return UINT64_MAX;
    on_fault(inst, now);
    if (inst->restart_at == 0)
        return UINT64_MAX;
    /* A STOP cuts the backoff short. */
    if (now < inst->restart_at
        && rk_ctl_load_relaxed(&inst->ctl->cmd) != RK_CTL_STOP)
        return inst->restart_at;
    inst->restart_at = 0;
    inst->answered = inst->restart_fault;
    inst->restarts_done++;
    rk__counter_add(&inst->restarts, 1);
    rk_ctl_verdict_post(inst->ctl, inst->restart_fault);
    rk__inst_signal(inst);
    return UINT64_MAX;
}

static void *
supervisor_main(void *arg)
{
    rk_runtime *rt = arg;

    for (;;) {
        uint32_t key = rk__ec_prepare(&rt->events);
        uint64_t now = rk_now_ns(), next = UINT64_MAX;
        uint32_t i, n;

        if (atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
            rk__ec_cancel(&rt->events);
            return NULL;
        }
        n = rk__kernel_count(rt);
        for (i = 0; i < n; i++) {
            rk__kernel *k = rk__kernel_at(rt, i);
            uint64_t t = visit(k, now);
            rk__inst *inst;
            if (t < next)
                next = t;
            inst = atomic_load_explicit(&k->inst, memory_order_acquire);
            if (inst != NULL && inst->be->event_poll_ns != 0
                && !atomic_load_explicit(&inst->reaped, memory_order_relaxed)
                && now + inst->be->event_poll_ns < next)
                next = now + inst->be->event_poll_ns;
        }
        (void)rk__ec_wait(&rt->events, key, next);
    }
}

int
rk__supervisor_start(rk_runtime *rt)
{
    int rc = pthread_create(&rt->supervisor, NULL, supervisor_main, rt);

    if (rc != 0)
        return rk__fail(
            RK_ENOMEM, "cannot start the supervisor thread (%d)", rc);
    rt->supervisor_started = true;
    return RK_OK;
}

void
rk__supervisor_stop(rk_runtime *rt)
{
    if (!rt->supervisor_started)
        return;
    atomic_store_explicit(&rt->stopping, 1, memory_order_release);
    rk__ec_notify_all(&rt->events);
    (void)pthread_join(rt->supervisor, NULL);
    rt->supervisor_started = false;
}
