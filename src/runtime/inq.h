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
 * do not care which one a kernel has, and both lend the kernel its input
 * in place (rk__inq_take, rk__inq_release): a frame is copied once, from
 * the sender's buffer into its slot.
 *
 * Waking the kernel is the queue's job, not the backend's: every
 * successful enqueue notifies the kernel's wake eventcount (common/ec.h)
 * after it publishes, and a close notifies every waiter there. The kernel
 * body parks on that eventcount (prepare, re-check, wait).
 *
 * Threads: senders per the kernel's promise; the kernel thread receives.
 * Storage: rk__inq_init allocates (rk__inq_fini frees); rk__inq_init_at
 * builds the lane in caller memory (the backend's, for a device that
 * reads it) and rk__inq_fini leaves that memory alone. The general inbox
 * is always host memory: its senders need compare-and-swap.
 */
#ifndef RK_SRC_RUNTIME_INQ_H
#define RK_SRC_RUNTIME_INQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ec.h"
#include "common/spin.h"
#include "ringkernel/queue.h"

typedef struct rk__inq {
    rk_mqueue *mq; /* general case, or NULL */
    rk_spsc *lane; /* single-producer case, or NULL */
    void *lane_owned; /* the lane's memory when rk__inq_init allocated it */
    rk__ec *wake;     /* the kernel's wake eventcount (caller-owned) */
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
     * consumer notifies it after every batch (one load of its waiter
     * count) and must not pull the counters the producer writes per
     * message. */
    _Alignas(64) rk__ec prod_ec;
    rk__spin prod_spin; /* spin budget before parking (common/spin.h) */
    /* Lane: consumer-written. */
    _Alignas(64) _Atomic uint64_t dequeued;
    _Atomic uint64_t high_water; /* largest depth the consumer saw */
    _Alignas(64) _Atomic uint32_t closed;
} rk__inq;

/* Picks the implementation from cfg (lane when single_producer, no bands
 * and not DROP_OLDEST). hold is the most slots the consumer keeps after
 * taking them (its batch, lent by rk__inq_take): either kind queues
 * cfg->capacity messages besides those (per band), in rings of at least
 * capacity + hold slots. Slot strides are rounded up to 64 bytes, so
 * every frame's header is 64-byte aligned. wake: the kernel's wake
 * eventcount, caller-owned, outlives q (see above). Errors as
 * rk_mqueue_create; RK_EINVAL with a detail naming the field for sizes
 * that overflow. */
int rk__inq_init(
    rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold, rk__ec *wake);

/* Placement. Bytes of caller memory a lane needs for (cfg, hold): an
 * rk_spsc (its rk_ring_ctrl first, the ring_proto.h control block a device
 * reads) in the first rk__INQ_LANE_HDR bytes, then the slot array. 0 when
 * cfg selects the general inbox (host memory, allocated by the queue), or
 * when the sizes overflow (rk__inq_init_at then says which). */
#define RK__INQ_LANE_HDR ((sizeof(rk_spsc) + 63) & ~(size_t)63)
size_t rk__inq_lane_bytes(const rk_mqueue_config *cfg, uint32_t hold);

/* As rk__inq_init, with the lane built in mem: rk__inq_lane_bytes bytes,
 * 64-byte aligned, host-accessible, caller-owned, alive until after
 * rk__inq_fini (which does not free it). mem is ignored (may be NULL) when
 * cfg selects the general inbox; mem == NULL for a lane allocates as
 * rk__inq_init does. */
int rk__inq_init_at(rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold,
    rk__ec *wake, void *mem);
void rk__inq_fini(rk__inq *q);

/* One frame (hdr then payload). Results as rk_mqueue_sendv. */
int rk__inq_send(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns);

/* Either kind: sends n frames, each h with a fresh message id
 * (h->message_id is overwritten) followed by payload i of len bytes at
 * base, at priority h->priority. Writes the frames straight into runs of
 * claimed slots (no staging copy), publishes each run at once and
 * notifies wake after each. Stops at the first message that does not go
 * in, which alone meets the policy (counted once); *sent counts those
 * that went in. Results as rk__inq_send for that message. The caller has
 * checked that sizeof(*h) + len fits a slot. */
struct rk_msg_header;
int rk__inq_send_many(rk__inq *q, struct rk_msg_header *h, const void *base,
    size_t len, size_t n, int64_t timeout_ns, size_t *sent);

/* A batch taken by rk__inq_take: frame i starts at frames + i * stride. */
typedef struct rk__inq_batch {
    const unsigned char *frames;
    size_t stride;
    size_t n;
    bool in_place; /* frames are the queue's slots; lens[] is not filled */
} rk__inq_batch;

/* Takes up to max (at most hold) frames without waiting, copying nothing:
 * the batch is a contiguous run of the queue's own slots (the lane's, or
 * one band's of the general inbox, highest band first), in_place is true
 * and each frame's length is in its header. The slots stay the caller's
 * until rk__inq_release(q, n); take nothing more before that. bufs, stride
 * and lens are not used (kept for a copying implementation).
 * RK_OK with out->n >= 1, RK_EEMPTY, or RK_ECLOSED (closed and drained). */
int rk__inq_take(rk__inq *q, void *bufs, size_t stride, size_t *lens,
    size_t max, rk__inq_batch *out);

/* Hands the n slots of an in-place batch back to the producers (either
 * kind). rk__inq_depth counts held slots until then; rk__inq_stats counts
 * them dequeued at the take. */
void rk__inq_release(rk__inq *q, size_t n);

size_t rk__inq_depth(const rk__inq *q);
void rk__inq_close(rk__inq *q);
void rk__inq_stats(const rk__inq *q, rk_queue_stats *out);

#endif /* RK_SRC_RUNTIME_INQ_H */
