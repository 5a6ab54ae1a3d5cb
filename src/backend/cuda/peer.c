/*
 * src/backend/cuda/peer.c - routes between CUDA devices, peer-to-peer
 * where the driver allows it (see peer.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devwide.h"
#include "backend/cuda/peer.h"
#include "common/common.h"
#include "device/cuda_driver.h"

/* Devices tracked; a pair beyond them is never linked (relay). */
#define PEER_MAX 32

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
/* linked[a][b]: the last plan for the pair found it peer-linked (both
 * directions enabled). Symmetric. Under peer_lock. */
static unsigned char linked[PEER_MAX][PEER_MAX];
static rk__cu_peer_counts counts; /* under peer_lock */

static int
no_peer_env(void)
{
    const char *s = getenv("RK_CUDA_NO_PEER");
    return s != NULL && s[0] != '\0' && strcmp(s, "0") != 0;
}

int
rk__cu_peer_enable(int src, int dst)
{
    const struct rk__cuda_driver *d;
    rk__cu_ctx saved = NULL, peer = NULL;
    rk__cu_result r;
    int rc;

    if ((rc = rk__cuda_driver(&d)) != RK_OK)
        return rc;
    if (d->cuCtxEnablePeerAccess == NULL || d->cuDeviceCanAccessPeer == NULL)
        return rk__fail(RK_ENOTSUP,
            "CUDA device %d -> %d: the driver has no peer access "
            "(cuCtxEnablePeerAccess)",
            src, dst);
    if (src == dst)
        return rk__fail(RK_EINVAL,
            "CUDA device %d -> %d: peer access is between two devices", src,
            dst);
    (void)d->cuCtxGetCurrent(&saved);
    /* The peer's primary context, then the source's current: access
     * from the current context to the peer's allocations. */
    if ((rc = rk__cuda_enter(dst, NULL)) == RK_OK
        && (rc = rk__cuda_check(d->cuCtxGetCurrent(&peer), "cuCtxGetCurrent"))
            == RK_OK
        && (rc = rk__cuda_enter(src, NULL)) == RK_OK) {
        r = d->cuCtxEnablePeerAccess(peer, 0);
        if (r == RK__CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
            r = RK__CUDA_SUCCESS; /* an earlier call, or another user */
        if (r == RK__CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) {
            (void)rk__cuda_check(r, "cuCtxEnablePeerAccess");
            rc = rk__fail(RK_ENOTSUP,
                "CUDA device %d cannot reach device %d's memory: %s", src, dst,
                rk_errdetail());
        } else if ((rc = rk__cuda_check(r, "cuCtxEnablePeerAccess"))
            != RK_OK) {
            rc = rk__fail(rc,
                "enabling peer access from CUDA device %d to device %d: %s",
                src, dst, rk_errdetail());
        }
    }
    (void)d->cuCtxSetCurrent(saved);
    return rc;
}

/* Can a and b reach each other's memory, by the driver's word? 0 where it
 * lacks the calls or fails the query. */
static int
can_reach(const struct rk__cuda_driver *d, int a, int b)
{
    int ab = 0, ba = 0;
    if (d->cuDeviceCanAccessPeer == NULL || d->cuCtxEnablePeerAccess == NULL)
        return 0;
    return d->cuDeviceCanAccessPeer(&ab, a, b) == RK__CUDA_SUCCESS
        && d->cuDeviceCanAccessPeer(&ba, b, a) == RK__CUDA_SUCCESS && ab && ba;
}

/* Decides the pair (a != b, both devices): linked or not. peer_lock
 * held. RK_OK, or enable's error (the pair is then not linked). */
static int
decide(const struct rk__cuda_driver *d, int a, int b)
{
    int rc = RK_OK, link = 0;

    if (a < PEER_MAX && b < PEER_MAX && !no_peer_env() && can_reach(d, a, b)) {
        rc = rk__cu_peer_enable(a, b);
        if (rc == RK_OK) {
            counts.enables++;
            rc = rk__cu_peer_enable(b, a);
        }
        if (rc == RK_OK) {
            counts.enables++;
            link = 1;
        }
    }
    if (a < PEER_MAX && b < PEER_MAX)
        linked[a][b] = linked[b][a] = (unsigned char)link;
    return rc;
}

/* linked[a][b], for any a and b (0 beyond the table). peer_lock held. */
static int
pair_linked(int a, int b)
{
    return a >= 0 && b >= 0 && a < PEER_MAX && b < PEER_MAX && linked[a][b];
}

/* The other end of a route, where it is a cuda kernel with device code
 * (the runtime hands only peers on this backend). */
static int
device_peer(const rk__backend_peer *p)
{
    return p->kernel_id != NULL && p->config != NULL
        && p->config->device_source != NULL;
}

/* One route between the kernel (on ordinal) and p: out says which way. */
static int
plan_one(const struct rk__cuda_driver *d, int ordinal, const char *self,
    const rk__backend_peer *p, int out)
{
    const char *from = out ? self : p->kernel_id;
    const char *to = out ? p->kernel_id : self;
    int dev, rc, link = 0;

    if ((rc = rk__cu_device_of(p->kernel_id, p->config, &dev)) != RK_OK)
        return rk__fail(
            rc, "route '%s' -> '%s': %s", from, to, rk_errdetail());
    if (dev == ordinal)
        return RK_OK;
    pthread_mutex_lock(&peer_lock);
    rc = decide(d, ordinal, dev);
    if (out && rc == RK_OK) {
        if ((link = pair_linked(ordinal, dev)) != 0)
            counts.p2p++;
        else
            counts.relayed++;
    }
    pthread_mutex_unlock(&peer_lock);
    if (out && rc == RK_OK)
        rk__log(RK_LOG_INFO,
            "route '%s' -> '%s' crosses CUDA devices %d -> %d: %s", from, to,
            ordinal, dev,
            link ? "peer-to-peer (lanes in the target's memory)"
                 : "host relay (no peer access)");
    if (rc != RK_OK)
        return rk__fail(rc, "route '%s' -> '%s' (CUDA device %d -> %d): %s",
            from, to, out ? ordinal : dev, out ? dev : ordinal,
            rk_errdetail());
    return RK_OK;
}

int
rk__cu_peer_plan(int ordinal, const rk__backend_launch *spec)
{
    const struct rk__cuda_driver *d;
    int rc;

    if ((rc = rk__cuda_driver(&d)) != RK_OK)
        return rc;
    if (device_peer(&spec->route_to)
        && (rc = plan_one(d, ordinal, spec->kernel_id, &spec->route_to, 1))
            != RK_OK)
        return rc;
    for (uint32_t i = 0; i < spec->nroutes_in; i++)
        if (device_peer(&spec->routes_in[i])
            && (rc = plan_one(
                    d, ordinal, spec->kernel_id, &spec->routes_in[i], 0))
                != RK_OK)
            return rc;
    return RK_OK;
}

int
rk__cu_peer_linked(int a, int b)
{
    int l;
    if (a == b)
        return 1;
    pthread_mutex_lock(&peer_lock);
    l = pair_linked(a, b);
    pthread_mutex_unlock(&peer_lock);
    return l;
}

void
rk__cu_peer_counts_get(rk__cu_peer_counts *out)
{
    pthread_mutex_lock(&peer_lock);
    *out = counts;
    pthread_mutex_unlock(&peer_lock);
}
