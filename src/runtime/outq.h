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
 * of up to slot_size bytes, at a stride rounded up to 64 bytes (headers
 * 64-byte aligned). Both sides wait on eventcounts (common/ec.h).
 *
 * Storage: rk__outq_init allocates the ring (rk__outq_fini frees it);
 * rk__outq_init_at builds it in caller memory (the backend's, for a
 * device that writes it) and rk__outq_fini leaves that memory alone.
 */
#ifndef RK_SRC_RUNTIME_OUTQ_H
#define RK_SRC_RUNTIME_OUTQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ec.h"
#include "common/spin.h"
#include "ringkernel/queue.h"

typedef struct rk__outq {
    rk_spsc *ring;
    void *owned; /* the ring's memory when rk__outq_init allocated it */
    size_t slot_size;
    uint32_t cap; /* frames it holds (the ring may be larger) */
    /* Host-side waiting (the consumer parks here). */
    _Alignas(64) rk__ec cons_ec;
    /* An event loop's wait (rk_kernel_output_arm): armed by the host, the
     * eventfd efd (-1 until the host asks for one, closed by
     * rk__outq_fini) is written once, by the first commit or close that
     * finds fd_armed set. In cons_ec's line: the producer reads fd_armed
     * right after cons_ec.waiters, and nobody writes either while no host
     * waits. */
    _Atomic uint32_t fd_armed;
    _Atomic int efd;
    /* The host's spin budget in ns, adapted by rk__outq_wait (0: the
     * caller's full spin_ns); written by the consumer only. */
    _Atomic uint32_t cons_spin_ns;
    /* Kernel-side waiting (the producer parks here when full). */
    _Alignas(64) rk__ec prod_ec;
    rk__spin prod_spin; /* spin budget before parking (common/spin.h) */
    _Alignas(64) _Atomic uint32_t closed;
} rk__outq;

/* Placement: bytes of caller memory for a queue of capacity frames (any
 * value in [1, 2^31]; the ring is the power of two at or above it, and
 * the queue holds exactly capacity frames) of up to slot_size bytes: an
 * rk_spsc (its rk_ring_ctrl first) in the first RK__OUTQ_HDR bytes, then
 * the slots. 0 if a size is out of range (rk__outq_init_at then says
 * which). */
#define RK__OUTQ_HDR ((sizeof(rk_spsc) + 63) & ~(size_t)63)
size_t rk__outq_ring_bytes(uint32_t capacity, size_t slot_size);

/* RK_OK, or RK_EINVAL naming output_capacity or the slot size (64 +
 * max_payload) when out of range, RK_ENOMEM. */
int rk__outq_init(rk__outq *q, uint32_t capacity, size_t slot_size);
/* The same in mem (rk__outq_ring_bytes bytes, 64-byte aligned,
 * host-accessible, caller-owned, alive until after rk__outq_fini). */
int rk__outq_init_at(
    rk__outq *q, void *mem, uint32_t capacity, size_t slot_size);
void rk__outq_fini(rk__outq *q);

/* Producer: writes header + payload as one frame, waiting while full.
 * RK_OK, or RK_ECLOSED once closed. */
int rk__outq_send(rk__outq *q, const void *hdr, size_t hlen,
    const void *payload, size_t len);

/* rk__outq_send waiting at most timeout_ns for room (RK_WAIT_FOREVER:
 * as rk__outq_send): RK_EFULL without waiting for RK_NO_WAIT,
 * RK_ETIMEDOUT once the time is up. For a producer that must not stop
 * while it holds something else (a device relay, a caller on a device's
 * lanes): it keeps the frame and tries again. */
int rk__outq_send_until(rk__outq *q, const void *hdr, size_t hlen,
    const void *payload, size_t len, int64_t timeout_ns);

/* Consumer: waits until a frame can be peeked. Spins first for an
 * adaptive budget of at most spin_ns (0: not at all; see outq.c), then
 * parks until the absolute deadline (UINT64_MAX: none). RK_OK,
 * RK_ETIMEDOUT, or RK_ECLOSED once closed and drained. */
int rk__outq_wait(rk__outq *q, int64_t spin_ns, uint64_t deadline);
/* Consumer: the oldest frame, in place, and its length in *flen, or NULL.
 * It stays valid (and in the queue) until rk__outq_release. */
const unsigned char *rk__outq_peek(rk__outq *q, size_t *flen);
/* Consumer: frees the peeked frame's slot and wakes a blocked producer. */
void rk__outq_release(rk__outq *q);
/* Host: the eventfd of the queue in *fd, created on first use (RK_OK, or
 * RK_ENOMEM and the like when eventfd(2) fails). Host threads that create
 * it concurrently get the same one. */
int rk__outq_fd(rk__outq *q, int *fd);
/* Host, under the instance's consumer lock, with the fd created: arms the
 * eventfd for one write. Returns false (not armed) when a frame is already
 * there or the queue is closed. No wake-up is lost: see the comment in
 * outq.c. */
bool rk__outq_arm(rk__outq *q);
/* Wakes and fails every waiter from now on (frames already in can still
 * be received). Idempotent. */
void rk__outq_close(rk__outq *q);

#endif /* RK_SRC_RUNTIME_OUTQ_H */
