/*
 * src/runtime/runtime.c - the runtime object: create (choosing the
 * backend, starting the supervisor), destroy, and kernel registration.
 * The backend of a kernel is the one its config names, else the
 * runtime's (rk_runtime_config.backend, "auto" when NULL).
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
    {
        int rc = rk__backend_find(rt->cfg.backend, &rt->be);
        if (rc != RK_OK) {
            free(rt);
            return rc;
        }
    }
    rk__ec_init(&rt->events);
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
    {
        int rc = rk__supervisor_start(rt);
        if (rc != RK_OK) {
            rk_runtime_destroy(rt);
            return rc;
        }
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

/* Ends one kernel for destroy; false if it could not be ended. An
 * instance that does not end within the terminate timeout, even after its
 * queues are closed (an actor stuck in its own code), is detached: its
 * thread may still run, and reaches its instance, its kernel, the kernels
 * it sends to and the runtime itself, so rk_runtime_destroy then frees
 * nothing of the runtime (docs/runtime.md, "Destroy"). */
static bool
destroy_kernel(rk_runtime *rt, rk__kernel *k)
{
    uint32_t st = rk__state_of(k);
    rk__inst *inst;
    int rc;

    if (st == RK_KERNEL_CREATED || st == RK_KERNEL_TERMINATED
        || st == RK_KERNEL_FAILED)
        return true;
    rc = rk_kernel_terminate(rt, k->id, rt->cfg.terminate_timeout_ns);
    if (rc != RK_ETIMEDOUT)
        return true;
    inst = atomic_load_explicit(&k->inst, memory_order_acquire);
    /* Closing both queues unblocks an actor stuck sending or receiving. */
    rk__inq_close(&inst->in);
    rk__ec_notify_all(&inst->wake);
    rk__outq_close(&inst->out);
    if (inst->be->wait_ack(inst->bi, 0,
            rk__deadline(rt->cfg.terminate_timeout_ns))
        == RK_OK) {
        pthread_mutex_lock(&k->lock);
        rk__reap(k, inst);
        pthread_mutex_unlock(&k->lock);
        return true;
    }
    rk__log(RK_LOG_ERROR,
        "kernel '%s' did not end within the terminate timeout twice; its "
        "thread is detached and the runtime's memory is left to it",
        k->id);
    inst->be->destroy(inst->bi, 1);
    inst->detached = true;
    return false;
}

void
rk_runtime_destroy(rk_runtime *rt)
{
    uint32_t i;
    bool all_ended = true;

    if (rt == NULL)
        return;
    for (i = 0; i < rt->nkernels; i++)
        all_ended &= destroy_kernel(
            rt, atomic_load_explicit(&rt->slots[i], memory_order_relaxed));
    rk__supervisor_stop(rt);
    if (!all_ended)
        return; /* a detached thread may still use any of it: leaked */
    for (i = 0; i < rt->nkernels; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
        rk__inst *inst = atomic_load_explicit(&k->inst, memory_order_relaxed);
        rk__inst *r, *next;

        if (inst != NULL)
            rk__inst_free(inst);
        for (r = k->retired; r != NULL; r = next) {
            next = r->retired_next;
            rk__inst_free(r);
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
    /* The kernel's backend: its own name, else the runtime's; "auto"
     * picks by the code the kernel has (host functions, device source). */
    if ((rc = rk__backend_find_for(
             def->config.backend ? def->config.backend : rt->cfg.backend,
             RK__CODE_HOST
                 | (def->config.device_source ? RK__CODE_DEVICE : 0u),
             &k->be))
        != RK_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", rk_errdetail());
        free(k);
        return rk__fail(rc, "kernel '%s': %s", def->id, why);
    }
    k->def.config.backend = k->be->name;
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
