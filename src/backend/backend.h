/*
 * src/backend/backend.h - the contract between the runtime and a backend.
 *
 * The runtime decides: the registry, the lifecycle state machine, the
 * host-side queues and their policies, routing, supervision (restart,
 * backoff, give up), dead letters and telemetry aggregation. A backend
 * executes and places: it says whether it can run here, allocates the
 * memory an instance shares with the host, starts the instance, makes it
 * see a new command, waits for its acknowledgement, and reports what it
 * did. docs/backend.md describes each entry and shows a worked skeleton.
 *
 * Rules every backend follows (as nng's transports do):
 *   - Calls run one way. A backend, and the instance it runs, never call
 *     into the runtime's lifecycle or supervision. An instance reports
 *     only through its control block (ringkernel/ctl_proto.h: acks,
 *     exit code, the failed frame, frames left unprocessed) and by
 *     notifying the eventcount the launch spec gives it.
 *   - The runtime allocates the backend's private instance state
 *     (`inst_size` bytes, zeroed, 64-byte aligned) and frees it after
 *     destroy; a backend keeps everything else it creates behind it.
 *   - Shared memory (control block, device-facing rings, spill area) comes
 *     from `alloc` and goes back through `release`; the core never assumes
 *     it is malloc memory.
 *   - Serialisation: for one instance, launch, wait_ack (from lifecycle
 *     calls) and destroy are called under that kernel's lifecycle lock;
 *     signal, wait_ack (from the supervisor, which also waits for acks) and
 *     query may come from any host thread between launch and destroy.
 *     probe, check, alloc and release may be called from any thread at
 *     any time.
 *   - Errors: entries that can fail return an RK_E* code and leave a
 *     detail (rk__fail) that names the kernel and the cause, and leave
 *     nothing allocated.
 */
#ifndef RK_SRC_BACKEND_H
#define RK_SRC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/ec.h"
#include "ringkernel/ctl_proto.h"
#include "ringkernel/message.h"

/* Bump when an entry's meaning, the launch spec or the control block's
 * layout changes; a backend built for another version is refused. */
#define RK__BACKEND_ABI 6

struct rk__inst; /* the runtime's host-side instance (runtime/internal.h) */

/* A piece of memory the backend placed: host address (always usable by
 * the host) and the instance's address for it (0 where the instance uses
 * the host address, as a CPU thread does). */
typedef struct rk__placed {
    void *host;
    uint64_t dev;
    size_t size;
} rk__placed;

/* What launch() needs to start an instance. Everything here outlives the
 * instance (the runtime frees it after destroy). */
typedef struct rk__backend_launch {
    const char *kernel_id;
    rk__placed ctl; /* an rk_ctl, initialised (HOLD) by the runtime */
    /* The instance's wake-up eventcount: senders notify it after queueing
     * input, and signal() must make the instance see a new command. A CPU
     * body parks on it; a GPU instance polls instead. Host memory. */
    rk__ec *wake;
    /* Notified (all) by the backend after every FAULTED or EXITED
     * acknowledgement, so the runtime's supervisor wakes. Host memory. */
    rk__ec *events;
    uint32_t grid_size, block_size; /* 0: the backend's default */
    /* The host-side instance: queues, configuration, routes. A CPU body
     * runs on it directly; a device backend reads its configuration and
     * relays between its host queues and the device's lanes. */
    struct rk__inst *inst;
} rk__backend_launch;

typedef struct rk__backend_status {
    uint32_t ack;         /* last rk_ctl ack (RK_CTL_ACK_*) */
    uint64_t cpu_time_ns; /* CPU time the instance consumed (0: unknown) */
} rk__backend_status;

typedef struct rk__backend_inst rk__backend_inst; /* backend-private */
struct rk_call_reply; /* ringkernel/runtime.h: rk_kernel_call_reply */

/* What code a backend runs (rk__backend.code). */
#define RK__CODE_HOST   1u /* C actor and handler functions */
#define RK__CODE_DEVICE 2u /* rk_kernel_config.device_source */

struct rk_kernel_config; /* ringkernel/runtime.h */

typedef struct rk__backend {
    uint32_t abi_version; /* RK__BACKEND_ABI */
    const char *name;     /* "cpu", "cuda", ... */
    size_t inst_size;     /* bytes of private state per instance */
    uint32_t code;        /* RK__CODE_*: what kernels it can run */
    /* 0: the backend notifies spec->events itself on FAULTED/EXITED.
     * Otherwise the supervisor also rescans this often (ns). */
    uint64_t event_poll_ns;

    /* Can this backend run kernels here and now? RK_OK, or an error
     * (RK_ENODEV, RK_ENOTSUP) with a detail naming the reason (no driver,
     * no device, ...). Cheap after the first call. */
    int (*probe)(void);

    /* Optional (may be NULL). A kernel with this config was registered
     * on this backend: get ready to launch it (the cuda backend compiles
     * and loads its code now, while no persistent kernel blocks the
     * load). Best effort: launch reports any error again. */
    void (*prepare)(
        const char *kernel_id, const struct rk_kernel_config *config);

    /* Checks what the backend must honour in a launch spec (grid and
     * block sizes, ...) before anything is allocated. May be NULL
     * (anything goes). */
    int (*check)(const rk__backend_launch *spec);

    /* Places size bytes (64-byte aligned, zeroed) reachable by the host
     * and by an instance; release() gives them back. */
    int (*alloc)(size_t size, rk__placed *out);
    void (*release)(rk__placed *p);

    /* Starts an instance so that it exists but processes nothing until
     * cmd becomes RUN (it acknowledges HELD first). bi is the runtime-
     * allocated private state. RK_OK, or an error with nothing started. */
    int (*launch)(rk__backend_inst *bi, const rk__backend_launch *spec);

    /* A host-written word of the control block changed (a command or a
     * verdict): make the instance see it soon. Returns at once. */
    void (*signal)(rk__backend_inst *bi);

    /* Waits until the instance's ack is one of those in mask (bit
     * 1u << RK_CTL_ACK_*; EXITED always counts) or the absolute deadline
     * (rk_now_ns based; UINT64_MAX: none). RK_OK or RK_ETIMEDOUT. */
    int (*wait_ack)(rk__backend_inst *bi, uint32_t mask, uint64_t deadline);

    /* Fills *out. Any thread between launch and destroy. */
    void (*query)(rk__backend_inst *bi, rk__backend_status *out);

    /* Releases what launch created. Called once the instance has EXITED
     * (joins the CPU thread), or with detach set when it never will (an
     * actor stuck in its own code past the terminate timeout): then the
     * backend lets it go without waiting. */
    void (*destroy)(rk__backend_inst *bi, int detach);

    /* Optional (NULL: RK_ENOTSUP). Runs the instance's handler on one
     * message, h (a complete header, stamped) and its payload, on the
     * calling thread, if the instance is idle (RUN, waiting for input,
     * none queued): RK_OK once handled (a handler failure is handed to
     * the instance to report as a fault), RK_EBUSY with nothing done
     * otherwise. The runtime admitted the message; the backend counts it
     * in inst->direct. With reply (not NULL, got and len cleared): the
     * handler's first output that would go to the output queue, is a
     * reply to h and fits reply->cap goes there instead, got set.
     * rk_kernel_call, rk_kernel_call_reply. */
    int (*call)(rk__backend_inst *bi, const rk_msg_header *h,
        const void *payload, size_t len, struct rk_call_reply *reply);
} rk__backend;

/* ---- src/backend/ack.c: shared by backends */

/* wait_ack for a backend whose instance notifies ack (an eventcount) after
 * every acknowledgement it stores in ctl: waits until the ack is in mask
 * (EXITED always counts) or the deadline. RK_OK or RK_ETIMEDOUT. */
int rk__ack_wait(
    rk__ec *ack, const rk_ctl *ctl, uint32_t mask, uint64_t deadline);

/* ---- src/backend/registry.c */

/* The backend called name ("cpu", "cuda", or "auto"/NULL for the best
 * usable one). RK_OK with *out set, or RK_ENOTFOUND / RK_ENODEV /
 * RK_ENOTSUP with a detail naming the backends built in and why the one
 * asked for cannot run. */
int rk__backend_find(const char *name, const rk__backend **out);

/* As rk__backend_find, for a kernel whose code is described by code
 * (RK__CODE_*: host functions, device source, or both): "auto"/NULL takes
 * the first usable backend, best first, that runs one of them, so a kernel
 * with device source goes to a GPU where one is usable and to the CPU
 * otherwise, and a host-only kernel never lands on a device backend. */
int rk__backend_find_for(
    const char *name, uint32_t code, const rk__backend **out);

/* The backends built in, best first, NULL-terminated. */
extern const rk__backend *const rk__backends[];

#endif /* RK_SRC_BACKEND_H */
