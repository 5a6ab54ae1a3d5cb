/*
 * src/queue/inbox.h - a kernel's inbox: the frame queue the runtime puts
 * messages in and a kernel (or a backend's relay) takes them from.
 *
 * One type, two implementations, picked once by rk__inbox_create from
 * the configuration and reached through a table of operations
 * (rk__inbox_ops), so that the runtime never asks which one it holds:
 *
 *   lanes   (inbox_lanes.c) every policy but DROP_OLDEST: ring_proto.h
 *           SPSC lanes (rk_spsc), one per priority band with bands, whose
 *           producer side is serialised by one flag. A kernel that
 *           promised a single producer takes the flag with an exchange and
 *           refuses a second, concurrent sender (RK_EINVAL); the general
 *           inbox (any number of senders) uses the same flag as a spin
 *           lock, held only while a sender writes and publishes (never
 *           while it waits for room). The kernel reads lanes exactly as a
 *           device would ("the CAS stays on the host, in front of the
 *           lanes" of the backend contract). Lanes may be placed in caller
 *           memory (rk__inbox_placed_bytes).
 *   mqueue  (inbox_mqueue.c) DROP_OLDEST: an rk_mqueue
 *           (queue/mqueue_int.h), whose senders evict from the head, which
 *           a lane's producer may not touch. Host memory only.
 *
 * Common to both:
 *   - Capacity. The inbox holds exactly cfg->capacity messages per band
 *     (any value >= 1, not only powers of two) besides the batch the
 *     consumer holds: the (capacity + 1)th send meets the policy. The
 *     rings inside are powers of two of at least capacity + hold slots.
 *   - Frames. A frame is a 64-byte rk_msg_header and payload_len bytes in
 *     one slot; slot strides are multiples of 64 (every header 64-byte
 *     aligned).
 *   - Zero copy. A frame is copied once, from the sender's buffer into
 *     its slot; the consumer takes a run of slots in place (take) and
 *     hands them back (release).
 *   - Books. Both count one rk_queue_stats (a taken batch counts as
 *     dequeued at the take), so the runtime's books do not depend on the
 *     implementation.
 *   - Waking. Waking the kernel is the inbox's job: every successful
 *     enqueue notifies the wake eventcount (common/ec.h) after it
 *     publishes, and a close notifies every waiter there.
 *
 * Threads: senders per the configuration's promise (any number, or one at
 * a time with single_producer); one consumer at a time calls take,
 * release and (for what it holds) depth; close, stats and depth from any
 * thread. The inbox never calls back into its caller except through the
 * fill callback of send_fill, on the sender's own thread.
 *
 * Ownership: rk__inbox_create allocates the inbox (and the lanes when mem
 * is NULL); rk__inbox_destroy frees what create allocated and leaves
 * caller memory alone.
 */
#ifndef RK_SRC_QUEUE_INBOX_H
#define RK_SRC_QUEUE_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "common/ec.h"
#include "ringkernel/queue.h"

/* A batch taken in place: frame i starts at frames + i * stride, and its
 * length is in its header (64 + payload_len). in_place is always true
 * (kept for the backends that still test it). */
typedef struct rk__inbox_batch {
    const unsigned char *frames;
    size_t stride;
    size_t n;
    bool in_place;
} rk__inbox_batch;

/* send_fill's writer: writes frames first .. first + k - 1 at dst,
 * dst + stride, ... (one contiguous run of slots). flagged: the slots
 * carry ready flags (queue/slotflag.h), so each frame must be written up
 * to its flag and then published with rk__slot_publish; otherwise the
 * whole frame is copied and the inbox publishes it. */
typedef void (*rk__inbox_fill)(void *arg, size_t first, unsigned char *dst,
    size_t stride, size_t k, bool flagged);

/*
 * The operations. q is the inbox itself (struct rk__inbox first in each
 * implementation), so the consumer's entries (take, release, depth) can
 * be put in another table as they are.
 */
typedef struct rk__inbox_ops {
    const char *name; /* "lanes" or "mqueue" */
    /* Sender: one frame (hdr, 64 bytes, then len payload bytes) at the
     * band of priority. RK_OK, RK_EMSGSIZE (over the slot size),
     * RK_EFULL/RK_ETIMEDOUT (BLOCK: no room in time), RK_EREJECTED
     * (REJECT), RK_EDROPPED (DROP_NEW), RK_ECLOSED, or RK_EINVAL (a
     * second concurrent sender to a single-producer inbox). uncounted: a
     * BLOCK refusal is not counted, because the caller keeps the message
     * (rk_send_frame_try); other policies count as always (DROP_OLDEST
     * never refuses for room). */
    int (*send)(void *q, const void *hdr, size_t hlen, const void *payload,
        size_t len, uint8_t priority, int64_t timeout_ns, bool uncounted);
    /* Sender: n frames of flen bytes (<= the slot size, checked by the
     * caller) at the band of priority, written in place by fill in runs
     * of claimed slots; each run is published and wake notified at once.
     * Stops at the first frame that does not go in, which alone meets
     * the policy (counted once). *sent: frames that went in. Results as
     * send for that frame (one timeout for the whole call under BLOCK). */
    int (*send_fill)(void *q, uint8_t priority, uint32_t flen, size_t n,
        rk__inbox_fill fill, void *arg, int64_t timeout_ns, size_t *sent);
    /* Consumer, no waiting: up to max (at most hold) frames in place, a
     * contiguous run of one band's slots, highest non-empty band first.
     * They stay the caller's until release; take nothing more before.
     * RK_OK (out->n >= 1), RK_EEMPTY, or RK_ECLOSED (closed and
     * drained). */
    int (*take)(void *q, size_t max, rk__inbox_batch *out);
    /* Consumer: gives the first n slots of the batch taken back. */
    void (*release)(void *q, size_t n);
    /* Messages queued plus those held by the consumer (any thread;
     * relaxed, exact for the consumer). */
    size_t (*depth)(void *q);
    /* Refuses sends from now on (RK_ECLOSED) and wakes every waiter;
     * a send told RK_OK is never stranded: take drains it. Idempotent. */
    void (*close)(void *q);
    void (*stats)(void *q, rk_queue_stats *out);
    void (*destroy)(void *q);
} rk__inbox_ops;

typedef struct rk__inbox {
    const rk__inbox_ops *ops;
} rk__inbox;

/* Slot strides are multiples of this: every frame header 64-byte aligned
 * (issue 10, defect 7: a stride of 64 + 3 put headers at odd addresses). */
#define SLOT_ALIGN 64u

/* Lanes cfg selects: 0 (DROP_OLDEST: an rk_mqueue), 1, or RK_BAND_COUNT
 * with bands. */
static inline uint32_t
rk__inbox_lane_count(const rk_mqueue_config *cfg)
{
    if (cfg == NULL || cfg->backpressure == RK_BP_DROP_OLDEST)
        return 0;
    return cfg->priority_bands ? RK_BAND_COUNT : 1;
}

/* The slot stride for slot_size (a multiple of 64), or 0 with a detail
 * naming the field when out of range. */
static inline uint32_t
rk__inbox_stride(uint32_t slot_size)
{
    uint64_t st
        = ((uint64_t)slot_size + SLOT_ALIGN - 1) & ~(uint64_t)(SLOT_ALIGN - 1);

    if (slot_size == 0 || st > UINT32_MAX) {
        rk__fail(RK_EINVAL,
            "input slot_size (64 + max_payload) %u is out of range [1, %u]",
            slot_size, UINT32_MAX - SLOT_ALIGN + 1);
        return 0;
    }
    return (uint32_t)st;
}


/* Placement. Bytes of caller memory the inbox for (cfg, hold) can be
 * built in: lane i (i < rk__inbox_lane_count(cfg)) is the block at
 * mem + i * (bytes / n), an rk_spsc (its rk_ring_ctrl first, the
 * ring_proto.h control block a device reads) in the first
 * RK__INBOX_LANE_HDR bytes, then its slot array. 0 when the inbox keeps
 * host memory of its own (DROP_OLDEST), or when the sizes are out of
 * range (rk__inbox_create says which). */
#define RK__INBOX_LANE_HDR ((sizeof(rk_spsc) + 63) & ~(size_t)63)
size_t rk__inbox_placed_bytes(const rk_mqueue_config *cfg, uint32_t hold);

/*
 * Creates the inbox cfg selects (see the top). cfg->capacity: messages
 * queued per band, any value in [1, 2^31 - hold]; cfg->slot_size: the
 * largest frame. hold: the most slots the consumer keeps after taking
 * them (its batch), which never take room from the capacity. wake: the
 * consumer's wake eventcount, caller-owned, outlives the inbox. mem:
 * rk__inbox_placed_bytes bytes, 64-byte aligned, host-accessible,
 * caller-owned and alive until after rk__inbox_destroy, or NULL to
 * allocate; ignored when the inbox needs none. RK_OK, RK_EINVAL (a
 * detail naming the field out of range), RK_ENOMEM.
 */
int rk__inbox_create(rk__inbox **out, const rk_mqueue_config *cfg,
    uint32_t hold, rk__ec *wake, void *mem);

/* Frees the inbox (NULL: nothing). Nobody may use it any more. */
static inline void
rk__inbox_destroy(rk__inbox *q)
{
    if (q != NULL)
        q->ops->destroy(q);
}

/* The operations, by name (see rk__inbox_ops). */
static inline int
rk__inbox_send(rk__inbox *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns, bool uncounted)
{
    return q->ops->send(
        q, hdr, hlen, payload, len, priority, timeout_ns, uncounted);
}

static inline int
rk__inbox_send_fill(rk__inbox *q, uint8_t priority, uint32_t flen, size_t n,
    rk__inbox_fill fill, void *arg, int64_t timeout_ns, size_t *sent)
{
    return q->ops->send_fill(
        q, priority, flen, n, fill, arg, timeout_ns, sent);
}

static inline int
rk__inbox_take(rk__inbox *q, size_t max, rk__inbox_batch *out)
{
    return q->ops->take(q, max, out);
}

static inline void
rk__inbox_release(rk__inbox *q, size_t n)
{
    q->ops->release(q, n);
}

static inline size_t
rk__inbox_depth(rk__inbox *q)
{
    return q->ops->depth(q);
}

static inline void
rk__inbox_close(rk__inbox *q)
{
    q->ops->close(q);
}

static inline void
rk__inbox_stats(rk__inbox *q, rk_queue_stats *out)
{
    q->ops->stats(q, out);
}

/* ---- the implementations, for inbox_create.c */


int rk__inbox_lanes_create(rk__inbox **out, const rk_mqueue_config *cfg,
    uint32_t hold, rk__ec *wake, void *mem);
size_t rk__inbox_lanes_bytes(const rk_mqueue_config *cfg, uint32_t hold);
int rk__inbox_mqueue_create(
    rk__inbox **out, const rk_mqueue_config *cfg, uint32_t hold, rk__ec *wake);

#endif /* RK_SRC_QUEUE_INBOX_H */
