/*
 * src/runtime/inq.c - the input queue (see inq.h).
 *
 * The lane's producer waits for room (BLOCK) with the parking handshake of
 * outq.c: read prod_seq, publish prod_parked, seq_cst fence, re-check,
 * sleep; the consumer, after taking messages (which is what makes room,
 * see lane_space), issues a fence and wakes it only if it sees
 * prod_parked. The consumer never waits here: the
 * kernel parks on its control block (backend.h), which senders wake.
 */
#include <string.h>

#include "common/barrier.h"
#include "common/common.h"
#include "common/futex.h"
#include "common/spin.h"
#include "ringkernel/message.h"
#include "runtime/inq.h"
#include "runtime/internal.h"

int
rk__inq_init(rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold)
{
    memset(q, 0, sizeof(*q));
    q->slot_size = cfg->slot_size;
    q->bp = cfg->backpressure;
    rk__spin_init(&q->prod_spin);
    if (cfg->single_producer && !cfg->priority_bands
        && cfg->backpressure != RK_BP_DROP_OLDEST) {
        uint64_t want = (uint64_t)cfg->capacity + hold, ring = 1;

        if (!rk__is_pow2(cfg->capacity))
            return rk_spsc_create(&q->lane, cfg->capacity, cfg->slot_size);
        while (ring < want)
            ring <<= 1;
        if (ring > UINT32_MAX / 2 + 1)
            return rk__fail(RK_EINVAL,
                "input_capacity %u plus a batch of %u is too large",
                cfg->capacity, hold);
        q->lane_cap = cfg->capacity;
        return rk_spsc_create(&q->lane, (uint32_t)ring, cfg->slot_size);
    }
    return rk_mqueue_create(&q->mq, cfg);
}

/*
 * Lane producer: room for up to want messages. A lane queues lane_cap
 * messages the kernel has not taken; slots it has taken but still holds (a
 * batch lent in place) do not count. The ring has at least lane_cap + hold
 * slots, so a producer that stays within lane_cap of what the kernel has
 * taken never writes into a held slot: it writes position p only if
 * p < taken + lane_cap, and p's slot last held position
 * p - ring <= taken - hold - 1, which the kernel released before it
 * published `taken`.
 */
static uint32_t
lane_space(rk__inq *q, uint32_t want)
{
    uint64_t pos = q->lane->prod.pos, used = pos - q->prod_taken;

    if (used + want > q->lane_cap) {
        /* Acquire pairs with the release store of dequeued in
         * rk__inq_take: every slot the kernel gave back before it
         * published that count is free to overwrite. */
        q->prod_taken
            = atomic_load_explicit(&q->dequeued, memory_order_acquire);
        used = pos - q->prod_taken;
    }
    return q->lane_cap - used < want ? (uint32_t)(q->lane_cap - used) : want;
}

void
rk__inq_fini(rk__inq *q)
{
    rk_mqueue_destroy(q->mq);
    rk_spsc_destroy(q->lane);
    q->mq = NULL;
    q->lane = NULL;
}

/* Single-writer counter bump (the lane has one producer, one consumer). */
static void
bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
        memory_order_relaxed);
}

static bool
is_closed(const rk__inq *q)
{
    /* Acquire pairs with the seq_cst store in rk__inq_close. */
    return atomic_load_explicit(&q->closed, memory_order_acquire) != 0;
}

/* Waits for room in the lane until deadline. */
static void
lane_wait_room(rk__inq *q, uint64_t deadline)
{
    /* Acquire pairs with the release bump in lane_notify/close. */
    uint32_t s = atomic_load_explicit(&q->prod_seq, memory_order_acquire);

    atomic_store_explicit(&q->prod_parked, 1, memory_order_seq_cst);
    /* Pairs with the fence in lane_notify. */
    rk__heavy_barrier();
    if (lane_space(q, 1) == 0 && !is_closed(q))
        (void)rk__futex_wait(&q->prod_seq, s, deadline);
    atomic_store_explicit(&q->prod_parked, 0, memory_order_relaxed);
}

static int lane_full(rk__inq *q, int64_t timeout_ns, uint64_t *deadline);

/* The producer's spin test (rk__spin_attempt): 1 once there is room or
 * the lane closed, 0 while full. */
static int
lane_room(void *arg)
{
    rk__inq *q = arg;

    return lane_space(q, 1) != 0 || is_closed(q);
}

/*
 * A lane has one producer at a time. Each send (or batch) takes the
 * producer role with an exchange and gives it back with a release store,
 * so successive producers on different threads see each other's ring
 * state (acquire/release), and a second, concurrent one is refused
 * (RK_EINVAL) instead of corrupting the ring. On one thread the flag's
 * line stays in its cache: an uncontended exchange and a store.
 */
static int
lane_enter(rk__inq *q)
{
    /* Acquire pairs with the release store in lane_leave. */
    if (rk__likely(
            atomic_exchange_explicit(&q->busy, 1, memory_order_acquire) == 0))
        return RK_OK;
    /* Not the producer: the counters are the producer's to bump. */
    atomic_fetch_add_explicit(&q->misuse, 1, memory_order_relaxed);
    return rk__fail(RK_EINVAL,
        "the kernel promised a single producer (single_producer), but two "
        "threads sent to it at once");
}

static void
lane_leave(rk__inq *q)
{
    /* Release pairs with the acquire exchange in lane_enter. */
    atomic_store_explicit(&q->busy, 0, memory_order_release);
}

static int
lane_send_locked(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, int64_t timeout_ns)
{
    unsigned char *slot;
    uint64_t deadline = 0;
    int rc;

    for (;;) {
        if (is_closed(q))
            return RK_ECLOSED;
        if (lane_space(q, 1) != 0) {
            slot = rk_ring_slot(&q->lane->prod, q->lane->prod.pos);
            break;
        }
        if ((rc = lane_full(q, timeout_ns, &deadline)) != RK_OK)
            return rc;
    }
    if (rk__likely(hlen == RK_MSG_HEADER_SIZE))
        memcpy(slot, hdr, RK_MSG_HEADER_SIZE); /* inlined, no call */
    else
        memcpy(slot, hdr, hlen);
    if (len != 0)
        memcpy(slot + hlen, payload, len);
    /* Counted before it is published, so dequeued never passes it. */
    bump(&q->enqueued, 1);
    rk_spsc_commit(q->lane);
    return RK_OK;
}

/* A full lane: applies the backpressure policy. RK_OK means there may be
 * room now (BLOCK waited); anything else is the result for the message. */
static int
lane_full(rk__inq *q, int64_t timeout_ns, uint64_t *deadline)
{
    if (q->bp == RK_BP_DROP_NEW) {
        bump(&q->dropped, 1);
        return RK_EDROPPED;
    }
    if (q->bp == RK_BP_REJECT || timeout_ns == RK_NO_WAIT) {
        bump(&q->rejected, 1);
        return q->bp == RK_BP_REJECT ? RK_EREJECTED : RK_EFULL;
    }
    if (*deadline == 0)
        *deadline = rk__deadline(timeout_ns);
    if (rk_now_ns() >= *deadline) {
        bump(&q->rejected, 1);
        return RK_ETIMEDOUT;
    }
    /* Spin first: the kernel frees a batch at a time, usually within
     * microseconds (common/spin.h). */
    if (rk__spin_wait(&q->prod_spin, lane_room, q, 0, *deadline) == 0
        && rk_now_ns() < *deadline)
        lane_wait_room(q, *deadline);
    return RK_OK;
}

static int
lane_send(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, int64_t timeout_ns)
{
    int rc = lane_enter(q);

    if (rc != RK_OK)
        return rc;
    rc = lane_send_locked(q, hdr, hlen, payload, len, timeout_ns);
    lane_leave(q);
    return rc;
}

int
rk__inq_send_many(rk__inq *q, rk_msg_header *h, const void *base, size_t len,
    size_t n, int64_t timeout_ns, size_t *sent, void (*wake)(void *),
    void *warg)
{
    rk_spsc *l = q->lane;
    const unsigned char *src = base;
    uint64_t deadline = 0;
    size_t i = 0;
    int rc = RK_OK;

    RK_ASSERT(l != NULL && sizeof(*h) + len <= q->slot_size);
    *sent = 0;
    if (n != 0 && (rc = lane_enter(q)) != RK_OK)
        return rc;
    while (i < n) {
        uint32_t want = n - i > UINT32_MAX ? UINT32_MAX : (uint32_t)(n - i);
        uint32_t k;

        if (is_closed(q)) {
            rc = RK_ECLOSED;
            break;
        }
        k = lane_space(q, want);
        if (k == 0) {
            wake(warg); /* let the kernel drain what is there */
            if ((rc = lane_full(q, timeout_ns, &deadline)) != RK_OK)
                break;
            continue;
        }
        /* Write a run of frames (in up to two pieces where the ring
         * wraps), then publish them with one tail store. */
        {
            uint32_t to_end
                = l->prod.mask + 1 - (uint32_t)(l->prod.pos & l->prod.mask);
            uint32_t k1 = k < to_end ? k : to_end;
            rk__fill_frames(rk_ring_slot(&l->prod, l->prod.pos),
                l->prod.slot_size, h, src + i * len, len, k1);
            if (k1 < k)
                rk__fill_frames(rk_ring_slot(&l->prod, l->prod.pos + k1),
                    l->prod.slot_size, h, src + (i + k1) * len, len, k - k1);
            i += k;
        }
        bump(&q->enqueued, k); /* before publishing, as in lane_send */
        rk_ring_prod_publish(&l->ctrl, &l->prod, k);
        wake(warg);
    }
    if (n != 0)
        lane_leave(q);
    *sent = i;
    return rc;
}

int
rk__inq_send(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns)
{
    if (q->mq != NULL) {
        struct rk_iov iov[2] = { { hdr, hlen }, { payload, len } };
        return rk_mqueue_sendv(q->mq, iov, 2, priority, timeout_ns);
    }
    if (hlen + len > q->slot_size)
        return rk__fail(
            RK_EMSGSIZE, "message exceeds slot_size %zu", q->slot_size);
    return lane_send(q, hdr, hlen, payload, len, timeout_ns);
}

int
rk__inq_take(rk__inq *q, void *bufs, size_t stride, size_t *lens, size_t max,
    rk__inq_batch *out)
{
    rk_spsc *l = q->lane;
    uint32_t k, avail, run;

    out->n = 0;
    if (q->mq != NULL) {
        out->frames = bufs;
        out->stride = stride;
        out->in_place = false;
        return rk_mqueue_recv_batch(
            q->mq, bufs, stride, lens, max, &out->n, RK_NO_WAIT);
    }
    /* The whole backlog, for the high-water mark (the consumer keeps it:
     * a producer would have to read the consumer's line each send). */
    avail = rk_ring_cons_avail(&l->ctrl, &l->cons, UINT32_MAX);
    if (avail > atomic_load_explicit(&q->high_water, memory_order_relaxed))
        atomic_store_explicit(&q->high_water, avail, memory_order_relaxed);
    if (avail == 0)
        return is_closed(q) && rk_ring_cons_avail(&l->ctrl, &l->cons, 1) == 0
            ? RK_ECLOSED
            : RK_EEMPTY;
    k = avail < max ? avail : (uint32_t)max;
    /* In place: the frames stay in their slots (no copy) until
     * rk__inq_release. One contiguous run: stop at the ring's end. */
    run = l->cons.mask + 1 - (uint32_t)(l->cons.pos & l->cons.mask);
    k = k < run ? k : run;
    out->frames = rk_ring_slot(&l->cons, l->cons.pos);
    out->stride = l->cons.slot_size;
    out->in_place = true;
    out->n = k;
    /* Counted when taken, as the general queue does: the books (stats
     * depth) treat a held batch as dequeued and pending in the kernel.
     * The count is also the producer's room (lane_space): release pairs
     * with its acquire load, and orders our reads of every slot we gave
     * back before this store (rk__inq_release) before the producer's
     * overwrites. */
    atomic_store_explicit(&q->dequeued,
        atomic_load_explicit(&q->dequeued, memory_order_relaxed) + k,
        memory_order_release);
    if (q->bp == RK_BP_BLOCK) {
        /* Pairs with the fence in lane_wait_room: the dequeued store is
         * ordered before the load of prod_parked. */
        rk__light_barrier();
        if (atomic_load_explicit(&q->prod_parked, memory_order_relaxed)) {
            /* Release pairs with the acquire load of prod_seq. */
            atomic_fetch_add_explicit(&q->prod_seq, 1, memory_order_release);
            rk__futex_wake(&q->prod_seq, INT32_MAX);
        }
    }
    return RK_OK;
}

void
rk__inq_release(rk__inq *q, size_t n)
{
    rk_spsc *l = q->lane;

    if (l == NULL || n == 0)
        return;
    /* The producer's room follows what was taken (rk__inq_take), not
     * head: no wake-up is owed here. */
    rk_ring_cons_release(&l->ctrl, &l->cons, (uint32_t)n);
}

size_t
rk__inq_depth(const rk__inq *q)
{
    return q->mq != NULL ? rk_mqueue_depth(q->mq) : rk_spsc_depth(q->lane);
}

void
rk__inq_close(rk__inq *q)
{
    if (q->mq != NULL) {
        rk_mqueue_close(q->mq);
        return;
    }
    /* seq_cst pairs with the acquire loads in is_closed; the bump wakes a
     * producer waiting for room. */
    atomic_store_explicit(&q->closed, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&q->prod_seq, 1, memory_order_release);
    rk__futex_wake(&q->prod_seq, INT32_MAX);
}

void
rk__inq_stats(const rk__inq *q, rk_queue_stats *out)
{
    uint64_t deq;

    if (q->mq != NULL) {
        rk_mqueue_stats(q->mq, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    /* Removals first, so depth does not go negative in practice. */
    deq = atomic_load_explicit(&q->dequeued, memory_order_relaxed);
    out->dequeued = deq;
    out->dropped = atomic_load_explicit(&q->dropped, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&q->rejected, memory_order_relaxed)
        + atomic_load_explicit(&q->misuse, memory_order_relaxed);
    out->enqueued = atomic_load_explicit(&q->enqueued, memory_order_relaxed);
    out->high_water
        = atomic_load_explicit(&q->high_water, memory_order_relaxed);
    out->depth = out->enqueued > deq ? out->enqueued - deq : 0;
}
