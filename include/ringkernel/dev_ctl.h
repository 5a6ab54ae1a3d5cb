/** @file
 * ringkernel/dev_ctl.h - the control block a device kernel shares with the
 * host, and the only functions the device loop uses to touch it.
 *
 * The runtime's control block (ringkernel/ctl_proto.h, rk_ctl) has one
 * instance-written line; a grid has many actors (one per block), which
 * must never write the same line. So the device gets this block: one
 * host line (cmd, activated, verdict) and one line per block (ack, exit
 * code, faults, heartbeat, counters), with ctl_proto.h's command and ack
 * values. The cuda backend's host relay mirrors it to and from rk_ctl
 * (src/backend/cuda/cuda.c), as the instance's single rk_ctl writer.
 * dev_kernel.h touches the block only through the accessors below.
 *
 * Compiles as host C11, host C++, nvcc and NVRTC (see rk_dev.h). Only
 * 32-bit acquire loads and release stores cross between host and device,
 * plus relaxed 64-bit stores of counters that one block alone writes; no
 * read-modify-write is ever applied to these words by both sides.
 *
 * Layout (mapped pinned host memory on a GPU):
 *   line 0, host-written:   cmd (HOLD/RUN/PAUSE/STOP), wake_seq, activated
 *     (and verdict, the answer to a block's fault)
 *   line 1 + b, written by block b only:
 *     ack, ack_seq, exit_code, heartbeat, processed, sent, errors, last_ns,
 *     faults
 *
 * Ownership: the host allocates the block (rk_dev_ctl_size(nblocks)
 * bytes, 64-byte aligned) before the kernel starts and frees it only after
 * every block has reported EXITED and the kernel has returned.
 */
#ifndef RINGKERNEL_DEV_CTL_H
#define RINGKERNEL_DEV_CTL_H

#include "ringkernel/ctl_proto.h"
#include "ringkernel/rk_dev.h"

/** Commands and acknowledgements: the runtime's own (ctl_proto.h), so the
 * relay mirrors them between rk_ctl and this block unchanged. */
#define RK_DEV_CMD_HOLD RK_CTL_HOLD
#define RK_DEV_CMD_RUN  RK_CTL_RUN /**< RK_CTL_RUN: process messages */
/** RK_CTL_PAUSE: stop at the next safe point */
#define RK_DEV_CMD_PAUSE RK_CTL_PAUSE
/** RK_CTL_STOP: drain the input, then end */
#define RK_DEV_CMD_STOP RK_CTL_STOP
/** RK_CTL_ACK_NONE: not started yet */
#define RK_DEV_ACK_NONE RK_CTL_ACK_NONE
/** RK_CTL_ACK_HELD: waiting for the first RUN */
#define RK_DEV_ACK_HELD RK_CTL_ACK_HELD
/** RK_CTL_ACK_RUNNING: processing */
#define RK_DEV_ACK_RUNNING RK_CTL_ACK_RUNNING
/** RK_CTL_ACK_PAUSED: stopped at a safe point */
#define RK_DEV_ACK_PAUSED RK_CTL_ACK_PAUSED
/** RK_CTL_ACK_EXITED: ended, exit_code valid */
#define RK_DEV_ACK_EXITED RK_CTL_ACK_EXITED
/** RK_CTL_ACK_FAULTED: failed, waiting for the verdict */
#define RK_DEV_ACK_FAULTED RK_CTL_ACK_FAULTED

/** Verdicts (host -> a faulted block): restart block b after its fault
 * number n is RK_DEV_VERDICT(b, n); RK_DEV_GIVE_UP ends it. */
#define RK_DEV_VERDICT(b, n)                                                  \
    ((((rk_dev_u32)(b) + 1u) << 16) | ((rk_dev_u32)(n)&0xffffu))
/** verdict: do not restart (RK_CTL_GIVE_UP) */
#define RK_DEV_GIVE_UP RK_CTL_GIVE_UP

/** Line 0 of a device control block: written by the host only. */
typedef struct rk_dev_ctl_host {
    RK_DEV_ALIGN64 RK_DEV_A32 cmd; /**< RK_DEV_CMD_* (release by the host) */
    RK_DEV_A32 wake_seq;           /**< bumped with every command */
    RK_DEV_A32 activated;          /**< 1 once RUN was first posted */
    rk_dev_u32 nblocks;            /**< set before launch, read-only */
    RK_DEV_A32 verdict;            /**< answer to one block's fault */
    unsigned char
        pad[RK_DEV_LINE - 20]; /**< padding to the end of the 64-byte line */
} rk_dev_ctl_host;

/** One block's line of the control block: written by that block's thread 0
 * only. */
typedef struct rk_dev_ctl_block {
    RK_DEV_ALIGN64 RK_DEV_A32 ack; /**< RK_DEV_ACK_* (release by the block) */
    RK_DEV_A32 ack_seq;            /**< bumped with every ack */
    RK_DEV_A32 exit_code;          /**< valid once ack == EXITED (int) */
    RK_DEV_A32 heartbeat;          /**< bumped at every pass of the loop */
    RK_DEV_A64 processed;          /**< messages handled */
    RK_DEV_A64 sent;               /**< messages sent (any route) */
    RK_DEV_A64 errors;             /**< handler failures and refused sends */
    RK_DEV_A64 last_ns;            /**< rk_dev_now_ns() of the last batch */
    RK_DEV_A32 faults;             /**< faults reported by this block */
    RK_DEV_A32 failed_held;        /**< l + 1: the failed message is at the
                                      head of the block's input lane l (0:
                                      the host's, 1..: a K2K lane); 0: none */
    unsigned char
        pad[RK_DEV_LINE - 56]; /**< padding to the end of the 64-byte line */
} rk_dev_ctl_block;

/** The control block of a device kernel, in host-mapped memory: the host line,
 * then one line per block. The runtime allocates and owns it (RK_DEV_CTL_SIZE
 * bytes); the device only reads the host line and writes its own block line.
 */
typedef struct rk_dev_ctl {
    rk_dev_ctl_host host;    /**< written by the host */
    rk_dev_ctl_block blk[1]; /**< nblocks lines follow */
} rk_dev_ctl;

/** Bytes for a control block of nblocks blocks. */
#define RK_DEV_CTL_SIZE(nblocks)                                              \
    (sizeof(rk_dev_ctl_host)                                                  \
        + (rk_dev_size)(nblocks) * sizeof(rk_dev_ctl_block))

/* ---------------------------------------------------------- kernel side */
/* The device loop's whole view of the control block. Each acquire pairs
 * with the host's release store of the same word (rk_dev_ctl_post on the
 * host); each release pairs with the host's acquire load in its poll. */

/** The host's current command (RK_DEV_CMD_*), acquire: pairs with the host's
 * release store. */
RK_DEV_FN rk_dev_u32
rk_dev_ctl_cmd(const rk_dev_ctl *c)
{
    return rk_dev_ld_acquire_sys32(&c->host.cmd);
}

/** 1 once the host posted RUN for the first time (acquire). */
RK_DEV_FN rk_dev_u32
rk_dev_ctl_activated(const rk_dev_ctl *c)
{
    return rk_dev_ld_acquire_sys32(&c->host.activated);
}

/** Publishes block b's acknowledgement. The counters and exit code written
 * before it are visible to a host that acquires ack. ack_seq is written by
 * this block alone, so the increment is a local read and a store. */
RK_DEV_FN void
rk_dev_ctl_ack(rk_dev_ctl *c, rk_dev_u32 b, rk_dev_u32 ack, rk_dev_u32 *seq)
{
    rk_dev_st_release_sys32(&c->blk[b].ack, ack);
    *seq += 1;
    rk_dev_st_release_sys32(&c->blk[b].ack_seq, *seq);
}

/** The host's answer to a fault (acquire pairs with the host's release
 * store of verdict, made after it copied the failed message). */
RK_DEV_FN rk_dev_u32
rk_dev_ctl_verdict(const rk_dev_ctl *c)
{
    return rk_dev_ld_acquire_sys32(&c->host.verdict);
}

/** Reports block b's fault number n with error err, then FAULTED. With
 * held set, the failed message stays at the head of the block's input
 * lane until the verdict. */
RK_DEV_FN void
rk_dev_ctl_fault(rk_dev_ctl *c, rk_dev_u32 b, rk_dev_i32 err, rk_dev_u32 n,
    rk_dev_u32 held, rk_dev_u32 *seq)
{
    rk_dev_st_relaxed32(&c->blk[b].exit_code, (rk_dev_u32)err);
    rk_dev_st_relaxed32(&c->blk[b].faults, n);
    rk_dev_st_relaxed32(&c->blk[b].failed_held, held);
    rk_dev_ctl_ack(c, b, RK_DEV_ACK_FAULTED, seq); /* release: both first */
}

/** Block b records its exit code; it is read by the host once the block
 * acknowledges EXITED. */
RK_DEV_FN void
rk_dev_ctl_exit_code(rk_dev_ctl *c, rk_dev_u32 b, rk_dev_i32 code)
{
    rk_dev_st_relaxed32(&c->blk[b].exit_code, (rk_dev_u32)code);
}

/** Block b publishes its loop heartbeat (relaxed: a liveness hint only). */
RK_DEV_FN void
rk_dev_ctl_heartbeat(rk_dev_ctl *c, rk_dev_u32 b, rk_dev_u32 beat)
{
    rk_dev_st_relaxed32(&c->blk[b].heartbeat, beat);
}

/** Topic lanes a publishing block counts (the bits of a publish's carried
 * mask, rk_dev_publish; RK_DEV_MAX_ROUTES). */
#define RK_DEV_CTL_TOPICS 8

/** One block's line of topic counts (docs/cuda-k2k.md, "Counting"), in
 * the host-mapped region next to the control block (rk_dev_kargs.topics):
 * carried[j], the publishes carried wholly on the device (no relay frame)
 * that went on the lane of bit j. Written by that block's thread 0 only,
 * relaxed, with its other counters. */
typedef struct rk_dev_ctl_topics {
    RK_DEV_ALIGN64 RK_DEV_A64 carried[RK_DEV_CTL_TOPICS]; /**< per bit */
} rk_dev_ctl_topics;

/** Counters: one writer (the block's thread 0), relaxed; the host reads a
 * snapshot and needs no ordering with the messages. */
typedef struct rk_dev_counters {
    /** @{ */
    /** Messages handled, messages sent, failures, and rk_dev_now_ns() of the
     * last batch. */
    rk_dev_u64 processed, sent, errors, last_ns;
    /** @} */
    /** Publishes carried wholly on the device, per carried-mask bit. */
    rk_dev_u64 topic[RK_DEV_CTL_TOPICS];
    rk_dev_u32 tdirty; /**< bit j: topic[j] changed since it was written */
} rk_dev_counters;

/** Block b publishes its counters k into its line (relaxed stores). */
RK_DEV_FN void
rk_dev_ctl_counters(rk_dev_ctl *c, rk_dev_u32 b, const rk_dev_counters *k)
{
    rk_dev_st_relaxed64(&c->blk[b].processed, k->processed);
    rk_dev_st_relaxed64(&c->blk[b].sent, k->sent);
    rk_dev_st_relaxed64(&c->blk[b].errors, k->errors);
    rk_dev_st_relaxed64(&c->blk[b].last_ns, k->last_ns);
}

/** Block b publishes the topic counts that changed into its line of t
 * (relaxed stores, posted: no read, no round trip) and clears tdirty. */
RK_DEV_FN void
rk_dev_ctl_topic_counts(rk_dev_ctl_topics *t, rk_dev_u32 b, rk_dev_counters *k)
{
    for (rk_dev_u32 j = 0; k->tdirty != 0 && j < RK_DEV_CTL_TOPICS; j++)
        if ((k->tdirty >> j) & 1u)
            rk_dev_st_relaxed64(&t[b].carried[j], k->topic[j]);
    k->tdirty = 0;
}

#endif /* RINGKERNEL_DEV_CTL_H */
