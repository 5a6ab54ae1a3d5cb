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


/* A launch's view of the routes (rk__backend_launch.route_to and
 * routes_in): k's target and the kernels routed to k, where they run on
 * k's backend. Under k's lock; the route pointers are read once each. */
void
rk__routes_for_launch(rk__kernel *k, rk__backend_launch *spec)
{
    rk_runtime *rt = k->rt;
    rk__kernel *to = atomic_load_explicit(&k->route, memory_order_acquire);

    spec->route_to = (rk__backend_peer) { 0 };
    spec->nroutes_in = 0;
    if (to != NULL && to->be == k->be)
        spec->route_to = (rk__backend_peer) { to->id, &to->def.config };
    pthread_mutex_lock(&rt->reg_lock);
    for (uint32_t i = 0; i < rt->nkernels; i++) {
        rk__kernel *s
            = atomic_load_explicit(&rt->slots[i], memory_order_acquire);
        /* Acquire pairs with rk_connect's release of the route. */
        if (s == NULL || s->be != k->be
            || atomic_load_explicit(&s->route, memory_order_acquire) != k
            || spec->nroutes_in == RK__ROUTES_IN_MAX)
            continue;
        spec->routes_in[spec->nroutes_in++]
            = (rk__backend_peer) { s->id, &s->def.config };
    }
    pthread_mutex_unlock(&rt->reg_lock);
}
