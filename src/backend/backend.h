/*
 * src/backend/backend.h - the contract between the runtime and a backend.
 *
 * The runtime decides *what* happens to a kernel (registry, lifecycle
 * state machine, queues, routing, supervision policy, telemetry); a
 * backend decides *where and how* a kernel instance executes. A backend is
 * a table of function pointers (rk__backend) plus the control block below,
 * which both sides share and which is designed to live in mapped pinned
 * host memory for a GPU backend. docs/backend.md shows how a CUDA backend
 * maps onto this contract.
 *
 * Ownership: the runtime allocates the control block and the queues and
 * keeps them alive until after destroy() returns. The backend owns only
 * what it creates behind the rk__backend_inst pointer.
 *
 * Threads: the runtime serialises lifecycle entries for one instance
 * (launch, activate, deactivate, terminate, destroy) under that kernel's
 * lock. wake() and query() may be called from any thread at any time
 * between launch and destroy.
 */
#ifndef RK_SRC_BACKEND_H
#define RK_SRC_BACKEND_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/ec.h"

/* Bump when an entry's meaning or the control block layout changes. A
 * backend built for another version is refused (RK_ENOTSUP). */
#define RK__BACKEND_ABI 1

/* Commands the host writes into rk__control.cmd. */
enum {
    RK__CMD_HOLD = 0,  /* LAUNCHED: exist, process nothing */
    RK__CMD_RUN = 1,   /* ACTIVE */
    RK__CMD_PAUSE = 2, /* DEACTIVATED: park at the next safe point */
    RK__CMD_STOP = 3   /* TERMINATING: drain, then end */
};

/* What the kernel reports in rk__control.ack. */
enum {
    RK__ACK_NONE = 0, /* not yet started */
    RK__ACK_HELD = 1, /* waiting for the first RUN */
    RK__ACK_RUNNING = 2,
    RK__ACK_PAUSED = 3, /* parked at a safe point */
    RK__ACK_EXITED = 4  /* body returned; exit_code is valid */
};

/*
 * The control block: one per kernel instance, 64-byte lines so that the
 * host-written and the kernel-written words never share a line (on a GPU,
 * the kernel polls the host line over PCIe and posts writes to its own).
 *
 * Protocol (all words 32-bit, loads/stores only, so it also works where
 * host<->device read-modify-write is not atomic):
 *   host:   store cmd (release), then wake(): the kernel sees cmd with an
 *           acquire load at its next safe point.
 *   kernel: store ack (release) after acting on a command, and bump
 *           ack_seq so a host waiting in the CPU backend wakes.
 *   park:   the kernel publishes parked=1 (seq_cst), re-checks its input
 *           and cmd, then sleeps on wake_seq; a producer that enqueued
 *           reads parked after a seq_cst fence and, if set, bumps wake_seq
 *           and wakes it (Dekker: one side always sees the other).
 */
typedef struct rk__control {
    /* host-written line */
    _Alignas(64) _Atomic uint32_t cmd;
    _Atomic uint32_t activated; /* 1 once RUN was first posted */
    /* GLUE (branch queue): the kernel's wake eventcount; the input queue
     * notifies it after every enqueue, commands notify all. */
    rk__ec wake;
    /* kernel-written line */
    _Alignas(64) _Atomic uint32_t ack;
    _Atomic uint32_t ack_seq;
    _Atomic int32_t exit_code;
} rk__control;

typedef struct rk__backend_inst rk__backend_inst;

/* What launch() needs to start an instance. */
typedef struct rk__backend_launch {
    const char *kernel_id;
    rk__control *control;
    uint32_t grid_size, block_size; /* GPU backends */
    /* CPU body: the runtime's kernel main loop. A GPU backend runs its
     * compiled device entry instead and ignores body/arg. */
    void (*body)(rk__backend_inst *bi, void *arg);
    void *arg;
} rk__backend_launch;

typedef struct rk__backend_status {
    uint32_t ack;         /* last rk__control.ack seen */
    int32_t exit_code;    /* valid when ack == RK__ACK_EXITED */
    uint64_t cpu_time_ns; /* CPU time the instance consumed (0: unknown) */
} rk__backend_status;

typedef struct rk__backend {
    uint32_t abi_version; /* RK__BACKEND_ABI */
    const char *name;

    /* Allocates what the instance needs and starts it so that it exists
     * but processes nothing until cmd becomes RUN (a CPU thread blocked on
     * the control block; a persistent GPU kernel spinning on cmd). Returns
     * RK_OK with *out set, or an error with nothing left behind. */
    int (*launch)(const rk__backend_launch *spec, rk__backend_inst **out);

    /* cmd = RUN and wake; returns at once (the first activation and every
     * reactivation). */
    void (*activate)(rk__backend_inst *bi);

    /* cmd = PAUSE and wake, then waits until the instance acknowledges
     * PAUSED (or EXITED) or the absolute deadline (rk_now_ns based;
     * UINT64_MAX: none) passes. RK_OK or RK_ETIMEDOUT; on timeout the
     * command stays posted. */
    int (*deactivate)(rk__backend_inst *bi, uint64_t deadline);

    /* cmd = STOP and wake, then waits for EXITED until the deadline.
     * RK_OK or RK_ETIMEDOUT (the command stays posted; call again). */
    int (*terminate)(rk__backend_inst *bi, uint64_t deadline);

    /* Waits, without posting anything, until the instance has EXITED or
     * the deadline passes. RK_OK or RK_ETIMEDOUT. */
    int (*wait_exit)(rk__backend_inst *bi, uint64_t deadline);

    /* New input is queued: wake the instance if it parked. Must be cheap
     * when it did not (a fence and one load on the CPU backend; nothing
     * on a GPU that polls). */
    void (*wake)(rk__backend_inst *bi);

    /* CPU bodies only: parks the calling body on control->wake with the
     * key from rk__ec_prepare (after re-checking its input and cmd). */
    void (*park)(rk__backend_inst *bi, uint32_t key, uint64_t deadline);

    /* CPU bodies only: stores ack (RK__ACK_*) and wakes a host blocked in
     * deactivate() or terminate(). */
    void (*report)(rk__backend_inst *bi, uint32_t ack);

    /* Fills *out. Any thread, any time between launch and destroy. */
    void (*query)(rk__backend_inst *bi, rk__backend_status *out);

    /* Releases the instance. Called once it has EXITED; waits for the
     * body to return (joins the CPU thread). */
    void (*destroy)(rk__backend_inst *bi);
} rk__backend;

/* The CPU backend: one thread per kernel instance, futex parking. */
extern const rk__backend rk__backend_cpu;

#endif /* RK_SRC_BACKEND_H */
