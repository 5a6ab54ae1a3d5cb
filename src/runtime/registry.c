/*
 * src/runtime/registry.c - finding kernels: by id, by handle (slot and
 * generation), and the "not found" detail that lists what exists.
 */
#include <string.h>

#include "runtime/internal.h"

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

uint32_t
rk__kernel_count(rk_runtime *rt)
{
    return rk__locked_read_u32(&rt->reg_lock, &rt->nkernels);
}

rk__kernel *
rk__kernel_by_id(rk_runtime *rt, const char *id)
{
    uint32_t i, n;

    if (id == NULL)
        return NULL;
    n = rk__kernel_count(rt);
    for (i = 0; i < n; i++) {
        rk__kernel *k = rk__kernel_at(rt, i);
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
    n = rk__kernel_count(rt);
    for (i = 0; i < n && off < sizeof(list) - 1; i++) {
        rk__kernel *k = rk__kernel_at(rt, i);
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
rk_kernel_lookup(rk_runtime *rt, const char *id, rk_kernel *out)
{
    rk__kernel *k;
    int rc;

    if ((rc = rk__host_check(rt, out != NULL, "rk_kernel_lookup")) != RK_OK)
        return rc;
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
    /* Acquire pairs with the release increment in rk__reap. */
    if (rk__unlikely(
            atomic_load_explicit(&k->gen, memory_order_acquire) != h.gen))
        return rk__fail(RK_ESTALE,
            "handle to kernel '%s' is stale: the instance it "
            "named has ended",
            k->id);
    *kp = k;
    return RK_OK;
}

int
rk_kernel_config_get(rk_runtime *rt, const char *id, rk_kernel_config *out)
{
    int rc;
    rk__kernel *k = rk__kernel_for_get(rt, id, out, __func__, &rc);

    if (k != NULL)
        *out = k->def.config; /* set at register, never changed after */
    return rc;
}

rk__kernel *
rk__kernel_for_op(rk_runtime *rt, const char *id, int *rc)
{
    rk__kernel *k;

    if (rt == NULL) {
        *rc = rk__fail(RK_EINVAL, "runtime is NULL");
        return NULL;
    }
    if ((*rc = rk__fork_check(rt, "kernel operation")) != RK_OK)
        return NULL;
    k = rk__kernel_by_id(rt, id);
    if (k == NULL)
        *rc = rk__not_found(rt, id);
    return k;
}

rk__kernel *
rk__kernel_for_get(
    rk_runtime *rt, const char *id, const void *out, const char *op, int *rc)
{
    if (out == NULL) {
        *rc = rk__fail(RK_EINVAL, "%s: out is NULL", op);
        return NULL;
    }
    return rk__kernel_for_op(rt, id, rc);
}

int
rk_runtime_kernel_ids(
    rk_runtime *rt, char (*ids)[RK_ID_MAX + 1], size_t cap, size_t *n)
{
    uint32_t i, total;
    int rc;

    if ((rc = rk__host_check(rt, n != NULL && (ids != NULL || cap == 0),
             "rk_runtime_kernel_ids"))
        != RK_OK)
        return rc;
    total = rk__kernel_count(rt);
    for (i = 0; i < total && i < cap; i++)
        memcpy(ids[i], rk__kernel_at(rt, i)->id, sizeof(ids[i]));
    *n = total;
    return RK_OK;
}
