/*
 * src/runtime/inq.h - a kernel's input queue.
 *
 * Two implementations behind one small interface:
 *   - an rk_mqueue (the general case: any number of senders, priority
 *     bands, every backpressure policy);
 *   - a "lane": the SPSC ring of ring_proto.h (rk_spsc), used when the
 *     kernel promised a single producer and needs neither bands nor
 *     DROP_OLDEST (which would make the producer take from the head). A
 *     lane costs a ck-like two index stores per message instead of a
 *     claim, counter updates and a fence, which is most of a round trip.
 *     The producer's room follows what the kernel has taken (dequeued),
 *     not the ring's head, and the ring is larger than the capacity by
 *     the kernel's batch: the kernel can hold a taken batch in place
 *     without taking room from the queue (see lane_space in inq.c).
 * Both count the same rk_queue_stats, so the runtime's books (runtime.md)
 * do not care which one a kernel has.
 *
 * Threads: senders per the kernel's promise; the kernel thread receives.
 * The queue owns its storage; init/fini pair.
 */
#ifndef RK_SRC_RUNTIME_INQ_H
#define RK_SRC_RUNTIME_INQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spin.h"
#include "ringkernel/queue.h"

typedef struct rk__inq {
    rk_mqueue *mq; /* general case, or NULL */
    rk_spsc *lane; /* single-producer case, or NULL */
    size_t slot_size;
    rk_backpressure bp;
    uint32_t lane_cap; /* lane: messages it queues (not yet taken) */
    /* Lane: producer-written counters (single writer). */
    _Alignas(64) _Atomic uint64_t enqueued;
    uint64_t prod_taken;     /* producer's copy of dequeued, last read */
    _Atomic uint32_t busy;   /* a producer is in a send */
    _Atomic uint64_t misuse; /* sends from other threads, refused */
    _Atomic uint64_t dropped;
    _Atomic uint64_t rejected;
    /* Lane: the producer parks here when full. Its own line: the
     * consumer reads prod_parked after every batch and must not pull the
     * counters the producer writes per message. */
    _Alignas(64) _Atomic uint32_t prod_seq;
    _Atomic uint32_t prod_parked;
    rk__spin prod_spin; /* spin budget before parking (common/spin.h) */
    /* Lane: consumer-written. */
    _Alignas(64) _Atomic uint64_t dequeued;
    _Atomic uint64_t high_water; /* largest depth the consumer saw */
    _Alignas(64) _Atomic uint32_t closed;
} rk__inq;

/* Picks the implementation from cfg (lane when single_producer, no bands
 * and not DROP_OLDEST). hold is the most lane slots the consumer keeps
 * after taking them (its batch, lent by rk__inq_take): a lane queues
 * cfg->capacity messages besides those, in a ring of at least capacity +
 * hold slots. Errors as rk_mqueue_create. */
int rk__inq_init(rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold);
void rk__inq_fini(rk__inq *q);

/* One frame (hdr then payload). Results as rk_mqueue_sendv. */
int rk__inq_send(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns);

/* Lane only (q->lane != NULL): sends n frames, each h with a fresh message
 * id (h->message_id is overwritten) followed by payload i of len bytes at
 * base, and
 * publishes every run of free slots with one index store, calling wake(warg)
 * after each. Stops at the first message that does not go in; *sent counts
 * those that did. Results as rk__inq_send for that message. */
struct rk_msg_header;
int rk__inq_send_many(rk__inq *q, struct rk_msg_header *h, const void *base,
    size_t len, size_t n, int64_t timeout_ns, size_t *sent,
    void (*wake)(void *), void *warg);

/* A batch taken by rk__inq_take: frame i starts at frames + i * stride. */
typedef struct rk__inq_batch {
    const unsigned char *frames;
    size_t stride;
    size_t n;
    bool in_place; /* frames are the lane's slots; lens[] is not filled */
} rk__inq_batch;

/* Takes up to max frames without waiting. The general queue copies frame
 * i to bufs + i * stride and its length to lens[i]. A lane copies nothing:
 * the batch is a contiguous run of its own slots (each frame's length is
 * in its header), which stay the caller's until rk__inq_release(q, n).
 * RK_OK with out->n >= 1, RK_EEMPTY, or RK_ECLOSED (closed and drained). */
int rk__inq_take(rk__inq *q, void *bufs, size_t stride, size_t *lens,
    size_t max, rk__inq_batch *out);

/* Hands an in-place batch's n slots back to the producer (no-op for the
 * general queue, whose take already freed them). rk__inq_depth counts
 * held slots until then; rk__inq_stats counts them dequeued at the take. */
void rk__inq_release(rk__inq *q, size_t n);

size_t rk__inq_depth(const rk__inq *q);
void rk__inq_close(rk__inq *q);
void rk__inq_stats(const rk__inq *q, rk_queue_stats *out);

#endif /* RK_SRC_RUNTIME_INQ_H */
