/*
 * src/runtime/outq.h - a kernel's output queue: kernel thread -> host.
 *
 * Exactly one thread produces (the kernel's) and one host thread at a time
 * consumes (under the instance's out_lock), so the queue is the SPSC ring
 * of ring_proto.h (rk_spsc) plus parking on both sides: the kernel parks
 * when the host lets it fill up (the output is BLOCK-only), the host when
 * it waits for a reply. The ring is cheaper per message than an rk_mqueue
 * (no claim, no counters, no bands), which is most of a round trip.
 *
 * Frames are an rk_msg_header and payload_len bytes; a slot holds a frame
 * of up to slot_size bytes. The queue owns its ring; create/destroy pair.
 */
#ifndef RK_SRC_RUNTIME_OUTQ_H
#define RK_SRC_RUNTIME_OUTQ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spin.h"
#include "ringkernel/queue.h"

typedef struct rk__outq {
    rk_spsc *ring;
    size_t slot_size;
    /* Host-side waiting (the consumer parks here). */
    _Alignas(64) _Atomic uint32_t cons_seq;
    _Atomic uint32_t cons_parked;
    /* Kernel-side waiting (the producer parks here when full). */
    _Alignas(64) _Atomic uint32_t prod_seq;
    _Atomic uint32_t prod_parked;
    rk__spin prod_spin; /* spin budget before parking (common/spin.h) */
    _Alignas(64) _Atomic uint32_t closed;
} rk__outq;

int rk__outq_init(rk__outq *q, uint32_t capacity, size_t slot_size);
void rk__outq_fini(rk__outq *q);

/* Producer: writes header + payload as one frame, waiting while full.
 * RK_OK, or RK_ECLOSED once closed. */
int rk__outq_send(rk__outq *q, const void *hdr, size_t hlen,
    const void *payload, size_t len);

/* Consumer: waits until a frame can be peeked. Spins for up to spin_ns
 * first (0: not at all), then parks until the absolute deadline
 * (UINT64_MAX: none). RK_OK, RK_ETIMEDOUT, or RK_ECLOSED once closed and
 * drained. */
int rk__outq_wait(rk__outq *q, int64_t spin_ns, uint64_t deadline);
/* Consumer: the oldest frame, in place, and its length in *flen, or NULL.
 * It stays valid (and in the queue) until rk__outq_release. */
const unsigned char *rk__outq_peek(rk__outq *q, size_t *flen);
/* Consumer: frees the peeked frame's slot and wakes a blocked producer. */
void rk__outq_release(rk__outq *q);
/* Wakes and fails every waiter from now on (frames already in can still
 * be received). Idempotent. */
void rk__outq_close(rk__outq *q);

#endif /* RK_SRC_RUNTIME_OUTQ_H */
