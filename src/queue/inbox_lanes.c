/*
 * src/queue/inbox_lanes.c - the inbox as SPSC lanes behind a producer
 * flag (see inbox.h): every policy but DROP_OLDEST.
 *
 * Every wait here is the eventcount of common/ec.h. Producers wait for
 * room (BLOCK) on prod_ec; the consumer, after taking messages (which is
 * what makes room, see lane_space), notifies it. The consumer never waits
 * here: the kernel parks on its wake eventcount, which every enqueue
 * notifies after the publication.
 *
 * Producers' room follows what the kernel has taken (dequeued), not the
 * ring's head, and each ring is larger than the capacity by the kernel's
 * batch: the kernel holds a taken batch in place without taking room from
 * the queue (see lane_space).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/ec.h"
#include "common/spin.h"
#include "queue/inbox.h"
#include "queue/slotflag.h"
#include "queue/vring.h"
#include "ringkernel/message.h"

typedef struct lanes {
    rk__inbox base;   /* first: the inbox handle */
    void *lane_owned; /* the lanes' memory when create allocated it */
    rk__ec *wake;     /* the kernel's wake eventcount (caller-owned) */
    size_t slot_size;
    rk_backpressure bp;
    uint32_t lane_cap; /* per lane: messages it queues (not yet taken) */
    uint32_t nlanes;   /* 1, or RK_BAND_COUNT with bands (index = band) */
    bool sp;           /* single producer promised: busy is not a lock */
    rk_spsc *lanes[RK_BAND_COUNT];
    /* Producer side, written by the holder of busy only. */
    _Alignas(64) _Atomic uint64_t enqueued;
    uint64_t prod_taken[RK_BAND_COUNT]; /* copies of dequeued, last read */
    _Atomic uint32_t busy;   /* the producer role (lock for many senders) */
    _Atomic uint64_t misuse; /* single_producer broken: sends refused */
    _Atomic uint64_t dropped;
    _Atomic uint64_t rejected;
    /* Producers park here when full. Its own line: the consumer notifies
     * it after every batch (one load of its waiter count) and must not
     * pull the counters the producer writes per message. */
    _Alignas(64) rk__ec prod_ec;
    rk__spin prod_spin; /* spin budget before parking (common/spin.h) */
    /* Consumer-written. */
    _Alignas(64) _Atomic uint64_t dequeued[RK_BAND_COUNT];
    _Atomic uint64_t high_water; /* largest depth the consumer saw */
    uint32_t held_band;          /* lane of the batch lent in place */
    /* Per lane: the last take found it empty (lanes_take). */
    bool waited[RK_BAND_COUNT];
    _Alignas(64) _Atomic uint32_t closed;
} lanes;

/* A lane's ring (slots) and stride for (cfg, hold), or RK_EINVAL naming
 * the field that is out of range. */
static int
lane_geometry(const rk_mqueue_config *cfg, uint32_t hold, uint32_t *ring,
    uint32_t *stride)
{
    uint64_t r = rk__pow2_at_least((uint64_t)cfg->capacity + hold);
    uint32_t st = rk__inbox_stride(cfg->slot_size);

    /* Any capacity: the ring is the power of two at or above capacity +
     * hold, and lane_space admits exactly capacity beyond what the kernel
     * has taken. */
    if (cfg->capacity == 0)
        return rk__fail(RK_EINVAL, "input_capacity must be at least 1");
    if (st == 0)
        return RK_EINVAL;
    if (r > (UINT64_C(1) << 31))
        return rk__fail(RK_EINVAL,
            "input_capacity %u plus a batch of %u is too large", cfg->capacity,
            hold);
    if (r * st > RK__QUEUE_MAX_BYTES)
        return rk__fail(RK_EINVAL,
            "input_capacity %u x slot_size %u is too large (limit %llu "
            "bytes)",
            cfg->capacity, st, (unsigned long long)RK__QUEUE_MAX_BYTES);
    *ring = (uint32_t)r;
    *stride = st;
    return RK_OK;
}

size_t
rk__inbox_lanes_bytes(const rk_mqueue_config *cfg, uint32_t hold)
{
    uint32_t ring = 0, stride = 0, n = rk__inbox_lane_count(cfg);

    if (n == 0 || lane_geometry(cfg, hold, &ring, &stride) != RK_OK)
        return 0;
    return n * (RK__INBOX_LANE_HDR + (size_t)ring * stride);
}

static const rk__inbox_ops lanes_ops;

int
rk__inbox_lanes_create(rk__inbox **out, const rk_mqueue_config *cfg,
    uint32_t hold, rk__ec *wake, void *mem)
{
    uint32_t ring = 0, stride = 0, n = rk__inbox_lane_count(cfg);
    size_t per;
    lanes *q;
    int rc;

    RK_ASSERT(n != 0);
    if ((rc = lane_geometry(cfg, hold, &ring, &stride)) != RK_OK)
        return rc;
    per = RK__INBOX_LANE_HDR + (size_t)ring * stride;
    if ((q = aligned_alloc(64, (sizeof(*q) + 63) & ~(size_t)63)) == NULL)
        return rk__fail(RK_ENOMEM, "input queue: no memory");
    memset(q, 0, sizeof(*q));
    q->base.ops = &lanes_ops;
    q->slot_size = cfg->slot_size;
    q->bp = cfg->backpressure;
    q->sp = cfg->single_producer;
    q->wake = wake;
    rk__ec_init(&q->prod_ec);
    rk__spin_init(&q->prod_spin);
    if (mem == NULL) {
        if ((mem = aligned_alloc(64, n * per)) == NULL) {
            free(q);
            return rk__fail(RK_ENOMEM, "input lanes: %zu bytes", n * per);
        }
        q->lane_owned = mem;
    }
    RK_ASSERT((uintptr_t)mem % 64 == 0);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *block = (unsigned char *)mem + i * per;
        q->lanes[i] = (rk_spsc *)(void *)block;
        rc = rk_spsc_init(
            q->lanes[i], block + RK__INBOX_LANE_HDR, ring, stride);
        if (rc != RK_OK) {
            free(q->lane_owned);
            free(q);
            return rc;
        }
        /* Every slot EMPTY: the kernel polls the slots' ready flags
         * (queue/slotflag.h). */
        rk__slots_init(block + RK__INBOX_LANE_HDR, stride, ring);
        atomic_init(&q->dequeued[i], 0);
    }
    q->nlanes = n;
    q->lane_cap = cfg->capacity;
    *out = &q->base;
    return RK_OK;
}

static void
lanes_destroy(void *arg)
{
    lanes *q = arg;

    free(q->lane_owned); /* caller memory is the caller's */
    free(q);
}

/* The lane of a priority. */
static inline uint32_t
band_of(const lanes *q, uint8_t priority)
{
    return q->nlanes == 1 ? 0 : (uint32_t)rk__priority_band(priority);
}

/*
 * Producer (holds the role): room for up to want messages in lane b. A
 * lane queues lane_cap messages the kernel has not taken; slots it has
 * taken but still holds (a batch lent in place) do not count. The ring
 * has at least lane_cap + hold slots, so a producer that stays within
 * lane_cap of what the kernel has taken never writes into a held slot: it
 * writes position p only if p < taken + lane_cap, and p's slot last held
 * position p - ring <= taken - hold - 1, which the kernel released before
 * it published `taken`.
 */
static uint32_t
lane_space(lanes *q, uint32_t b, uint32_t want)
{
    uint64_t pos = q->lanes[b]->prod.pos, used = pos - q->prod_taken[b];

    if (used + want > q->lane_cap) {
        /* Acquire pairs with the release store of dequeued in
         * lanes_take: every slot the kernel gave back before it
         * published that count is free to overwrite. */
        q->prod_taken[b]
            = atomic_load_explicit(&q->dequeued[b], memory_order_acquire);
        used = pos - q->prod_taken[b];
    }
    return q->lane_cap - used < want ? (uint32_t)(q->lane_cap - used) : want;
}

/* Single-writer counter bump (the holder of the producer role, or the
 * consumer). */
static void
bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
        memory_order_relaxed);
}

static bool
is_closed(const lanes *q)
{
    /* seq_cst: pairs with the seq_cst store in lanes_close (see the
     * comment there); a plain load on x86. */
    return atomic_load_explicit(&q->closed, memory_order_seq_cst) != 0;
}

/* Room in lane b, read without the producer role (only atomics: the
 * published tail, which equals the producer's position whenever nobody
 * holds the role, and what the kernel has taken). */
static bool
room_unlocked(const lanes *q, uint32_t b)
{
    uint64_t tail = rk_ring_load_relaxed(&q->lanes[b]->ctrl.tail);
    uint64_t taken
        = atomic_load_explicit(&q->dequeued[b], memory_order_relaxed);

    return tail - taken < q->lane_cap;
}

/*
 * The producer role. A kernel that promised one producer takes it with an
 * exchange and refuses a second, concurrent sender (RK_EINVAL) instead of
 * corrupting the lane. Otherwise the role is a spin lock: a sender holds
 * it only while it writes and publishes (it gives it up to wait for room),
 * so waiting for it is short; a sender that finds it taken spins, then
 * yields the CPU to the holder. Acquire/release on the flag orders each
 * holder's view of the producer state (prod.pos, prod_taken, the
 * counters) after the previous holder's. On one thread the flag's line
 * stays in its cache: an uncontended exchange and a store.
 */
#define ROLE_SPIN 64u

static int
role_contended(lanes *q)
{
    if (q->sp) {
        /* Not the producer: the counters are the producer's to bump. */
        atomic_fetch_add_explicit(&q->misuse, 1, memory_order_relaxed);
        return rk__fail(RK_EINVAL,
            "the kernel promised a single producer (single_producer), but "
            "two threads sent to it at once");
    }
    for (uint32_t i = 1;; i++) {
        /* seq_cst: acquire pairs with the release store in role_give;
         * the rest orders the flag before the closed check (close). */
        if (atomic_load_explicit(&q->busy, memory_order_relaxed) == 0
            && atomic_exchange_explicit(&q->busy, 1, memory_order_seq_cst)
                == 0)
            return RK_OK;
        if (i % ROLE_SPIN == 0)
            sched_yield();
        else
            rk__cpu_relax();
    }
}

static inline int
role_take(lanes *q)
{
    /* seq_cst: acquire pairs with the release store in role_give; and
     * the flag is ordered before this sender's check of closed, which
     * lanes_close relies on (it stores closed, then waits for the
     * flag). An exchange is a full barrier on x86 either way. */
    if (rk__likely(
            atomic_exchange_explicit(&q->busy, 1, memory_order_seq_cst) == 0))
        return RK_OK;
    return role_contended(q);
}

static inline void
role_give(lanes *q)
{
    /* Release pairs with the acquire exchange in role_take. */
    atomic_store_explicit(&q->busy, 0, memory_order_release);
}

/* Waits for room in lane b until deadline (ec.h's protocol: prepare,
 * re-check, wait; lanes_take and lanes_close notify). */
static void
lane_wait_room(lanes *q, uint32_t b, uint64_t deadline)
{
    uint32_t key = rk__ec_prepare(&q->prod_ec);

    if (!room_unlocked(q, b) && !is_closed(q))
        (void)rk__ec_wait(&q->prod_ec, key, deadline);
    else
        rk__ec_cancel(&q->prod_ec);
}

/* The producer's spin test (rk__spin_attempt): 1 once there is room or
 * the queue closed, 0 while full. */
struct room_arg {
    const lanes *q;
    uint32_t b;
};

static int
lane_room(void *arg)
{
    const struct room_arg *r = arg;

    return room_unlocked(r->q, r->b) || is_closed(r->q);
}

/*
 * Lane b is full (the caller holds the role): applies the backpressure
 * policy. RK_OK means there may be room now (BLOCK waited, holding the
 * role again); anything else is the result for the message, counted,
 * except that a BLOCK refusal (no wait, or the deadline passed) is not
 * counted when the caller keeps the message (uncounted: rk_send_frame_try).
 * Several senders give the role up while they wait, so that the others
 * (and their timeouts) are not held up; a single producer keeps it.
 */
static inline int
lane_full(lanes *q, uint32_t b, int64_t timeout_ns, bool uncounted,
    uint64_t *deadline)
{
    struct room_arg ra = { q, b };
    bool count = !uncounted || q->bp != RK_BP_BLOCK;

    if (q->bp == RK_BP_DROP_NEW) {
        bump(&q->dropped, 1);
        return RK_EDROPPED;
    }
    if (q->bp == RK_BP_REJECT || timeout_ns == RK_NO_WAIT) {
        if (count)
            bump(&q->rejected, 1);
        return q->bp == RK_BP_REJECT ? RK_EREJECTED : RK_EFULL;
    }
    if (*deadline == 0)
        *deadline = rk__deadline(timeout_ns);
    if (rk_now_ns() >= *deadline) {
        if (count)
            bump(&q->rejected, 1);
        return RK_ETIMEDOUT;
    }
    if (!q->sp)
        role_give(q);
    /* Spin first: the kernel frees a batch at a time, usually within
     * microseconds (common/spin.h). */
    if (rk__spin_wait(&q->prod_spin, lane_room, &ra, 0, *deadline) == 0
        && rk_now_ns() < *deadline)
        lane_wait_room(q, b, *deadline);
    if (!q->sp)
        (void)role_take(q); /* several senders: waits, never refuses */
    return RK_OK;
}

/* Lane b is closed or full (the caller holds the role): waits for room
 * or applies the policy. RK_OK: a slot is free now; else the result for
 * the message. Out of line, so that the straight path of a send into
 * room (lane_send_locked) keeps its registers and a small frame. */
static __attribute__((noinline, cold)) int
lane_no_room(lanes *q, uint32_t b, int64_t timeout_ns, bool uncounted)
{
    uint64_t deadline = 0;
    int rc;

    for (;;) {
        if (is_closed(q))
            return RK_ECLOSED;
        if (lane_space(q, b, 1) != 0)
            return RK_OK;
        if ((rc = lane_full(q, b, timeout_ns, uncounted, &deadline)) != RK_OK)
            return rc;
    }
}

/* One frame into lane b (the caller holds the role). */
static inline int
lane_send_locked(lanes *q, uint32_t b, const void *hdr, size_t hlen,
    const void *payload, size_t len, int64_t timeout_ns, bool uncounted)
{
    rk_spsc *l = q->lanes[b];
    int rc;

    if (rk__unlikely(is_closed(q) || lane_space(q, b, 1) == 0)
        && (rc = lane_no_room(q, b, timeout_ns, uncounted)) != RK_OK)
        return rc;
    /* The frame and its ready flag (queue/slotflag.h), then tail. */
    RK_ASSERT(hlen == RK_MSG_HEADER_SIZE);
    (void)hlen; /* the envelope is always 64 bytes */
    /* Counted before it is published (the flag), so dequeued never
     * passes it. */
    bump(&q->enqueued, 1);
    rk__slot_write(rk_ring_slot(&l->prod, l->prod.pos), hdr, payload, len);
    rk_spsc_commit(l);
    return RK_OK;
}

static int
lanes_send_fill(void *arg, uint8_t priority, uint32_t flen, size_t n,
    rk__inbox_fill fill, void *fill_arg, int64_t timeout_ns, size_t *sent)
{
    lanes *q = arg;
    uint64_t deadline = 0;
    uint32_t b;
    rk_spsc *l;
    size_t i = 0;
    int rc = RK_OK;

    RK_ASSERT(flen <= q->slot_size);
    (void)flen; /* fill writes the frames; their length is in the header */
    *sent = 0;
    if (n == 0)
        return RK_OK;
    if ((rc = role_take(q)) != RK_OK)
        return rc;
    b = band_of(q, priority);
    l = q->lanes[b];
    while (i < n) {
        uint32_t want = n - i > UINT32_MAX ? UINT32_MAX : (uint32_t)(n - i);
        uint32_t k;

        if (is_closed(q)) {
            rc = RK_ECLOSED;
            break;
        }
        k = lane_space(q, b, want);
        if (k == 0) {
            if ((rc = lane_full(q, b, timeout_ns, false, &deadline)) != RK_OK)
                break;
            continue;
        }
        /* Write a run of frames (in up to two pieces where the ring
         * wraps), each with its ready flag (queue/slotflag.h), then
         * publish them with one tail store. */
        bump(&q->enqueued, k); /* before the flags, as in lane_send_locked */
        {
            uint32_t to_end
                = l->prod.mask + 1 - (uint32_t)(l->prod.pos & l->prod.mask);
            uint32_t k1 = k < to_end ? k : to_end;
            fill(fill_arg, i, rk_ring_slot(&l->prod, l->prod.pos),
                l->prod.slot_size, k1, true);
            if (k1 < k)
                fill(fill_arg, i + k1,
                    rk_ring_slot(&l->prod, l->prod.pos + k1),
                    l->prod.slot_size, k - k1, true);
            i += k;
        }
        rk_ring_prod_publish(&l->ctrl, &l->prod, k);
        rk__ec_notify(q->wake); /* the kernel drains while we fill */
    }
    role_give(q);
    *sent = i;
    return rc;
}

static int
lanes_send(void *arg, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns, bool uncounted)
{
    lanes *q = arg;
    int rc;

    if (hlen + len > q->slot_size)
        return rk__fail(
            RK_EMSGSIZE, "message exceeds slot_size %zu", q->slot_size);
    if ((rc = role_take(q)) != RK_OK)
        return rc;
    rc = lane_send_locked(q, band_of(q, priority), hdr, hlen, payload, len,
        timeout_ns, uncounted);
    role_give(q);
    if (rc == RK_OK)
        rk__ec_notify(q->wake); /* after the publication (ec.h) */
    return rc;
}

/* Consumer: published frames of lane l not yet taken, by tail. The
 * consumer takes by the slots' flags, which the producer stores before
 * tail, so it may be ahead of the tail it reads: cons.peer (ring_proto.h's
 * cached tail) is kept at least cons.pos and only ever raised, and the
 * backlog is 0 while tail lags. */
static uint64_t
lane_backlog(rk_spsc *l)
{
    uint64_t pos = l->cons.pos; /* read before the acquire (ring_proto.h) */
    /* Acquire pairs with the producer's release store of tail
     * (rk_ring_publish_tail): the slots below it are written. */
    uint64_t t = rk_ring_load_acquire(&l->ctrl.tail);

    if (t > l->cons.peer)
        l->cons.peer = t;
    return l->cons.peer - pos;
}

static int
lanes_take(void *arg, size_t max, rk__inbox_batch *out)
{
    lanes *q = arg;

    out->n = 0;
    for (uint32_t b = q->nlanes; b-- > 0;) {
        rk_spsc *l = q->lanes[b];
        uint64_t pos = l->cons.pos, avail = l->cons.peer - pos;
        /* One contiguous run: stop at the ring's end. */
        uint32_t run = l->cons.mask + 1 - (uint32_t)(pos & l->cons.mask);
        uint32_t lim = max < run ? (uint32_t)max : run, k;

        /* Frames below the cached tail are known to be there. Past it,
         * the slot's own flag says (queue/slotflag.h), so an idle or
         * waiting kernel polls the slot and not tail's line, which stays
         * with the producer. A frame that came while we waited is taken
         * alone (a round trip reads no other line); one that was there at
         * once means a backlog, sized with one read of tail per batch. */
        if (avail == 0) {
            if (!rk__slot_ready(rk_ring_slot(&l->cons, pos))) {
                q->waited[b] = true;
                continue;
            }
            avail = q->waited[b] ? 0 : lane_backlog(l);
            q->waited[b] = false;
            if (avail == 0) /* waited, or tail lags the flag */
                avail = 1;
        }
        k = avail < lim ? (uint32_t)avail : lim;
        /* The cached tail stays no older than what we take (see
         * lane_backlog). */
        if (l->cons.peer < pos + k)
            l->cons.peer = pos + k;
        /* The backlog as far as we know it, for the high-water mark (the
         * consumer keeps it: a producer would have to read the consumer's
         * line each send). */
        if (avail > atomic_load_explicit(&q->high_water, memory_order_relaxed))
            atomic_store_explicit(&q->high_water, avail, memory_order_relaxed);
        /* In place: the frames stay in their slots (no copy) until
         * lanes_release. */
        out->frames = rk_ring_slot(&l->cons, pos);
        out->stride = l->cons.slot_size;
        out->in_place = true;
        out->n = k;
        q->held_band = b;
        /* Counted when taken: the books (stats depth) treat a held batch
         * as dequeued and pending in the kernel. The count is also the
         * producers' room (lane_space): release pairs with their acquire
         * load, and orders our reads of every slot we gave back before
         * this store (lanes_release), and the EMPTY flags we stored
         * there, before their overwrites. */
        atomic_store_explicit(&q->dequeued[b],
            atomic_load_explicit(&q->dequeued[b], memory_order_relaxed) + k,
            memory_order_release);
        if (q->bp == RK_BP_BLOCK) /* after the dequeued store: room */
            rk__ec_notify_all(&q->prod_ec);
        return RK_OK;
    }
    if (!is_closed(q))
        return RK_EEMPTY;
    /* Closed: everything published before the close is visible now
     * (acquire in is_closed); look once more. */
    for (uint32_t b = 0; b < q->nlanes; b++)
        if (lane_backlog(q->lanes[b]) != 0)
            return RK_EEMPTY;
    return RK_ECLOSED;
}

static void
lanes_release(void *arg, size_t n)
{
    lanes *q = arg;

    if (n == 0)
        return;
    /* The producers' room follows what was taken (lanes_take), not
     * head: no wake-up is owed here. The slots read EMPTY again before
     * the next take publishes the room (queue/slotflag.h). */
    rk_spsc *l = q->lanes[q->held_band];
    for (size_t i = 0; i < n; i++)
        rk__slot_empty(rk_ring_slot(&l->cons, l->cons.pos + i));
    rk_ring_cons_release(&l->ctrl, &l->cons, (uint32_t)n);
}

static size_t
lanes_depth(void *arg)
{
    const lanes *q = arg;
    size_t d = 0;

    /* Held slots count until released. */
    for (uint32_t b = 0; b < q->nlanes; b++)
        d += rk_spsc_depth(q->lanes[b]);
    return d;
}

static void
lanes_close(void *arg)
{
    lanes *q = arg;

    /* seq_cst pairs with the seq_cst loads in is_closed; the notifies
     * wake producers waiting for room and the kernel. */
    atomic_store_explicit(&q->closed, 1, memory_order_seq_cst);
    rk__ec_notify_all(&q->prod_ec);
    rk__ec_notify_all(q->wake);
    /* A sender that took the producer flag before the store above may
     * not have seen it: it is writing a frame it will publish. Wait until
     * it gives the flag back, so that whoever drains the queue after the
     * close sees that frame (a sender told RK_OK is never stranded in a
     * closed queue). The flag is held only while writing a frame (a
     * sender waiting for room gives it back and then sees closed), so
     * this is short. Dekker with role_take: closed, then the flag here;
     * the flag, then closed there; both seq_cst. */
    while (atomic_load_explicit(&q->busy, memory_order_seq_cst) != 0)
        sched_yield();
}

static void
lanes_stats(void *arg, rk_queue_stats *out)
{
    const lanes *q = arg;
    uint64_t deq = 0;

    memset(out, 0, sizeof(*out));
    /* Removals first, so depth does not go negative in practice. */
    for (uint32_t b = 0; b < q->nlanes; b++)
        deq += atomic_load_explicit(&q->dequeued[b], memory_order_relaxed);
    out->dequeued = deq;
    out->dropped = atomic_load_explicit(&q->dropped, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&q->rejected, memory_order_relaxed)
        + atomic_load_explicit(&q->misuse, memory_order_relaxed);
    out->enqueued = atomic_load_explicit(&q->enqueued, memory_order_relaxed);
    out->high_water
        = atomic_load_explicit(&q->high_water, memory_order_relaxed);
    out->depth = out->enqueued > deq ? out->enqueued - deq : 0;
}

static const rk__inbox_ops lanes_ops = {
    .name = "lanes",
    .send = lanes_send,
    .send_fill = lanes_send_fill,
    .take = lanes_take,
    .release = lanes_release,
    .depth = lanes_depth,
    .close = lanes_close,
    .stats = lanes_stats,
    .destroy = lanes_destroy,
};
