/*
 * src/backend/backend.h - the contract between the runtime and a backend.
 *
 * The runtime decides: the registry, the lifecycle state machine, the
 * host-side queues and their policies, where every message goes (routes,
 * topics, the output queue, dead letters), supervision (restart, backoff,
 * give up) and telemetry aggregation. A backend executes and places: it
 * says whether it can run here, allocates the memory an instance shares
 * with the host, starts the instance, and the instance runs the kernel's
 * code over what the runtime hands it at launch (rk__backend_io: take and
 * release input, emit and publish output, dead-letter) and reports through
 * its control block. docs/backend.md describes each entry and shows a
 * skeleton; adding a backend is one folder and one line in registry.c.
 *
 * Rules every backend follows (as nng's transports do):
 *   - Calls run one way. A backend includes no runtime header (only this
 *     contract and the layers below the runtime: common, queue, message,
 *     telemetry, device, memory) and calls nothing of the runtime but the
 *     rk__backend_io it is handed. It never decides where a message goes
 *     and never calls the lifecycle or supervision. An instance reports
 *     only through its control block (ringkernel/ctl_proto.h: acks, exit
 *     code, the failed frame, frames left unprocessed) and by notifying
 *     the eventcounts the launch spec gives it.
 *   - The runtime allocates the backend's private instance state
 *     (`inst_size` bytes, zeroed, 64-byte aligned) and frees it after
 *     destroy; a backend keeps everything else it creates behind it.
 *   - Shared memory (control block, device-facing rings, spill area) comes
 *     from `alloc` and goes back through `release`; the core never assumes
 *     it is malloc memory.
 *   - The runtime posts commands and verdicts in the control block and
 *     notifies the instance's wake eventcount; it waits for
 *     acknowledgements on the ack eventcount, which the instance notifies
 *     after each one it stores (so neither needs a backend entry).
 *   - Serialisation: for one instance, launch and destroy are called under
 *     that kernel's lifecycle lock; signal, cpu_time and call may come from
 *     any host thread between launch and destroy. probe, check, alloc and
 *     release may be called from any thread at any time.
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
#include "ringkernel/runtime.h"

/* Bump when an entry's meaning, the launch spec or the control block's
 * layout changes; a backend built for another version is refused. */
#define RK__BACKEND_ABI 11

struct rk_call_reply; /* ringkernel/runtime.h: rk_kernel_call_reply */
struct rk_kernel_config; /* ringkernel/runtime.h */
struct rk__inbox_batch; /* a batch taken from an inbox (queue/inbox.h) */
struct rk__hist;      /* telemetry/histogram.h */
struct rk_oneshot_def; /* ringkernel/oneshot.h */
struct rk_oneshot_launch; /* ringkernel/oneshot.h */

/* A piece of memory the backend placed: host address (always usable by
 * the host) and the instance's address for it (0 where the instance uses
 * the host address, as a CPU thread does). */
typedef struct rk__placed {
    void *host;
    uint64_t dev;
    size_t size;
} rk__placed;

/* The runtime's side of one instance, opaque to a backend: the argument
 * of every output call below. */
typedef struct rk__io rk__io;

/*
 * What an instance may read and call of the runtime: handed over at
 * launch, constant until destroy. This is the whole of the runtime a
 * backend sees. It takes input from the kernel's inbox (take, then
 * release what it took; depth for "is there more"), and hands every
 * message the instance produces to emit or publish; the runtime decides
 * where it goes (an rk_connect route, the output queue, a direct call's
 * reply buffer) and refuses what breaks the kernel's rules. A frame the
 * instance can neither process nor hand back to a caller goes to
 * dead_letter, so nothing it accepted is lost uncounted.
 */
typedef struct rk__backend_io {
    /* What the instance runs: actor or handler, and the configuration
     * (batch, spin, direct_calls, device_source, ...). */
    const rk_kernel_def *def;
    uint32_t sender;  /* the kernel's sender id in headers (slot + 1) */
    size_t slot_size; /* RK_MSG_HEADER_SIZE + max_payload */
    size_t stride;    /* slot_size rounded up to 64: one frame's room */
    /* The spill area (host address): def->config.batch frames of stride
     * bytes, then the fail slot. An instance leaves the frames it did not
     * process there at its exit (rk_ctl_exit's left_n) and the frame that
     * failed in the fail slot (rk_ctl_fault); the runtime dead-letters
     * both. */
    unsigned char *spill;
    bool telemetry;          /* telemetry is on for this kernel */
    struct rk__hist *latency; /* send -> dequeue; the instance writes it
                                 (single writer: rk__hist_record_n) */

    /* Input: the kernel's inbox (queue/inbox.h) and its consumer's
     * operations, called with in as the first argument. The instance is
     * its single consumer: results and rules as rk__inbox_ops's take,
     * release and depth. */
    void *in;
    int (*take)(void *in, size_t max, struct rk__inbox_batch *out);
    void (*release)(void *in, size_t n);
    size_t (*depth)(void *in);

    /* Output. emit: one message the instance sends (h complete, stamped,
     * h->payload_len == len); RK_OK once it is queued where the runtime
     * sends it, else an RK_E* code with a detail, nothing queued (the
     * instance counts its sends in rk_ctl, as it counts what it
     * processed). A route's target applies its own
     * admission and backpressure (it waits on BLOCK); over max_payload is
     * RK_EMSGSIZE. publish: the same to every subscriber of topic
     * (*delivered: how many took it). dead_letter: a frame the instance
     * gives up on (reason, RK_E* error). Any of the instance's threads;
     * never under a lock the runtime may want. */
    rk__io *rt;
    int (*emit)(
        rk__io *rt, const rk_msg_header *h, const void *payload, size_t len);
    /* emit_wait: emit, for an instance that keeps the message and tries
     * again when a route's target (or the instance's own output queue)
     * has no room: under the target's BLOCK policy, and on a full output
     * queue, it waits at most timeout_ns (RK_NO_WAIT: not at all) and
     * then returns RK_EFULL or RK_ETIMEDOUT, nothing queued and nothing
     * counted as rejected; the target's other policies (DROP_*, REJECT)
     * apply as for emit. A device relay uses it, so that it never waits
     * forever on one message while its device and its commands wait. */
    int (*emit_wait)(rk__io *rt, const rk_msg_header *h, const void *payload,
        size_t len, int64_t timeout_ns);
    /* emit_call: emit_wait with RK_NO_WAIT, for output that a direct
     * call's caller reads from a device instance's lanes: the reply to
     * the call (correlation id *call_id) goes to reply when it fits (got
     * set), as a host direct call's reply does; everything else as
     * emit_wait. reply may be NULL (emit_wait, RK_NO_WAIT). */
    int (*emit_call)(rk__io *rt, struct rk_call_reply *reply,
        const rk_uuid *call_id, const rk_msg_header *h, const void *payload,
        size_t len);
    int (*publish)(rk__io *rt, const char *topic, const rk_msg_header *h,
        const void *payload, size_t len, size_t *delivered);
    /* publish_device: a device instance's publish on its topic index
     * `index` (def->config.device_topics[index]; RK_ENOTFOUND with a
     * detail when it names none), fanned out by the runtime to the
     * topic's subscribers but those the instance reached itself: bit j of
     * carried (the frame is in their lane) or dropped (their lane was
     * full and their policy drops: counted as dropped) names the launch
     * spec's topic_out[j]. RK_OK or the first delivery's error. */
    int (*publish_device)(rk__io *rt, uint32_t index, const rk_msg_header *h,
        const void *payload, size_t len, uint32_t carried, uint32_t dropped);
    /* topic_device: n more publishes of the instance were carried wholly
     * on the device (no relay frame) and went on the lane of the launch
     * spec's topic_out[bit]: counted in that topic's statistics
     * (published once per publish, delivered once per lane). */
    void (*topic_device)(rk__io *rt, uint32_t bit, uint64_t n);
    void (*dead_letter)(rk__io *rt, rk_dead_reason reason, int error,
        const void *frame, size_t len);
} rk__backend_io;

/*
 * The actor's context (the public rk_ctx), for backends that run host
 * code. The runtime places it with the instance and implements the
 * rk_ctx_* calls over it (runtime/actor.c); the backend running the actor
 * fills ops and be at launch, and keeps cur (and, during a direct call,
 * capture) current. Only the thread running the actor or handler (or a
 * direct call's caller, while it holds the instance) touches it.
 */
typedef struct rk__ctx_ops {
    /* rk_ctx_recv and rk_should_terminate, as documented in runtime.h
     * (the runtime has checked ctx, out and that the kernel is an
     * actor). */
    int (*recv)(rk_ctx *ctx, rk_msg_view *out, int64_t timeout_ns);
    bool (*should_terminate)(rk_ctx *ctx);
} rk__ctx_ops;

struct rk_ctx {
    /* The backend's. */
    const rk__ctx_ops *ops;
    void *be;                   /* the backend's state for ops */
    const rk_msg_header *cur;   /* the message in flight, or NULL */
    bool in_handler;            /* the backend runs the receive loop */
    /* During a direct call with a reply buffer (rk_kernel_call_reply):
     * the reply to the message with id capture_id goes there instead of
     * the output queue. NULL otherwise. */
    struct rk_call_reply *capture;
    rk_uuid capture_id;
    /* The runtime's. */
    const rk__backend_io *io;
    rk__io *rt;
    void *user;   /* def.config.user */
    int priority; /* rk_ctx_set_priority; RK_CTX_PRIORITY_INHERIT */
};

/* Another kernel on the same backend that an rk_connect route joins to
 * the one launched (rk__backend_launch.route_to, routes_in). */
typedef struct rk__backend_peer {
    const char *kernel_id;
    const struct rk_kernel_config *config;
} rk__backend_peer;

#define RK__ROUTES_IN_MAX 8 /* routes_in entries the runtime hands over */

/* A device topic subscription between the kernel launched and a peer on
 * the same backend (rk__backend_launch.topic_out, topic_in): the peer
 * subscribes to the publisher's device_topics[index]; drop: the
 * subscriber's backpressure policy is not BLOCK. */
typedef struct rk__backend_topic {
    uint32_t index;
    int drop;
    rk__backend_peer peer;
} rk__backend_topic;

#define RK__TOPIC_OUT_MAX 8 /* topic_out entries (bits of a carried mask) */
#define RK__TOPIC_IN_MAX  8 /* topic_in entries */
#define RK__TOPIC_BITS    32 /* topic indices topic_relay has a bit for */

/* What launch() needs to start an instance. Everything here outlives the
 * instance (the runtime frees it after destroy). */
typedef struct rk__backend_launch {
    const char *kernel_id;
    rk__placed ctl; /* an rk_ctl, initialised (HOLD) by the runtime */
    /* The instance's wake-up eventcount: senders notify it after queueing
     * input, and so does the runtime after posting a command or a verdict
     * (a backend that must do more sets signal). A CPU body parks on it;
     * a device relay polls and parks on it when idle. Host memory. */
    rk__ec *wake;
    /* Notified (all) by the instance after every acknowledgement it
     * stores in ctl: the runtime's wait_ack parks here. Host memory. */
    rk__ec *ack;
    /* Notified (all) by the backend after every FAULTED or EXITED
     * acknowledgement, so the runtime's supervisor wakes. Host memory. */
    rk__ec *events;
    uint32_t grid_size, block_size; /* 0: the backend's default */
    /* The runtime's side: the instance's input, output and sizes. */
    const rk__backend_io *io;
    /* The actor's context (host-code backends; the runtime set io, rt,
     * user and priority). */
    rk_ctx *ctx;
    /* rk_connect routes as they stand at launch between this kernel and
     * kernels on the same backend: its own route's target (kernel_id
     * NULL: none), and the kernels whose route is this one (in
     * registration order, at most RK__ROUTES_IN_MAX). A backend that can
     * carry such a route itself (cuda: K2K lanes in device memory) may
     * wire it, and then the instance's output on it never reaches emit;
     * others ignore these. */
    rk__backend_peer route_to;
    rk__backend_peer routes_in[RK__ROUTES_IN_MAX];
    uint32_t nroutes_in;
    /* Device topics as they stand at launch (docs/cuda-k2k.md): the
     * subscribers, on the same backend, with device code and a matching
     * input type, of the topics this kernel's device code publishes on
     * (topic_out: a backend that carries a publish to one itself sets
     * its bit in io->publish_device's masks); bit i of topic_relay: the
     * topic of index i had other subscribers (or none at all), so its
     * publishes must reach the runtime too. topic_in: the kernels whose
     * device code publishes on a topic this kernel subscribes to. */
    rk__backend_topic topic_out[RK__TOPIC_OUT_MAX];
    uint32_t ntopic_out;
    uint32_t topic_relay;
    rk__backend_topic topic_in[RK__TOPIC_IN_MAX];
    uint32_t ntopic_in;
} rk__backend_launch;

typedef struct rk__backend_inst rk__backend_inst; /* backend-private */

/* What code a backend runs (rk__backend.code). */
#define RK__CODE_HOST   1u /* C actor and handler functions */
#define RK__CODE_DEVICE 2u /* rk_kernel_config.device_source */

/* A one-shot kernel as a backend sees it (ringkernel/oneshot.h): the
 * definition the runtime checked and copied (def->name set, entry set),
 * and be, the backend's state for it (exec_load sets it, exec_unload
 * frees it). The runtime owns the struct. */
typedef struct rk__exec_kernel {
    const struct rk_oneshot_def *def;
    void *be;
    int ordinal; /* the CUDA device it runs on (exec_load sets it), or -1 */
} rk__exec_kernel;

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

    /* Optional (NULL: the runtime's notify of wake is enough). A
     * host-written word of the control block changed (a command or a
     * verdict) and wake was notified: do whatever else makes the
     * instance see it soon. Returns at once. */
    void (*signal)(rk__backend_inst *bi);

    /* Optional (NULL: unknown). CPU time the instance has consumed, in
     * ns, while it runs (0 once EXITED or when unknown). */
    uint64_t (*cpu_time)(rk__backend_inst *bi);

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
     * otherwise. The runtime admitted the message and counts a call that
     * returned RK_OK. With reply (not NULL, got and len cleared): the
     * handler's first output that would go to the output queue, is a
     * reply to h and fits reply->cap goes there instead, got set.
     * rk_kernel_call, rk_kernel_call_reply. */
    int (*call)(rk__backend_inst *bi, const rk_msg_header *h,
        const void *payload, size_t len, struct rk_call_reply *reply);

    /*
     * The caller's own path into a device instance (all optional; the
     * cuda backend has them). The runtime decides when to try them: on a
     * host send to an ACTIVE kernel, after admission. A backend with
     * `send` also runs `call` as the device twin of a direct call: it
     * writes the message into the instance's input lane and polls the
     * instance's output lanes for the reply itself (bounded; what it
     * reads goes to io->emit_call), so the runtime takes direct calls to
     * it without config.direct_calls.
     *
     * send: writes one admitted, stamped message straight into an input
     * lane on the calling thread when the instance is idle (running, its
     * relay holding nothing of the lanes, the inbox empty: nothing queued
     * ahead of it, so per-sender order holds) and a lane has room:
     * RK_OK (the runtime counts it in `direct`); RK_EBUSY with nothing
     * done (the runtime queues it as usual); RK_ECLOSED once the
     * instance is ending (nothing done; the runtime refuses the send).
     *
     * send_batch: rk_send_batch's frames the same way, as many as the
     * lanes take now: frame(arg, i, &h, &payload) gives frame i (its own
     * fresh id); *done is how many were written (the first *done of n);
     * RK_OK, RK_EBUSY (none), RK_ECLOSED (none).
     *
     * pull: a host receiver found the output queue empty: moves up to max
     * frames from the instance's output lanes to the runtime
     * (io->emit_wait, RK_NO_WAIT) on the calling thread when the relay
     * holds nothing of the lanes; returns how many.
     *
     * relayed: frames the instance's host relay moved so far (one per
     * frame it wrote to a lane, one per frame it handed to the runtime):
     * the relay hand-offs of docs/cuda-data-path.md's PCIe accounting.
     */
    int (*send)(rk__backend_inst *bi, const rk_msg_header *h,
        const void *payload, size_t len);
    int (*send_batch)(rk__backend_inst *bi, size_t n,
        void (*frame)(
            void *arg, size_t i, rk_msg_header *h, const void **payload),
        void *arg, size_t *done);
    size_t (*pull)(rk__backend_inst *bi, size_t max);
    uint64_t (*relayed)(rk__backend_inst *bi);

    /* Optional (NULL: never). True while the instance's own rk_connect
     * route (route_to at its launch) is carried by the backend itself
     * (cuda: the sender's K2K lanes are wired to its running target), so
     * that unwiring it would leave the instance writing its target's
     * lanes: the runtime then refuses rk_disconnect (RK_EBUSY). A report,
     * any host thread. */
    int (*route_live)(rk__backend_inst *bi);

    /* One-shot kernels (ringkernel/oneshot.h). All three optional; exec
     * NULL: the backend runs none (rk_oneshot_create: RK_ENOTSUP).
     * exec_load: the kernel was defined on this backend: get it ready
     * (the cuda backend compiles and loads it now, RK_EBUSY while
     * persistent kernels are resident and it is not loaded). exec: runs
     * one launch (the runtime checked its sizes) to completion on the
     * calling thread, RK_OK or an RK_E* code with a detail naming the
     * kernel; any thread, concurrently. exec_unload: releases be, once no
     * launch runs. */
    int (*exec_load)(rk__exec_kernel *k);
    int (*exec)(rk__exec_kernel *k, const struct rk_oneshot_launch *l);
    void (*exec_unload)(rk__exec_kernel *k);
} rk__backend;

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
