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
    int rc;

    if ((a = rk__kernel_for_op(rt, from, &rc)) == NULL
        || (b = rk__kernel_for_op(rt, to, &rc)) == NULL)
        return rc;
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
    int rc;

    if ((a = rk__kernel_for_op(rt, from, &rc)) == NULL)
        return rc;
    atomic_store_explicit(&a->route, NULL, memory_order_release);
    return RK_OK;
}

