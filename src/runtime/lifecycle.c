/*
 * src/runtime/lifecycle.c - the lifecycle state machine: launch, activate,
 * deactivate, terminate, wait, and the accounting of an instance that has
 * ended (rk__reap).
 *
 * Every state change is a CAS on k->state. Host operations on one kernel
 * are serialised by k->lock. The runtime alone changes states: an
 * instance only acknowledges commands and reports FAULTED or EXITED in
 * its control block (ringkernel/ctl_proto.h); the supervisor thread
 * (supervisor.c), or the host call that waited for the exit, turns an
 * EXITED into TERMINATED or FAILED here. docs/runtime.md has the table.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

#define ACK_BIT(a) (1u << (a))

/* Refuses op in state st with the code the state calls for: a kernel not
 * launched yet, one not running, one ended (or ending), one failed; a
 * call that would repeat what the state already is gets RK_EALREADY. */
static int
bad_transition(rk__kernel *k, uint32_t st, const char *op)
{
    static const int err_in[RK__KERNEL_STATE_COUNT] = {
        [RK_KERNEL_CREATED] = RK_ENOTLAUNCHED,
        [RK_KERNEL_LAUNCHED] = RK_ENOTACTIVE,
        [RK_KERNEL_ACTIVE] = RK_EALREADY,
        [RK_KERNEL_DEACTIVATED] = RK_EALREADY,
        [RK_KERNEL_TERMINATING] = RK_ETERMINATED,
        [RK_KERNEL_TERMINATED] = RK_ETERMINATED,
        [RK_KERNEL_FAILED] = RK_EFAILED,
    };
    int err = st < RK__KERNEL_STATE_COUNT ? err_in[st] : RK_EALREADY;

    if ((st == RK_KERNEL_LAUNCHED && strcmp(op, "launch") == 0)
        || (st == RK_KERNEL_TERMINATED && strcmp(op, "terminate") == 0))
        err = RK_EALREADY;
    return rk__fail(err, "cannot %s kernel '%s': it is %s", op, k->id,
        rk_kernel_state_name((rk_kernel_state)st));
}

/* ------------------------------------------------------ instances */

static size_t
round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Gives back what the backend placed for inst. */
static void
release_placed(rk__inst *inst)
{
    rk__placed *p[] = { &inst->ctl_mem, &inst->spill_mem, &inst->in_mem,
        &inst->out_mem };

    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        if (p[i]->host != NULL)
            inst->be->release(p[i]);
}

void
rk__inst_free(rk__inst *inst)
{
    const rk__backend *be = inst->be;
    rk__stash_item *s, *next;

    if (inst->detached)
        return; /* its thread may still run: see rk_runtime_destroy */
    if (inst->bi != NULL)
        be->destroy(inst->bi, 0);
    free(inst->bi);
    for (s = inst->stash_head; s != NULL; s = next) {
        next = s->next;
        free(s);
    }
    rk__inbox_destroy(inst->in);
    rk__outq_fini(&inst->out);
    release_placed(inst);
    free(inst);
}

static int
inst_create(rk__kernel *k, rk__inst **out)
{
    const rk_kernel_config *c = &k->def.config;
    const rk__backend *be = k->be;
    rk_mqueue_config qin = { 0 };
    rk__inst *inst;
    int rc;

    inst = aligned_alloc(64, round64(sizeof(*inst)));
    if (inst == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory", k->id);
    memset(inst, 0, sizeof(*inst));
    inst->k = k;
    inst->be = be;
    inst->slot_size = RK_MSG_HEADER_SIZE + (size_t)c->max_payload;
    inst->stride = round64(inst->slot_size);
    inst->telemetry = !c->telemetry_off;
    inst->backoff_ns = c->supervision.backoff_ns;
    rk__ec_init(&inst->wake);
    rk__ec_init(&inst->ack);
    rk__ec_init(&inst->out_free);
    qin.capacity = c->input_capacity;
    qin.slot_size = (uint32_t)inst->slot_size;
    qin.backpressure = c->backpressure;
    qin.priority_bands = c->priority_bands;
    qin.single_producer = c->single_producer;
    /* Placement: everything an instance reads or writes in place comes
     * from the backend (the control block, the spill area, the input's
     * lanes and the output ring); the sizes were validated at register,
     * so a 0 below means the inbox keeps host memory of its own. */
    {
        size_t in_bytes = rk__inbox_placed_bytes(&qin, c->batch);
        size_t out_bytes
            = rk__outq_ring_bytes(c->output_capacity, inst->slot_size);
        if (out_bytes == 0)
            rc = rk__fail(RK_EINVAL,
                "kernel '%s': output_capacity %u x slot %zu bytes overflows",
                k->id, c->output_capacity, inst->slot_size);
        else if ((rc = be->alloc(sizeof(rk_ctl), &inst->ctl_mem)) == RK_OK
            && (rc = be->alloc(inst->stride * ((size_t)c->batch + 1),
                    &inst->spill_mem))
                == RK_OK
            && (in_bytes == 0
                || (rc = be->alloc(in_bytes, &inst->in_mem)) == RK_OK))
            rc = be->alloc(out_bytes, &inst->out_mem);
        if (rc != RK_OK) {
            release_placed(inst);
            free(inst);
            return rc;
        }
    }
    rc = rk__inbox_create(
        &inst->in, &qin, c->batch, &inst->wake, inst->in_mem.host);
    if (rc != RK_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        release_placed(inst);
        free(inst);
        return rk__fail(rc, "kernel '%s': cannot create its input queue (%s)",
            k->id, why);
    }
    rc = rk__outq_init_at(&inst->out, inst->out_mem.host, c->output_capacity,
        inst->slot_size);
    if (rc != RK_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        rk__inbox_destroy(inst->in);
        release_placed(inst);
        free(inst);
        return rk__fail(rc,
            "kernel '%s': cannot create its output queue (%s)", k->id, why);
    }
    /* From here on rk__inst_free undoes whatever was set up. */
    inst->ctl = inst->ctl_mem.host;
    rk_ctl_init(inst->ctl);
    rk__io_init(inst);
    if (be->inst_size != 0) {
        inst->bi = aligned_alloc(64, round64(be->inst_size));
        if (inst->bi == NULL) {
            rk__inst_free(inst);
            return rk__fail(RK_ENOMEM, "kernel '%s': no memory", k->id);
        }
        memset(inst->bi, 0, round64(be->inst_size));
    }
    *out = inst;
    return RK_OK;
}

/* The failed frame of fault number faults, once: the supervisor and the
 * reaper may both get here for the same fault. */
void
rk__fault_dead_letter(rk__inst *inst, uint32_t faults)
{
    uint32_t handled
        = atomic_load_explicit(&inst->faults_handled, memory_order_relaxed);
    size_t flen;

    do {
        if (handled >= faults)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&inst->faults_handled,
        &handled, faults, memory_order_relaxed, memory_order_relaxed));
    /* The instance wrote failed_len and the fail slot before its
     * FAULTED/EXITED release store, which the caller loaded with acquire. */
    flen = rk_ctl_load_relaxed(&inst->ctl->failed_len);
    if (flen != 0 && flen <= inst->stride)
        rk__dead_letter(inst->k->rt, inst, RK_DEAD_FAILED,
            (int)rk_ctl_load_relaxed(&inst->ctl->exit_code),
            (const unsigned char *)inst->spill_mem.host
                + inst->stride * inst->k->def.config.batch,
            flen);
}

static size_t
spill_len(const unsigned char *f, size_t stride)
{
    uint32_t plen;

    memcpy(&plen, f + offsetof(rk_msg_header, payload_len), sizeof(plen));
    return (size_t)plen + RK_MSG_HEADER_SIZE <= stride
        ? (size_t)plen + RK_MSG_HEADER_SIZE
        : stride;
}

/* Everything still queued goes to the dead-letter queue, so no message is
 * ever lost silently. The instance has exited: the host is the input's
 * only consumer now. */
static void
drain_input(rk__inst *inst, rk_dead_reason why, int err)
{
    rk_runtime *rt = inst->k->rt;

    rk__inbox_close(inst->in);
    for (;;) {
        rk__inbox_batch b;
        if (rk__inbox_take(inst->in, 1, &b) != RK_OK || b.n == 0)
            break;
        rk__dead_letter(
            rt, inst, why, err, b.frames, spill_len(b.frames, b.stride));
        rk__inbox_release(inst->in, b.n);
    }
}

void
rk__reap(rk__kernel *k, rk__inst *inst)
{
    rk_ctl *c = inst->ctl;
    const unsigned char *spill = inst->spill_mem.host;
    uint32_t exit_code, left, faults, st, to;
    rk_dead_reason why;

    if (atomic_load_explicit(&inst->reaped, memory_order_relaxed))
        return;
    /* Acquire pairs with the instance's release store of EXITED
     * (rk_ctl_exit): exit_code, left_n, the spill area are its last. */
    if (rk_ctl_ack_get(c) != RK_CTL_ACK_EXITED)
        return;
    exit_code = rk_ctl_load_relaxed(&c->exit_code);
    left = rk_ctl_load_relaxed(&c->left_n);
    faults = rk_ctl_load_relaxed(&c->faults);
    rk__fault_dead_letter(inst, faults);
    why = exit_code != RK_OK ? RK_DEAD_ABANDONED : RK_DEAD_TERMINATED;
    if (left > k->def.config.batch)
        left = k->def.config.batch; /* a broken instance cannot overrun */
    for (uint32_t i = 0; i < left; i++) {
        const unsigned char *f = spill + (size_t)i * inst->stride;
        rk__dead_letter(
            k->rt, inst, why, (int)exit_code, f, spill_len(f, inst->stride));
    }
    drain_input(inst, why, (int)exit_code);
    st = rk__state_of(k);
    to = exit_code != RK_OK ? RK_KERNEL_FAILED : RK_KERNEL_TERMINATED;
    while (!rk__cas_state(k, &st, to))
        ;
    /* Release pairs with the acquire load in rk__resolve: a handle user
     * that sees the new generation also sees the final state. */
    atomic_fetch_add_explicit(&k->gen, 1, memory_order_release);
    atomic_store_explicit(&inst->reaped, 1, memory_order_release);
    /* Receivers learn that nothing more comes once the output drains
     * (RK_ETERMINATED). Closed after the final state is set, so a
     * receiver woken by the close reads that state (the close's seq_cst
     * store orders the CAS before it). */
    rk__outq_close(&inst->out);
}

/* ------------------------------------------------------- commands */

void
rk__inst_signal(rk__inst *inst)
{
    /* The command or verdict was stored before: the instance re-checks
     * both after its rk__ec_prepare (common/ec.h). */
    rk__ec_notify_all(&inst->wake);
    if (inst->be->signal != NULL)
        inst->be->signal(inst->bi);
}

int
rk__ack_wait(rk__inst *inst, uint32_t mask, uint64_t deadline)
{
    const rk_ctl *ctl = inst->ctl;

    mask |= 1u << RK_CTL_ACK_EXITED;
    for (;;) {
        uint32_t key = rk__ec_prepare(&inst->ack);
        /* Acquire pairs with the instance's release store of its ack
         * (rk_ctl_ack), made before it notified. */
        if (mask & (1u << rk_ctl_ack_get(ctl))) {
            rk__ec_cancel(&inst->ack);
            return RK_OK;
        }
        if (rk__ec_wait(&inst->ack, key, deadline) == RK_ETIMEDOUT)
            return mask & (1u << rk_ctl_ack_get(ctl)) ? RK_OK : RK_ETIMEDOUT;
    }
}

static void
post(rk__inst *inst, uint32_t cmd)
{
    rk_ctl_post(inst->ctl, cmd);
    rk__inst_signal(inst);
}

/*
 * The transitions. Each runs under the kernel's lock with the state it
 * found (st) and returns the call's result; locked() finds the kernel and
 * takes the lock around it.
 */
typedef int (*transition)(
    rk_runtime *rt, rk__kernel *k, uint32_t st, int64_t timeout_ns);

static int
locked(rk_runtime *rt, const char *id, transition op, int64_t timeout_ns)
{
    rk__kernel *k;
    int rc = RK_OK;

    if ((k = rk__kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    rc = op(rt, k, rk__state_of(k), timeout_ns);
    pthread_mutex_unlock(&k->lock);
    return rc;
}

static int
launch(rk_runtime *rt, rk__kernel *k, uint32_t st, int64_t timeout_ns)
{
    rk__inst *inst = NULL, *old;
    rk__backend_launch spec;
    int rc;

    (void)timeout_ns;
    if (st != RK_KERNEL_CREATED && st != RK_KERNEL_TERMINATED
        && st != RK_KERNEL_FAILED)
        return bad_transition(k, st, "launch");
    spec = (rk__backend_launch) {
        .kernel_id = k->id,
        .grid_size = k->def.config.grid_size,
        .block_size = k->def.config.block_size,
        .events = &rt->events,
    };
    if (k->be->check != NULL && (rc = k->be->check(&spec)) != RK_OK)
        return rc;
    if ((rc = inst_create(k, &inst)) != RK_OK)
        return rc;
    spec.ctl = inst->ctl_mem;
    spec.wake = &inst->wake;
    spec.ack = &inst->ack;
    spec.io = &inst->io;
    spec.ctx = &inst->ctx;
    rk__routes_for_launch(k, &spec);
    rk__topics_for_launch(k, &spec, inst);
    rc = k->be->launch(inst->bi, &spec);
    if (rc != RK_OK) {
        free(inst->bi); /* nothing started: no destroy */
        inst->bi = NULL;
        rk__inst_free(inst);
        return rc;
    }
    old = atomic_load_explicit(&k->inst, memory_order_relaxed);
    if (old != NULL) {
        /* It has exited; it is freed with the runtime, so that lock-free
         * readers of the old pointer stay safe. */
        old->retired_next = k->retired;
        k->retired = old;
    }
    /* Release: readers that load inst with acquire see it initialised. */
    atomic_store_explicit(&k->inst, inst, memory_order_release);
    if (!rk__cas_state(k, &st, RK_KERNEL_LAUNCHED))
        RK_ASSERT(0 && "state changed under the kernel lock");
    return RK_OK;
}

static int
activate(rk_runtime *rt, rk__kernel *k, uint32_t st, int64_t timeout_ns)
{
    (void)rt;
    (void)timeout_ns;
    if ((st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_DEACTIVATED)
        && rk__cas_state(k, &st, RK_KERNEL_ACTIVE)) {
        rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
        uint64_t zero = 0;
        (void)atomic_compare_exchange_strong_explicit(&inst->start_ns, &zero,
            rk_now_ns(), memory_order_relaxed, memory_order_relaxed);
        post(inst, RK_CTL_RUN);
        return RK_OK;
    }
    return bad_transition(k, st, "activate");
}

static int
deactivate(rk_runtime *rt, rk__kernel *k, uint32_t st, int64_t timeout_ns)
{
    rk__inst *inst;
    int rc;

    (void)timeout_ns;
    if (st != RK_KERNEL_ACTIVE
        || !rk__cas_state(k, &st, RK_KERNEL_DEACTIVATED))
        return bad_transition(k, st, "deactivate");
    inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
    post(inst, RK_CTL_PAUSE);
    rc = rk__ack_wait(inst, ACK_BIT(RK_CTL_ACK_PAUSED),
        rk__deadline(rt->cfg.control_timeout_ns));
    if (rc != RK_OK)
        rc = rk__fail(rc,
            "kernel '%s' is DEACTIVATED but has not reached a "
            "safe point yet (busy in its actor)",
            k->id);
    return rc;
}

static int
terminate(rk_runtime *rt, rk__kernel *k, uint32_t st, int64_t timeout_ns)
{
    rk__inst *inst;
    int rc;

    if (st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_ACTIVE
        || st == RK_KERNEL_DEACTIVATED) {
        if (!rk__cas_state(k, &st, RK_KERNEL_TERMINATING))
            return bad_transition(k, st, "terminate");
    } else if (st != RK_KERNEL_TERMINATING) {
        return bad_transition(k, st, "terminate");
    }
    inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
    post(inst, RK_CTL_STOP);
    /* A fault waiting out its backoff is answered now (supervisor.c). */
    rk__ec_notify_all(&rt->events);
    rc = rk__ack_wait(inst, 0, rk__deadline(timeout_ns));
    if (rc == RK_OK)
        rk__reap(k, inst);
    else
        rc = rk__fail(rc,
            "kernel '%s' did not end in time; it stays "
            "TERMINATING (call terminate again)",
            k->id);
    return rc;
}

int
rk_kernel_launch(rk_runtime *rt, const char *id)
{
    return locked(rt, id, launch, 0);
}

int
rk_kernel_activate(rk_runtime *rt, const char *id)
{
    return locked(rt, id, activate, 0);
}

int
rk_kernel_deactivate(rk_runtime *rt, const char *id)
{
    return locked(rt, id, deactivate, 0);
}

int
rk_kernel_terminate(rk_runtime *rt, const char *id, int64_t timeout_ns)
{
    return locked(rt, id, terminate, timeout_ns);
}

int
rk_kernel_wait(rk_runtime *rt, const char *id, int64_t timeout_ns)
{
    rk__kernel *k;
    rk__inst *inst;
    int rc = RK_OK;

    if ((k = rk__kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if (inst == NULL)
        return rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
    rc = rk__ack_wait(inst, 0, rk__deadline(timeout_ns));
    if (rc != RK_OK)
        return rk__fail(rc, "kernel '%s' is still running", k->id);
    /* Account for the exit now rather than when the supervisor gets to
     * it, so the caller sees the final state. */
    pthread_mutex_lock(&k->lock);
    rk__reap(k, inst);
    pthread_mutex_unlock(&k->lock);
    return RK_OK;
}

int
rk_kernel_state_get(rk_runtime *rt, const char *id, rk_kernel_state *out)
{
    int rc;
    rk__kernel *k = rk__kernel_for_get(rt, id, out, __func__, &rc);

    if (k != NULL)
        *out = (rk_kernel_state)rk__state_of(k);
    return rc;
}
