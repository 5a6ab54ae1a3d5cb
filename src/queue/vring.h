/*
 * src/queue/vring.h - the bounded multi-producer/multi-consumer ring engine
 * behind rk_mpsc, rk_mpmc and each band of rk_mqueue.
 *
 * Dmitry Vyukov's design: every slot carries a 64-bit sequence number.
 * For position pos (a free-running counter) and capacity cap:
 *   seq == pos        the slot is free for the producer of pos;
 *   seq == pos + 1    the slot holds the message of pos;
 *   seq == pos + cap  the consumer of pos is done; free for pos + cap.
 * Producers claim a position by advancing tail (CAS, or a plain store with
 * one producer), write the slot and publish seq = pos + 1 with release.
 * Consumers claim by advancing head (CAS with several consumers or
 * evictors, plain store with one), read the slot and release seq =
 * pos + cap. Producers and consumers never touch each other's index: they
 * meet only on the slot's sequence word.
 */
#ifndef RK_SRC_QUEUE_VRING_H
#define RK_SRC_QUEUE_VRING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "ringkernel/queue.h"

/* Slot header; the payload follows at offset RK__VSLOT_HDR. */
/* The band of a priority (rk_priority_band, inline for the send paths:
 * the inbox's lanes pick one per message). */
static inline rk_band
rk__priority_band(uint8_t priority)
{
    if (priority >= 224)
        return RK_BAND_SYSTEM;
    if (priority >= 160)
        return RK_BAND_HIGH;
    if (priority >= 64)
        return RK_BAND_NORMAL;
    return RK_BAND_LOW;
}

typedef struct rk__vslot {
    _Atomic uint64_t seq;
    /* Message length (rk_mqueue). Atomic because an evicting producer or a
     * second consumer may read it before winning the claim; the winner's
     * claim makes the value it read the right one (see mqueue.c). */
    _Atomic uint32_t len;
    uint32_t pad;
} rk__vslot;

#define RK__VSLOT_HDR ((uint32_t)sizeof(rk__vslot))

typedef struct rk__vring {
    _Alignas(RK_CACHELINE) _Atomic uint64_t tail; /* producers' line */
    /* rk_mqueue with a consumer that holds slots in place: a value head
     * had at some point (never above it), so that producers test their
     * admission limit without reading the consumer's line per message. */
    _Atomic uint64_t head_hint;
    _Alignas(RK_CACHELINE) _Atomic uint64_t head; /* consumers' line */
    /* Read-only after init: shared by both sides without bouncing. */
    _Alignas(RK_CACHELINE) unsigned char *slots;
    uint64_t mask;
    uint32_t slot_size; /* payload bytes */
    uint32_t stride;    /* bytes from one slot to the next */
} rk__vring;

/* Allocates and initialises r's slots. RK_EINVAL / RK_ENOMEM. */
int rk__vring_init(
    rk__vring *r, uint32_t capacity, uint32_t slot_size, const char *what);

void rk__vring_fini(rk__vring *r);

/* No queue's slot array may exceed this (1 TiB). */
#define RK__QUEUE_MAX_BYTES (UINT64_C(1) << 40)

/* Validates a (capacity, slot_size) pair for any queue. */
int rk__queue_check_geometry(
    uint32_t capacity, uint32_t slot_size, const char *what);

static inline rk__vslot *
rk__vring_slot(const rk__vring *r, uint64_t pos)
{
    return (rk__vslot *)(r->slots + (pos & r->mask) * r->stride);
}

static inline unsigned char *
rk__vslot_data(rk__vslot *s)
{
    return (unsigned char *)s + RK__VSLOT_HDR;
}

/* Producer claim with several producers: true and *pos on success, false
 * when the ring is full. */
static inline bool
rk__vring_claim_mp(rk__vring *r, uint64_t *pos)
{
    uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        rk__vslot *s = rk__vring_slot(r, p);
        /* Acquire pairs with the consumer's release of seq in
         * rk__vring_free: its reads of the slot are done before we write. */
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - p);
        if (diff == 0) {
            /* Relaxed: the CAS only arbitrates between producers; the slot
             * contents are ordered by the seq release/acquire. */
            if (atomic_compare_exchange_weak_explicit(&r->tail, &p, p + 1,
                    memory_order_relaxed, memory_order_relaxed)) {
                *pos = p;
                return true;
            }
        } else if (diff < 0) {
            return false; /* the slot still holds the message of p - cap */
        } else {
            p = atomic_load_explicit(&r->tail, memory_order_relaxed);
        }
    }
}

/* Producer claim with one producer: no RMW. */
static inline bool
rk__vring_claim_sp(rk__vring *r, uint64_t *pos)
{
    uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    rk__vslot *s = rk__vring_slot(r, p);
    /* Acquire pairs with the consumer's release in rk__vring_free. */
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != p)
        return false;
    atomic_store_explicit(&r->tail, p + 1, memory_order_relaxed);
    *pos = p;
    return true;
}

/*
 * Claims up to n consecutive positions for producers with one CAS: counts
 * the free slots from tail, then advances tail over them. Slots become free
 * in position order only with one consumer; with several, counting stops
 * at the first busy slot, which is still correct.
 */
static inline uint32_t
rk__vring_claim_batch_mp(rk__vring *r, uint32_t n, uint64_t *first)
{
    uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        uint32_t k = 0;
        while (k < n) {
            /* Acquire pairs with rk__vring_free (slot reads done). */
            uint64_t seq = atomic_load_explicit(
                &rk__vring_slot(r, p + k)->seq, memory_order_acquire);
            if (seq != p + k)
                break;
            k++;
        }
        if (k == 0) {
            uint64_t seq = atomic_load_explicit(
                &rk__vring_slot(r, p)->seq, memory_order_relaxed);
            if ((int64_t)(seq - p) < 0)
                return 0; /* full */
            p = atomic_load_explicit(&r->tail, memory_order_relaxed);
            continue; /* another producer moved past p */
        }
        /* Relaxed: arbitration between producers only. */
        if (atomic_compare_exchange_weak_explicit(&r->tail, &p, p + k,
                memory_order_relaxed, memory_order_relaxed)) {
            *first = p;
            return k;
        }
    }
}

/* The same with one producer: no RMW. Counts the free slots from tail
 * (they free in position order only with one consumer; the count stops at
 * the first busy slot either way). */
static inline uint32_t
rk__vring_claim_batch_sp(rk__vring *r, uint32_t n, uint64_t *first)
{
    uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint32_t k = 0;
    /* Acquire pairs with rk__vring_free (slot reads done). */
    while (k < n
        && atomic_load_explicit(
               &rk__vring_slot(r, p + k)->seq, memory_order_acquire)
            == p + k)
        k++;
    if (k > 0)
        atomic_store_explicit(&r->tail, p + k, memory_order_relaxed);
    *first = p;
    return k;
}

/* Producer: the slot of pos is written; make it visible. */
static inline void
rk__vring_publish(rk__vring *r, uint64_t pos)
{
    /* Release pairs with the consumer's acquire of seq in
     * rk__vring_take_*: the payload and len are visible first. */
    atomic_store_explicit(
        &rk__vring_slot(r, pos)->seq, pos + 1, memory_order_release);
}

/* Consumer claim with one consumer (and no evictors): no RMW. The caller
 * reads the slot, then calls rk__vring_free. */
static inline bool
rk__vring_take_sc(rk__vring *r, uint64_t *pos)
{
    uint64_t p = atomic_load_explicit(&r->head, memory_order_relaxed);
    rk__vslot *s = rk__vring_slot(r, p);
    /* Acquire pairs with the producer's release in rk__vring_publish. */
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != p + 1)
        return false;
    atomic_store_explicit(&r->head, p + 1, memory_order_relaxed);
    *pos = p;
    return true;
}

/* Consumer claim with several consumers or evicting producers: the
 * slot of *pos (the caller reads it, then calls rk__vslot_free), or NULL
 * when there is nothing to take. */
static inline rk__vslot *
rk__vring_take_mc(rk__vring *r, uint64_t *pos)
{
    uint64_t p = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        rk__vslot *s = rk__vring_slot(r, p);
        /* Acquire pairs with the producer's release in rk__vring_publish. */
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - (p + 1));
        if (diff == 0) {
            /* Relaxed: arbitration only, as in claim_mp. */
            if (atomic_compare_exchange_weak_explicit(&r->head, &p, p + 1,
                    memory_order_relaxed, memory_order_relaxed)) {
                *pos = p;
                return s;
            }
        } else if (diff < 0) {
            return NULL; /* empty (or its producer is still writing) */
        } else {
            p = atomic_load_explicit(&r->head, memory_order_relaxed);
        }
    }
}

/* Consumer: done with slot s, that of pos; hand it to the producer of
 * pos + cap. */
static inline void
rk__vslot_free(const rk__vring *r, rk__vslot *s, uint64_t pos)
{
    /* Release pairs with the producer's acquire in rk__vring_claim_*: our
     * reads of the payload happen before it is overwritten. */
    atomic_store_explicit(&s->seq, pos + r->mask + 1, memory_order_release);
}

/* Consumer: done with the slot of pos (rk__vslot_free). */
static inline void
rk__vring_free(rk__vring *r, uint64_t pos)
{
    rk__vslot_free(r, rk__vring_slot(r, pos), pos);
}

/* Whether the slot at the consumer's head holds a message (a cheap
 * emptiness probe that reads no producer line). */
static inline bool
rk__vring_ready(const rk__vring *r)
{
    uint64_t p = atomic_load_explicit(&r->head, memory_order_relaxed);
    /* Acquire pairs with rk__vring_publish. */
    return atomic_load_explicit(
               &rk__vring_slot(r, p)->seq, memory_order_acquire)
        == p + 1;
}

/* Messages claimed and not yet taken (approximate under concurrency). */
static inline uint64_t
rk__vring_depth(const rk__vring *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    return t > h ? t - h : 0;
}

/*
 * A high-water mark kept by senders (rk_mqueue, rk_mpsc, rk_mpmc). After a
 * send that brought the admissions to `total`, rk__hw_maybe says whether
 * it might be a new high by a stale hint of the removal count; only then
 * does the sender read the real count (on the consumer's line) and call
 * rk__hw_raise. While the queue stays below its mark no line is pulled.
 * Approximate under concurrency: a send overlapping a receive may count
 * both (hence the limit), and concurrent senders race benignly.
 */
typedef struct rk__hwmark {
    _Atomic uint64_t high_water;
    _Atomic uint64_t removed_hint; /* a stale removal count */
} rk__hwmark;

static inline bool
rk__hw_maybe(rk__hwmark *m, uint64_t total)
{
    uint64_t hw = atomic_load_explicit(&m->high_water, memory_order_relaxed);
    uint64_t hint
        = atomic_load_explicit(&m->removed_hint, memory_order_relaxed);
    return total > hint && total - hint > hw;
}

static inline void
rk__hw_raise(rk__hwmark *m, uint64_t total, uint64_t removed, uint64_t limit)
{
    atomic_store_explicit(&m->removed_hint, removed, memory_order_relaxed);
    if (total <= removed)
        return;
    uint64_t depth = total - removed;
    if (depth > limit)
        depth = limit;
    uint64_t hw = atomic_load_explicit(&m->high_water, memory_order_relaxed);
    while (depth > hw
        && !atomic_compare_exchange_weak_explicit(&m->high_water, &hw, depth,
            memory_order_relaxed, memory_order_relaxed)) { }
}

/* Internal views of an rk_mqueue for the queue tests (mqueue.c): band b's
 * ring, and how many threads are parked (or about to park) as senders
 * (senders = true) or as the receiver. */
struct rk_mqueue;
rk__vring *rk__mqueue_band(struct rk_mqueue *q, unsigned b);
uint32_t rk__mqueue_waiters(const struct rk_mqueue *q, bool senders);

#endif /* RK_SRC_QUEUE_VRING_H */
