/*
 * src/runtime/runtime.c - the runtime object, the kernel registry and the
 * lifecycle state machine.
 *
 * Every state change is a CAS on k->state. Host operations on one kernel
 * are serialised by k->lock; the kernel thread changes the state only when
 * its body ends (rk__kernel_ended), which the CAS makes safe against a
 * host operation that read the old state. docs/runtime.md has the table.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

#define DEFAULT_MAX_KERNELS 256u
#define DEFAULT_DLQ         1024u
#define DEFAULT_TIMEOUT_NS  (5 * INT64_C(1000000000))
#define DEFAULT_CAPACITY    1024u
#define DEFAULT_MAX_PAYLOAD 192u
#define DEFAULT_BATCH       64u

static const char *const state_names[] = {
    "CREATED",
    "LAUNCHED",
    "ACTIVE",
    "DEACTIVATED",
    "TERMINATING",
    "TERMINATED",
    "FAILED",
};

const char *
rk_kernel_state_name(rk_kernel_state s)
{
    if ((unsigned)s >= RK__KERNEL_STATE_COUNT)
        return "UNKNOWN";
    return state_names[s];
}

/* ------------------------------------------------ static registration */

static _Atomic(rk_static_kernel *) static_head;

void
rk_static_kernel_add(rk_static_kernel *node)
{
    rk_static_kernel *head
        = atomic_load_explicit(&static_head, memory_order_relaxed);

    /* Release publishes node->def and node->next to the acquire load in
     * rk_runtime_create; constructors may run on any thread (dlopen). */
    do {
        node->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&static_head, &head, node,
        memory_order_release, memory_order_relaxed));
}

/* ---------------------------------------------------------- runtime */

int
rk_runtime_create(rk_runtime **out, const rk_runtime_config *cfg)
{
    rk_runtime *rt;
    rk_static_kernel *n;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_runtime_create: out is NULL");
    *out = NULL;
    rt = calloc(1, sizeof(*rt));
    if (rt == NULL)
        return rk__fail(RK_ENOMEM, "rk_runtime_create: no memory");
    if (cfg != NULL)
        rt->cfg = *cfg;
    if (rt->cfg.max_kernels == 0)
        rt->cfg.max_kernels = DEFAULT_MAX_KERNELS;
    if (rt->cfg.dead_letter_capacity == 0)
        rt->cfg.dead_letter_capacity = DEFAULT_DLQ;
    if (rt->cfg.terminate_timeout_ns <= 0)
        rt->cfg.terminate_timeout_ns = DEFAULT_TIMEOUT_NS;
    if (rt->cfg.control_timeout_ns <= 0)
        rt->cfg.control_timeout_ns = DEFAULT_TIMEOUT_NS;
    if (rt->cfg.host_spin_ns == 0)
        rt->cfg.host_spin_ns = 20000;
    rk__barrier_init();
    rt->be = &rk__backend_cpu;
    if (rt->be->abi_version != RK__BACKEND_ABI) {
        const rk__backend *be = rt->be;
        free(rt);
        return rk__fail(RK_ENOTSUP, "backend '%s' has ABI %u, need %u",
            be->name, be->abi_version, RK__BACKEND_ABI);
    }
    rt->slots = calloc(rt->cfg.max_kernels, sizeof(*rt->slots));
    rt->dlq = calloc(rt->cfg.dead_letter_capacity, sizeof(*rt->dlq));
    if (rt->slots == NULL || rt->dlq == NULL) {
        free(rt->slots);
        free(rt->dlq);
        free(rt);
        return rk__fail(RK_ENOMEM, "rk_runtime_create: no memory");
    }
    pthread_mutex_init(&rt->reg_lock, NULL);
    pthread_rwlock_init(&rt->topics_lock, NULL);
    pthread_mutex_init(&rt->dlq_lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&rt->dlq_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (!rt->cfg.no_static_kernels) {
        /* Acquire pairs with the release CAS in rk_static_kernel_add. */
        for (n = atomic_load_explicit(&static_head, memory_order_acquire);
             n != NULL; n = n->next) {
            int rc = rk_runtime_register(rt, n->def);
            if (rc != RK_OK) {
                rk_runtime_destroy(rt);
                return rc;
            }
        }
    }
    *out = rt;
    return RK_OK;
}

static void
inst_free(rk_runtime *rt, rk__inst *inst)
{
    rk__stash_item *s, *next;

    if (inst->bi != NULL)
        rt->be->destroy(inst->bi);
    for (s = inst->stash_head; s != NULL; s = next) {
        next = s->next;
        free(s);
    }
    rk__inq_fini(&inst->in);
    rk__outq_fini(&inst->out);
    rk__ctx_fini(&inst->ctx);
    pthread_mutex_destroy(&inst->out_lock);
    free(inst);
}

void
rk_runtime_destroy(rk_runtime *rt)
{
    uint32_t i;

    if (rt == NULL)
        return;
    for (i = 0; i < rt->nkernels; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
        uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);
        int rc;

        if (st == RK_KERNEL_CREATED || st == RK_KERNEL_TERMINATED
            || st == RK_KERNEL_FAILED)
            continue;
        rc = rk_kernel_terminate(rt, k->id, rt->cfg.terminate_timeout_ns);
        if (rc == RK_ETIMEDOUT) {
            /* Closing both queues unblocks an actor stuck sending; one
             * stuck in its own code is waited for (joined) below. */
            rk__inst *inst
                = atomic_load_explicit(&k->inst, memory_order_acquire);
            fprintf(stderr,
                "ringkernel: kernel '%s' did not end within the "
                "terminate timeout; closing its queues and waiting\n",
                k->id);
            rk__inq_close(&inst->in);
            rk__outq_close(&inst->out);
        }
    }
    for (i = 0; i < rt->nkernels; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
        rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
        rk__inst *r, *next;

        if (inst != NULL)
            inst_free(rt, inst);
        for (r = k->retired; r != NULL; r = next) {
            next = r->retired_next;
            inst_free(rt, r);
        }
        pthread_mutex_destroy(&k->lock);
        free(k);
    }
    for (i = 0; i < rt->ntopics; i++)
        free(rt->topics[i].subs);
    free(rt->topics);
    for (i = 0; i < rt->dlq_count; i++)
        free(rt->dlq[(rt->dlq_head + i) % rt->cfg.dead_letter_capacity]
                 .payload);
    free(rt->dlq);
    free(rt->slots);
    pthread_cond_destroy(&rt->dlq_cond);
    pthread_mutex_destroy(&rt->dlq_lock);
    pthread_rwlock_destroy(&rt->topics_lock);
    pthread_mutex_destroy(&rt->reg_lock);
    free(rt);
}

/* ---------------------------------------------------------- registry */

static int
check_id(const char *what, const char *id)
{
    size_t n;

    if (id == NULL || id[0] == '\0')
        return rk__fail(RK_EINVAL, "%s: empty id", what);
    n = strlen(id);
    if (n > RK_ID_MAX)
        return rk__fail(RK_EINVAL, "%s: id '%.20s...' is %zu bytes (max %d)",
            what, id, n, RK_ID_MAX);
    return RK_OK;
}

rk__kernel *
rk__kernel_by_id(rk_runtime *rt, const char *id)
{
    uint32_t i, n;

    if (id == NULL)
        return NULL;
    pthread_mutex_lock(&rt->reg_lock);
    n = rt->nkernels;
    pthread_mutex_unlock(&rt->reg_lock);
    for (i = 0; i < n; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_acquire);
        if (strcmp(k->id, id) == 0)
            return k;
    }
    return NULL;
}

int
rk__not_found(rk_runtime *rt, const char *id)
{
    char list[400];
    size_t off = 0;
    uint32_t i, n;

    list[0] = '\0';
    pthread_mutex_lock(&rt->reg_lock);
    n = rt->nkernels;
    pthread_mutex_unlock(&rt->reg_lock);
    for (i = 0; i < n && off < sizeof(list) - 1; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_acquire);
        int w = snprintf(
            list + off, sizeof(list) - off, "%s'%s'", i ? ", " : "", k->id);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    if (off >= sizeof(list) - 1)
        snprintf(list + sizeof(list) - 5, 5, "...");
    return rk__fail(RK_ENOTFOUND, "no kernel '%s'; kernels: %s",
        id ? id : "(null)", n ? list : "(none registered)");
}

int
rk_runtime_register(rk_runtime *rt, const rk_kernel_def *def)
{
    rk__kernel *k;
    int rc;

    if (rt == NULL || def == NULL)
        return rk__fail(RK_EINVAL, "rk_runtime_register: NULL argument");
    if ((rc = check_id("rk_runtime_register", def->id)) != RK_OK)
        return rc;
    if ((def->actor == NULL) == (def->handler == NULL))
        return rk__fail(RK_EINVAL,
            "kernel '%s': set exactly one of actor and handler", def->id);
    if ((unsigned)def->config.backpressure > RK_BP_DROP_NEW
        || (unsigned)def->config.when_inactive > RK_INACTIVE_REJECT
        || (unsigned)def->config.supervision.policy > RK_SUPERVISE_RESTART)
        return rk__fail(RK_EINVAL, "kernel '%s': bad enum in config", def->id);
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory", def->id);
    strcpy(k->id, def->id);
    k->def = *def;
    k->def.id = k->id;
    {
        rk_kernel_config *c = &k->def.config;
        rk_supervision *s = &c->supervision;
        if (c->input_capacity == 0)
            c->input_capacity = DEFAULT_CAPACITY;
        if (c->output_capacity == 0)
            c->output_capacity = DEFAULT_CAPACITY;
        if (c->max_payload == 0)
            c->max_payload = DEFAULT_MAX_PAYLOAD;
        if (c->batch == 0)
            c->batch = DEFAULT_BATCH;
        if (c->spin == 0)
            c->spin = 2000;
        if (s->policy == RK_SUPERVISE_RESTART && s->max_restarts == 0)
            s->max_restarts = 3;
        if (s->backoff_ns <= 0)
            s->backoff_ns = 1000000;
        if (s->backoff_max_ns <= 0)
            s->backoff_max_ns = 1000000000;
    }
    k->rt = rt;
    pthread_mutex_init(&k->lock, NULL);
    atomic_init(&k->state, RK_KERNEL_CREATED);
    atomic_init(&k->gen, 1);
    atomic_init(&k->inst, NULL);

    pthread_mutex_lock(&rt->reg_lock);
    for (uint32_t i = 0; i < rt->nkernels; i++) {
        rk__kernel *o
            = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
        if (strcmp(o->id, k->id) == 0) {
            pthread_mutex_unlock(&rt->reg_lock);
            pthread_mutex_destroy(&k->lock);
            free(k);
            return rk__fail(
                RK_EEXIST, "a kernel '%s' is already registered", def->id);
        }
    }
    if (rt->nkernels == rt->cfg.max_kernels) {
        pthread_mutex_unlock(&rt->reg_lock);
        pthread_mutex_destroy(&k->lock);
        free(k);
        return rk__fail(RK_ENOMEM, "kernel '%s': all %u kernel slots used",
            def->id, rt->cfg.max_kernels);
    }
    k->slot = rt->nkernels;
    /* Release publishes the kernel's fields to lock-free readers
     * (rk__resolve, rk__kernel_by_id) that load the slot with acquire. */
    atomic_store_explicit(&rt->slots[k->slot], k, memory_order_release);
    rt->nkernels++;
    pthread_mutex_unlock(&rt->reg_lock);
    return RK_OK;
}

int
rk_kernel_lookup(rk_runtime *rt, const char *id, rk_kernel *out)
{
    rk__kernel *k;

    if (rt == NULL || out == NULL)
        return rk__fail(RK_EINVAL, "rk_kernel_lookup: NULL argument");
    k = rk__kernel_by_id(rt, id);
    if (k == NULL)
        return rk__not_found(rt, id);
    out->slot = k->slot;
    out->gen = atomic_load_explicit(&k->gen, memory_order_acquire);
    return RK_OK;
}

int
rk__resolve(rk_runtime *rt, rk_kernel h, rk__kernel **kp)
{
    rk__kernel *k;

    if (rk__unlikely(rt == NULL))
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if (rk__unlikely(h.slot >= rt->cfg.max_kernels))
        return rk__fail(RK_ESTALE, "handle slot %u out of range", h.slot);
    /* Acquire pairs with the release store in rk_runtime_register. */
    k = atomic_load_explicit(&rt->slots[h.slot], memory_order_acquire);
    if (rk__unlikely(k == NULL))
        return rk__fail(RK_ESTALE, "handle names no kernel");
    /* Acquire pairs with the release increment in rk__kernel_ended. */
    if (rk__unlikely(
            atomic_load_explicit(&k->gen, memory_order_acquire) != h.gen))
        return rk__fail(RK_ESTALE,
            "handle to kernel '%s' is stale: the instance it "
            "named has ended",
            k->id);
    *kp = k;
    return RK_OK;
}

/* ---------------------------------------------------------- lifecycle */

static int
bad_transition(rk__kernel *k, uint32_t st, const char *op)
{
    int err;

    switch (st) {
    case RK_KERNEL_CREATED:
        err = RK_ENOTLAUNCHED;
        break;
    case RK_KERNEL_LAUNCHED:
        err = strcmp(op, "launch") == 0 ? RK_EALREADY : RK_ENOTACTIVE;
        break;
    case RK_KERNEL_TERMINATING:
        err = RK_ETERMINATED;
        break;
    case RK_KERNEL_TERMINATED:
        err = strcmp(op, "terminate") == 0 ? RK_EALREADY : RK_ETERMINATED;
        break;
    case RK_KERNEL_FAILED:
        err = RK_EFAILED;
        break;
    default: /* ACTIVE, DEACTIVATED */
        err = RK_EALREADY;
        break;
    }
    return rk__fail(err, "cannot %s kernel '%s': it is %s", op, k->id,
        rk_kernel_state_name((rk_kernel_state)st));
}

static rk__kernel *
kernel_for_op(rk_runtime *rt, const char *id, int *rc)
{
    rk__kernel *k;

    if (rt == NULL) {
        *rc = rk__fail(RK_EINVAL, "runtime is NULL");
        return NULL;
    }
    k = rk__kernel_by_id(rt, id);
    if (k == NULL)
        *rc = rk__not_found(rt, id);
    return k;
}

static uint32_t
state_of(rk__kernel *k)
{
    /* Acquire pairs with the CAS (acq_rel) of whoever changed it. */
    return atomic_load_explicit(&k->state, memory_order_acquire);
}

static bool
cas_state(rk__kernel *k, uint32_t *from, uint32_t to)
{
    /* acq_rel: publishes the instance set up before the change and sees
     * the kernel thread's writes when it changed the state. */
    return atomic_compare_exchange_strong_explicit(
        &k->state, from, to, memory_order_acq_rel, memory_order_acquire);
}

void
rk__kernel_ended(rk__kernel *k, bool failed)
{
    uint32_t st = state_of(k);
    uint32_t to = failed ? RK_KERNEL_FAILED : RK_KERNEL_TERMINATED;

    while (!cas_state(k, &st, to))
        ;
    /* Release pairs with the acquire load in rk__resolve: a handle user
     * that sees the new generation also sees the final state. */
    atomic_fetch_add_explicit(&k->gen, 1, memory_order_release);
}

static int
inst_create(rk__kernel *k, rk__inst **out)
{
    const rk_kernel_config *c = &k->def.config;
    rk_mqueue_config qin = { 0 };
    rk__inst *inst;
    int rc;

    /* GLUE (branch queue): the slot size is narrowed to 32 bits for the
     * input queue below; refuse what does not fit (issue 10, defect 1). */
    if ((uint64_t)RK_MSG_HEADER_SIZE + c->max_payload > UINT32_MAX - 63)
        return rk__fail(RK_EINVAL,
            "kernel '%s': max_payload %u is too large (64 + max_payload must "
            "fit 32 bits after rounding up to 64)",
            k->id, c->max_payload);
    inst = aligned_alloc(64, (sizeof(*inst) + 63) & ~(size_t)63);
    if (inst == NULL)
        return rk__fail(RK_ENOMEM, "kernel '%s': no memory", k->id);
    memset(inst, 0, sizeof(*inst));
    inst->k = k;
    inst->slot_size = RK_MSG_HEADER_SIZE + (size_t)c->max_payload;
    inst->telemetry = !c->telemetry_off;
    qin.capacity = c->input_capacity;
    qin.slot_size = (uint32_t)inst->slot_size;
    qin.backpressure = c->backpressure;
    qin.priority_bands = c->priority_bands;
    qin.single_producer = c->single_producer;
    rk__ec_init(&inst->control.wake);
    rc = rk__inq_init(&inst->in, &qin, c->batch, &inst->control.wake);
    if (rc == RK_OK) {
        rc = rk__outq_init(&inst->out, c->output_capacity, inst->slot_size);
        if (rc != RK_OK)
            rk__inq_fini(&inst->in);
    }
    if (rc == RK_OK
        && (rc = rk__ctx_init(&inst->ctx, inst, c->batch)) != RK_OK) {
        rk__inq_fini(&inst->in);
        rk__outq_fini(&inst->out);
    }
    if (rc != RK_OK) {
        /* GLUE (branch queue): keep the queue's detail, which names the
         * field (input_capacity, output_capacity, max_payload). */
        char why[192];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        rk__ctx_fini(&inst->ctx);
        free(inst);
        return rk__fail(
            rc, "kernel '%s': cannot create its queues: %s", k->id, why);
    }
    pthread_mutex_init(&inst->out_lock, NULL);
    *out = inst;
    return RK_OK;
}

int
rk_kernel_launch(rk_runtime *rt, const char *id)
{
    rk__kernel *k;
    rk__inst *inst = NULL, *old;
    rk__backend_launch spec;
    uint32_t st;
    int rc = RK_OK;

    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    st = state_of(k);
    if (st != RK_KERNEL_CREATED && st != RK_KERNEL_TERMINATED
        && st != RK_KERNEL_FAILED) {
        rc = bad_transition(k, st, "launch");
        goto out;
    }
    if ((rc = inst_create(k, &inst)) != RK_OK)
        goto out;
    spec = (rk__backend_launch) {
        .kernel_id = k->id,
        .control = &inst->control,
        .grid_size = k->def.config.grid_size,
        .block_size = k->def.config.block_size,
        .body = rk__kernel_body,
        .arg = inst,
    };
    rc = rt->be->launch(&spec, &inst->bi);
    if (rc != RK_OK) {
        inst_free(rt, inst); /* never published, no thread */
        goto out;
    }
    old = atomic_load_explicit(&k->inst, memory_order_relaxed);
    if (old != NULL) {
        /* Its thread has exited; it is joined and freed with the runtime,
         * so that lock-free readers of the old pointer stay safe. */
        old->retired_next = k->retired;
        k->retired = old;
    }
    /* Release: readers that load inst with acquire see it initialised,
     * bi included. */
    atomic_store_explicit(&k->inst, inst, memory_order_release);
    if (!cas_state(k, &st, RK_KERNEL_LAUNCHED))
        RK_ASSERT(0 && "state changed under the kernel lock");
out:
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int
rk_kernel_activate(rk_runtime *rt, const char *id)
{
    rk__kernel *k;
    uint32_t st;
    int rc = RK_OK;

    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    st = state_of(k);
    if ((st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_DEACTIVATED)
        && cas_state(k, &st, RK_KERNEL_ACTIVE))
        rt->be->activate(
            atomic_load_explicit(&k->inst, memory_order_relaxed)->bi);
    else
        rc = bad_transition(k, st, "activate");
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int
rk_kernel_deactivate(rk_runtime *rt, const char *id)
{
    rk__kernel *k;
    uint32_t st;
    int rc = RK_OK;

    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    st = state_of(k);
    if (st == RK_KERNEL_ACTIVE && cas_state(k, &st, RK_KERNEL_DEACTIVATED)) {
        rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
        rc = rt->be->deactivate(
            inst->bi, rk__deadline(rt->cfg.control_timeout_ns));
        if (rc != RK_OK)
            rc = rk__fail(rc,
                "kernel '%s' is DEACTIVATED but has not reached a "
                "safe point yet (busy in its actor)",
                k->id);
    } else {
        rc = bad_transition(k, st, "deactivate");
    }
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int
rk_kernel_terminate(rk_runtime *rt, const char *id, int64_t timeout_ns)
{
    rk__kernel *k;
    rk__inst *inst;
    uint32_t st;
    int rc = RK_OK;

    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    pthread_mutex_lock(&k->lock);
    st = state_of(k);
    if (st == RK_KERNEL_LAUNCHED || st == RK_KERNEL_ACTIVE
        || st == RK_KERNEL_DEACTIVATED) {
        if (!cas_state(k, &st, RK_KERNEL_TERMINATING)) {
            rc = bad_transition(k, st, "terminate");
            goto out;
        }
    } else if (st != RK_KERNEL_TERMINATING) {
        rc = bad_transition(k, st, "terminate");
        goto out;
    }
    inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
    rc = rt->be->terminate(inst->bi, rk__deadline(timeout_ns));
    if (rc != RK_OK)
        rc = rk__fail(rc,
            "kernel '%s' did not end in time; it stays "
            "TERMINATING (call terminate again)",
            k->id);
out:
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int
rk_kernel_wait(rk_runtime *rt, const char *id, int64_t timeout_ns)
{
    rk__kernel *k;
    rk__inst *inst;
    int rc = RK_OK;

    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    if (inst == NULL)
        return rk__fail(
            RK_ENOTLAUNCHED, "kernel '%s' has not been launched", k->id);
    rc = rt->be->wait_exit(inst->bi, rk__deadline(timeout_ns));
    if (rc != RK_OK)
        return rk__fail(rc, "kernel '%s' is still running", k->id);
    return RK_OK;
}

int
rk_kernel_state_get(rk_runtime *rt, const char *id, rk_kernel_state *out)
{
    rk__kernel *k;
    int rc = RK_OK;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_kernel_state_get: out is NULL");
    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
        return rc;
    *out = (rk_kernel_state)state_of(k);
    return RK_OK;
}

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
        "largest input queue depth seen")

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
    uint64_t start, held, now = rk_now_ns();

    memset(s, 0, sizeof(*s));
    s->state = (rk_kernel_state)state_of(k);
    if (inst == NULL)
        return;
    rk__inq_stats(&inst->in, &q);
    s->processed = rk__counter_get(&inst->kc.processed);
    s->dead_lettered = rk__counter_get(&inst->kc.dead_lettered);
    s->errors = rk__counter_get(&inst->kc.errors);
    s->restarts = rk__counter_get(&inst->kc.restarts);
    s->sent = rk__counter_get(&inst->kc.sent);
    s->dropped = q.dropped;
    s->rejected = q.rejected + rk__counter_get(&inst->rejected);
    /* Dequeued but neither processed nor dead-lettered: prefetched or in
     * flight in the kernel (transiently off while the kernel runs). */
    held = q.dequeued - s->processed - s->dead_lettered;
    s->pending = q.depth + (held > q.dequeued ? 0 : held);
    s->queue_depth = q.depth;
    s->queue_high_water = q.high_water;
    /* Every attempt ends in exactly one of these (docs/runtime.md). */
    s->offered = q.enqueued + (q.dropped - q.evicted) + s->rejected;
    rk__hist_summary(&inst->latency, &lat);
    s->latency_count = lat.count;
    s->latency_p50_ns = lat.p50_ns;
    s->latency_p99_ns = lat.p99_ns;
    s->latency_p999_ns = lat.p999_ns;
    s->latency_max_ns = lat.max_ns;
    start = atomic_load_explicit(&inst->start_ns, memory_order_relaxed);
    s->uptime_ns = start != 0 && now > start ? now - start : 0;
    s->throughput = rk_rate_per_sec(s->processed, s->uptime_ns);
    {
        rk__backend_status bs;
        k->rt->be->query(inst->bi, &bs);
        s->cpu_time_ns = bs.cpu_time_ns;
    }
}

int
rk_kernel_stats_get(rk_runtime *rt, const char *id, rk_kernel_stats *out)
{
    rk__kernel *k;
    int rc = RK_OK;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_kernel_stats_get: out is NULL");
    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
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
    int rc = RK_OK;

    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_kernel_telemetry: out is NULL");
    if ((k = kernel_for_op(rt, id, &rc)) == NULL)
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
