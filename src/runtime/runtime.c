/*
 * src/runtime/runtime.c - the runtime object: create (choosing the
 * backend, starting the supervisor), destroy, and kernel registration.
 * The backend of a kernel is the one its config names, else the
 * runtime's (rk_runtime_config.backend, "auto" when NULL).
 */
#include <pthread.h>
#include <sched.h>
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
    rk_static_kernel *head;

    if (node == NULL)
        return;
    head = atomic_load_explicit(&static_head, memory_order_relaxed);

    /* Release publishes node->def and node->next to the acquire load in
     * rk_runtime_create; constructors may run on any thread (dlopen). */
    do {
        node->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&static_head, &head, node,
        memory_order_release, memory_order_relaxed));
}

/* ----------------------------------------------------------- limits */

static int
check_runtime_sizes(const rk_runtime_config *c)
{
    if (c->max_kernels > RK_RUNTIME_MAX_KERNELS)
        return rk__fail(RK_EINVAL,
            "rk_runtime_create: max_kernels %u is over the limit %u "
            "(RK_RUNTIME_MAX_KERNELS)",
            c->max_kernels, RK_RUNTIME_MAX_KERNELS);
    if (c->dead_letter_capacity > RK_RUNTIME_MAX_DEAD_LETTERS)
        return rk__fail(RK_EINVAL,
            "rk_runtime_create: dead_letter_capacity %u is over the limit "
            "%u (RK_RUNTIME_MAX_DEAD_LETTERS)",
            c->dead_letter_capacity, RK_RUNTIME_MAX_DEAD_LETTERS);
    return RK_OK;
}

/* Any capacity from 1 (0 took the default) to the limit: the queues hold
 * exactly that many, in rings rounded up inside (issue 27). */
static int
check_capacity(const char *id, const char *field, uint32_t v)
{
    if (v > RK_KERNEL_MAX_CAPACITY)
        return rk__fail(RK_EINVAL,
            "kernel '%s': %s %u is over the limit %u "
            "(RK_KERNEL_MAX_CAPACITY)",
            id, field, v, RK_KERNEL_MAX_CAPACITY);
    return RK_OK;
}

static int
check_bytes(const char *id, const char *field, uint64_t n, uint64_t stride)
{
    if (n * stride > RK_KERNEL_MAX_QUEUE_BYTES)
        return rk__fail(RK_EINVAL,
            "kernel '%s': %s %llu with %llu-byte slots (max_payload + the "
            "64-byte header, rounded up to 64) is over the limit of %llu "
            "bytes (RK_KERNEL_MAX_QUEUE_BYTES)",
            id, field, (unsigned long long)n, (unsigned long long)stride,
            (unsigned long long)RK_KERNEL_MAX_QUEUE_BYTES);
    return RK_OK;
}

/* Every size field of a kernel's configuration (defaults applied), so
 * that the queues' 32-bit slot sizes and byte counts cannot overflow. */
static int
check_kernel_sizes(const char *id, const rk_kernel_config *c)
{
    uint64_t stride;
    int rc;

    if ((rc = check_capacity(id, "input_capacity", c->input_capacity)) != RK_OK
        || (rc = check_capacity(id, "output_capacity", c->output_capacity))
            != RK_OK)
        return rc;
    if (c->max_payload > RK_KERNEL_MAX_PAYLOAD)
        return rk__fail(RK_EINVAL,
            "kernel '%s': max_payload %u is over the limit %u "
            "(RK_KERNEL_MAX_PAYLOAD)",
            id, c->max_payload, RK_KERNEL_MAX_PAYLOAD);
    if (c->batch > RK_KERNEL_MAX_BATCH)
        return rk__fail(RK_EINVAL,
            "kernel '%s': batch %u is over the limit %u "
            "(RK_KERNEL_MAX_BATCH)",
            id, c->batch, RK_KERNEL_MAX_BATCH);
    stride
        = ((uint64_t)RK_MSG_HEADER_SIZE + c->max_payload + 63) & ~UINT64_C(63);
    if ((rc = check_bytes(id, "input_capacity", c->input_capacity, stride))
            != RK_OK
        || (rc = check_bytes(
                id, "output_capacity", c->output_capacity, stride))
            != RK_OK
        || (rc = check_bytes(id, "batch", (uint64_t)c->batch + 1, stride))
            != RK_OK)
        return rc;
    return RK_OK;
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
    {
        int rc = check_runtime_sizes(&rt->cfg);
        if (rc != RK_OK) {
            free(rt);
            return rc;
        }
    }
    rt->fork_gen = rk__fork_gen();
    rk__ec_init(&rt->calls_ec);
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
        /* Kept for the kernels registered later: the backend's own name
         * (static), never the caller's string, which need not outlive
         * this call; NULL stays "auto". */
        if (rt->cfg.backend != NULL && strcmp(rt->cfg.backend, "auto") != 0)
            rt->cfg.backend = rt->be->name;
        else
            rt->cfg.backend = NULL;
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
    rk__cond_init_mono(&rt->dlq_cond);
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
            int rc;
            if (n->def == NULL)
                continue;
            rc = rk_runtime_register(rt, n->def);
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
    /* Closing both queues unblocks an actor stuck sending or receiving,
     * and every host call blocked on them. */
    rk__inbox_close(inst->in);
    rk__ec_notify_all(&inst->wake);
    rk__outq_close(&inst->out);
    if (rk__ack_wait(inst, 0, rk__deadline(rt->cfg.terminate_timeout_ns))
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

/* Destroy with a stuck kernel: gives an exited instance's backend state
 * back (joins a CPU thread, frees the private state no other thread
 * reaches) but keeps the instance itself. */
static void
release_exited(rk__inst *inst)
{
    if (inst != NULL && !inst->detached && inst->bi != NULL) {
        inst->be->destroy(inst->bi, 0);
        free(inst->bi); /* runtime-allocated, as in rk__inst_free */
        inst->bi = NULL;
    }
}

void
rk_runtime_destroy(rk_runtime *rt)
{
    char stuck[300];
    size_t off = 0;
    uint32_t i;

    if (rt == NULL)
        return;
    /* A forked child's copy: its threads and locks are the parent's; it
     * is left alone (the child's copy of the memory stays allocated). */
    if (rk__fork_check(rt, "rk_runtime_destroy") != RK_OK)
        return;
    /* New host calls are refused from here on (rk__call_enter); the heavy
     * barrier pairs with the light one of a call entering on its own
     * slot, so the counts read later include every call that missed the
     * store. */
    atomic_store_explicit(&rt->closing, 1, memory_order_seq_cst);
    rk__heavy_barrier();
    stuck[0] = '\0';
    for (i = 0; i < rt->nkernels; i++) {
        rk__kernel *k
            = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
        if (!destroy_kernel(rt, k) && off < sizeof(stuck)) {
            int w = snprintf(stuck + off, sizeof(stuck) - off, "%s'%s'",
                off ? ", " : "", k->id);
            off += w > 0 ? (size_t)w : 0;
        }
    }
    /* Every instance's queues are closed now (rk__reap, or above), which
     * woke the host calls blocked on them; dead-letter receivers see
     * closing. Wait until every host call has left before freeing. */
    pthread_mutex_lock(&rt->dlq_lock);
    pthread_cond_broadcast(&rt->dlq_cond);
    pthread_mutex_unlock(&rt->dlq_lock);
    rk__calls_wait(rt);
    rk__supervisor_stop(rt);
    if (off != 0) {
        /* A detached thread may still use any of it: leaked on purpose.
         * The instances that did exit are still released to their
         * backend (a CPU thread is joined): that state is private to
         * each instance, and no other thread reaches it. The detail is
         * the caller's report (destroy returns nothing). */
        for (i = 0; i < rt->nkernels; i++) {
            rk__kernel *k
                = atomic_load_explicit(&rt->slots[i], memory_order_relaxed);
            rk__inst *r;
            release_exited(
                atomic_load_explicit(&k->inst, memory_order_relaxed));
            for (r = k->retired; r != NULL; r = r->retired_next)
                release_exited(r);
        }
        (void)rk__fail(RK_ETIMEDOUT,
            "rk_runtime_destroy: kernel %s did not end within "
            "terminate_timeout_ns (%lld ns, twice); its thread is detached "
            "and the runtime's memory is left to it",
            stuck, (long long)rt->cfg.terminate_timeout_ns);
        return;
    }
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

/* Ids are reported in the exposition and in JSON: valid UTF-8 only. */
static int
check_id(const char *what, const char *id)
{
    return rk__check_name(what, "id", id, RK_ID_MAX);
}

/* The names rk_dev_publish's topic indices stand for: each a valid topic
 * name, at most 65536 (the index is 16 bits of a frame's flags). */
static int
check_device_topics(const rk_kernel_def *def)
{
    const rk_kernel_config *c = &def->config;

    if (c->ndevice_topics > 65536u
        || (c->ndevice_topics != 0 && c->device_topics == NULL))
        return rk__fail(RK_EINVAL,
            "kernel '%s': %u device topics (at most 65536, each named)",
            def->id, c->ndevice_topics);
    for (uint32_t i = 0; i < c->ndevice_topics; i++) {
        int rc = rk__check_name(
            "rk_runtime_register", "topic name", c->device_topics[i], RK_ID_MAX);
        if (rc != RK_OK)
            return rc;
    }
    return RK_OK;
}

int
rk_runtime_register(rk_runtime *rt, const rk_kernel_def *def)
{
    rk__kernel *k;
    int rc;

    if ((rc = rk__host_check(rt, def != NULL, "rk_runtime_register")) != RK_OK)
        return rc;
    if ((rc = check_id("rk_runtime_register", def->id)) != RK_OK)
        return rc;
    if ((def->actor == NULL) == (def->handler == NULL)
        && !(def->actor != NULL && def->config.direct_calls))
        return rk__fail(RK_EINVAL,
            "kernel '%s': set exactly one of actor and handler (both only "
            "with direct_calls: the handler runs the direct calls)",
            def->id);
    if (def->config.direct_calls && def->handler == NULL)
        return rk__fail(RK_EINVAL,
            "kernel '%s': direct_calls needs a handler (an actor receives "
            "its own messages)",
            def->id);
    if ((rc = check_device_topics(def)) != RK_OK)
        return rc;
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
    if ((rc = check_kernel_sizes(k->id, &k->def.config)) != RK_OK) {
        free(k);
        return rc;
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
    if (k->be->prepare != NULL)
        k->be->prepare(k->id, &k->def.config);
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
