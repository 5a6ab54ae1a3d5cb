/*
 * src/runtime/deadletter.c - the dead-letter queue: messages a kernel
 * could not process (failed, abandoned, or left at termination).
 */
#include <string.h>
#include <time.h>

#include "runtime/internal.h"


void
rk__dead_letter(rk_runtime *rt, rk__inst *inst, rk_dead_reason reason,
    int error, const void *frame, size_t len)
{
    rk__dead d;
    size_t plen = len > RK_MSG_HEADER_SIZE ? len - RK_MSG_HEADER_SIZE : 0;

    memset(&d, 0, sizeof(d));
    strcpy(d.dl.kernel_id, inst->k->id);
    d.dl.reason = reason;
    d.dl.error = error;
    memcpy(&d.dl.hdr, frame, len < sizeof(d.dl.hdr) ? len : sizeof(d.dl.hdr));
    d.dl.len = plen;
    d.payload = plen ? malloc(plen) : NULL;
    if (d.payload != NULL)
        memcpy(d.payload, (const char *)frame + RK_MSG_HEADER_SIZE, plen);
    else
        d.dl.len = 0; /* out of memory: keep the header at least */
    rk__counter_add(&inst->dead_lettered, 1);

    pthread_mutex_lock(&rt->dlq_lock);
    if (rt->dlq_count == rt->cfg.dead_letter_capacity) {
        /* Full: the oldest goes (counted), the newest is kept. */
        free(rt->dlq[rt->dlq_head].payload);
        rt->dlq_head = (rt->dlq_head + 1) % rt->cfg.dead_letter_capacity;
        rt->dlq_count--;
        rt->dlq_overflow++;
    }
    rt->dlq[(rt->dlq_head + rt->dlq_count) % rt->cfg.dead_letter_capacity] = d;
    rt->dlq_count++;
    pthread_cond_signal(&rt->dlq_cond);
    pthread_mutex_unlock(&rt->dlq_lock);
}

int
rk_dead_letter_recv(rk_runtime *rt, rk_dead_letter *out, void *buf, size_t cap,
    int64_t timeout_ns)
{
    uint64_t deadline = rk__deadline(timeout_ns);
    rk__dead d;

    if (rt == NULL || out == NULL || (buf == NULL && cap != 0))
        return rk__fail(RK_EINVAL, "rk_dead_letter_recv: NULL argument");
    pthread_mutex_lock(&rt->dlq_lock);
    while (rt->dlq_count == 0) {
        struct timespec ts;
        if (rk_now_ns() >= deadline) {
            pthread_mutex_unlock(&rt->dlq_lock);
            return rk__fail(RK_ETIMEDOUT, "no dead letters");
        }
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&rt->dlq_cond, &rt->dlq_lock);
            continue;
        }
        ts.tv_sec = (time_t)(deadline / 1000000000u);
        ts.tv_nsec = (long)(deadline % 1000000000u);
        pthread_cond_timedwait(&rt->dlq_cond, &rt->dlq_lock, &ts);
    }
    d = rt->dlq[rt->dlq_head];
    rt->dlq_head = (rt->dlq_head + 1) % rt->cfg.dead_letter_capacity;
    rt->dlq_count--;
    pthread_mutex_unlock(&rt->dlq_lock);
    *out = d.dl;
    if (d.payload != NULL && cap != 0)
        memcpy(buf, d.payload, d.dl.len < cap ? d.dl.len : cap);
    free(d.payload);
    return RK_OK;
}

