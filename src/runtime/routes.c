/*
 * src/runtime/routes.c - kernel-to-kernel routes (rk_connect).
 */
#include <string.h>

#include "runtime/internal.h"


int
rk_connect(rk_runtime *rt, const char *from, const char *to)
{
    rk__kernel *a, *b;
    const rk_msgtype *ot, *it;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((a = rk__kernel_by_id(rt, from)) == NULL)
        return rk__not_found(rt, from);
    if ((b = rk__kernel_by_id(rt, to)) == NULL)
        return rk__not_found(rt, to);
    ot = a->def.config.output_type;
    it = b->def.config.input_type;
    if (it != NULL && ot != it)
        return rk__fail(RK_ETYPE,
            "cannot connect '%s' -> '%s': '%s' sends %s, '%s' "
            "takes %s",
            from, to, from, ot ? ot->name : "any type", to, it->name);
    /* Release pairs with the acquire load in ctx_emit. The route belongs
     * to the kernel, so it outlives relaunches. */
    atomic_store_explicit(&a->route, b, memory_order_release);
    return RK_OK;
}

int
rk_disconnect(rk_runtime *rt, const char *from)
{
    rk__kernel *a;

    if (rt == NULL)
        return rk__fail(RK_EINVAL, "runtime is NULL");
    if ((a = rk__kernel_by_id(rt, from)) == NULL)
        return rk__not_found(rt, from);
    atomic_store_explicit(&a->route, NULL, memory_order_release);
    return RK_OK;
}

