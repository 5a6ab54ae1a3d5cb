/*
 * src/cluster/mpi_stage.c - staging: the growable byte buffers of the
 * cluster, and the frames a thread stages for a peer, which the
 * progress thread moves into batches (rk__cl_pump) (docs/cluster.md).
 * Each peer has two stages, guarded by its lock: 0 for DATA and TOPIC
 * frames (credited, and bounded: a producer waits for room), 1 for
 * replies, errors and announcements (never wait).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/cluster_int.h"
#include "cluster/mpi_wake.h"

int
rk__cl_buf_append(cl_buf *b, size_t n, uint8_t **where)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *p;

        while (cap < b->len + n)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL)
            return rk__fail(RK_ENOMEM, "cluster: staging buffer of %zu", cap);
        b->p = p;
        b->cap = cap;
    }
    *where = b->p + b->len;
    b->len += n;
    return RK_OK;
}

/* Appends a frame to peer's staging class cls. Class 0 waits (up to the
 * timeout) while the stage is over its limit: a slow peer slows its
 * proxies, whose own queues then apply their backpressure. */
int
rk__cl_stage_reserve(rk_cluster *cl, cl_peer *p, int rank, int cls, size_t len,
    uint64_t deadline, uint8_t **dst)
{
    while (cls == 0 && p->stage[0].len >= cl->stage_limit
        && atomic_load(&p->state) == PEER_LIVE && !atomic_load(&cl->stopped)) {
        struct timespec ts;
        uint64_t now = rk_now_ns(), t;

        if (now >= deadline)
            return rk__fail(
                RK_ETIMEDOUT, "cluster: rank %d is not keeping up", rank);
        t = deadline - now < 10000000 ? deadline : now + 10000000;
        ts.tv_sec = (time_t)(t / 1000000000u);
        ts.tv_nsec = (long)(t % 1000000000u);
        pthread_cond_timedwait(&p->room, &p->lock, &ts);
    }
    if (atomic_load(&p->state) != PEER_LIVE || atomic_load(&cl->stopped))
        return rk__fail(RK_EUNREACHABLE, "cluster: rank %d is %s", rank,
            atomic_load(&p->state) == PEER_DEAD ? "dead" : "gone");
    atomic_fetch_or_explicit(&p->staged, 1u << cls, memory_order_relaxed);
    return rk__cl_buf_append(&p->stage[cls], len, dst);
}

int
rk__cl_stage_frame(rk_cluster *cl, int rank, int cls, const rk__cl_frame *f,
    const void *payload, int64_t timeout_ns)
{
    cl_peer *p = &cl->peers[rank];
    uint8_t *dst = NULL;
    int rc;

    pthread_mutex_lock(&p->lock);
    rc = rk__cl_stage_reserve(cl, p, rank, cls, rk__cl_frame_size(f->len),
        rk__deadline(timeout_ns), &dst);
    if (rc == RK_OK) {
        rk__cl_frame_write(dst, f, payload);
        if (cls == 0)
            atomic_fetch_add_explicit(&p->unsent, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == RK_OK)
        rk__cl_wake_progress(cl);
    return rc;
}

/* Appends frames already encoded (a proxy's run) under one lock. */
int
rk__cl_stage_bytes(
    rk_cluster *cl, int rank, const uint8_t *bytes, size_t len, uint32_t n)
{
    cl_peer *p = &cl->peers[rank];
    uint8_t *dst = NULL;
    int rc;

    pthread_mutex_lock(&p->lock);
    rc = rk__cl_stage_reserve(cl, p, rank, 0, len, UINT64_MAX, &dst);
    if (rc == RK_OK) {
        memcpy(dst, bytes, len);
        atomic_fetch_add_explicit(&p->unsent, n, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == RK_OK)
        rk__cl_wake_progress(cl);
    return rc;
}
