/** @file
 * ringkernel/ctl_proto.h - a kernel instance's control block: its layout
 * and its protocol, shared by the host and the instance (a CPU thread or a
 * persistent GPU kernel).
 *
 * It compiles the same three ways as ring_proto.h (host C11, CUDA device
 * code under nvcc or NVRTC, host C++), with which it shares its
 * environment and its atomics layer, rk_atomic.h. Every shared word is
 * 32 bits and is only loaded (acquire) or stored (release): no
 * read-modify-write crosses between host and device, because none is
 * atomic over PCIe. The counters on line 2 are 64-bit, written by the
 * instance alone and read by the host as statistics (a torn read is
 * impossible on the 64-bit-aligned words of every platform we build for,
 * and a stale one is harmless).
 *
 * Ownership: the backend allocates the block (rk__backend.alloc) where
 * both sides can reach it (host memory for a CPU thread, mapped pinned
 * host memory for a GPU); the runtime initialises it with rk_ctl_init and
 * frees it through the backend after the instance has exited.
 *
 * Protocol (docs/backend.md has the state diagram):
 *   host:     rk_ctl_post(cmd)        store cmd with release (and, once,
 *                                     activated = 1 before the first RUN);
 *                                     then the backend wakes the instance
 *   instance: rk_ctl_cmd()            acquire load at every safe point
 *             rk_ctl_ack(ack)         release store after acting on cmd
 *             rk_ctl_fault(err, len)  a failure: FAULTED, then waits for
 *                                     the host's rk_ctl_verdict_post
 *             rk_ctl_exit(code, left) exit_code and left_n, then
 *                                     ack = EXITED with release: a host that
 *                                     sees EXITED sees both
 *   host:     rk_ctl_ack_get()        acquire load; pairs with the above
 * Host-written and instance-written words sit on separate 64-byte lines,
 * so neither side ever writes a line the other writes.
 */
#ifndef RINGKERNEL_CTL_PROTO_H
#define RINGKERNEL_CTL_PROTO_H

#include "ringkernel/ring_proto.h"

/** a 32-bit control word shared with the other side (_Atomic in host C, a
 * plain word elsewhere) */
#define RK_CTL_A32 RK_ATOMIC_U32

/** Commands (host -> instance). */
#define RK_CTL_HOLD  0u /**< LAUNCHED: exist, process nothing */
#define RK_CTL_RUN   1u /**< ACTIVE */
#define RK_CTL_PAUSE 2u /**< DEACTIVATED: stop at the next safe point */
#define RK_CTL_STOP  3u /**< TERMINATING: drain the input, then end */

/** Acknowledgements (instance -> host). */
#define RK_CTL_ACK_NONE    0u /**< not started yet */
#define RK_CTL_ACK_HELD    1u /**< waiting for the first RUN */
#define RK_CTL_ACK_RUNNING 2u /**< processing (after RUN) */
#define RK_CTL_ACK_PAUSED  3u /**< stopped at a safe point */
/** ended; exit_code, failed_len, left_n valid */
#define RK_CTL_ACK_EXITED  4u
#define RK_CTL_ACK_FAULTED 5u /**< the actor or handler failed: waiting for
                                 the host's verdict (restart or give up) */

/** rk_ctl.verdict: 0 none yet; n: restart after fault number n;
 * RK_CTL_GIVE_UP: end the instance as failed. */
#define RK_CTL_GIVE_UP 0xffffffffu

/** The block: three 64-byte lines, 192 bytes under every compiler. */
/** The control block of one kernel instance: three 64-byte lines, each with
 * one writer. The runtime allocates and owns it; the instance only reads
 * line 0 and writes lines 1 and 2. */
typedef struct rk_ctl {
    /** Line 0: written by the host only. */
    RK_PROTO_ALIGN64 RK_CTL_A32 cmd; /**< RK_CTL_HOLD..STOP */
    RK_CTL_A32 activated; /**< 1 once RUN was posted: a STOP that overtook
                             the first RUN still drains the input */
    RK_CTL_A32 verdict;   /**< answer to a fault (RK_CTL_GIVE_UP, or the
                             fault number to restart after) */
    rk_proto_u32 pad0[13]; /**< padding to the end of the 64-byte line */
    /** Line 1: written by the instance only. */
    RK_PROTO_ALIGN64 RK_CTL_A32 ack; /**< RK_CTL_ACK_* */
    RK_CTL_A32 exit_code; /**< an RK_* code as unsigned; RK_OK = clean end */
    RK_CTL_A32 failed_len; /**< bytes of the failed frame in the fail slot of
                              the spill area, 0: none */
    RK_CTL_A32 faults;     /**< faults reported so far */
    RK_CTL_A32 left_n;     /**< at EXITED: unprocessed frames the instance
                              left in the spill area, for the host */
    rk_proto_u32 pad1[11]; /**< padding to the end of the 64-byte line */
    /** Line 2: the instance's counters (single writer, statistics). */
    RK_PROTO_ALIGN64 RK_PROTO_A64 processed; /**< messages handled */
    RK_PROTO_A64 errors; /**< handler or actor failures */
    RK_PROTO_A64 sent;   /**< messages the instance sent */
    rk_proto_u64 pad2[5]; /**< padding to the end of the 64-byte line */
} rk_ctl;

/* ---------------------------------------------------------- primitives */
/*
 * The control words are 32-bit and shared at system scope (rk_atomic.h).
 * rk_ctl_load_acquire pairs with the other side's rk_ctl_store_release:
 * everything written before the store is visible to a reader that sees
 * its value. The relaxed forms order nothing: a word its writer alone
 * stores (counters), or a read for statistics.
 */
/** acquire load of a control word */
#define rk_ctl_load_acquire rk_atomic_load_acquire_sys_u32
/** release store of a control word */
#define rk_ctl_store_release rk_atomic_store_release_sys_u32
/** relaxed store (a word its writer alone stores) */
#define rk_ctl_store_relaxed rk_atomic_store_relaxed_u32
/** relaxed load (statistics) */
#define rk_ctl_load_relaxed rk_atomic_load_relaxed_u32

/* ---------------------------------------------------------- host side */

/** Before the instance starts: HOLD, no acknowledgement, counters zero. */
RK_PROTO_FN void
rk_ctl_init(rk_ctl *c)
{
    rk_atomic_init_u32(&c->cmd, RK_CTL_HOLD);
    rk_atomic_init_u32(&c->activated, 0);
    rk_atomic_init_u32(&c->verdict, 0);
    rk_atomic_init_u32(&c->ack, RK_CTL_ACK_NONE);
    rk_atomic_init_u32(&c->exit_code, 0);
    rk_atomic_init_u32(&c->failed_len, 0);
    rk_atomic_init_u32(&c->faults, 0);
    rk_atomic_init_u32(&c->left_n, 0);
    rk_atomic_init_u64(&c->processed, 0);
    rk_atomic_init_u64(&c->errors, 0);
    rk_atomic_init_u64(&c->sent, 0);
}

/** Posts a command. The release pairs with the instance's acquire load in
 * rk_ctl_cmd: what the host wrote before (queued input) is visible with
 * the command. RUN also records that the kernel was activated, before the
 * command itself, so an instance that reads STOP can tell whether RUN was
 * ever posted. */
RK_PROTO_FN void
rk_ctl_post(rk_ctl *c, rk_proto_u32 cmd)
{
    if (cmd == RK_CTL_RUN)
        rk_ctl_store_release(&c->activated, 1);
    rk_ctl_store_release(&c->cmd, cmd);
}

/** The instance's last acknowledgement; after EXITED, exit_code and
 * failed_len are valid (acquire pairs with the release in rk_ctl_exit). */
RK_PROTO_FN rk_proto_u32
rk_ctl_ack_get(const rk_ctl *c)
{
    return rk_ctl_load_acquire(&c->ack);
}

/* ---------------------------------------------------------- instance side */

/** The command in force (acquire pairs with the release in rk_ctl_post). */
RK_PROTO_FN rk_proto_u32
rk_ctl_cmd(const rk_ctl *c)
{
    return rk_ctl_load_acquire(&c->cmd);
}

/** True if RUN was ever posted (acquire pairs with rk_ctl_post). */
RK_PROTO_FN int
rk_ctl_was_activated(const rk_ctl *c)
{
    return rk_ctl_load_acquire(&c->activated) != 0;
}

/** Publishes an acknowledgement (release: everything the instance did
 * before, e.g. the last message's effects, is visible with it). */
RK_PROTO_FN void
rk_ctl_ack(rk_ctl *c, rk_proto_u32 ack)
{
    rk_ctl_store_release(&c->ack, ack);
}

/** Reports a fault: the error, the failed frame's length (0: none; the
 * frame is in the fail slot), the fault number, then FAULTED (release
 * pairs with rk_ctl_ack_get). The instance then waits for a verdict
 * (rk_ctl_verdict_get) or STOP. Returns the fault number. */
RK_PROTO_FN rk_proto_u32
rk_ctl_fault(rk_ctl *c, rk_proto_u32 error, rk_proto_u32 failed_len)
{
    rk_proto_u32 n = rk_ctl_load_relaxed(&c->faults) + 1;

    rk_ctl_store_relaxed(&c->exit_code, error);
    rk_ctl_store_relaxed(&c->failed_len, failed_len);
    rk_ctl_store_relaxed(&c->faults, n);
    rk_ctl_store_release(&c->ack, RK_CTL_ACK_FAULTED);
    return n;
}

/** The host's answer to the last fault (acquire pairs with
 * rk_ctl_verdict_post). */
RK_PROTO_FN rk_proto_u32
rk_ctl_verdict_get(const rk_ctl *c)
{
    return rk_ctl_load_acquire(&c->verdict);
}

/** Host: answers fault n (restart) or gives up (RK_CTL_GIVE_UP). The
 * release orders the host's reading of the fail slot before the instance
 * may reuse it. */
RK_PROTO_FN void
rk_ctl_verdict_post(rk_ctl *c, rk_proto_u32 v)
{
    rk_ctl_store_release(&c->verdict, v);
}

/** Ends the instance: the exit code, how many unprocessed frames it left
 * in the spill area, then EXITED (release pairs with rk_ctl_ack_get). A
 * fault not yet answered stays reported (faults, failed_len). */
RK_PROTO_FN void
rk_ctl_exit(rk_ctl *c, rk_proto_u32 exit_code, rk_proto_u32 left_n)
{
    rk_ctl_store_relaxed(&c->exit_code, exit_code);
    rk_ctl_store_relaxed(&c->left_n, left_n);
    rk_ctl_store_release(&c->ack, RK_CTL_ACK_EXITED);
}

/** Adds n to one of the instance's counters (single writer). */
RK_PROTO_FN void
rk_ctl_count(RK_PROTO_A64 *ctr, rk_proto_u64 n)
{
    rk_ring_store_relaxed_u64(ctr, rk_ring_load_relaxed(ctr) + n);
}

#endif /* RINGKERNEL_CTL_PROTO_H */
