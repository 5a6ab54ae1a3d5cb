/*
 * src/runtime/inq.h - a kernel's input queue.
 *
 * What the kernel consumes is always ring_proto.h SPSC lanes (rk_spsc),
 * one per priority band when bands are on, except under DROP_OLDEST:
 *   - lanes: the producer side of every lane is serialised by one flag,
 *     `busy`. A kernel that promised a single producer (single_producer)
 *     takes it with an exchange and refuses a second, concurrent sender
 *     (RK_EINVAL); the general inbox (any number of senders) uses the
 *     same flag as a spin lock, which a sender holds only while it writes
 *     and publishes (never while it waits for room). Uncontended, either
 *     is one exchange on a line that stays in the sender's cache; the
 *     admission counters are then single-writer stores, and the kernel
 *     reads lanes exactly as a device would. This is the "CAS stays on
 *     the host, in front of the lanes" of the backend contract.
 *   - DROP_OLDEST: an rk_mqueue (queue/mqueue_int.h), whose senders evict
 *     from the head, which a lane's producer may not touch. It stays host
 *     memory.
 * Producers' room follows what the kernel has taken (dequeued), not the
 * ring's head, and each ring is larger than the capacity by the kernel's
 * batch: the kernel holds a taken batch in place without taking room from
 * the queue (see lane_space in inq.c; the rk_mqueue does the same).
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
 * builds the lanes in caller memory (the backend's, for a device that
 * reads them) and rk__inq_fini leaves that memory alone.
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
    rk_mqueue *mq;    /* DROP_OLDEST, or NULL */
    rk_spsc *lane;    /* lanes[0] (the only lane without bands), or NULL */
    void *lane_owned; /* the lanes' memory when rk__inq_init allocated it */
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
    /* Per lane: the last take found it empty (rk__inq_take). */
    bool waited[RK_BAND_COUNT];
    _Alignas(64) _Atomic uint32_t closed;
} rk__inq;

/* Picks the implementation from cfg (lanes unless DROP_OLDEST; four with
 * priority_bands; single_producer makes a second concurrent sender an
 * error instead of a wait for the lock). hold is the most slots the consumer
 * keeps after taking them (its batch, lent by rk__inq_take): either kind
 * queues cfg->capacity messages besides those (per band), in rings of at least
 * capacity + hold slots. Slot strides are rounded up to 64 bytes, so
 * every frame's header is 64-byte aligned. wake: the kernel's wake
 * eventcount, caller-owned, outlives q (see above). Errors as
 * rk_mqueue_create; RK_EINVAL with a detail naming the field for sizes
 * that overflow. */
int rk__inq_init(
    rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold, rk__ec *wake);

/* Placement. Bytes of caller memory the lanes need for (cfg, hold): lane
 * i (i < rk__inq_lane_count(cfg)) is the block at mem + i * (bytes / n):
 * an rk_spsc (its rk_ring_ctrl first, the ring_proto.h control block a
 * device reads) in the first rk__INQ_LANE_HDR bytes, then its slot array.
 * 0 when cfg selects DROP_OLDEST (an rk_mqueue: host memory, allocated by
 * the queue), or when the sizes overflow (rk__inq_init_at says which). */
#define RK__INQ_LANE_HDR ((sizeof(rk_spsc) + 63) & ~(size_t)63)
size_t rk__inq_lane_bytes(const rk_mqueue_config *cfg, uint32_t hold);
/* Lanes cfg selects: 0 (DROP_OLDEST), 1, or RK_BAND_COUNT with bands. */
uint32_t rk__inq_lane_count(const rk_mqueue_config *cfg);

/* As rk__inq_init, with the lanes built in mem: rk__inq_lane_bytes bytes,
 * 64-byte aligned, host-accessible, caller-owned, alive until after
 * rk__inq_fini (which does not free it). mem is ignored (may be NULL) when
 * cfg selects DROP_OLDEST; mem == NULL allocates as rk__inq_init does. */
int rk__inq_init_at(rk__inq *q, const rk_mqueue_config *cfg, uint32_t hold,
    rk__ec *wake, void *mem);
void rk__inq_fini(rk__inq *q);

/* One frame (hdr then payload). Results as rk_mqueue_sendv. uncounted:
 * a BLOCK queue's refusal (full with no wait, or at the deadline) is not
 * counted, because the caller keeps the message (rk_send_frame_try); the
 * other policies count as always (DROP_OLDEST never refuses). */
int rk__inq_send(rk__inq *q, const void *hdr, size_t hlen, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns, bool uncounted);

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
 * the batch is a contiguous run of the queue's own slots (of one lane or
 * band, the highest non-empty band first), in_place is true
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
