/*
 * src/queue/inbox_mqueue.c - the inbox as an rk_mqueue (see inbox.h): the
 * DROP_OLDEST policy, whose senders evict from the head.
 *
 * A thin adapter over queue/mqueue_int.h: the queue's not-empty
 * eventcount is the kernel's wake eventcount (so every send wakes the
 * kernel and a close notifies it), its receiver holds up to hold slots in
 * place outside the capacity, and frames are written in their slots.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "queue/inbox.h"
#include "queue/mqueue_int.h"

typedef struct mq_inbox {
    rk__inbox base; /* first: the inbox handle */
    rk_mqueue *mq;
    size_t slot_size;
} mq_inbox;

static const rk__inbox_ops mq_ops;

int
rk__inbox_mqueue_create(
    rk__inbox **out, const rk_mqueue_config *cfg, uint32_t hold, rk__ec *wake)
{
    mq_inbox *q = malloc(sizeof(*q));
    int rc;

    if (q == NULL)
        return rk__fail(RK_ENOMEM, "input queue: no memory");
    q->base.ops = &mq_ops;
    q->slot_size = cfg->slot_size;
    if ((rc = rk__mqueue_create_held(&q->mq, cfg, hold, wake)) != RK_OK) {
        free(q);
        return rc;
    }
    *out = &q->base;
    return RK_OK;
}

static void
mq_destroy(void *arg)
{
    mq_inbox *q = arg;

    rk_mqueue_destroy(q->mq);
    free(q);
}

static int
mq_send(void *arg, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns, bool uncounted)
{
    mq_inbox *q = arg;

    (void)uncounted; /* DROP_OLDEST never refuses for room */
    if (rk__likely(hlen == RK__MQ_FRAME_HDR)) /* always, from the runtime */
        return rk__mqueue_send_frame(
            q->mq, hdr, payload, len, priority, timeout_ns);
    struct rk_iov iov[2] = { { hdr, hlen }, { payload, len } };
    return rk_mqueue_sendv(q->mq, iov, 2, priority, timeout_ns);
}

/* The rk_mqueue's in-place writer (rk__mqueue_fill) over the inbox's:
 * its slots carry no ready flags. */
typedef struct mq_fill {
    rk__inbox_fill fill;
    void *arg;
} mq_fill;

static void
fill_unflagged(
    void *arg, size_t first, unsigned char *dst, size_t stride, size_t k)
{
    mq_fill *f = arg;

    f->fill(f->arg, first, dst, stride, k, false);
}

static int
mq_send_fill(void *arg, uint8_t priority, uint32_t flen, size_t n,
    rk__inbox_fill fill, void *fill_arg, int64_t timeout_ns, size_t *sent)
{
    mq_inbox *q = arg;
    mq_fill f = { fill, fill_arg };

    return rk__mqueue_send_fill(
        q->mq, priority, flen, n, fill_unflagged, &f, timeout_ns, sent);
}

static int
mq_take(void *arg, size_t max, rk__inbox_batch *out)
{
    mq_inbox *q = arg;
    rk__mqueue_run held;
    int rc = rk__mqueue_take_held(q->mq, max, &held);

    out->n = 0;
    if (rc == RK_OK) {
        out->frames = held.frames;
        out->stride = held.stride;
        out->n = held.n;
        out->in_place = true;
    }
    return rc;
}

static void
mq_release(void *arg, size_t n)
{
    mq_inbox *q = arg;

    if (n != 0)
        rk__mqueue_release(q->mq, n);
}

static size_t
mq_depth(void *arg)
{
    mq_inbox *q = arg;

    /* Held slots count until released. */
    return rk_mqueue_depth(q->mq) + (size_t)rk__mqueue_held(q->mq);
}

static void
mq_close(void *arg)
{
    mq_inbox *q = arg;

    rk_mqueue_close(q->mq); /* notifies all on wake: it is the queue's */
}

static void
mq_stats(void *arg, rk_queue_stats *out)
{
    mq_inbox *q = arg;

    rk_mqueue_stats(q->mq, out);
}

static const rk__inbox_ops mq_ops = {
    .name = "mqueue",
    .send = mq_send,
    .send_fill = mq_send_fill,
    .take = mq_take,
    .release = mq_release,
    .depth = mq_depth,
    .close = mq_close,
    .stats = mq_stats,
    .destroy = mq_destroy,
};
