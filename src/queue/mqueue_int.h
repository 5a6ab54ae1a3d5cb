/*
 * src/queue/mqueue_int.h - rk_mqueue's internal interface for the runtime's
 * DROP_OLDEST inbox (src/queue/inbox_mqueue.c): a zero-copy send that writes frames in
 * their slots, and an in-place take that lends a run of slots to the
 * receiver until it releases them. With both, a frame is copied once on
 * its way from the sender's buffer to the kernel's view.
 *
 * Threads: as rk_mqueue (many senders, one receiver). The take/release
 * pair is the receiver's; at most one run is held at a time.
 */
#ifndef RK_SRC_QUEUE_MQUEUE_INT_H
#define RK_SRC_QUEUE_MQUEUE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/ec.h"
#include "ringkernel/queue.h"

/*
 * rk_mqueue_create with two internal options:
 *   hold: the most slots the receiver holds in place (rk__mqueue_take_held
 *         never takes more). Each band's ring gets that many slots more
 *         than cfg->capacity, and senders are admitted up to capacity
 *         beyond the receiver's head, so held slots never take room from
 *         the queue and are never evicted (DROP_OLDEST evicts at the head).
 *   notempty: the eventcount a send notifies after it publishes (the
 *         kernel's wake eventcount, caller-owned, outlives the queue), or
 *         NULL for the queue's own. rk_mqueue_recv* wait on it.
 * Each message starts 16 bytes into its slot (16-byte aligned: a 64-byte
 * stride measured ~5 % slower in a ping-pong, see docs/queues.md).
 */
int rk__mqueue_create_held(rk_mqueue **out, const rk_mqueue_config *cfg,
    uint32_t hold, rk__ec *notempty);

/*
 * One message of a 64-byte header (a runtime envelope) and len payload
 * bytes, gathered into one slot: rk_mqueue_sendv of those two pieces
 * (same results, same books), with the common cases (room, or room after
 * one eviction under DROP_OLDEST) on a short path of its own.
 */
#define RK__MQ_FRAME_HDR 64u
int rk__mqueue_send_frame(rk_mqueue *q, const void *hdr, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns);

/* Writes messages first .. first + k - 1 at dst, dst + stride, ... (one
 * contiguous run of slots; each slot has slot_size bytes). */
typedef void (*rk__mqueue_fill)(
    void *arg, size_t first, unsigned char *dst, size_t stride, size_t k);

/*
 * Zero-copy batch send of n messages of len bytes each to the band of
 * priority: claims runs of free slots and has fill write the messages in
 * place, then publishes each run and notifies. The policy applies as in
 * rk_mqueue_send_batch (one timeout for the whole batch under BLOCK), but
 * the send stops at the first message refused and counts only that one
 * (rejected, or dropped under DROP_NEW). *sent: how many went in. len must
 * not exceed slot_size (checked by the caller).
 */
int rk__mqueue_send_fill(rk_mqueue *q, uint8_t priority, uint32_t len,
    size_t n, rk__mqueue_fill fill, void *arg, int64_t timeout_ns,
    size_t *sent);

/* A run of messages lent in place: message i starts at frames + i * stride
 * (the runtime's frames carry their length in their header). */
typedef struct rk__mqueue_run {
    const unsigned char *frames;
    size_t stride;
    size_t n;
} rk__mqueue_run;

/* Receiver, no waiting: takes up to min(max, hold) messages from the
 * highest non-empty band, in place; they count as dequeued now and stay
 * the receiver's until rk__mqueue_release. Nothing may be held already.
 * RK_OK (out->n >= 1), RK_EEMPTY, or RK_ECLOSED (closed and drained). */
int rk__mqueue_take_held(rk_mqueue *q, size_t max, rk__mqueue_run *out);
/* Gives the first n held slots back to the senders. */
void rk__mqueue_release(rk_mqueue *q, size_t n);
/* Slots held now (any thread; relaxed). */
uint64_t rk__mqueue_held(const rk_mqueue *q);

#endif /* RK_SRC_QUEUE_MQUEUE_INT_H */
