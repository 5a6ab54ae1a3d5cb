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

/* True while k's instance runs (launched and not yet ended). */
static bool
runs(rk__kernel *k)
{
    uint32_t st = atomic_load_explicit(&k->state, memory_order_acquire);

    return st >= RK_KERNEL_LAUNCHED && st <= RK_KERNEL_TERMINATING;
}

/* a's route to b is carried by their backend itself (cuda: K2K lanes on
 * the device) while both run: the backend says so for a's instance.
 * Under both kernels' locks (no launch of either meanwhile). */
static bool
carried(rk__kernel *a, rk__kernel *b)
{
    rk__inst *inst = atomic_load_explicit(&a->inst, memory_order_acquire);

    return b != NULL && runs(a) && runs(b) && inst != NULL
        && inst->bi != NULL && inst->be->route_live != NULL
        && inst->be->route_live(inst->bi);
}

/* A route the device carries between running kernels cannot be unwired
 * under them (the sender holds its target's lane): refused with RK_EBUSY
 * until one end has ended (docs/cuda-k2k.md, "Disconnect"). Both locks,
 * in address order, keep either end from launching (and wiring the route
 * again) between the check and the store. */
int
rk_disconnect(rk_runtime *rt, const char *from)
{
    rk__kernel *a, *b, *lo, *hi;
    int rc = RK_OK;

    if ((a = rk__kernel_for_op(rt, from, &rc)) == NULL)
        return rc;
    /* Acquire pairs with rk_connect's release of the route. */
    b = atomic_load_explicit(&a->route, memory_order_acquire);
    lo = b != NULL && (uintptr_t)b < (uintptr_t)a ? b : a;
    hi = lo == a ? b : a;
    pthread_mutex_lock(&lo->lock);
    if (hi != NULL && hi != lo)
        pthread_mutex_lock(&hi->lock);
    if (atomic_load_explicit(&a->route, memory_order_relaxed) == b
        && carried(a, b))
        rc = rk__fail(RK_EBUSY,
            "rk_disconnect: the route '%s' -> '%s' is carried on the "
            "device while both kernels run; terminate one of them first",
            a->id, b->id);
    else
        atomic_store_explicit(&a->route, NULL, memory_order_release);
    if (hi != NULL && hi != lo)
        pthread_mutex_unlock(&hi->lock);
    pthread_mutex_unlock(&lo->lock);
    return rc;
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
