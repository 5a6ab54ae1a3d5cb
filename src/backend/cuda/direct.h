/*
 * src/backend/cuda/direct.h - who holds a device instance's lanes (its
 * relay or a caller), the output lanes -> runtime step both use, and the
 * caller's own path: a host thread that sends to an idle device instance
 * writes the input lane itself and, for a call, polls the output lanes
 * for its reply itself (docs/cuda-data-path.md, "The caller's own path").
 *
 * The lanes' host sides are single-producer/single-consumer (ring_proto.h)
 * and their order is the device's order, so exactly one host thread works
 * them at a time: the one that holds `owner`, a host-only word taken with
 * a compare-and-swap (nothing read-modify-write crosses PCIe). The relay
 * takes it for each pass that has work for the lanes (input queued in the
 * inbox, output in a lane, a held frame, a command to post); a caller
 * takes it only when the relay does not hold it, and goes direct only
 * when nothing is queued in the inbox (nothing of any sender is ahead of
 * it: per-sender order holds). The relay posts device commands only while
 * it holds the lanes, so a caller that holds them and saw RUN posted knows
 * its message is processed before the device can stop (a STOP drains).
 * When the device has ended the relay closes the lanes for good: a caller
 * then gets RK_ECLOSED.
 *
 * Everything here but owner, out_errors and relayed is touched only by
 * the holder; the acquire CAS that takes owner pairs with the release
 * store that gives it back.
 */
#ifndef RK_SRC_BACKEND_CUDA_DIRECT_H
#define RK_SRC_BACKEND_CUDA_DIRECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cuda/devhost.h"

#define RK__LANES_FREE   0u
#define RK__LANES_RELAY  1u
#define RK__LANES_CALLER 2u
#define RK__LANES_CLOSED 3u /* the device ended: nobody takes them again */

typedef struct rk__cuda_lanes {
    _Atomic uint32_t owner; /* RK__LANES_* */
    rk__dh *d;
    const rk__backend_io *io;
    rk_ctl *ctl;
    rk__ec *wake;        /* the relay's: notified when a caller leaves work */
    const char *id;      /* the kernel, for details */
    unsigned char *buf;  /* one output frame */
    unsigned char *held; /* an output frame a route's target had no room */
    _Atomic size_t held_len; /* for, retried first (0: none); relaxed:
                                the holder writes it, the relay peeks */
    uint32_t rr;             /* the next block input goes to (round robin) */
    bool off;                /* RK_CUDA_DIRECT=0 at launch: relay only */
    _Atomic uint64_t out_errors; /* device output the runtime refused */
    _Atomic uint64_t relayed;    /* relay hand-offs (frames it moved) */
    /* The device's topic counts per carried-mask bit (rk__dh_topic_count)
     * already handed to the runtime: the relay's alone. */
    uint64_t tfolded[RK_DEV_CTL_TOPICS];
} rk__cuda_lanes;

/* The relay (its pass, its exit): hands the runtime the publishes the
 * device carried wholly on its topic lanes since the last call
 * (io->topic_device, per carried-mask bit). */
void rk__lanes_topics(rk__cuda_lanes *l);

/* Takes the lanes for who (RK__LANES_RELAY or _CALLER) if nobody holds
 * them: true when taken. */
bool rk__lanes_take(rk__cuda_lanes *l, uint32_t who);
/* Gives them back (the holder). */
void rk__lanes_give(rk__cuda_lanes *l);
/* Closes them for good, waiting for a caller that holds them to leave
 * (it leaves within a bounded poll). The relay, when the device ended. */
void rk__lanes_close(rk__cuda_lanes *l);

/* One step of a host thread's polling: a pause, and now and then the CPU
 * is yielded, so that on a machine with few cores the threads it waits
 * for (a client, or the stand-in driver's blocks) still run. */
void rk__lanes_relax(uint32_t *spins);

/* The holder: device output lanes -> the runtime, at most max frames.
 * With reply, the output answering call_id goes there (io->emit_call);
 * else io->emit_wait with timeout_ns. A frame a route's target or the
 * output queue has no room for is held and retried first next time, and nothing more is
 * taken meanwhile; one the runtime refuses otherwise is dead-lettered
 * and counted in out_errors. Returns frames handed over. */
size_t rk__lanes_out(rk__cuda_lanes *l, int64_t timeout_ns, size_t max,
    struct rk_call_reply *reply, const rk_uuid *call_id);

/* The backend entries send, call, send_batch and pull (backend.h) over
 * an instance's lanes. */
int rk__cuda_direct_send(rk__cuda_lanes *l, const rk_msg_header *h,
    const void *payload, size_t len);
int rk__cuda_direct_call(rk__cuda_lanes *l, const rk_msg_header *h,
    const void *payload, size_t len, struct rk_call_reply *reply);
int rk__cuda_direct_batch(rk__cuda_lanes *l, size_t n,
    void (*frame)(void *arg, size_t i, rk_msg_header *h, const void **payload),
    void *arg, size_t *done);
size_t rk__cuda_direct_pull(rk__cuda_lanes *l, size_t max);

#endif /* RK_SRC_BACKEND_CUDA_DIRECT_H */
