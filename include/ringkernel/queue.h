/** @file
 * ringkernel/queue.h - lock-free bounded queues: the message hot path.
 *
 * Three layers, fastest first:
 *
 *   rk_spsc   single producer, single consumer ring of fixed-size slots.
 *             Built on ring_proto.h (the host/GPU protocol); hot paths are
 *             static inline and the caller owns all storage. try_ calls
 *             never wait; there is no blocking variant (use rk_mqueue).
 *   rk_mpsc   many producers, one consumer; rk_mpmc many of both. Vyukov's
 *             bounded queue: a sequence number per slot, one CAS per
 *             operation on the contended side(s).
 *   rk_mqueue the blocking message queue used as a kernel inbox: many
 *             producers (or one, on a fast path), one consumer, optional
 *             four priority bands, a backpressure policy, counters, and
 *             futex parking after a short adaptive spin.
 *
 * Capacities are powers of two (at least 2 for rk_mpsc, rk_mpmc and
 * rk_mqueue, whose per-slot sequence numbers need two slots). Slots hold up to
 * slot_size bytes; rk_spsc, rk_mpsc and rk_mpmc copy exactly slot_size bytes
 * per element, rk_mqueue keeps the length of each message. See docs/queues.md
 * for the design.
 */
#ifndef RINGKERNEL_QUEUE_H
#define RINGKERNEL_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ringkernel/clock.h"
#include "ringkernel/error.h"
#include "ringkernel/ring_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ common */

/** What a send to a full queue does. */
typedef enum rk_backpressure {
    RK_BP_BLOCK = 0,   /**< wait for room up to the send timeout */
    RK_BP_REJECT,      /**< fail at once with RK_EREJECTED */
    RK_BP_DROP_OLDEST, /**< evict the oldest message of the same band */
    RK_BP_DROP_NEW     /**< discard the new message: RK_EDROPPED */
} rk_backpressure;

/** Priority bands: a queue with bands on delivers higher bands first, FIFO
 * within a band. */
typedef enum rk_band {
    RK_BAND_LOW = 0, /**< priority < 64 */
    RK_BAND_NORMAL,  /**< 64..159 */
    RK_BAND_HIGH,    /**< 160..223 */
    RK_BAND_SYSTEM   /**< >= 224 */
} rk_band;

#define RK_BAND_COUNT 4 /**< number of rk_band values */

/** The band of a 0-255 message priority. */
rk_band rk_priority_band(uint8_t priority);

/** A snapshot of a queue's counters. Exact when the queue is quiescent;
 * while it is in use each field is a recent value (they are read one by
 * one with relaxed loads). */
typedef struct rk_queue_stats {
    uint64_t enqueued;   /**< messages admitted into the queue */
    uint64_t dequeued;   /**< messages received */
    uint64_t dropped;    /**< messages lost to DROP_OLDEST or DROP_NEW */
    uint64_t rejected;   /**< sends refused: REJECT, or BLOCK giving up */
    uint64_t depth;      /**< messages in the queue now */
    uint64_t high_water; /**< largest depth seen by a sender */
    uint64_t evicted;    /**< the part of dropped evicted by DROP_OLDEST */
} rk_queue_stats;
/* Invariant: enqueued == dequeued + evicted + depth. Under DROP_OLDEST
 * dropped == evicted; under DROP_NEW evicted == 0 and dropped counts the
 * discarded incoming messages, which were never enqueued. */

/* ================================================================ SPSC */

/**
 * A single-producer single-consumer ring. The struct is public so that it
 * can live in caller memory and its hot paths can inline; treat its fields
 * as private. Exactly one thread may produce and one thread may consume at
 * a time (they may be the same thread). The static inline calls below
 * (try_enqueue/dequeue, reserve/commit, peek/release) check nothing, as in
 * ck: q and elem must not be NULL. The out-of-line calls check q.
 */
typedef struct rk_spsc {
    rk_ring_ctrl ctrl;                  /**< shared indices (3 lines) */
    RK_PROTO_ALIGN64 rk_ring_side prod; /**< producer-private line */
    uint64_t prod_limit; /**< try_enqueue: head + capacity, last read */
    RK_PROTO_ALIGN64 rk_ring_side cons; /**< consumer-private line */
    RK_PROTO_ALIGN64 void *owned;       /**< buffer rk_spsc_create owns */
} rk_spsc;

/** Bytes of slot storage rk_spsc_init needs: capacity * slot_size, or 0 if
 * that overflows. */
size_t rk_spsc_buffer_size(uint32_t capacity, uint32_t slot_size);

/**
 * Initialises q over caller-owned storage of rk_spsc_buffer_size() bytes
 * (64-byte alignment recommended). The caller keeps ownership of q and
 * buffer; both must outlive the queue. RK_EINVAL for a NULL pointer, a
 * capacity that is zero or not a power of two (or above 2^31), or a zero
 * slot_size.
 */
int rk_spsc_init(
    rk_spsc *q, void *buffer, uint32_t capacity, uint32_t slot_size);

/** Allocates a queue and its storage; rk_spsc_destroy frees both. */
int rk_spsc_create(rk_spsc **out, uint32_t capacity, uint32_t slot_size);
/** Frees a queue made by rk_spsc_create and its storage. NULL is ignored. */
void rk_spsc_destroy(rk_spsc *q);

/*
 * Preconditions of the inline fast path (rk_spsc_try_enqueue/dequeue,
 * reserve, commit, peek, release and the RK_SPSC_TYPED handles): q is a
 * live queue from rk_spsc_init()/rk_spsc_create() and elem points to
 * slot_size bytes. They are not checked in release builds, where a NULL
 * is undefined behaviour; code compiled with RK_DEBUG defined (the
 * library's debug and sanitizer builds, its tests) asserts them. Every
 * out-of-line function in this header returns RK_EINVAL, or a neutral
 * value (0, NULL, zeroed stats), for NULL arguments instead.
 */
#if defined(RK_DEBUG)
#include <assert.h>
#define RK__QUEUE_PRE(cond) assert(cond)
#else
#define RK__QUEUE_PRE(cond) ((void)0)
#endif

/* Copies one slot to or from position pos. An 8-byte slot (a pointer or
 * handle) takes a path whose address is a shift and whose copy is one
 * move; the branch on the slot size is predictable. GCC may warn about the
 * 8-byte copy when it sees an element smaller than that, on a path the
 * branch never takes: silenced here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
static inline void
rk__slot_put(unsigned char *base, uint64_t idx, uint32_t size, const void *src)
{
    if (size == 8)
        memcpy(base + (idx << 3), src, 8);
    else
        memcpy(base + idx * size, src, size);
}

static inline void
rk__slot_get(const unsigned char *base, uint64_t idx, uint32_t size, void *dst)
{
    if (size == 8)
        memcpy(dst, base + (idx << 3), 8);
    else
        memcpy(dst, base + idx * size, size);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/**
 * Private state on the host (the untyped calls; the typed handles of
 * RK_SPSC_TYPED keep the same state in the handle instead). The producer
 * keeps its index privately in prod.pos and stores it as well as the
 * shared tail: reading it back from tail, a line the consumer polls, put
 * a cache miss on the critical path of every cross-thread round trip
 * (ping-pong p50 +30 to +48% measured, see docs/queues.md). The consumer's
 * single-element calls keep no private copy: they read their index back
 * from the shared head with a relaxed load (only the consumer stores it;
 * the producer reads head only when its cache says full) and never store
 * cons.pos. Consumer calls that go through ring_proto.h's cons.pos
 * (peek/release, the untyped batch) reload it first (rk__spsc_sync_cons),
 * so every untyped call may be mixed on one queue. The cached peer indices
 * (prod.peer, cons.peer) are refreshed by every call; every advance of a
 * side is checked against a value no newer than the cached one, so the
 * free/available arithmetic stays in range. The consumer tests its cached
 * tail before it reads the shared one: a lagging consumer then reads tail
 * once per run of messages, which is what puts the cross-thread one-way
 * rate above ck_ring's.
 *
 * The single-element paths read every field they need before the refresh
 * (an acquire load, after which the compiler would re-read fields still in
 * memory, and the slot copy may alias them).
 */
static inline uint64_t
rk__spsc_sync_cons(rk_spsc *q)
{
    return q->cons.pos = rk_ring_load_relaxed(&q->ctrl.head);
}

/** rk_ring_cons_avail with the own index passed in (read from the shared
 * word) instead of taken from s->pos. */
static inline uint32_t
rk__spsc_avail_at(rk_spsc *q, uint64_t pos, uint32_t want)
{
    uint64_t avail = q->cons.peer - pos;
    if (avail < want) {
        /* Acquire pairs with the producer's release store of tail
         * (rk_ring_publish_tail): the slots below tail are fully written. */
        uint64_t peer = rk_ring_load_acquire(&q->ctrl.tail);
        q->cons.peer = peer;
        avail = peer - pos;
    }
    return avail < want ? (uint32_t)avail : want;
}

/** Single-element producer (typed and untyped), out of the fast path:
 * re-reads head, caches head + capacity in prod_limit and head in prod.peer
 * (for the batch and reserve calls), and returns the free slots at pos. */
static inline uint64_t
rk__spsc_refresh_limit(rk_spsc *q, uint64_t pos)
{
    uint64_t cap = (uint64_t)q->prod.mask + 1; /* read before the acquire */
    /* Acquire pairs with the consumer's release store of head
     * (rk_ring_release_head): its reads of the freed slots are done
     * before we overwrite them. */
    uint64_t head = rk_ring_load_acquire(&q->ctrl.head);
    q->prod.peer = head;
    q->prod_limit = head + cap;
    return head + cap - pos; /* pos <= head + capacity always */
}

/** Producer: copies slot_size bytes from elem. RK_EFULL if no room. */
static inline int
rk_spsc_try_enqueue(rk_spsc *q, const void *elem)
{
    RK__QUEUE_PRE(q != NULL && elem != NULL);
    uint64_t pos = q->prod.pos; /* private: see above */
    uint64_t mask = q->prod.mask;
    uint32_t size = q->prod.slot_size;
    unsigned char *base = q->prod.base;
    /* Room test against the cached head + capacity: one compare. */
    if (pos >= q->prod_limit && rk__spsc_refresh_limit(q, pos) == 0)
        return RK_EFULL;
    q->prod.pos = pos + 1;
    rk__slot_put(base, pos & mask, size, elem);
    rk_ring_publish_tail(&q->ctrl, pos + 1); /* release, see there */
    return RK_OK;
}

/** Consumer: copies slot_size bytes into elem. RK_EEMPTY if none. */
static inline int
rk_spsc_try_dequeue(rk_spsc *q, void *elem)
{
    RK__QUEUE_PRE(q != NULL && elem != NULL);
    uint64_t pos = rk_ring_load_relaxed(&q->ctrl.head); /* own index */
    uint64_t mask = q->cons.mask;
    uint32_t size = q->cons.slot_size;
    const unsigned char *base = q->cons.base;
    if (rk__spsc_avail_at(q, pos, 1) == 0)
        return RK_EEMPTY;
    rk__slot_get(base, pos & mask, size, elem);
    rk_ring_release_head(&q->ctrl, pos + 1); /* release, see there */
    return RK_OK;
}

/** Producer: enqueues up to n elements from the contiguous array elems
 * (n * slot_size bytes) with one index publication. Returns how many. */
uint32_t rk_spsc_enqueue_batch(rk_spsc *q, const void *elems, uint32_t n);

/** Consumer: dequeues up to n elements into elems. Returns how many. */
uint32_t rk_spsc_dequeue_batch(rk_spsc *q, void *elems, uint32_t n);

/** Producer, zero copy: the next free slot (slot_size writable bytes) or
 * NULL when full. Write the message there, then rk_spsc_commit(). A
 * reserve without a commit is simply repeated by the next reserve. */
static inline void *
rk_spsc_reserve(rk_spsc *q)
{
    RK__QUEUE_PRE(q != NULL);
    if (rk_ring_prod_space(&q->ctrl, &q->prod, 1) == 0)
        return NULL;
    return rk_ring_slot(&q->prod, q->prod.pos);
}

/** Producer: publishes the message written into the slot rk_spsc_reserve()
 * returned. */
static inline void
rk_spsc_commit(rk_spsc *q)
{
    RK__QUEUE_PRE(q != NULL);
    rk_ring_prod_publish(&q->ctrl, &q->prod, 1);
}

/** Consumer, zero copy: the oldest message in place, or NULL when empty.
 * The pointer is valid until rk_spsc_release(). */
static inline const void *
rk_spsc_peek(rk_spsc *q)
{
    RK__QUEUE_PRE(q != NULL);
    rk__spsc_sync_cons(q);
    if (rk_ring_cons_avail(&q->ctrl, &q->cons, 1) == 0)
        return NULL;
    return rk_ring_slot(&q->cons, q->cons.pos);
}

/** Consumer: frees the slot rk_spsc_peek() returned; its pointer is invalid
 * afterwards. */
static inline void
rk_spsc_release(rk_spsc *q)
{
    RK__QUEUE_PRE(q != NULL);
    rk__spsc_sync_cons(q);
    rk_ring_cons_release(&q->ctrl, &q->cons, 1);
}

/** Messages in the ring (approximate while both sides run). */
size_t rk_spsc_depth(const rk_spsc *q);
/** Counters: enqueued = the tail position, dequeued = the head, depth =
 * their difference (read head first, so never negative). rejected and
 * high_water are not kept (they would cost the inline hot paths a store)
 * and read 0, as do dropped and evicted. A NULL q zeroes *out. */
void rk_spsc_stats(const rk_spsc *q, rk_queue_stats *out);

/* ---------------------------------------------------------- typed SPSC */

/** @def RK_SPSC_TYPED(name, T)
 * RK_SPSC_TYPED(name, T) generates typed handles on an rk_spsc for one
 * element type T, in the manner of Concurrency Kit's CK_RING_PROTOTYPE:
 * the slot stride is sizeof(T), a compile-time constant, and elements are
 * passed by value and stored with a plain typed assignment, so nothing goes
 * through memcpy and the slot size is never loaded or tested. The queue
 * object, its memory layout and the ring_proto.h protocol (and so every
 * acquire/release pair) are exactly those of rk_spsc.
 *
 * Each side works through a small handle that keeps, besides the slot
 * array and mask, that side's private state: the producer's position and
 * its cached limit (head + capacity), the consumer's cached tail. Kept in
 * a local variable, a handle lives in registers, so a typed call touches
 * memory only for the element, the shared index it publishes and, when
 * its cache runs out, the other side's index: no private index is stored
 * per call (docs/queues.md, "Typed SPSC"). Generated (all static inline):
 *
 *   int name_init(rk_spsc *q, T *buffer, uint32_t capacity);
 *       rk_spsc_init with slot_size sizeof(T); RK_EINVAL also for a buffer
 *       not aligned for T.
 *   int name_create(rk_spsc **out, uint32_t capacity);
 *   int name_check(const rk_spsc *q);
 *       RK_OK if q (e.g. created elsewhere with rk_spsc_init) has
 *       slot_size == sizeof(T) and slots aligned for T, else RK_EINVAL.
 *
 *   name_prod: the producer's handle.
 *   int name_prod_bind(name_prod *p, rk_spsc *q);
 *       name_check(q), then takes over the producer's position from q.
 *       RK_EINVAL for a NULL p.
 *   void name_prod_unbind(name_prod *p);
 *       hands the position back to q. Between producing through a handle
 *       and producing any other way (the untyped calls, another handle),
 *       unbind it: each side has one owner at a time, and the untyped
 *       calls rely on q's copy of the side's state.
 *   int name_try_enqueue(name_prod *p, T v);            RK_OK / RK_EFULL
 *   uint32_t name_enqueue_batch(name_prod *p, const T *v, uint32_t n);
 *
 *   name_cons: the consumer's handle, the same way round.
 *   int name_cons_bind(name_cons *c, rk_spsc *q);
 *   void name_cons_unbind(name_cons *c);
 *   int name_try_dequeue(name_cons *c, T *out);         RK_OK / RK_EEMPTY
 *   uint32_t name_dequeue_batch(name_cons *c, T *out, uint32_t n);
 *
 * Batches move up to n elements with one index publication and return how
 * many. Same threading rules as rk_spsc (one producer thread and one
 * consumer thread at a time, each using its own handle). The caller owns q
 * and the buffer as for rk_spsc_init; a handle owns nothing.
 */
#ifdef __cplusplus
#define RK__ALIGNOF(T) alignof(T)
#else
#define RK__ALIGNOF(T) _Alignof(T)
#endif

/** Out of line, for name_check: RK_EINVAL (with a detail) unless q's slots
 * are `size` bytes at addresses aligned to `align`. */
int rk_spsc_check_slot(const rk_spsc *q, size_t size, size_t align);

/** A typed producer, out of the fast path: the free slots at pos, from a
 * fresh head; *limit becomes head + capacity. */
static inline uint64_t
rk__spsc_typed_room(rk_spsc *q, uint64_t pos, uint64_t mask, uint64_t *limit)
{
    /* Acquire pairs with the consumer's release store of head
     * (rk_ring_release_head): its reads of the freed slots are done
     * before we overwrite them. */
    uint64_t head = rk_ring_load_acquire(&q->ctrl.head);
    *limit = head + mask + 1;
    return *limit - pos; /* pos <= head + capacity always */
}

/** A typed consumer, out of the fast path: the messages at pos, from a
 * fresh tail, which becomes *peer. */
static inline uint64_t
rk__spsc_typed_avail(rk_spsc *q, uint64_t pos, uint64_t *peer)
{
    /* Acquire pairs with the producer's release store of tail
     * (rk_ring_publish_tail): the slots below tail are fully written. */
    *peer = rk_ring_load_acquire(&q->ctrl.tail);
    return *peer - pos;
}

#define RK_SPSC_TYPED(name, T)                                                \
    typedef struct name##_prod {                                              \
        rk_spsc *q;                                                           \
        T *slots;                                                             \
        uint64_t mask;                                                        \
        uint64_t pos;   /* the next position to write */                      \
        uint64_t limit; /* cached head + capacity: room while pos < it */     \
    } name##_prod;                                                            \
                                                                              \
    typedef struct name##_cons {                                              \
        rk_spsc *q;                                                           \
        const T *slots;                                                       \
        uint64_t mask;                                                        \
        uint64_t peer; /* cached tail: messages while head < it */            \
    } name##_cons;                                                            \
                                                                              \
    static inline int name##_check(const rk_spsc *q)                          \
    {                                                                         \
        return rk_spsc_check_slot(q, sizeof(T), RK__ALIGNOF(T));              \
    }                                                                         \
                                                                              \
    static inline int name##_init(rk_spsc *q, T *buffer, uint32_t capacity)   \
    {                                                                         \
        int rc = rk_spsc_init(q, buffer, capacity, (uint32_t)sizeof(T));      \
        return rc != RK_OK ? rc : name##_check(q);                            \
    }                                                                         \
                                                                              \
    static inline int name##_create(rk_spsc **out, uint32_t capacity)         \
    {                                                                         \
        /* 64-byte aligned storage: aligned for any T up to that. */          \
        int rc = rk_spsc_create(out, capacity, (uint32_t)sizeof(T));          \
        if (rc == RK_OK && (rc = name##_check(*out)) != RK_OK) {              \
            rk_spsc_destroy(*out);                                            \
            *out = NULL;                                                      \
        }                                                                     \
        return rc;                                                            \
    }                                                                         \
                                                                              \
    static inline int name##_prod_bind(name##_prod *p, rk_spsc *q)            \
    {                                                                         \
        int rc = p != NULL ? name##_check(q) : RK_EINVAL;                     \
        if (rc != RK_OK)                                                      \
            return rc;                                                        \
        p->q = q;                                                             \
        p->slots = (T *)(void *)q->prod.base;                                 \
        p->mask = q->prod.mask;                                               \
        p->pos = q->prod.pos; /* the producer's own state: no race */         \
        p->limit = 0;         /* refreshed by the first call */               \
        return RK_OK;                                                         \
    }                                                                         \
                                                                              \
    static inline void name##_prod_unbind(name##_prod *p)                     \
    {                                                                         \
        /* Also re-read the untyped calls' caches of head, which may be */    \
        /* too old for the new position (free = cap - (pos - peer)). */       \
        rk__spsc_refresh_limit(p->q, p->pos);                                 \
        p->q->prod.pos = p->pos;                                              \
    }                                                                         \
                                                                              \
    static inline int name##_cons_bind(name##_cons *c, rk_spsc *q)            \
    {                                                                         \
        int rc = c != NULL ? name##_check(q) : RK_EINVAL;                     \
        if (rc != RK_OK)                                                      \
            return rc;                                                        \
        c->q = q;                                                             \
        c->slots = (const T *)(const void *)q->cons.base;                     \
        c->mask = q->cons.mask;                                               \
        c->peer = 0; /* refreshed by the first call */                        \
        return RK_OK;                                                         \
    }                                                                         \
                                                                              \
    static inline void name##_cons_unbind(name##_cons *c)                     \
    {                                                                         \
        /* The untyped calls' cached tail must not lag behind head. */        \
        c->q->cons.peer = rk_ring_load_acquire(&c->q->ctrl.tail);             \
    }                                                                         \
                                                                              \
    static inline int name##_try_enqueue(name##_prod *p, T v)                 \
    {                                                                         \
        uint64_t pos = p->pos;                                                \
        if (pos >= p->limit                                                   \
            && rk__spsc_typed_room(p->q, pos, p->mask, &p->limit) == 0)       \
            return RK_EFULL;                                                  \
        p->pos = pos + 1;                                                     \
        p->slots[pos & p->mask] = v;                                          \
        /* Release: pairs with the consumer's acquire of tail. */             \
        rk_ring_publish_tail(&p->q->ctrl, pos + 1);                           \
        return RK_OK;                                                         \
    }                                                                         \
                                                                              \
    static inline int name##_try_dequeue(name##_cons *c, T *out)              \
    {                                                                         \
        /* The consumer's index is head itself (only it stores head). */      \
        uint64_t pos = rk_ring_load_relaxed(&c->q->ctrl.head);                \
        if (pos >= c->peer && rk__spsc_typed_avail(c->q, pos, &c->peer) == 0) \
            return RK_EEMPTY;                                                 \
        *out = c->slots[pos & c->mask];                                       \
        /* Release: pairs with the producer's acquire of head. */             \
        rk_ring_release_head(&c->q->ctrl, pos + 1);                           \
        return RK_OK;                                                         \
    }                                                                         \
                                                                              \
    static inline uint32_t name##_enqueue_batch(                              \
        name##_prod *p, const T *v, uint32_t n)                               \
    {                                                                         \
        uint64_t pos = p->pos, mask = p->mask;                                \
        uint64_t room = pos < p->limit ? p->limit - pos : 0;                  \
        if (room < n)                                                         \
            room = rk__spsc_typed_room(p->q, pos, mask, &p->limit);           \
        uint32_t k = room < n ? (uint32_t)room : n;                           \
        for (uint32_t i = 0; i < k; i++)                                      \
            p->slots[(pos + i) & mask] = v[i];                                \
        p->pos = pos + k;                                                     \
        if (k > 0)                                                            \
            rk_ring_publish_tail(&p->q->ctrl, pos + k); /* release */         \
        return k;                                                             \
    }                                                                         \
                                                                              \
    static inline uint32_t name##_dequeue_batch(                              \
        name##_cons *c, T *out, uint32_t n)                                   \
    {                                                                         \
        uint64_t pos = rk_ring_load_relaxed(&c->q->ctrl.head),                \
                 mask = c->mask;                                              \
        uint64_t avail = pos < c->peer ? c->peer - pos : 0;                   \
        if (avail < n)                                                        \
            avail = rk__spsc_typed_avail(c->q, pos, &c->peer);                \
        uint32_t k = avail < n ? (uint32_t)avail : n;                         \
        for (uint32_t i = 0; i < k; i++)                                      \
            out[i] = c->slots[(pos + i) & mask];                              \
        if (k > 0)                                                            \
            rk_ring_release_head(&c->q->ctrl, pos + k); /* release */         \
        return k;                                                             \
    }

/* ================================================================ MPSC/MPMC
 */

/**
 * Bounded queues of fixed-size elements on Vyukov's design. Handles are
 * opaque and allocated by _create; no operation allocates afterwards.
 * rk_mpsc: any number of producer threads, one consumer thread at a time.
 * rk_mpmc: any number of both. Every call checks its pointers: a NULL
 * queue or element gives RK_EINVAL (0 / NULL from the calls that return
 * counts or slots) with a detail. try_ calls never wait (a producer that has
 * claimed a slot but not yet written it can make the next slot look empty
 * to a consumer for that short time).
 */
typedef struct rk_mpsc rk_mpsc;
/** The multi-producer multi-consumer queue (see rk_mpsc). */
typedef struct rk_mpmc rk_mpmc;

/** Allocates a queue of capacity elements (a power of two) of slot_size bytes
 * each. The caller owns *out. RK_EINVAL, RK_ENOMEM. */
int rk_mpsc_create(rk_mpsc **out, uint32_t capacity, uint32_t slot_size);
/** Frees a queue; no thread may still use it. NULL is ignored. */
void rk_mpsc_destroy(rk_mpsc *q);
int rk_mpsc_try_enqueue(rk_mpsc *q, const void *elem); /**< RK_OK / RK_EFULL */
int rk_mpsc_try_dequeue(rk_mpsc *q, void *elem); /**< RK_OK / RK_EEMPTY */
/** Enqueues up to n elements from the array elems; returns how many went in.
 */
uint32_t rk_mpsc_enqueue_batch(rk_mpsc *q, const void *elems, uint32_t n);
/** Dequeues up to n elements into elems; returns how many came out. */
uint32_t rk_mpsc_dequeue_batch(rk_mpsc *q, void *elems, uint32_t n);
/** Zero copy: claims a slot (NULL when full) and returns its address; the
 * caller writes slot_size bytes and passes the ticket to commit. Every
 * successful reserve must be committed, or the consumer stalls there. */
void *rk_mpsc_reserve(rk_mpsc *q, uint64_t *ticket);
/** Publishes the slot claimed by rk_mpsc_reserve with this ticket. */
void rk_mpsc_commit(rk_mpsc *q, uint64_t ticket);
/** Elements in the queue (approximate while threads run). */
size_t rk_mpsc_depth(const rk_mpsc *q);
/** Counters: enqueued and dequeued are the tail and head positions
 * (enqueued includes reserved slots not yet committed), depth their
 * difference; rejected counts elements refused for lack of room (a failed
 * try_enqueue or reserve, the shortfall of a batch); high_water is the
 * largest depth a producer saw (approximate while several run); dropped
 * and evicted are 0. A NULL q zeroes *out. */
void rk_mpsc_stats(const rk_mpsc *q, rk_queue_stats *out);

/** As rk_mpsc_create, for an rk_mpmc. */
int rk_mpmc_create(rk_mpmc **out, uint32_t capacity, uint32_t slot_size);
/** As rk_mpsc_destroy. */
void rk_mpmc_destroy(rk_mpmc *q);
/** As rk_mpsc_try_enqueue: RK_OK or RK_EFULL. */
int rk_mpmc_try_enqueue(rk_mpmc *q, const void *elem);
/** As rk_mpsc_try_dequeue, from any thread: RK_OK or RK_EEMPTY. */
int rk_mpmc_try_dequeue(rk_mpmc *q, void *elem);
/** As rk_mpsc_enqueue_batch. */
uint32_t rk_mpmc_enqueue_batch(rk_mpmc *q, const void *elems, uint32_t n);
/** As rk_mpsc_dequeue_batch. */
uint32_t rk_mpmc_dequeue_batch(rk_mpmc *q, void *elems, uint32_t n);
/** As rk_mpsc_reserve. */
void *rk_mpmc_reserve(rk_mpmc *q, uint64_t *ticket);
/** As rk_mpsc_commit. */
void rk_mpmc_commit(rk_mpmc *q, uint64_t ticket);
/** As rk_mpsc_depth. */
size_t rk_mpmc_depth(const rk_mpmc *q);
void rk_mpmc_stats(const rk_mpmc *q, rk_queue_stats *out); /**< as rk_mpsc */

/* ================================================================ mqueue */

/**
 * rk_mqueue: the blocking message queue used as a kernel inbox or outbox.
 * Any number of sender threads (or exactly one with single_producer), one
 * receiver thread at a time. Messages are byte strings of at most
 * slot_size bytes, copied in and out.
 *
 * Priority bands (priority_bands = true): four rings of `capacity` slots
 * each; recv takes the oldest message of the highest non-empty band.
 * Without bands priority is ignored and the queue is one FIFO.
 *
 * Send results: RK_OK (admitted; under DROP_OLDEST possibly after evicting
 * the oldest message of its band), RK_EREJECTED (REJECT, full),
 * RK_EDROPPED (DROP_NEW, full: the message was discarded and counted),
 * RK_EFULL (BLOCK with RK_NO_WAIT, full), RK_ETIMEDOUT (BLOCK, still full
 * at the timeout), RK_ECLOSED, RK_EMSGSIZE, RK_EINVAL. DROP_OLDEST waits
 * only when nothing can be evicted because the band's oldest slot is still
 * being written by another sender: it yields to it, and gives up like BLOCK
 * (RK_EFULL for RK_NO_WAIT, RK_ETIMEDOUT; counted rejected). The queue copies
 * the message; the caller keeps its buffer in every case.
 *
 * Recv results: RK_OK, RK_EEMPTY (RK_NO_WAIT and empty), RK_ETIMEDOUT,
 * RK_ECLOSED (closed and drained), RK_EMSGSIZE (cap too small: the message
 * stays queued and *len says how big it is), RK_EINVAL.
 *
 * Timeouts are relative nanoseconds, or RK_NO_WAIT / RK_WAIT_FOREVER.
 */
typedef struct rk_mqueue rk_mqueue;

/** An rk_mqueue's configuration; zeroed fields mean the defaults shown. */
typedef struct rk_mqueue_config {
    uint32_t capacity;  /**< slots (per band when bands are on); pow2;
                           0 = default 1024 */
    uint32_t slot_size; /**< max message bytes per slot; 0 = default 256 */
    rk_backpressure backpressure; /**< send to a full queue (0: BLOCK) */
    bool priority_bands; /**< one ring per rk_band, higher bands first */
    bool
        single_producer; /**< promise of one producer thread: SPSC fast path */
} rk_mqueue_config;

/** capacity when the config gives 0 */
#define RK_MQUEUE_DEFAULT_CAPACITY 1024u
/** slot_size when the config gives 0 */
#define RK_MQUEUE_DEFAULT_SLOT_SIZE 256u

/** Creates a queue (NULL cfg = defaults). The caller owns *out and frees it
 * with rk_mqueue_destroy, after every other thread has stopped using it. */
int rk_mqueue_create(rk_mqueue **out, const rk_mqueue_config *cfg);
/** Frees the queue and any messages still in it. NULL is ignored. */
void rk_mqueue_destroy(rk_mqueue *q);

/** Sends one message of len bytes (copied) at priority; the results are listed
 * above (see rk_mqueue). */
int rk_mqueue_send(rk_mqueue *q, const void *msg, size_t len, uint8_t priority,
    int64_t timeout_ns);

/** Gather send: the iov pieces, concatenated, form one message in one slot
 * (e.g. header + payload without an intermediate copy). */
struct rk_iov {
    const void *base; /**< start of the piece */
    size_t len;       /**< bytes in the piece */
};
/** Sends the iovcnt pieces of iov as one message; the results of
 * rk_mqueue_send. */
int rk_mqueue_sendv(rk_mqueue *q, const struct rk_iov *iov, int iovcnt,
    uint8_t priority, int64_t timeout_ns);

/**
 * Batch send of n messages to the band of priority: message i is lens[i]
 * bytes (stride bytes when lens is NULL) at (const char *)msgs + i * stride.
 * Free consecutive slots are claimed together (one tail update for the
 * run) and the messages are published in order; each message meets the
 * backpressure policy as rk_mqueue_send would, with one timeout for the
 * whole batch. *sent (may be NULL) gets how many were admitted, always the
 * first *sent of the batch. Returns RK_OK when all n were admitted, else
 * what the first refused message got: RK_EREJECTED / RK_EDROPPED (the rest
 * are counted rejected / dropped), RK_EFULL / RK_ETIMEDOUT (BLOCK, the rest
 * counted rejected), RK_ECLOSED; RK_EINVAL (NULL, or a length above
 * stride) and RK_EMSGSIZE are checked before anything is sent.
 */
int rk_mqueue_send_batch(rk_mqueue *q, const void *msgs, size_t stride,
    const size_t *lens, size_t n, uint8_t priority, int64_t timeout_ns,
    size_t *sent);

/** Receives one message into buf (cap bytes); *len gets its length. */
int rk_mqueue_recv(
    rk_mqueue *q, void *buf, size_t cap, size_t *len, int64_t timeout_ns);

/** Waits (up to the timeout) for at least one message, then takes up to max
 * without waiting more: message i goes to (char *)bufs + i * stride (at
 * most stride bytes) and its length to lens[i]; *n gets the count. A
 * message longer than stride stops the batch (RK_EMSGSIZE only if it is the
 * first). */
int rk_mqueue_recv_batch(rk_mqueue *q, void *bufs, size_t stride, size_t *lens,
    size_t max, size_t *n, int64_t timeout_ns);

/** Closes the queue and wakes every waiter. Later sends fail RK_ECLOSED;
 * receives drain what is left, then return RK_ECLOSED. Idempotent. */
void rk_mqueue_close(rk_mqueue *q);
/** True once rk_mqueue_close has been called. */
bool rk_mqueue_is_closed(const rk_mqueue *q);

/** Fills *out (caller-owned) with the queue's counters. */
void rk_mqueue_stats(const rk_mqueue *q, rk_queue_stats *out);
/** Messages in the queue now (approximate while threads run). */
size_t rk_mqueue_depth(const rk_mqueue *q);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_QUEUE_H */
