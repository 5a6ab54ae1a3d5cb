/*
 * src/queue/mqueue.c - rk_mqueue: the blocking multi-producer queue (and
 * the runtime's DROP_OLDEST inbox, through queue/mqueue_int.h).
 *
 * One vring (vring.h) per priority band; a sender claims a slot in its
 * band, copies the message (or has it written in place), counts it and
 * publishes it; the receiver probes the bands from SYSTEM down to LOW (four
 * loads of slot sequence words that stay in its cache while the bands are
 * idle) and takes the first ready message, or lends a run of them in place
 * (rk__mqueue_take_held). Waiting is the eventcount of common/ec.h, one per
 * direction (docs/queues.md, "Parking").
 */
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/ec.h"
#include "common/spin.h"
#include "queue/mqueue_int.h"
#include "queue/vring.h"
#include "ringkernel/queue.h"

/*
 * Waiting is the library's one eventcount (common/ec.h) per direction,
 * after an adaptive spin (common/spin.h, one budget per direction). A
 * sender pays only the eventcount's light barrier and one load per
 * publication; the waiter pays the heavy barrier.
 */

struct rk_mqueue {
    rk__vring bands[RK_BAND_COUNT];
    /* Read-mostly line. */
    _Alignas(RK_CACHELINE) uint32_t nbands;
    uint32_t capacity; /* messages admitted per band beyond the head */
    uint32_t slot_size;
    uint32_t hold; /* slots the receiver may hold in place (0: none) */
    rk_backpressure bp;
    bool sp;      /* single producer: no CAS on tail, no RMW on counters */
    bool mc;      /* DROP_OLDEST: senders take from the head too, so CAS it */
    bool limited; /* rings larger than capacity: admission tests the head */
    rk__ec
        *ne; /* not empty: ne_own, or the owner's (rk__mqueue_create_held) */
    _Atomic uint32_t closed;
    /* Senders' counters. */
    _Alignas(RK_CACHELINE) _Atomic uint64_t enqueued;
    _Atomic uint64_t dropped;
    _Atomic uint64_t evicted;
    _Atomic uint64_t rejected;
    rk__hwmark hw; /* removals: dequeued + evicted */
    /* Receiver's line: its counter and the run it holds in place. */
    _Alignas(RK_CACHELINE) _Atomic uint64_t dequeued;
    _Atomic uint64_t held;    /* slots taken in place, not yet released */
    _Atomic uint64_t recv_hw; /* high water kept here (limited queues) */
    uint64_t held_pos;
    uint32_t held_band;
    /* Waiting. */
    _Alignas(RK_CACHELINE) rk__ec ne_own; /* the receiver waits here */
    rk__spin ne_spin;
    _Alignas(RK_CACHELINE) rk__ec nf; /* BLOCK senders wait here */
    rk__spin nf_spin;
};

rk_band
rk_priority_band(uint8_t priority)
{
    return rk__priority_band(priority);
}

/* ---------------------------------------------------------------- parking */

typedef int (*mq_attempt)(rk_mqueue *q, void *ctx);

/* Adapts an mq_attempt to rk__spin_wait's one-argument form. */
struct mq_try {
    rk_mqueue *q;
    mq_attempt attempt;
    void *ctx;
};

static int
mq_try_once(void *arg)
{
    struct mq_try *t = arg;

    return t->attempt(t->q, t->ctx);
}

/*
 * Runs attempt until it returns something other than `again`: at once,
 * then through an adaptive spin, then parked on ec until notified, closed
 * (attempt reports RK_ECLOSED itself) or the timeout. Returns attempt's
 * result, `again` for RK_NO_WAIT, or RK_ETIMEDOUT.
 */
static int
park_wait(rk_mqueue *q, rk__ec *ec, rk__spin *spin, mq_attempt attempt,
    void *ctx, int again, int64_t timeout_ns)
{
    int rc = attempt(q, ctx);
    if (rc != again || timeout_ns == RK_NO_WAIT)
        return rc;
    uint64_t deadline = rk__deadline(timeout_ns);
    struct mq_try t = { q, attempt, ctx };

    if ((rc = rk__spin_wait(spin, mq_try_once, &t, again, deadline)) != again)
        return rc;
    for (;;) {
        /* prepare, re-check, then wait or cancel: ec.h's protocol. */
        uint32_t key = rk__ec_prepare(ec);
        rc = attempt(q, ctx);
        if (rc != again) {
            rk__ec_cancel(ec);
            return rc;
        }
        if (rk__ec_wait(ec, key, deadline) == RK_ETIMEDOUT) {
            rc = attempt(q, ctx);
            return rc == again ? RK_ETIMEDOUT : rc;
        }
    }
}

/* ---------------------------------------------------------------- counters */

/* Adds n to a counter. Counters with one writer (the single producer, the
 * receiver) skip the RMW. */
static inline uint64_t
count_add(_Atomic uint64_t *c, uint64_t n, bool one_writer)
{
    if (one_writer) {
        uint64_t v = atomic_load_explicit(c, memory_order_relaxed) + n;
        atomic_store_explicit(c, v, memory_order_relaxed);
        return v;
    }
    return atomic_fetch_add_explicit(c, n, memory_order_relaxed) + n;
}

/* Raises the high-water mark after a send that made the queue `total`
 * messages long by the senders' count (see rk__hwmark). */
static inline void
note_depth(rk_mqueue *q, uint64_t total)
{
    /* A limited queue's receiver keeps the mark (take_held): reading its
     * line here cost a miss on nearly every send of a ping-pong. */
    if (q->limited || !rk__hw_maybe(&q->hw, total))
        return;
    uint64_t removed = atomic_load_explicit(&q->dequeued, memory_order_relaxed)
        + atomic_load_explicit(&q->evicted, memory_order_relaxed);
    rk__hw_raise(&q->hw, total, removed, (uint64_t)q->capacity * q->nbands);
}

/* ---------------------------------------------------------------- create */

int
rk__mqueue_create_held(rk_mqueue **out, const rk_mqueue_config *cfg,
    uint32_t hold, rk__ec *notempty)
{
    if (out == NULL)
        return rk__fail(RK_EINVAL, "rk_mqueue_create: NULL out");
    *out = NULL;
    rk_mqueue_config c = { 0 };
    if (cfg != NULL)
        c = *cfg;
    if (c.capacity == 0)
        c.capacity = RK_MQUEUE_DEFAULT_CAPACITY;
    if (c.slot_size == 0)
        c.slot_size = RK_MQUEUE_DEFAULT_SLOT_SIZE;
    if ((unsigned)c.backpressure > RK_BP_DROP_NEW)
        return rk__fail(RK_EINVAL, "rk_mqueue: unknown backpressure %d",
            (int)c.backpressure);
    /* A receiver that holds up to `hold` slots in place gets that many
     * more slots per band, and senders are admitted up to capacity beyond
     * the head (mq_claim): held slots never take room from the queue.
     * That admission bound holds any capacity exactly, so with a hold the
     * capacity need not be a power of two (the ring is; vring_init checks
     * its size). The public queue (no hold) frees a slot after it moved
     * the head past it (take_one), so its ring is its capacity. */
    int rc = hold == 0
        ? rk__queue_check_geometry(c.capacity, c.slot_size, "rk_mqueue")
        : RK_OK;
    if (rc != RK_OK)
        return rc;
    uint64_t ring = rk__pow2_at_least((uint64_t)c.capacity + hold);
    if (ring > (UINT64_C(1) << 31))
        return rk__fail(RK_EINVAL,
            "rk_mqueue: capacity %u plus a held batch of %u is too large",
            c.capacity, hold);

    rk_mqueue *q = aligned_alloc(RK_CACHELINE, sizeof(*q));
    if (q == NULL)
        return rk__fail(RK_ENOMEM, "rk_mqueue: queue");
    memset(q, 0, sizeof(*q));
    q->nbands = c.priority_bands ? RK_BAND_COUNT : 1;
    q->capacity = c.capacity;
    q->slot_size = c.slot_size;
    q->hold = hold;
    q->bp = c.backpressure;
    q->sp = c.single_producer;
    q->mc = c.backpressure == RK_BP_DROP_OLDEST;
    q->limited = ring != c.capacity;
    for (uint32_t b = 0; b < q->nbands; b++) {
        rc = rk__vring_init(
            &q->bands[b], (uint32_t)ring, c.slot_size, "rk_mqueue");
        if (rc != RK_OK) {
            while (b-- > 0)
                rk__vring_fini(&q->bands[b]);
            free(q);
            return rc;
        }
    }
    atomic_init(&q->closed, 0);
    atomic_init(&q->enqueued, 0);
    atomic_init(&q->dropped, 0);
    atomic_init(&q->evicted, 0);
    atomic_init(&q->rejected, 0);
    atomic_init(&q->hw.high_water, 0);
    atomic_init(&q->hw.removed_hint, 0);
    atomic_init(&q->dequeued, 0);
    atomic_init(&q->held, 0);
    atomic_init(&q->recv_hw, 0);
    rk__ec_init(&q->ne_own);
    rk__ec_init(&q->nf);
    rk__spin_init(&q->ne_spin);
    rk__spin_init(&q->nf_spin);
    q->ne = notempty != NULL ? notempty : &q->ne_own;
    *out = q;
    return RK_OK;
}

int
rk_mqueue_create(rk_mqueue **out, const rk_mqueue_config *cfg)
{
    return rk__mqueue_create_held(out, cfg, 0, NULL);
}

void
rk_mqueue_destroy(rk_mqueue *q)
{
    if (q == NULL)
        return;
    for (uint32_t b = 0; b < q->nbands; b++)
        rk__vring_fini(&q->bands[b]);
    free(q);
}

/* ---------------------------------------------------------------- claim */

/*
 * Claims up to want consecutive free positions of band r; returns how many
 * (0: full) and the first in *first.
 *
 * Unlimited queue (the public rk_mqueue): free means the slot's sequence
 * says so (vring.h).
 *
 * Limited queue (a receiver that holds slots in place): the ring is larger
 * than capacity by the receiver's hold, and a position p is free when
 * p < head + capacity. Its slot last held p - ring < head - hold, and the
 * receiver takes past a position only after it released everything it
 * held below it (rk__mqueue_take_held takes nothing while it holds), so
 * that slot was freed before the head reached its value. Without evicting
 * senders this bound is all a sender needs: it acquires the head (or a
 * hint of it, below), which orders the receiver's reads of the slot before
 * our writes, and never reads the slot's sequence word, a line the
 * receiver wrote last (a read miss on every send; the write that replaces
 * it does not stall). With evicting senders (DROP_OLDEST) the head also
 * moves by eviction, before the evicted slot is freed, so the sequence is
 * checked as well.
 *
 * The head is read through a hint on the senders' line and from the
 * receiver's line only when the hint says full. Any value the head had is
 * a safe hint (the head only grows); release/acquire on the hint carries
 * the ordering of the head load that produced it to the senders that use
 * it.
 */
static inline uint32_t
mq_claim(rk_mqueue *q, rk__vring *r, uint32_t want, uint64_t *first)
{
    uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        uint32_t k = want, f = 0;
        if (q->limited) {
            /* Acquire pairs with the release store of the hint below. */
            uint64_t h
                = atomic_load_explicit(&r->head_hint, memory_order_acquire);
            int64_t used = (int64_t)(p - h);
            if (used < 0 || (uint64_t)used + want > q->capacity) {
                /* Acquire pairs with the receiver's release store of the
                 * head in take_run: the slots below it were freed. */
                h = atomic_load_explicit(&r->head, memory_order_acquire);
                /* Release: passes that ordering on (see above). */
                atomic_store_explicit(&r->head_hint, h, memory_order_release);
                used = (int64_t)(p - h);
                if (used < 0) { /* a stale tail: another sender moved on */
                    p = atomic_load_explicit(&r->tail, memory_order_relaxed);
                    continue;
                }
                if ((uint64_t)used >= q->capacity)
                    return 0;
                if ((uint64_t)used + want > q->capacity)
                    k = q->capacity - (uint32_t)used;
            }
        }
        if (q->limited && !q->mc) {
            f = k; /* free by the bound alone */
        } else {
            /* Acquire pairs with rk__vring_free: the receiver's reads of
             * the slot are done before we overwrite it. */
            while (f < k
                && atomic_load_explicit(
                       &rk__vring_slot(r, p + f)->seq, memory_order_acquire)
                    == p + f)
                f++;
            if (f == 0) {
                uint64_t seq = atomic_load_explicit(
                    &rk__vring_slot(r, p)->seq, memory_order_relaxed);
                if (q->sp || (int64_t)(seq - p) < 0)
                    return 0; /* still holds the message of p - ring */
                p = atomic_load_explicit(&r->tail, memory_order_relaxed);
                continue; /* another sender claimed p */
            }
        }
        if (q->sp) {
            atomic_store_explicit(&r->tail, p + f, memory_order_relaxed);
            *first = p;
            return f;
        }
        /* Relaxed: arbitration between senders only. */
        if (atomic_compare_exchange_weak_explicit(&r->tail, &p, p + f,
                memory_order_relaxed, memory_order_relaxed)) {
            *first = p;
            return f;
        }
    }
}

/* ---------------------------------------------------------------- send */

static rk__vring *
band_of(rk_mqueue *q, uint8_t priority)
{
    return &q->bands[q->nbands == 1 ? 0 : rk__priority_band(priority)];
}

/*
 * What one send call delivers: n messages (one for send/sendv) into one
 * band. Message i is the iov gather (iov != NULL, n == 1) or lens[i] bytes
 * (stride bytes when lens is NULL) at msgs + i * stride. done counts the
 * messages admitted so far, always a prefix.
 */
typedef struct send_ctx {
    const struct rk_iov *iov;
    int iovcnt;
    uint32_t len; /* the iov message's length */
    const unsigned char *msgs;
    size_t stride;
    const size_t *lens;
    /* Or written in place by fill (rk__mqueue_send_fill), fill_len each. */
    rk__mqueue_fill fill;
    void *fill_arg;
    uint32_t fill_len;
    bool count_one; /* a refusal counts the refused message only */
    size_t n;
    size_t done;
    rk__vring *band;
    int64_t timeout_ns;
    uint64_t deadline; /* 0 until needed */
} send_ctx;

/* Evicts the oldest message of r (DROP_OLDEST), that of *pos, and counts
 * it. False if r had nothing ready to evict (a concurrent receive or
 * eviction made room, or the head slot's sender is still writing it). */
static inline bool
evict_oldest(rk_mqueue *q, rk__vring *r, uint64_t *pos)
{
    rk__vslot *s = rk__vring_take_mc(r, pos);
    if (s == NULL)
        return false;
    rk__vslot_free(r, s, *pos);
    /* One counter: an eviction is a drop, and rk_mqueue_stats reports
     * dropped as dropped + evicted (dropped itself counts DROP_NEW's
     * refusals only), so each eviction costs one RMW, not two. */
    atomic_fetch_add_explicit(&q->evicted, 1, memory_order_relaxed);
    return true;
}

static uint64_t
send_deadline(send_ctx *c)
{
    if (c->deadline == 0)
        c->deadline = rk__deadline(c->timeout_ns);
    return c->deadline;
}

/*
 * DROP_OLDEST on a full band: evicts until a slot can be claimed. The band
 * can be full with nothing evictable when its head slot is claimed by a
 * sender that has not published it yet (preempted mid-copy, say), or when
 * the slot the sender needs is held in place by the receiver
 * (eviction_helps): then no spinning helps until that sender runs or the
 * receiver releases. After MQ_EVICT_SPIN rounds the
 * sender yields the CPU between tries and gives up at its timeout like a
 * BLOCK sender: RK_EFULL for RK_NO_WAIT, RK_ETIMEDOUT after it; the caller
 * counts it rejected. The deadline starts at the first yield.
 */
#define MQ_EVICT_SPIN 64u

/* Whether evicting the oldest message of r can make room at the tail. On
 * a limited queue the tail's slot may still be held by the receiver (it
 * holds a batch in place while senders evicted past it): evicting more
 * would lose messages and free nothing, since a held slot is never
 * evicted or overwritten. Then the sender waits as for a stuck head. */
static bool
eviction_helps(const rk_mqueue *q, const rk__vring *r)
{
    if (!q->limited)
        return true;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    /* Relaxed: a hint; mq_claim checks again. */
    return atomic_load_explicit(
               &rk__vring_slot(r, t)->seq, memory_order_relaxed)
        == t;
}

static int
claim_evicting(rk_mqueue *q, send_ctx *c, uint64_t *pos)
{
    rk__vring *r = c->band;
    for (uint32_t round = 0;; round++) {
        uint64_t e;
        if (!eviction_helps(q, r) || !evict_oldest(q, r, &e)) {
            if (round < MQ_EVICT_SPIN) {
                rk__cpu_relax();
            } else {
                if (c->timeout_ns == RK_NO_WAIT)
                    return RK_EFULL;
                if (rk_now_ns() >= send_deadline(c))
                    return RK_ETIMEDOUT;
                /* Acquire pairs with the seq_cst store in rk_mqueue_close. */
                if (atomic_load_explicit(&q->closed, memory_order_acquire))
                    return RK_ECLOSED;
                sched_yield();
            }
        }
        if (mq_claim(q, r, 1, pos) == 1)
            return RK_OK;
    }
}

/*
 * Full under DROP_OLDEST (rk__mqueue_send_frame): evicts the oldest
 * message and claims the tail position p in one go; returns p's slot, or
 * NULL when nothing was evictable, or eviction would not free the tail's
 * slot, or another sender claimed p meanwhile (the caller then takes the
 * general path, whose claim_evicting goes on from there). An eviction
 * made is counted either way.
 *
 * On a limited queue the tail's slot is checked first, as eviction_helps
 * does: its sequence (acquire, pairs with rk__vring_free) says the
 * receiver gave it back, so evicting frees room we can use and not a
 * message we cannot replace. On an unlimited one the tail's slot is the
 * head's, so it is checked after the eviction. The eviction's CAS moved
 * the head to e + 1, a lower bound of the head from then on (it only
 * grows), so the admission test p < head + capacity is made against
 * e + 1, without reading the head again or storing the hint: a lower
 * bound can only refuse, never admit too much. The CAS of the tail from
 * p then proves nobody else claimed p.
 */
static rk__vslot *
evict_claim(rk_mqueue *q, rk__vring *r, uint64_t *pos)
{
    uint64_t e, p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    rk__vslot *s = rk__vring_slot(r, p);
    /* Acquire pairs with rk__vring_free (see above). */
    if (q->limited
        && atomic_load_explicit(&s->seq, memory_order_acquire) != p)
        return NULL;
    if (!evict_oldest(q, r, &e)) /* counted there */
        return NULL;
    /* p below e + 1: the tail we read is stale (its CAS would fail). */
    if ((int64_t)(p - (e + 1)) < 0 || p - (e + 1) >= q->capacity)
        return NULL;
    /* Acquire pairs with rk__vring_free, as above. */
    if (!q->limited
        && atomic_load_explicit(&s->seq, memory_order_acquire) != p)
        return NULL;
    if (q->sp) {
        atomic_store_explicit(&r->tail, p + 1, memory_order_relaxed);
    } else if (!atomic_compare_exchange_strong_explicit(&r->tail, &p, p + 1,
                   memory_order_relaxed, memory_order_relaxed)) {
        /* Relaxed: arbitration between senders only. */
        return NULL;
    }
    *pos = p;
    return s;
}

/* Copies message i of c into dst; returns its length. */
static uint32_t
copy_msg(const send_ctx *c, size_t i, unsigned char *dst)
{
    if (c->iov != NULL) {
        for (int j = 0; j < c->iovcnt; j++) {
            if (c->iov[j].len == 0)
                continue;
            memcpy(dst, c->iov[j].base, c->iov[j].len);
            dst += c->iov[j].len;
        }
        return c->len;
    }
    size_t len = c->lens != NULL ? c->lens[i] : c->stride;
    if (len > 0)
        memcpy(dst, c->msgs + i * c->stride, len);
    return (uint32_t)len;
}

/*
 * One send attempt: admits the next message(s) of c into consecutive slots
 * claimed at once (as many as are free, up to what is left), or one after
 * evicting under DROP_OLDEST. RK_OK if it admitted any, else RK_EFULL,
 * RK_ETIMEDOUT (DROP_OLDEST stuck, see claim_evicting) or RK_ECLOSED.
 */
static int
send_attempt(rk_mqueue *q, void *arg)
{
    send_ctx *c = arg;
    rk__vring *r = c->band;
    uint64_t pos = 0;
    uint32_t k;

    /* Acquire pairs with the seq_cst store in rk_mqueue_close. */
    if (atomic_load_explicit(&q->closed, memory_order_acquire))
        return RK_ECLOSED;
    size_t want = c->n - c->done;
    k = mq_claim(q, r, want > UINT32_MAX ? UINT32_MAX : (uint32_t)want, &pos);
    if (k == 0) {
        if (q->bp != RK_BP_DROP_OLDEST)
            return RK_EFULL;
        int rc = claim_evicting(q, c, &pos);
        if (rc != RK_OK)
            return rc;
        k = 1;
    }
    if (c->fill != NULL) {
        /* In place: one call per contiguous run (the ring may wrap). */
        for (uint32_t i = 0; i < k;) {
            uint64_t p = pos + i;
            uint64_t to_end = r->mask + 1 - (p & r->mask);
            uint32_t run = k - i < to_end ? k - i : (uint32_t)to_end;
            c->fill(c->fill_arg, c->done + i,
                rk__vslot_data(rk__vring_slot(r, p)), r->stride, run);
            for (uint32_t j = 0; j < run; j++)
                atomic_store_explicit(&rk__vring_slot(r, p + j)->len,
                    c->fill_len, memory_order_relaxed);
            i += run;
        }
    } else {
        for (uint32_t i = 0; i < k; i++) {
            rk__vslot *s = rk__vring_slot(r, pos + i);
            uint32_t len = copy_msg(c, c->done + i, rk__vslot_data(s));
            atomic_store_explicit(&s->len, len, memory_order_relaxed);
        }
    }
    /* Counted before it is published, so dequeued never passes enqueued. */
    uint64_t total = count_add(&q->enqueued, k, q->sp);
    for (uint32_t i = 0; i < k; i++)
        rk__vring_publish(r, pos + i);
    c->done += k;
    note_depth(q, total);
    rk__ec_notify(q->ne); /* after the publication, as ec.h requires */
    return RK_OK;
}

/*
 * The DROP_OLDEST inbox's single send (mqueue_int.h): a 64-byte envelope
 * and its payload, the common cases in one straight line. It does what
 * send_run does for one message, in the same order (claim, copy, count,
 * publish, notify), without the batch machinery: no send_ctx, no iov
 * loop, no second call for the claim. Full under DROP_OLDEST, it evicts
 * the oldest message once (evict_oldest, counted there) and claims again,
 * as claim_evicting's first round does. Anything else (closed, a band
 * that stays full, another policy that refuses, a message too large) goes
 * to rk_mqueue_sendv, which takes it from the top: claim_evicting's loop
 * then evicts again if needed, so a message never goes in without its
 * eviction counted and never evicts more than the room it needs.
 */
int
rk__mqueue_send_frame(rk_mqueue *q, const void *hdr, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns)
{
    rk__vring *r = band_of(q, priority);
    rk__vslot *s = NULL;
    uint64_t pos;

    /* Acquire pairs with the seq_cst store in rk_mqueue_close. */
    if (rk__likely(len <= q->slot_size
            && len + RK__MQ_FRAME_HDR <= q->slot_size
            && !atomic_load_explicit(&q->closed, memory_order_acquire))) {
        if (mq_claim(q, r, 1, &pos) == 1)
            s = rk__vring_slot(r, pos);
        else if (q->bp == RK_BP_DROP_OLDEST)
            s = evict_claim(q, r, &pos);
    }
    if (rk__likely(s != NULL)) {
        unsigned char *d = rk__vslot_data(s);
        memcpy(d, hdr, RK__MQ_FRAME_HDR);
        if (len != 0)
            memcpy(d + RK__MQ_FRAME_HDR, payload, len);
        atomic_store_explicit(
            &s->len, (uint32_t)(RK__MQ_FRAME_HDR + len), memory_order_relaxed);
        /* Counted before it is published, as in send_attempt. */
        uint64_t total = count_add(&q->enqueued, 1, q->sp);
        /* Release pairs with the receiver's acquire of seq, as in
         * rk__vring_publish (the slot is at hand). */
        atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
        note_depth(q, total);
        rk__ec_notify(q->ne); /* after the publication, as ec.h requires */
        return RK_OK;
    }
    struct rk_iov iov[2] = { { hdr, RK__MQ_FRAME_HDR }, { payload, len } };
    return rk_mqueue_sendv(q, iov, 2, priority, timeout_ns);
}

/* The timeout left for the next wait of a BLOCK batch. */
static int64_t
send_time_left(send_ctx *c)
{
    if (c->done == 0 || c->timeout_ns <= 0)
        return c->timeout_ns; /* first wait, RK_NO_WAIT or RK_WAIT_FOREVER */
    uint64_t now = rk_now_ns(), end = send_deadline(c);
    return now >= end ? RK_NO_WAIT : (int64_t)(end - now);
}

/* Sends everything in c under the queue's policy and counts what is
 * refused: every message not admitted counts once as rejected (or as
 * dropped under DROP_NEW), except after a close. */
static int
send_run(rk_mqueue *q, send_ctx *c)
{
    int rc;
    if (q->bp == RK_BP_BLOCK && c->n > 1 && c->timeout_ns > 0)
        send_deadline(c); /* one timeout for the whole batch */
    do {
        if (q->bp == RK_BP_BLOCK) {
            int64_t left = send_time_left(c);
            rc = park_wait(
                q, &q->nf, &q->nf_spin, send_attempt, c, RK_EFULL, left);
            if (rc == RK_EFULL && c->timeout_ns > 0)
                rc = RK_ETIMEDOUT; /* a batch whose time ran out */
        } else {
            rc = send_attempt(q, c);
        }
    } while (rc == RK_OK && c->done < c->n);
    if (rc != RK_EFULL && rc != RK_ETIMEDOUT)
        return rc;
    uint64_t refused = c->count_one ? 1 : (uint64_t)(c->n - c->done);
    if (q->bp == RK_BP_DROP_NEW) {
        atomic_fetch_add_explicit(&q->dropped, refused, memory_order_relaxed);
        return RK_EDROPPED;
    }
    atomic_fetch_add_explicit(&q->rejected, refused, memory_order_relaxed);
    return q->bp == RK_BP_REJECT ? RK_EREJECTED : rc;
}

/* The batch sends' common part: sends the n messages c describes into the
 * band of priority; c->done counts those that went in. */
static inline int
send_n(
    rk_mqueue *q, send_ctx *c, size_t n, uint8_t priority, int64_t timeout_ns)
{
    if (n == 0)
        return RK_OK;
    c->n = n;
    c->band = band_of(q, priority);
    c->timeout_ns = timeout_ns;
    return send_run(q, c);
}

int
rk_mqueue_sendv(rk_mqueue *q, const struct rk_iov *iov, int iovcnt,
    uint8_t priority, int64_t timeout_ns)
{
    if (q == NULL || iovcnt < 0 || (iov == NULL && iovcnt > 0))
        return rk__fail(RK_EINVAL, "rk_mqueue_sendv: %s",
            q == NULL ? "NULL queue" : "bad iov");
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].base == NULL && iov[i].len > 0)
            return rk__fail(RK_EINVAL, "rk_mqueue_sendv: iov[%d] is NULL", i);
        if (iov[i].len > q->slot_size || len + iov[i].len > q->slot_size)
            return rk__fail(RK_EMSGSIZE,
                "rk_mqueue_send: message exceeds slot_size %u", q->slot_size);
        len += iov[i].len;
    }
    static const struct rk_iov none = { NULL, 0 };
    send_ctx c = { .iov = iovcnt > 0 ? iov : &none,
        .iovcnt = iovcnt,
        .len = (uint32_t)len,
        .n = 1,
        .band = band_of(q, priority),
        .timeout_ns = timeout_ns };
    return send_run(q, &c);
}

int
rk_mqueue_send(rk_mqueue *q, const void *msg, size_t len, uint8_t priority,
    int64_t timeout_ns)
{
    if (msg == NULL && len > 0)
        return rk__fail(RK_EINVAL, "rk_mqueue_send: NULL message");
    struct rk_iov iov = { msg, len };
    return rk_mqueue_sendv(q, &iov, 1, priority, timeout_ns);
}

int
rk_mqueue_send_batch(rk_mqueue *q, const void *msgs, size_t stride,
    const size_t *lens, size_t n, uint8_t priority, int64_t timeout_ns,
    size_t *sent)
{
    if (sent != NULL)
        *sent = 0;
    if (q == NULL || (msgs == NULL && n > 0))
        return rk__fail(RK_EINVAL, "rk_mqueue_send_batch: NULL %s",
            q == NULL ? "queue" : "messages");
    for (size_t i = 0; i < n; i++) {
        size_t len = lens != NULL ? lens[i] : stride;
        if (len > stride || len > q->slot_size)
            return rk__fail(len > stride ? RK_EINVAL : RK_EMSGSIZE,
                "rk_mqueue_send_batch: message %zu is %zu bytes (stride %zu, "
                "slot_size %u)",
                i, len, stride, q->slot_size);
    }
    send_ctx c = { .msgs = msgs, .stride = stride, .lens = lens };
    int rc = send_n(q, &c, n, priority, timeout_ns);
    if (sent != NULL)
        *sent = c.done;
    return rc;
}

int
rk__mqueue_send_fill(rk_mqueue *q, uint8_t priority, uint32_t len, size_t n,
    rk__mqueue_fill fill, void *arg, int64_t timeout_ns, size_t *sent)
{
    RK_ASSERT(len <= q->slot_size);
    send_ctx c = {
        .fill = fill, .fill_arg = arg, .fill_len = len, .count_one = true
    };
    int rc = send_n(q, &c, n, priority, timeout_ns);
    *sent = c.done;
    return rc;
}

/* ---------------------------------------------------------------- recv */

typedef struct recv_ctx {
    unsigned char *bufs;
    size_t stride;
    size_t *lens;
    size_t max;
    size_t n;
} recv_ctx;

/*
 * Takes the oldest message of band r into buf. RK_OK, RK_EEMPTY, or
 * RK_EMSGSIZE (left in place, *len set). With evicting senders (mc) the
 * head is claimed by CAS; the length is read before the claim, and a
 * successful claim proves it was this message's (rewriting the slot would
 * need the head to move past pos first).
 */
static int
take_one(
    rk_mqueue *q, rk__vring *r, unsigned char *buf, size_t cap, size_t *len)
{
    uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    rk__vslot *s;
    uint32_t l;
    for (;;) {
        s = rk__vring_slot(r, pos);
        /* Acquire pairs with rk__vring_publish: payload and len visible. */
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (seq != pos + 1) {
            if (!q->mc || (int64_t)(seq - (pos + 1)) < 0)
                return RK_EEMPTY;
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
            continue; /* an evictor moved the head */
        }
        l = atomic_load_explicit(&s->len, memory_order_relaxed);
        if (l > cap) {
            *len = l;
            return RK_EMSGSIZE;
        }
        if (!q->mc) {
            atomic_store_explicit(&r->head, pos + 1, memory_order_relaxed);
            break;
        }
        /* Relaxed: arbitration against evictors only. */
        if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1,
                memory_order_relaxed, memory_order_relaxed))
            break;
    }
    memcpy(buf, rk__vslot_data(s), l);
    *len = l;
    rk__vring_free(r, pos);
    return RK_OK;
}

/* Takes up to c->max messages, highest band first; RK_EEMPTY if none. */
static int
recv_some(rk_mqueue *q, recv_ctx *c)
{
    int rc = RK_OK;
    while (c->n < c->max) {
        rc = RK_EEMPTY;
        for (uint32_t b = q->nbands; b-- > 0;) {
            rc = take_one(q, &q->bands[b], c->bufs + c->n * c->stride,
                c->stride, &c->lens[c->n]);
            if (rc != RK_EEMPTY)
                break;
        }
        if (rc != RK_OK)
            break;
        c->n++;
    }
    if (c->n == 0)
        return rc;
    count_add(&q->dequeued, c->n, true);
    if (q->bp == RK_BP_BLOCK)
        rk__ec_notify_all(&q->nf); /* after the frees: room to claim */
    return RK_OK;
}

static int
recv_attempt(rk_mqueue *q, void *arg)
{
    recv_ctx *c = arg;
    int rc = recv_some(q, c);
    /* Acquire pairs with the seq_cst store in rk_mqueue_close: every send
     * that finished before the close is visible to the retry. */
    if (rc == RK_EEMPTY
        && atomic_load_explicit(&q->closed, memory_order_acquire)) {
        rc = recv_some(q, c);
        if (rc == RK_EEMPTY)
            rc = RK_ECLOSED;
    }
    return rc;
}

int
rk_mqueue_recv_batch(rk_mqueue *q, void *bufs, size_t stride, size_t *lens,
    size_t max, size_t *n, int64_t timeout_ns)
{
    if (n != NULL)
        *n = 0;
    if (q == NULL || bufs == NULL || lens == NULL || n == NULL || max == 0)
        return rk__fail(RK_EINVAL, "rk_mqueue_recv_batch: %s",
            q == NULL      ? "NULL queue"
                : max == 0 ? "max is 0"
                           : "NULL buffer");
    recv_ctx c = { bufs, stride, lens, max, 0 };
    int rc = park_wait(
        q, q->ne, &q->ne_spin, recv_attempt, &c, RK_EEMPTY, timeout_ns);
    *n = c.n;
    return rc;
}

int
rk_mqueue_recv(
    rk_mqueue *q, void *buf, size_t cap, size_t *len, int64_t timeout_ns)
{
    size_t n, l = 0;
    if (q == NULL || (buf == NULL && cap > 0))
        return rk__fail(RK_EINVAL, "rk_mqueue_recv: NULL %s",
            q == NULL ? "queue" : "buffer");
    unsigned char dummy;
    int rc = rk_mqueue_recv_batch(
        q, buf ? buf : &dummy, cap, &l, 1, &n, timeout_ns);
    if (len != NULL && (rc == RK_OK || rc == RK_EMSGSIZE))
        *len = l;
    return rc;
}

/* ---------------------------------------------------------------- in place */

/*
 * Takes a run of up to n ready messages at the head of band r without
 * freeing their slots (one contiguous run: it stops at the ring's end).
 * With evicting senders the head moves by CAS, so a message is either
 * evicted or taken, never both; slots the receiver holds lie below the
 * head, where no evictor looks.
 */
static uint32_t
take_run(rk_mqueue *q, rk__vring *r, uint32_t n, uint64_t *first)
{
    uint64_t p = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        uint64_t to_end = r->mask + 1 - (p & r->mask);
        uint32_t want = n < to_end ? n : (uint32_t)to_end, k = 0;
        /* Acquire pairs with rk__vring_publish: payload and len visible. */
        while (k < want
            && atomic_load_explicit(
                   &rk__vring_slot(r, p + k)->seq, memory_order_acquire)
                == p + k + 1)
            k++;
        if (!q->mc) {
            /* Release pairs with the senders' acquire of the head in
             * mq_claim: every slot freed before is free to overwrite. */
            if (k > 0)
                atomic_store_explicit(&r->head, p + k, memory_order_release);
            *first = p;
            return k;
        }
        if (k == 0) {
            uint64_t seq = atomic_load_explicit(
                &rk__vring_slot(r, p)->seq, memory_order_relaxed);
            if ((int64_t)(seq - (p + 1)) < 0)
                return 0; /* empty, or its sender is still writing */
            p = atomic_load_explicit(&r->head, memory_order_relaxed);
            continue; /* an evictor moved the head */
        }
        /* Relaxed: arbitration against evictors only. */
        if (atomic_compare_exchange_weak_explicit(&r->head, &p, p + k,
                memory_order_relaxed, memory_order_relaxed)) {
            *first = p;
            return k;
        }
    }
}

int
rk__mqueue_take_held(rk_mqueue *q, size_t max, rk__mqueue_run *out)
{
    RK_ASSERT(atomic_load_explicit(&q->held, memory_order_relaxed) == 0);
    uint32_t want = max < q->hold ? (uint32_t)max : q->hold;
    out->n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t b = q->nbands; b-- > 0;) {
            rk__vring *r = &q->bands[b];
            uint64_t pos;
            uint32_t k = take_run(q, r, want, &pos);
            if (k == 0)
                continue;
            /* High water, kept by the receiver here (see note_depth): a
             * short run is the whole backlog of its band; a full one
             * reads the senders' tail (only when the queue is backed up). */
            uint64_t depth = k < want
                ? k
                : atomic_load_explicit(&r->tail, memory_order_relaxed) - pos;
            if (depth > q->capacity)
                depth = q->capacity;
            /* On our own line: the senders' line changes every send. */
            if (depth
                > atomic_load_explicit(&q->recv_hw, memory_order_relaxed))
                atomic_store_explicit(
                    &q->recv_hw, depth, memory_order_relaxed);
            q->held_band = b;
            q->held_pos = pos;
            atomic_store_explicit(&q->held, k, memory_order_relaxed);
            count_add(&q->dequeued, k, true);
            /* On a limited queue the room is the head, which moved. */
            if (q->bp == RK_BP_BLOCK)
                rk__ec_notify_all(&q->nf);
            out->frames = rk__vslot_data(rk__vring_slot(r, pos));
            out->stride = r->stride;
            out->n = k;
            return RK_OK;
        }
        /* Acquire pairs with the seq_cst store in rk_mqueue_close: every
         * send that finished before the close is visible to the retry. */
        if (pass == 0
            && !atomic_load_explicit(&q->closed, memory_order_acquire))
            return RK_EEMPTY;
    }
    return RK_ECLOSED;
}

void
rk__mqueue_release(rk_mqueue *q, size_t n)
{
    uint64_t held = atomic_load_explicit(&q->held, memory_order_relaxed);
    rk__vring *r = &q->bands[q->held_band];

    RK_ASSERT(n <= held);
    for (size_t i = 0; i < n; i++)
        rk__vring_free(r, q->held_pos + i);
    q->held_pos += n;
    atomic_store_explicit(&q->held, held - n, memory_order_relaxed);
    if (q->bp == RK_BP_BLOCK && !q->limited)
        rk__ec_notify_all(&q->nf); /* room is the freed slots */
}

uint64_t
rk__mqueue_held(const rk_mqueue *q)
{
    return atomic_load_explicit(&q->held, memory_order_relaxed);
}

/* ---------------------------------------------------------------- misc */

void
rk_mqueue_close(rk_mqueue *q)
{
    if (q == NULL)
        return;
    /* seq_cst pairs with the acquire loads of closed in the attempts. */
    atomic_store_explicit(&q->closed, 1, memory_order_seq_cst);
    rk__ec_notify_all(q->ne);
    rk__ec_notify_all(&q->nf);
}

bool
rk_mqueue_is_closed(const rk_mqueue *q)
{
    return q != NULL
        && atomic_load_explicit(&q->closed, memory_order_acquire) != 0;
}

void
rk_mqueue_stats(const rk_mqueue *q, rk_queue_stats *out)
{
    if (q == NULL || out == NULL)
        return;
    /* Removals first: each was counted after its enqueue, so reading them
     * before enqueued keeps depth from going negative in practice. */
    out->dequeued = atomic_load_explicit(&q->dequeued, memory_order_relaxed);
    out->evicted = atomic_load_explicit(&q->evicted, memory_order_relaxed);
    /* Evictions are drops too (evict_oldest counts them once). */
    out->dropped = atomic_load_explicit(&q->dropped, memory_order_relaxed)
        + out->evicted;
    out->rejected = atomic_load_explicit(&q->rejected, memory_order_relaxed);
    out->enqueued = atomic_load_explicit(&q->enqueued, memory_order_relaxed);
    out->high_water
        = atomic_load_explicit(&q->hw.high_water, memory_order_relaxed);
    uint64_t rhw = atomic_load_explicit(&q->recv_hw, memory_order_relaxed);
    if (rhw > out->high_water)
        out->high_water = rhw;
    uint64_t out_count = out->dequeued + out->evicted;
    out->depth = out->enqueued > out_count ? out->enqueued - out_count : 0;
}

size_t
rk_mqueue_depth(const rk_mqueue *q)
{
    rk_queue_stats s;
    if (q == NULL)
        return 0;
    rk_mqueue_stats(q, &s);
    return (size_t)s.depth;
}

rk__vring *
rk__mqueue_band(rk_mqueue *q, unsigned b)
{
    return b < q->nbands ? &q->bands[b] : NULL;
}

uint32_t
rk__mqueue_waiters(const rk_mqueue *q, bool senders)
{
    const rk__ec *ec = senders ? &q->nf : q->ne;
    return atomic_load_explicit(&ec->waiters, memory_order_relaxed);
}
