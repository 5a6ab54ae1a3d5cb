/** @file
 * ringkernel/dev_kernel.h - the device actor API and the persistent loop.
 *
 * A ring kernel on a GPU is a persistent kernel; each thread block of it
 * is one actor. The block's thread 0 takes a message (or a batch) from the
 * block's input lanes and the whole block shares it, so a handler can be
 * data-parallel over the block's threads. Everything here is
 * block-collective: every thread of the block calls it with the same
 * arguments and gets the same result (thread 0 does the protocol work,
 * rk_dev_sync_block() publishes it to the others through the shared ctx).
 *
 * A user writes a handler in the C subset of docs/cuda-programming.md:
 *
 *     RK_DEV_HANDLER(echo)(rk_dev_ctx *x, const rk_dev_msg *m)
 *     {
 *         return rk_dev_reply(x, m, m->hdr->type_id, m->data, m->len);
 *     }
 *     RK_DEV_KERNEL(rk_echo, echo)
 *
 * and the runtime compiles it together with this header (NVRTC, or nvcc).
 * The same file compiled as host C gives a host entry (rk_dev_host_kernel)
 * that the tests and the stand-in driver run on CPU threads, one thread
 * per block, against the same ring_proto.h lanes and control block.
 *
 * The loop (rk_dev_run) is the CPU body's protocol (src/backend/cpu/body.c)
 * with one device-side implementation:
 *   ack HELD, wait while cmd == HOLD; a STOP before any RUN exits at once
 *   unless RUN was posted (activated), which still drains;
 *   ack RUNNING; then at safe points (between batches; cmd is read at every
 *   RK_DEV_CMD_EVERY-th one while running): PAUSE acks
 *   PAUSED and polls with back-off until RUN (ack RUNNING) or STOP; STOP
 *   drains: the loop ends only once every input lane is empty;
 *   a handler returning non-zero is a fault: the block reports FAULTED
 *   with the failing message at the head of its lane and waits for the
 *   host's verdict: restart (skip it, go on) or give up / STOP (exit with
 *   that code, the messages after it left in the lane for the host);
 *   counters and the heartbeat go to the block's kernel-written line;
 *   exit_code, then ack EXITED. RK_DEV_ACTOR_KERNEL runs an actor (the
 *   block's own loop on rk_dev_should_terminate and rk_dev_recv) inside
 *   the same lifecycle and fault protocol.
 *
 * Memory: the kernel never allocates. Lanes are ring_proto.h SPSC rings
 * the host placed before launch: input lane 0 of each block is fed by the
 * host, further input lanes by other kernels (K2K); the output lane goes
 * to the host; route r is another kernel's input lane. Lanes in mapped
 * host memory use system scope (ring_proto.h); K2K lanes (input lanes >= 1
 * and routes) live in device memory and use GPU scope (dev_k2k.h); see
 * docs/cuda.md, "Kernel-to-kernel on the device".
 */
#ifndef RINGKERNEL_DEV_KERNEL_H
#define RINGKERNEL_DEV_KERNEL_H

#include "ringkernel/dev_ctl.h"
#include "ringkernel/dev_ll.h"
#include "ringkernel/dev_k2k.h"
#include "ringkernel/error.h"
#include "ringkernel/ring_proto.h"
#include "ringkernel/rk_dev.h"

#define RK_DEV_MAX_IN     4 /**< input lanes per block (host + K2K) */
#define RK_DEV_MAX_ROUTES 8 /**< K2K routes per block */
/** Device topic indices whose publishes can skip the host relay (bits of
 * rk_dev_kargs.topic_relay); a publish on a higher index always also goes
 * to the relay. */
#define RK_DEV_TOPIC_BITS 32
/** Messages per receive (64: what one LL sweep may take). */
#define RK_DEV_MAX_BATCH RK_DEV_LL_MAX_BATCH
/** Empty polls at full speed before an idle block backs off. */
#define RK_DEV_SPIN_POLLS 1024
/** A running block reads the host's command word at every this many safe
 * points that brought no command with their poll (PAUSE and STOP wait at
 * most this many batches or polls). */
#define RK_DEV_CMD_EVERY 8
/** The heartbeat is written at most once per this many ns of
 * rk_dev_now_ns() (%globaltimer): a posted PCIe write per 100 us, not
 * one per poll. */
#define RK_DEV_BEAT_NS 100000u
/** rk_dev_lane.format: a ring_proto.h ring (the tail says where the
 * producer is; K2K lanes). */
#define RK_DEV_LANE_RING 0u
/** rk_dev_lane.format: an LL lane (ring_ll.h: every word carries its
 * slot's sequence; the host's lanes). */
#define RK_DEV_LANE_LL 1u

/** rk_msg_header.flags bits the device sets (runtime bits >= 8). A publish
 * goes to the output lane with TOPIC set and the topic's index (assigned
 * by the host relay) in bits 16..31. */
/** The frame is a publish (rk_dev_publish), its topic index in bits
 * 16..31: RK_MSG_F_TOPIC on the host, a bit of its own (never
 * RK_MSG_F_REQUEST's 1 << 8, which would make a publish look like a
 * request). */
#define RK_DEV_MSG_F_TOPIC (1u << 10)
/** For the host even where the kernel's output is routed (RK_MSG_F_HOST:
 * rk_dev_reply_host). */
#define RK_DEV_MSG_F_HOST (1u << 9)
#define RK_DEV_MSG_TOPIC_SHIFT 16 /**< first bit of the topic index in flags  \
                                   */
#define RK_DEV_MSG_MAGIC       0x4B52u /**< RK_MSG_MAGIC */
#define RK_DEV_MSG_VERSION     1u      /**< RK_MSG_VERSION */
#define RK_DEV_MSG_HEADER_SIZE 64u     /**< RK_MSG_HEADER_SIZE */

/** The 64-byte envelope (ringkernel/message.h's rk_msg_header, which needs
 * host headers). The tests check that the two layouts are identical. */
typedef struct rk_dev_msg_header {
    unsigned short magic;   /**< 0x4B52 ("RK") */
    unsigned char version;  /**< RK_DEV_MSG_VERSION */
    unsigned char priority; /**< 0-255, higher is more urgent */
    rk_dev_u32 type_id;     /**< message type id of the payload, 0 = untyped */
    rk_dev_u32 flags;       /**< RK_MSG_F_* and RK_DEV_MSG_F_* bits */
    rk_dev_u32 payload_len; /**< bytes of payload after the header */
    unsigned char message_id[16];     /**< UUID v7 */
    unsigned char correlation_id[16]; /**< all zeros = none */
    rk_dev_u64 send_ns;               /**< send timestamp */
    rk_dev_u32 sender;           /**< sending kernel id, 0 = host or unknown */
    unsigned short type_version; /**< layout version of the payload type */
    unsigned short reserved;     /**< must be 0 */
} rk_dev_msg_header;

/** One lane as the host placed it: the ring's control lines and slots. */
typedef struct rk_dev_lane {
    rk_ring_ctrl *ctrl;   /**< the ring's control block */
    unsigned char *slots; /**< the ring's slot array */
    rk_dev_u32 format;    /**< RK_DEV_LANE_RING or RK_DEV_LANE_LL */
    rk_dev_u32 reserved;  /**< 0 */
} rk_dev_lane;

/**
 * The launch argument (passed by value). Arrays are indexed by block:
 * in[b * nin + i], out[b], routes[b * nroutes + r]. The arrays live in
 * memory the device can read; they are read once, at the start.
 */
typedef struct rk_dev_kargs {
    rk_dev_ctl *ctl;           /**< the control block */
    const rk_dev_lane *in;     /**< input lanes, nin per block */
    const rk_dev_lane *out;    /**< output lane, one per block */
    const rk_dev_lane *routes; /**< K2K route lanes, nroutes per block */
    rk_dev_u32 nin;            /**< 1..RK_DEV_MAX_IN */
    rk_dev_u32 nroutes;        /**< 0..RK_DEV_MAX_ROUTES */
    rk_dev_u32 kernel_id;      /**< stamped as sender (runtime slot + 1) */
    rk_dev_u32 batch; /**< messages per receive, 1..RK_DEV_MAX_BATCH */
    /** Output-lane messages staged before one publish (1..the lane's
     * capacity). */
    rk_dev_u32 stage_out;
    /** Staging bytes per block (the launch's dynamic shared memory):
     * (batch + stage_out) slots. */
    rk_dev_u32 stage_bytes;
    void *user; /**< the handler's own state, or NULL */
    /** The kernel's named barrier (rk_kernel_config.device_barrier): an
     * rk_dev_barrier in device memory, or 0; rk_dev_kernel_barrier(). */
    rk_dev_u64 barrier;
    rk_dev_u32 barrier_parties; /**< blocks that wait at it, in all */
    rk_dev_u32 barrier_pad_;    /**< reserved (8-byte size) */
    /** 0: rk_dev_send and rk_dev_reply go to the output lane (the host);
     * r (1..nroutes): they go on K2K route r - 1 (an rk_connect route to
     * another device kernel, wired on the device). */
    rk_dev_u32 send_route;
    /** Device topics (docs/cuda-k2k.md, "Device topics"): route r is the
     * K2K lane of a subscriber of topic index topic_of[r] - 1 (0: not a
     * topic lane), bit topic_bit[r] of the publish's carried mask. */
    unsigned short topic_of[RK_DEV_MAX_ROUTES];
    /** Route r's bit in the publish's carried mask (a topic lane). */
    unsigned char topic_bit[RK_DEV_MAX_ROUTES];
    /** Bit r: topic route r's subscriber drops when its lane is full (its
     * policy is not BLOCK) instead of the publisher waiting for room. */
    rk_dev_u32 topic_drop;
    /** Bit i: a publish on topic index i also goes to the host relay (the
     * topic has subscribers that no lane here reaches). */
    rk_dev_u32 topic_relay;
    /** The blocks' topic counts (one line per block, host-mapped), or 0
     * when the kernel has no routes. */
    rk_dev_ctl_topics *topics;
} rk_dev_kargs;

/** A received message: header and payload in the lane's slot (read in
 * place; valid until the batch is released). len is the header's
 * payload_len, clipped to the slot. */
typedef struct rk_dev_msg {
    const rk_dev_msg_header *hdr; /**< the envelope, in the slot */
    const unsigned char *data;    /**< the payload, in the slot */
    rk_dev_u32 len;               /**< payload bytes */
} rk_dev_msg;

/** The block's actor context. On a GPU it lives in shared memory, so every
 * thread of the block reads what thread 0 wrote after a block sync. */
typedef struct rk_dev_ctx {
    rk_dev_kargs a; /**< the launch argument */
    /** @{ */
    /** This block's index, and the launch's nin, nroutes and batch. */
    rk_dev_u32 blk, nin, nroutes, batch;
    /** @} */
    rk_ring_ctrl *in_ctrl[RK_DEV_MAX_IN]; /**< this block's input rings */
    rk_ring_side in[RK_DEV_MAX_IN]; /**< consumer state of each input ring */
    rk_ring_ctrl *out_ctrl;         /**< this block's output ring */
    rk_ring_side out;               /**< producer state of the output ring */
    rk_ring_ctrl
        *route_ctrl[RK_DEV_MAX_ROUTES]; /**< this block's route rings */
    rk_ring_side
        route[RK_DEV_MAX_ROUTES]; /**< producer state of each route ring */
    rk_dev_counters k; /**< counters, published to the control block */
    /** @{ */
    /** Staging (rk_dev_stage_mem): the current batch copied out of its
     * lane in one sweep, and the output-lane messages written since the
     * last publish. */
    unsigned char *stage_in, *stage_out;
    /** @} */
    /** @{ */
    /** Output slots in stage_out; how many are written, not published. */
    rk_dev_u32 stage_cap, nout;
    /** @} */
    rk_dev_u32 idle;     /**< empty polls since the last message */
    rk_dev_u32 cmd_skip; /**< safe points left before cmd is read again */
    /** @{ */
    /** Loop state: the last acknowledgement, heartbeat, idle backoff, message
     * sequence and fault count. */
    rk_dev_u32 ack_seq, beat, backoff, msg_seq, faults;
    /** @} */
    /** @{ */
    rk_dev_u32 lane, n, rr; /**< current batch: lane, size; next lane */
    /** @} */
    /** @{ */
    /** Bit i: input lane i is an LL lane; the output lane is one. */
    rk_dev_u32 in_ll, out_ll;
    /** @} */
    /** The command the last safe point has not used yet: what the last
     * poll of an LL lane found in its head slot, or RK_DEV_CMD_NONE. */
    rk_dev_u32 ib;
    rk_dev_u32 hot;        /**< the last take found some: sweep a batch */
    rk_dev_u64 beat_ns;    /**< rk_dev_now_ns() of the last heartbeat */
    rk_dev_ll_sweep sweep; /**< the LL sweep's block-shared results */
    /** @{ */
    /** One message per warp (dev_warp.h): each message's handler result,
     * and 1 where it wrote a reply into its output stage slot. */
    rk_dev_i32 wrc[RK_DEV_MAX_BATCH];
    unsigned char wout[RK_DEV_MAX_BATCH];
    /** @} */
    /** @{ */
    /** rk_dev_publish (thread 0): don't wait for room on a full topic lane
     * (RK_EFULL); the carried and dropped masks for the relay's frame. */
    rk_dev_u32 nowait, pub_mask;
    rk_dev_u32 tpoll; /**< safe points since rk_dev__topics_poll */
    /** @} */
    rk_dev_u32 flag;     /**< broadcast: bool results */
    rk_dev_i32 rc;       /**< broadcast: int results */
    unsigned char *slot; /**< broadcast: slot being written */
} rk_dev_ctx;

/** A device handler: called for each message m with the block's context x;
 * returns RK_OK or an error, which faults the block (supervision on the host
 * decides). */
typedef int (*rk_dev_handler)(rk_dev_ctx *x, const rk_dev_msg *m);

/* ---------------------------------------------------------- internals */

/** True on the block's thread 0 (the one that does the block's single-threaded
 * work). */
RK_DEV_FN int
rk_dev_thread0(void)
{
    return rk_dev_thread_idx() == 0;
}

/** The heartbeat, at most once per RK_DEV_BEAT_NS (the clock is
 * %globaltimer, not a PCIe access). */
RK_DEV_FN void
rk_dev__beat(rk_dev_ctx *x)
{
    rk_dev_u64 now = rk_dev_now_ns();
    if (now - x->beat_ns < RK_DEV_BEAT_NS)
        return;
    x->beat_ns = now;
    x->beat += 1;
    rk_dev_ctl_heartbeat(x->a.ctl, x->blk, x->beat);
}

/** 1 when input lane l is an LL lane (every lane is, in a kernel built
 * with RK_DEV_LL_ONLY: the test that checks the fast path's PTX). */
RK_DEV_FN int
rk_dev__in_ll(const rk_dev_ctx *x, rk_dev_u32 l)
{
#if defined(RK_DEV_LL_ONLY)
    (void)x;
    (void)l;
    return 1;
#else
    return (int)((x->in_ll >> l) & 1u);
#endif
}

/** 1 when the output lane is an LL lane. */
RK_DEV_FN int
rk_dev__out_ll(const rk_dev_ctx *x)
{
#if defined(RK_DEV_LL_ONLY)
    (void)x;
    return 1;
#else
    return (int)x->out_ll;
#endif
}

/** Hands `done` slots of input lane l back to its producer: the head,
 * relaxed on an LL lane (ring_ll.h); a GPU-scope release on a K2K lane
 * (lanes 1 and up, device memory); after a fence on a host ring lane
 * (the caller's rk_dev__commit), a release on the host build. Thread 0. */
RK_DEV_FN void
rk_dev__hand_back(rk_dev_ctx *x, rk_dev_u32 l, rk_dev_u32 done)
{
    rk_ring_side *s = &x->in[l];
    if (l != 0 && !rk_dev__in_ll(x, l)) {
        rk_k2k_cons_release(x->in_ctrl[l], s, done);
        return;
    }
    s->pos += done;
    if (rk_dev__in_ll(x, l)) {
        rk_ring_ll_release_head(x->in_ctrl[l], s->pos);
        return;
    }
#if defined(RK_DEV_ON_DEVICE)
    rk_ring_store_relaxed_u64(&x->in_ctrl[l]->head, s->pos); /* fenced */
#else
    rk_ring_release_head(x->in_ctrl[l], s->pos);
#endif
}

/** Thread 0: publishes the block's counters (and its topic counts that
 * changed) to the host-mapped control block; relaxed, posted stores. */
RK_DEV_FN void
rk_dev__counters(rk_dev_ctx *x)
{
    rk_dev_ctl_counters(x->a.ctl, x->blk, &x->k);
    if (x->k.tdirty != 0 && x->a.topics != 0)
        rk_dev_ctl_topic_counts(x->a.topics, x->blk, &x->k);
}

RK_DEV_FN void
rk_dev__ack(rk_dev_ctx *x, rk_dev_u32 ack)
{
    rk_dev__counters(x);
    rk_dev_ctl_ack(x->a.ctl, x->blk, ack, &x->ack_seq);
}

/** Thread 0's wait while cmd == what; returns the new command. */
RK_DEV_FN rk_dev_u32
rk_dev__wait_while(rk_dev_ctx *x, rk_dev_u32 what)
{
    rk_dev_u32 ns = 0, cmd;
    while ((cmd = rk_dev_ctl_cmd(x->a.ctl)) == what) {
        rk_dev__beat(x);
        rk_dev_backoff(&ns);
    }
    return cmd;
}

/** Thread 0: up to want messages queued on ring input lane l (not an LL
 * lane): lane 0 is the host's (system scope, mapped memory), the others
 * are K2K lanes (GPU scope, device memory). */
RK_DEV_FN rk_dev_u32
rk_dev__avail(rk_dev_ctx *x, rk_dev_u32 l, rk_dev_u32 want)
{
    return l == 0 ? rk_dev__sys_avail(x->in_ctrl[0], &x->in[0], want)
                  : rk_k2k_cons_avail(x->in_ctrl[l], &x->in[l], want);
}

/** Thread 0: 1 once K2K route r is wired, attaching to its lane the first
 * time. The host may wire a route while the kernel runs (when its target
 * starts after it): it writes the table entry's slots, then its ctrl with
 * a release store, so an entry whose ctrl is set is whole. */
RK_DEV_FN int
rk_dev__route(rk_dev_ctx *x, rk_dev_u32 r)
{
    if (x->route_ctrl[r] == 0) {
        const rk_dev_lane *l = &x->a.routes[x->blk * x->a.nroutes + r];
        /* Acquire pairs with the host's release of ctrl (k2k.c, or the
         * tests' rk__dh_connect before launch). */
        rk_dev_u64 c = rk_atomic_load_acquire_sys_u64(
            (const RK_ATOMIC_U64 *)(const void *)&l->ctrl);
        if (c == 0)
            return 0;
        x->route_ctrl[r] = (rk_ring_ctrl *)(rk_dev_size)c;
        rk_k2k_prod_attach(x->route_ctrl[r], &x->route[r], l->slots);
    }
    return 1;
}

/** Thread 0: attaches to the topic lanes wired since the last look
 * (rk_dev__route on each topic route not yet attached). Called where the
 * block looks at its commands (rk_dev_begin, and every
 * RK_DEV_CMD_EVERY-th safe point), so a publish itself reads only the
 * block's own state and the lanes (GPU scope): a subscriber that started
 * after the publisher is reached within that many safe points, through
 * the relay until then. */
RK_DEV_FN void
rk_dev__topics_poll(rk_dev_ctx *x)
{
    for (rk_dev_u32 r = 0; r < x->nroutes; r++)
        if (x->a.topic_of[r] != 0 && x->route_ctrl[r] == 0)
            (void)rk_dev__route(x, r);
}

/** Collective: 1 once K2K route r is wired (rk_dev__route). */
RK_DEV_FN int
rk_dev__route_ready(rk_dev_ctx *x, rk_dev_u32 r)
{
    rk_dev_sync_block(); /* every thread has read x->flag's last value */
    if (rk_dev_thread0())
        x->flag = (rk_dev_u32)rk_dev__route(x, r);
    rk_dev_sync_block();
    return (int)x->flag;
}

/** Thread 0: 1 if any input lane holds a message (acquire of its tail). */
RK_DEV_FN int
rk_dev__any_input(rk_dev_ctx *x)
{
    for (rk_dev_u32 i = 0; i < x->nin; i++) {
        const rk_ring_side *s = &x->in[i];
        if (rk_dev__in_ll(x, i)) {
            if (rk_dev_ll_any(s))
                return 1;
        } else if (rk_dev__avail(x, i, 1) != 0) {
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- staging */

/**
 * Thread 0: publishes n output slots and hands `done` slots of the current
 * input lane back.
 *
 * LL lanes (the host's): nothing to order. Each output word carries its
 * slot's flag in the same store as its data, so the host accepts a slot
 * once every word has arrived, and the relaxed head store follows from
 * the flags the block validated (ring_ll.h). No fence.
 *
 * K2K lanes (input lanes 1 and up, device memory): handed back with a
 * GPU-scope release (rk_k2k_cons_release), no system fence.
 *
 * A ring lane in mapped memory (an output lane or a host lane 0 that is
 * not LL): one system-scope fence, then the indices. The block's other
 * threads wrote the output slots (or read the input slots) before the
 * block sync that precedes this: a barrier orders their accesses before
 * thread 0's, and the fence is cumulative, so one fence by thread 0
 * orders them all before the new indices (the pattern of cooperative
 * groups' grid sync, there at GPU scope). On the host build, where a
 * block is one thread, release stores do the same.
 */
RK_DEV_FN void
rk_dev__commit(rk_dev_ctx *x, rk_dev_u32 n, rk_dev_u32 done)
{
    int out_ll = rk_dev__out_ll(x);
    int host_ring = x->lane == 0 && !rk_dev__in_ll(x, 0);
    if ((n != 0 && !out_ll) || (done != 0 && host_ring))
        rk_dev_fence_sys();
    if (n != 0) {
        x->out.pos += n;
        if (!out_ll) {
#if defined(RK_DEV_ON_DEVICE)
            rk_ring_store_relaxed_u64(&x->out_ctrl->tail, x->out.pos);
#else
            rk_ring_publish_tail(x->out_ctrl, x->out.pos);
#endif
        }
    }
    if (done != 0)
        rk_dev__hand_back(x, x->lane, done);
}

/**
 * Copies the staged output-lane messages into the lane: thread 0 waits
 * for room (the heartbeat keeps beating), then the block copies the slots
 * out in one sweep. Returns how many (every thread); they are published
 * by rk_dev__commit. Collective.
 */
RK_DEV_FN rk_dev_u32
rk_dev__unstage(rk_dev_ctx *x)
{
    rk_dev_sync_block(); /* the staged writes, and x->nout, are settled */
    rk_dev_u32 n = x->nout;
    if (n == 0)
        return 0;
    if (rk_dev_thread0()) {
        rk_dev_u32 ns = 0;
        while (rk_dev__space(x->out_ctrl, &x->out, n) < n) {
            rk_dev__beat(x);
            rk_dev_backoff(&ns);
        }
    }
    rk_dev_sync_block();
    if (rk_dev__out_ll(x))
        rk_dev_ll_put(&x->out, x->stage_out, n);
    else
        rk_dev_ring_copy(&x->out, x->out.pos, n, x->stage_out, 1);
    rk_dev_sync_block(); /* the copy, before thread 0's commit */
    return n;
}

/** Publishes the staged output-lane messages. Collective. */
RK_DEV_FN void
rk_dev__flush(rk_dev_ctx *x)
{
    rk_dev_u32 n = rk_dev__unstage(x);
    if (n == 0)
        return;
    if (rk_dev_thread0()) {
        rk_dev__commit(x, n, 0);
        x->nout = 0;
    }
    rk_dev_sync_block();
}

/* ---------------------------------------------------------- lifecycle */

/** Attaches the block to its lanes. Collective; call once at entry. */
RK_DEV_FN void
rk_dev_ctx_init(rk_dev_ctx *x, const rk_dev_kargs *a)
{
    if (rk_dev_thread0()) {
        rk_dev_u32 b = rk_dev_block_idx();
        x->a = *a;
        x->blk = b;
        x->nin = a->nin == 0         ? 1
            : a->nin > RK_DEV_MAX_IN ? RK_DEV_MAX_IN
                                     : a->nin;
        x->nroutes
            = a->nroutes > RK_DEV_MAX_ROUTES ? RK_DEV_MAX_ROUTES : a->nroutes;
        x->batch = a->batch == 0          ? 1
            : a->batch > RK_DEV_MAX_BATCH ? RK_DEV_MAX_BATCH
                                          : a->batch;
        x->in_ll = 0;
        for (rk_dev_u32 i = 0; i < x->nin; i++) {
            const rk_dev_lane *l = &a->in[b * a->nin + i];
            x->in_ctrl[i] = l->ctrl;
            if (i == 0)
                rk_ring_cons_attach(l->ctrl, &x->in[i], l->slots);
            else
                rk_k2k_cons_attach(l->ctrl, &x->in[i], l->slots);
            if (l->format == RK_DEV_LANE_LL)
                x->in_ll |= 1u << i;
        }
        x->out_ll = a->out[b].format == RK_DEV_LANE_LL;
        x->out_ctrl = a->out[b].ctrl;
        rk_ring_prod_attach(a->out[b].ctrl, &x->out, a->out[b].slots);
        for (rk_dev_u32 r = 0; r < x->nroutes; r++)
            x->route_ctrl[r] = 0; /* attached once wired: rk_dev__route */
        x->stage_in = rk_dev_stage_mem();
        x->stage_out
            = x->stage_in + (rk_dev_size)x->batch * x->in[0].slot_size;
        x->stage_cap = a->stage_out == 0 ? 1 : a->stage_out;
        x->nout = x->idle = x->cmd_skip = 0;
        x->k.processed = x->k.sent = x->k.errors = x->k.last_ns = 0;
        for (rk_dev_u32 j = 0; j < RK_DEV_CTL_TOPICS; j++)
            x->k.topic[j] = 0;
        x->k.tdirty = 0;
        x->ack_seq = x->beat = x->backoff = x->msg_seq = x->faults = 0;
        x->lane = x->n = x->rr = x->hot = 0;
        x->nowait = x->pub_mask = x->tpoll = 0;
        x->ib = x->sweep.ib = RK_DEV_CMD_NONE;
        x->beat_ns = 0;
    }
    rk_dev_sync_block();
}

/** Reports HELD and waits for the first command. Returns 1 if the block
 * should run (RUN, or a STOP after a RUN it missed, which still drains),
 * 0 if it should exit at once (STOP before any RUN). Collective. */
RK_DEV_FN int
rk_dev_begin(rk_dev_ctx *x)
{
    if (rk_dev_thread0()) {
        rk_dev__ack(x, RK_DEV_ACK_HELD);
        rk_dev_u32 cmd = rk_dev__wait_while(x, RK_DEV_CMD_HOLD);
        x->flag = cmd != RK_DEV_CMD_STOP || rk_dev_ctl_activated(x->a.ctl);
        rk_dev__topics_poll(x);
        if (x->flag)
            rk_dev__ack(x, RK_DEV_ACK_RUNNING);
    }
    rk_dev_sync_block();
    return (int)x->flag;
}

/**
 * The safe point. Returns 1 once the block must end: STOP was posted and
 * every input lane is empty. PAUSE acknowledges PAUSED and waits here
 * (polling with back-off) until RUN or STOP. Collective.
 */
RK_DEV_FN int
rk_dev_should_terminate(rk_dev_ctx *x)
{
    rk_dev__flush(x);
    if (rk_dev_thread0()) {
        /* The command usually came with the last poll (the host keeps it
         * in the free head slot of an LL lane): no read. Otherwise cmd
         * (a PCIe read) is read at every RK_DEV_CMD_EVERY-th safe point:
         * a busy block, or a lane whose free slot the host could not
         * reach. */
        rk_dev_u32 cmd = RK_DEV_CMD_RUN;
        if (x->ib != RK_DEV_CMD_NONE) {
            cmd = x->ib;
            x->ib = RK_DEV_CMD_NONE;
            x->cmd_skip = RK_DEV_CMD_EVERY - 1;
        } else if (x->cmd_skip == 0) {
            cmd = rk_dev_ctl_cmd(x->a.ctl);
            x->cmd_skip = cmd == RK_DEV_CMD_RUN ? RK_DEV_CMD_EVERY - 1 : 0;
        } else {
            x->cmd_skip -= 1;
        }
        if (++x->tpoll >= RK_DEV_CMD_EVERY) {
            x->tpoll = 0;
            rk_dev__topics_poll(x);
        }
        if (cmd == RK_DEV_CMD_PAUSE) {
            rk_dev__ack(x, RK_DEV_ACK_PAUSED);
            cmd = rk_dev__wait_while(x, RK_DEV_CMD_PAUSE);
            if (cmd != RK_DEV_CMD_STOP)
                rk_dev__ack(x, RK_DEV_ACK_RUNNING);
        }
        /* The acquire of cmd (STOP) came after the host's last enqueue,
         * so the tails read below include every message sent before
         * terminate: the drain misses none. A STOP that came with a poll
         * was in the free slot after the last message (the host writes
         * the command there after a message), so that lane is empty up
         * to it; rk_dev__any_input looks again. */
        x->flag = cmd == RK_DEV_CMD_STOP && !rk_dev__any_input(x);
    }
    rk_dev_sync_block();
    return (int)x->flag;
}

/** Flushes the counters and reports EXITED with code. Collective; the
 * block must return right after. */
RK_DEV_FN void
rk_dev_exit(rk_dev_ctx *x, rk_dev_i32 code)
{
    rk_dev__flush(x);
    if (rk_dev_thread0()) {
        /* K2K senders learn that this block takes no more (dev_k2k.h);
         * what they queued meanwhile is counted by the host. */
        for (rk_dev_u32 i = 1; i < x->nin; i++)
            rk_k2k_close(x->in_ctrl[i], &x->in[i]);
        rk_dev_ctl_exit_code(x->a.ctl, x->blk, code);
        rk_dev__ack(x, RK_DEV_ACK_EXITED); /* release: exit_code first */
    }
}

/* ---------------------------------------------------------- receiving */

/** Takes up to x->batch messages from ring lane l (K2K): thread 0 reads
 * the tail, then the block copies the slots to the stage in one sweep.
 * Returns how many (every thread). Collective. */
RK_DEV_FN rk_dev_u32
rk_dev__ring_take(rk_dev_ctx *x, rk_dev_u32 l)
{
    rk_dev_u32 n;
    if (rk_dev_thread0())
        x->rc = (rk_dev_i32)rk_dev__avail(x, l, x->batch);
    rk_dev_sync_block();
    n = (rk_dev_u32)x->rc;
    if (n != 0) {
        if (rk_dev_thread0())
            rk_dev_pcie_read(); /* one pipelined sweep */
        rk_dev_ring_copy(&x->in[l], x->in[l].pos, n, x->stage_in, 0);
    }
    rk_dev_sync_block(); /* the copy; all have read x->rc */
    return n;
}

/**
 * Takes up to x->batch messages from the next non-empty input lane
 * (round robin) and returns how many; 0 after one back-off step when all
 * lanes are empty. The batch is copied to the block's stage (a handler
 * reads the copy, not mapped memory) and stays in the lane until
 * rk_dev_recv_done. Collective: every thread gets the same count and
 * reads the same messages with rk_dev_msg_at.
 *
 * An idle LL lane is polled one slot at a time (its window: one read
 * that also brings the host's command); after a take that found
 * messages, the next sweep covers a whole batch.
 */
RK_DEV_FN rk_dev_u32
rk_dev_recv_batch(rk_dev_ctx *x)
{
    rk_dev_u32 n = 0, i, l = 0, nin, rr, want;
    rk_dev__flush(x); /* an actor waiting for input has sent what it wrote */
    if (rk_dev_thread0())
        rk_dev__beat(x);
    rk_dev_sync_block();
    nin = x->nin;
    rr = x->rr;
    want = x->hot ? x->batch : 1;
    rk_dev_sync_block(); /* all have read them before thread 0 writes */
    for (i = 0; i < nin && n == 0; i++) {
        l = (rr + i) % nin;
        n = rk_dev__in_ll(x, l)
            ? rk_dev_ll_take(&x->in[l], x->stage_in, want, &x->sweep)
            : rk_dev__ring_take(x, l);
    }
    if (rk_dev_thread0()) {
        if (x->sweep.ib != RK_DEV_CMD_NONE) { /* came with the poll */
            x->ib = x->sweep.ib;
            x->sweep.ib = RK_DEV_CMD_NONE;
        }
        x->n = n;
        x->hot = n != 0;
        if (n == 0) {
            rk_dev_pcie_pass(0);
            /* Poll at full speed for a while after the last message
             * (each poll of a mapped lane is a PCIe read, so this is
             * about a millisecond), then back off. */
            if (x->idle < RK_DEV_SPIN_POLLS)
                x->idle += 1;
            else
                rk_dev_backoff(&x->backoff);
        } else {
            x->lane = l;
            x->backoff = x->idle = 0;
            x->rr = (l + 1) % nin;
            x->k.last_ns = rk_dev_now_ns();
        }
    }
    rk_dev_sync_block();
    return n;
}

/** Message i (< the count rk_dev_recv_batch returned) of the batch, read
 * from the block's stage. */
RK_DEV_FN rk_dev_msg
rk_dev_msg_at(const rk_dev_ctx *x, rk_dev_u32 i)
{
    const rk_ring_side *s = &x->in[x->lane];
    const unsigned char *slot = x->stage_in + (rk_dev_size)i * s->slot_size;
    rk_dev_msg m;
    rk_dev_u32 room = s->slot_size - RK_DEV_MSG_HEADER_SIZE;
    m.hdr = (const rk_dev_msg_header *)(const void *)slot;
    m.data = slot + RK_DEV_MSG_HEADER_SIZE;
    m.len = m.hdr->payload_len > room ? room : m.hdr->payload_len;
    return m;
}

/** Hands the first `done` messages of the batch back to their producer and
 * counts them processed. Collective: the block sync first makes every
 * thread's reads of those slots happen before the release. */
RK_DEV_FN void
rk_dev_recv_done(rk_dev_ctx *x, rk_dev_u32 done)
{
    /* The batch's replies are published, and the batch handed back, by
     * one commit (unstage ends with the block sync the commit needs). */
    rk_dev_u32 n = rk_dev__unstage(x);
    if (n == 0)
        rk_dev_sync_block(); /* every thread is done with the batch */
    if (rk_dev_thread0()) {
        /* What is not handed back stays held: the rest of the batch is
         * taken again by the next receive (or is the failed message). */
        rk_dev__commit(x, n, done);
        x->nout = 0;
        x->n = done < x->n ? x->n - done : 0;
        if (done != 0) {
            x->k.processed += done;
            rk_dev__counters(x);
            rk_dev_pcie_pass(done);
        }
    }
    rk_dev_sync_block();
}

/** One message: like rk_dev_recv_batch with a batch of 1. Returns 1 and
 * fills *m, or 0 when nothing is queued. Release with rk_dev_recv_done. */
RK_DEV_FN int
rk_dev_recv(rk_dev_ctx *x, rk_dev_msg *m)
{
    rk_dev_u32 saved = x->batch;
    rk_dev_sync_block();
    if (rk_dev_thread0())
        x->batch = 1;
    rk_dev_u32 n = rk_dev_recv_batch(x);
    if (rk_dev_thread0())
        x->batch = saved;
    if (n != 0)
        *m = rk_dev_msg_at(x, 0);
    rk_dev_sync_block();
    return n != 0;
}

/* ---------------------------------------------------------- counters */

/** Counts an application-level error (shown as the kernel's errors). */
RK_DEV_FN void
rk_dev_count_error(rk_dev_ctx *x)
{
    if (rk_dev_thread0())
        x->k.errors += 1;
}

/** The handler's state (rk_dev_kargs.user). */
RK_DEV_FN void *
rk_dev_user(const rk_dev_ctx *x)
{
    return x->a.user;
}

/* ---------------------------------------------------------- the loop */

/**
 * The handler or actor failed with rc, holding the message at the head of
 * the current lane if a received one was not handed back (x->n != 0):
 * report FAULTED and wait (polling, heartbeat beating) for the host's
 * verdict. Returns 1 to restart (go on with the next message, or call the
 * actor again), 0 to end (given up, or STOP). Either way a held failed
 * message is handed back: the host copied it (to dead-letter it) before
 * answering. Collective.
 */
RK_DEV_FN int
rk_dev__fault(rk_dev_ctx *x, rk_dev_i32 rc)
{
    rk_dev__flush(x); /* what the handled messages sent goes out first */
    if (rk_dev_thread0()) {
        rk_dev_u32 n = ++x->faults, ns = 0, v, want;
        x->k.errors += 1;
        rk_dev__counters(x);
        /* Which lane holds it: a K2K lane's message is in device memory,
         * where the host copies it from (k2k.c) to dead-letter it. */
        rk_dev_ctl_fault(x->a.ctl, x->blk, rc, n, x->n != 0 ? x->lane + 1 : 0,
            &x->ack_seq);
        want = RK_DEV_VERDICT(x->blk, n);
        for (;;) {
            v = rk_dev_ctl_verdict(x->a.ctl);
            if (v == want || v == RK_DEV_GIVE_UP
                || rk_dev_ctl_cmd(x->a.ctl) == RK_DEV_CMD_STOP)
                break;
            rk_dev__beat(x);
            rk_dev_backoff(&ns);
        }
        x->flag = v == want && rk_dev_ctl_cmd(x->a.ctl) != RK_DEV_CMD_STOP;
        if (x->n != 0) {
            if (x->lane == 0 && !rk_dev__in_ll(x, 0))
                rk_dev_fence_sys(); /* the ring lane's reads, first */
            rk_dev__hand_back(x, x->lane, 1);
        }
        x->n = 0;
        if (x->flag)
            rk_dev__ack(x, RK_DEV_ACK_RUNNING);
    }
    rk_dev_sync_block();
    return (int)x->flag;
}

/** Ends a batch: hands the first `done` messages back (their replies
 * published); with code an error, the block faults holding the next one
 * (rk_dev__fault). Returns 0 when the block must end (given up or STOP),
 * 1 to go on. Collective. */
RK_DEV_FN int
rk_dev__batch_end(rk_dev_ctx *x, rk_dev_u32 done, rk_dev_i32 code)
{
    rk_dev_recv_done(x, done);
    return code == RK_OK || rk_dev__fault(x, code);
}

/**
 * The persistent loop: lifecycle, batches, safe points, faults, drain and
 * exit. fn is called by every thread of the block for each message; thread
 * 0's return value decides (non-zero: a fault, see rk_dev__fault).
 */
RK_DEV_FN void
rk_dev_run(const rk_dev_kargs *a, rk_dev_ctx *x, rk_dev_handler fn)
{
    rk_dev_i32 code = RK_OK;

    rk_dev_ctx_init(x, a);
    if (rk_dev_begin(x)) {
        while (!rk_dev_should_terminate(x)) {
            rk_dev_u32 n = rk_dev_recv_batch(x), i;
            for (i = 0; i < n; i++) {
                rk_dev_msg m = rk_dev_msg_at(x, i);
                int rc = fn(x, &m);
                if (rk_dev_thread0())
                    x->rc = rc;
                rk_dev_sync_block();
                rc = x->rc;
                /* Every thread has read x->rc before thread 0 may write
                 * it again for the next message (a handler need not
                 * sync). */
                rk_dev_sync_block();
                if (rc != RK_OK) {
                    code = rc;
                    break;
                }
            }
            if (!rk_dev__batch_end(x, i, code))
                break;
            code = RK_OK;
        }
    }
    rk_dev_exit(x, code);
}

/** An actor: the block's own loop on rk_dev_should_terminate and
 * rk_dev_recv, called once per activation (again after a restart). It
 * returns RK_OK to end the kernel, an error to fault. */
typedef int (*rk_dev_actor)(rk_dev_ctx *x);

/** The persistent loop around an actor (RK_DEV_ACTOR_KERNEL). */
RK_DEV_FN void
rk_dev_run_actor(const rk_dev_kargs *a, rk_dev_ctx *x, rk_dev_actor fn)
{
    rk_dev_i32 code = RK_OK;

    rk_dev_ctx_init(x, a);
    if (rk_dev_begin(x)) {
        for (;;) {
            int rc = fn(x);
            if (rk_dev_thread0())
                x->rc = rc;
            rk_dev_sync_block();
            code = x->rc;
            if (code == RK_OK || !rk_dev__fault(x, code))
                break;
            code = RK_OK;
        }
    }
    rk_dev_exit(x, code);
}

/* ---------------------------------------------------------- entries */

/** Declares a handler function with the right qualifiers. */
#define RK_DEV_HANDLER(name) RK_DEV_FN int name

#if defined(RK_DEV_CUDA)
#define RK_DEV__ENTRY(name, runner, fn)                                       \
    extern "C" __global__ void name(rk_dev_kargs rk_dev_args_)                \
    {                                                                         \
        __shared__ rk_dev_ctx rk_dev_x_;                                      \
        runner(&rk_dev_args_, &rk_dev_x_, fn);                                \
    }
#else
/** The host build of an entry: what the tests and the stand-in driver
 * run, one CPU thread per block. args points at an rk_dev_kargs. */
typedef struct rk_dev_host_kernel {
    const char *name;     /**< the entry's name */
    rk_dev_size arg_size; /**< sizeof(rk_dev_kargs) */
    void (*run)(const void *args, rk_dev_u32 block,
        rk_dev_u32
            nblocks); /**< runs block of nblocks on the calling thread */
} rk_dev_host_kernel;

#if defined(__cplusplus)
#define RK_DEV__EXTERN extern "C"
#else
#define RK_DEV__EXTERN
#endif
#define RK_DEV__ENTRY(name, runner, fn)                                       \
    static void name##_rk_host(                                               \
        const void *args, rk_dev_u32 block, rk_dev_u32 nblocks)               \
    {                                                                         \
        const rk_dev_kargs *a_ = (const rk_dev_kargs *)args;                  \
        void *stage_ = malloc(a_->stage_bytes ? a_->stage_bytes : 64);        \
        rk_dev_ctx x;                                                         \
        if (stage_ == NULL)                                                   \
            abort(); /* a test harness out of memory */                       \
        rk_dev_host_enter(block, nblocks);                                    \
        rk_dev_host_stage_set(stage_);                                        \
        runner(a_, &x, fn);                                                   \
        free(stage_);                                                         \
    }                                                                         \
    RK_DEV__EXTERN const rk_dev_host_kernel rk_dev_host_kernel_##name;        \
    RK_DEV__EXTERN const rk_dev_host_kernel rk_dev_host_kernel_##name         \
        = { #name, sizeof(rk_dev_kargs), name##_rk_host };
#endif

/** A persistent kernel entry `name` running handler on every block (the
 * loop is rk_dev_run). */
#define RK_DEV_KERNEL(name, handler) RK_DEV__ENTRY(name, rk_dev_run, handler)

/** A persistent kernel entry `name` running the actor on every block. */
#define RK_DEV_ACTOR_KERNEL(name, actor)                                      \
    RK_DEV__ENTRY(name, rk_dev_run_actor, actor)

/** Declares an actor function with the right qualifiers. */
#define RK_DEV_ACTOR(name) RK_DEV_FN int name

/* Sending: rk_dev_send, rk_dev_reply, rk_dev_send_to, rk_dev_publish. */
#include "ringkernel/dev_send.h"
/* One-shot kernels (RK_DEV_ONESHOT) and the barriers: always with the
 * device API, so a source compiled through the NVRTC prelude has them. */
#include "ringkernel/dev_oneshot.h"
/* One message per warp (RK_DEV_WARP_KERNEL). */
#include "ringkernel/dev_warp.h"

#endif /* RINGKERNEL_DEV_KERNEL_H */
