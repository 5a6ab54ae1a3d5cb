/** @file
 * ringkernel/runtime.h - the ring-kernel runtime: kernels, lifecycle,
 * messaging, routing, supervision and per-kernel telemetry.
 *
 * A ring kernel is a persistent actor: an id, an actor function (or a
 * per-message handler) and a configuration. The runtime owns every kernel
 * and its queues; the host talks to kernels by id or through an
 * rk_kernel handle resolved once. docs/runtime.md has the lifecycle
 * transition table and the delivery guarantees.
 *
 * Ownership: the runtime copies every definition and id string it is given;
 * the caller keeps ownership of its own buffers. Received messages are copied
 * into caller buffers (host side) or into the kernel's context (actor side,
 * valid until that kernel's next receive).
 *
 * Threads: every rk_runtime_* and host-side call is thread-safe. rk_ctx_*
 * calls are for the kernel's own thread, with the rk_ctx it was given.
 */
#ifndef RINGKERNEL_RUNTIME_H
#define RINGKERNEL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringkernel/clock.h"
#include "ringkernel/error.h"
#include "ringkernel/message.h"
#include "ringkernel/queue.h"
#include "ringkernel/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque runtime; the caller owns it (rk_runtime_create,
 * rk_runtime_destroy). */
typedef struct rk_runtime rk_runtime;
/** A kernel's context, handed to its actor or handler by the runtime, which
 * owns it; valid only on that kernel's thread during the call. */
typedef struct rk_ctx rk_ctx;

/** Longest kernel id or topic name, in bytes, without the terminating NUL. */
#define RK_ID_MAX 63

/* ----------------------------------------------------------- lifecycle */

/**
 * CREATED -> LAUNCHED -> ACTIVE <-> DEACTIVATED -> TERMINATING -> TERMINATED,
 * and FAILED when supervision gives up. TERMINATED and FAILED kernels can be
 * launched again (a new instance). docs/runtime.md has the full table.
 */
typedef enum rk_kernel_state {
    RK_KERNEL_CREATED = 0,
    RK_KERNEL_LAUNCHED,
    RK_KERNEL_ACTIVE,
    RK_KERNEL_DEACTIVATED,
    RK_KERNEL_TERMINATING,
    RK_KERNEL_TERMINATED,
    RK_KERNEL_FAILED,
    RK__KERNEL_STATE_COUNT
} rk_kernel_state;

/** "ACTIVE" etc.; never NULL. */
const char *rk_kernel_state_name(rk_kernel_state s);

/**
 * A kernel handle: a small value resolved once from an id. It stays valid
 * while the kernel instance it was resolved for lives; once that instance
 * has ended (TERMINATED or FAILED) every call through the handle returns
 * RK_ESTALE. Handles are never dereferenced memory, so a stale one is safe.
 */
typedef struct rk_kernel {
    uint32_t slot; /**< index of the kernel's slot in the runtime */
    /** generation of the instance the handle was resolved for */
    uint32_t gen;
} rk_kernel;

/* ----------------------------------------------------------- definition */

/** What a send to a kernel that is LAUNCHED or DEACTIVATED (not ACTIVE)
 * does. */
typedef enum rk_inactive_policy {
    RK_INACTIVE_QUEUE = 0, /**< enqueue it; it is processed once active */
    RK_INACTIVE_REJECT     /**< refuse with RK_ENOTACTIVE (counted rejected) */
} rk_inactive_policy;

/** What happens when the actor returns an error or a handler fails. */
typedef enum rk_restart_policy {
    RK_SUPERVISE_STOP = 0, /**< first failure: the kernel goes FAILED */
    RK_SUPERVISE_RESTART   /**< restart up to max_restarts times, backoff */
} rk_restart_policy;

/** How a kernel's failures are handled; zeroed fields mean the defaults
 * shown. */
typedef struct rk_supervision {
    rk_restart_policy policy; /**< stop or restart (0: STOP) */
    uint32_t max_restarts;  /**< restarts allowed in all (0 with RESTART: 3) */
    int64_t backoff_ns;     /**< first backoff; doubles each time (0: 1 ms) */
    int64_t backoff_max_ns; /**< cap on the backoff (0: 1 s) */
} rk_supervision;

/**
 * Limits on a kernel's sizes. rk_runtime_register refuses a configuration
 * outside them with RK_EINVAL and a detail naming the field and its limit
 * (a queue's slot is the 64-byte header plus max_payload, rounded up to
 * the header's alignment).
 */
#define RK_KERNEL_MAX_CAPACITY    (UINT32_C(1) << 24) /**< queue slots */
#define RK_KERNEL_MAX_PAYLOAD     (UINT32_C(1) << 24) /**< bytes (16 MiB) */
#define RK_KERNEL_MAX_BATCH       UINT32_C(65536)     /**< per dequeue */
#define RK_KERNEL_MAX_QUEUE_BYTES (UINT64_C(1) << 30) /**< slots x slot size */
/** Limits on the runtime's own sizes (rk_runtime_create, same rules). */
#define RK_RUNTIME_MAX_KERNELS      UINT32_C(65536)
/** largest dead_letter_capacity */
#define RK_RUNTIME_MAX_DEAD_LETTERS (UINT32_C(1) << 20)

/**
 * A kernel's configuration. Zeroed fields take the defaults noted.
 * grid_size and block_size are for GPU backends; the CPU backend runs one
 * thread per kernel and refuses a launch with either above 1.
 */
typedef struct rk_kernel_config {
    const rk_msgtype *input_type;  /**< NULL: accept any type */
    const rk_msgtype *output_type; /**< NULL: any */
    uint32_t input_capacity;       /**< messages the input queue holds,
                                      any value up to
                                      RK_KERNEL_MAX_CAPACITY, held exactly
                                      (0: 1024; per band with bands) */
    uint32_t output_capacity;      /**< messages the output queue holds,
                                      as input_capacity (0: 1024) */
    uint32_t max_payload;          /**< largest payload in bytes (0: 192) */
    rk_backpressure backpressure;  /**< input queue policy (0: BLOCK) */
    bool priority_bands;           /**< input queue orders by priority band */
    bool single_producer; /**< promise: never two threads sending to this
                             kernel at once (host threads in turn, or one
                             upstream route); the input becomes an SPSC
                             lane (not with bands or DROP_OLDEST). A
                             concurrent second sender gets RK_EINVAL. */
    rk_inactive_policy when_inactive; /**< sends while not ACTIVE (0: QUEUE) */
    /** Messages taken from the input per dequeue, for actors and handlers
     * alike (0: 64). Priority bands order what is queued at each dequeue:
     * a SYSTEM message that arrives while a batch of NORMAL ones is being
     * handled comes out after that batch. batch 1 gives per-message band
     * order at the cost of one dequeue per message. */
    uint32_t batch;
    bool telemetry_off;  /**< skip clock reads and the latency histogram */
    uint32_t spin;       /**< receive spins before parking, at most: the
                            budget halves after a spin that ended in a park
                            and is restored by one that found input
                            (0: 2000) */
    uint32_t grid_size;  /**< GPU backend only */
    uint32_t block_size; /**< GPU backend only */
    /** cuda backend: the CUDA device ordinal that runs the kernel. 0: the
     * default, RK_CUDA_DEVICE's ordinal where it is set, else device 0
     * (so with RK_CUDA_DEVICE set, a kernel cannot name device 0 by 0).
     * A device the driver does not have fails the launch: RK_ENODEV (or
     * RK_EINVAL when negative), naming the kernel and the device count. */
    int device;
    /** cuda backend: the name of a barrier in device memory that this
     * kernel's blocks share with those of every kernel naming it (on the
     * same device); device code waits at it with rk_dev_kernel_barrier().
     * Placed at registration (register every such kernel before
     * launching the first). NULL: none. Not copied: it must outlive the
     * kernel. docs/cuda-programming.md, "One-shot kernels and barriers". */
    const char *device_barrier;
    /** The blocks that wait at device_barrier, across every kernel naming
     * it (each arrives once per round); every kernel naming it gives the
     * same number, and they must all be resident on the device together
     * (else the launch fails: RK_ENOTSUP). */
    uint32_t device_barrier_parties;
    rk_supervision supervision; /**< failure handling (0: STOP) */
    void *user; /**< handed to the actor as rk_ctx_user() */
    /** The backend that runs this kernel: "cpu", "cuda", "auto"; NULL: the
     * runtime's. Checked at register: an unknown or unusable backend is
     * an error naming the ones available and why. */
    const char *backend;
    /** Latency sampling: a sending thread stamps one send in
     * latency_sample, and more when it sends slowly: at each stamp it
     * takes its send rate over the stride just ended and makes the next
     * stride the sends that take 1 ms at that rate (at least 1, at most
     * latency_sample), so a thread whose sends come 1 ms or more apart
     * stamps every send. The kernel times exactly the stamped
     * messages (send -> dequeue), so an unstamped send and its handling
     * read no clock. 0: 16. 1: every message is timed, and then the
     * histogram's count equals the messages processed. */
    uint32_t latency_sample;
    /** The cuda backend's device code: the handler source in CUDA C (the
     * subset of docs/cuda-programming.md), compiled at launch with NVRTC together
     * with ringkernel/dev_kernel.h (cached on disk); device_entry names
     * the kernel its RK_DEV_KERNEL defines; device_source_name is the
     * file name compile errors cite (NULL: "<id>.cu"). The cpu backend
     * ignores them and runs actor/handler, so one definition can run on
     * either. The runtime does not copy the strings: they must outlive
     * the kernel. */
    const char *device_source;
    const char *device_entry; /**< see device_source */
    const char *device_source_name; /**< see device_source */
    /** PTX (NUL-terminated) to link with device_source: a handler that
     * Numba compiled with the C ABI (docs/cuda-programming.md, "Handlers in
     * Python").
     * device_source is then compiled as relocatable code and linked with
     * it by nvJitLink (or the driver's linker); the kernel cache keys both.
     * NULL: none. Not copied, like device_source. */
    const char *device_link_ptx;
    /** A handler on the cpu backend that also takes direct calls
     * (rk_kernel_call()): while its thread waits for input with none
     * queued, another thread may run the handler on one message itself,
     * with the kernel's own context, counters and output queue, one
     * thread at a time. Costs the kernel's thread an atomic exchange per
     * batch it takes (none when false). rk_request() on such a kernel
     * runs the handler this way when the kernel is idle (else it queues
     * the request as usual). An actor kernel may take direct calls too
     * if its definition also names a handler: the actor runs on the
     * kernel's thread, the handler only in direct calls, and only while
     * the actor waits for input with a timeout other than RK_NO_WAIT
     * (so it holds nothing it took before; the MPI cluster's proxies). */
    bool direct_calls;
    /** The cuda backend: slots of each block's input and output lane in
     * mapped memory, a power of two at least twice the batch a block
     * takes (min(batch, 64, what its shared memory stages)), so the host
     * refills a lane while the block works on a batch. 0: twice that
     * batch rounded up to a power of two, at least 16 while a lane stays
     * within 64 MiB. A value the device cannot hold is RK_EINVAL at
     * launch, naming both numbers. Other backends ignore it. */
    uint32_t lane_capacity;
    /** The cuda backend: the topics rk_dev_publish() names by index:
     * index i publishes to device_topics[i] (i < ndevice_topics), fanned
     * out by the relay as rk_publish() does (a subscriber applying BLOCK
     * holds the relay until it has room). A publish on an index with no
     * name is dead-lettered (RK_ENOTFOUND) and counted in the kernel's
     * errors. Each name is checked at register as a topic name. Not
     * copied, like device_source. */
    const char *const *device_topics;
    uint32_t ndevice_topics; /**< entries of device_topics (at most 65536) */
} rk_kernel_config;

/**
 * The actor style: the runtime calls actor once per activation on the
 * kernel's thread; it loops on rk_should_terminate() and rk_ctx_recv().
 * Returning RK_OK ends the kernel (TERMINATED); returning an error triggers
 * supervision.
 */
typedef int (*rk_actor_fn)(rk_ctx *ctx);

struct rk_msg_view;

/**
 * The handler style: the runtime dequeues in batches and calls handler once
 * per message. An error return sends that message to the dead-letter queue
 * and triggers supervision.
 */
typedef int (*rk_handler_fn)(rk_ctx *ctx, const struct rk_msg_view *msg);

/** A kernel definition. Exactly one of actor and handler is set, or both
 * with config.direct_calls (the handler then runs direct calls only). */
typedef struct rk_kernel_def {
    /** unique kernel id: 1 to RK_ID_MAX bytes of valid UTF-8 (else
     * RK_EINVAL naming the first bad byte); copied */
    const char *id;
    rk_actor_fn actor; /**< the actor style, or NULL */
    rk_handler_fn handler; /**< the handler style, or NULL */
    rk_kernel_config config; /**< sizes and policies (zeroed: defaults) */
} rk_kernel_def;

/* ------------------------------------------------------------- runtime */

/** A runtime's configuration (rk_runtime_create); zeroed fields mean the
 * defaults shown. */
typedef struct rk_runtime_config {
    uint32_t max_kernels;          /**< kernel slots (0: 256) */
    uint32_t dead_letter_capacity; /**< dead letters kept (0: 1024) */
    int64_t terminate_timeout_ns;  /**< used by destroy (0: 5 s) */
    int64_t control_timeout_ns;    /**< deactivate acknowledgement (0: 5 s) */
    bool no_static_kernels;        /**< skip RK_RING_KERNEL definitions */
    int64_t host_spin_ns; /**< host receives spin up to this long before
                             parking, adapting per kernel as a kernel's
                             spin does (0: 20 us; negative: never spin) */
    /** The default backend for kernels: "cpu", "cuda", or NULL/"auto" for
     * the best usable one (cuda where a GPU and its driver are present,
     * else cpu). An unknown or unusable name fails rk_runtime_create with
     * RK_ENOTFOUND or RK_ENODEV and a detail listing the backends built in
     * and why the one asked for cannot run. Read by rk_runtime_create
     * only: the string need not outlive the call. */
    const char *backend;
} rk_runtime_config;

/* ----------------------------------------------------------- listing */

/** The ids of the registered kernels, in registration order: up to cap of
 * them are copied into ids (NUL-terminated), and *n is set to how many
 * there are in all (which may exceed cap: call again with more room).
 * RK_EINVAL for a NULL rt or n, or NULL ids with cap > 0. */
int rk_runtime_kernel_ids(
    rk_runtime *rt, char (*ids)[RK_ID_MAX + 1], size_t cap, size_t *n);

/** The same for the topics that exist (a topic exists once something
 * subscribed to it). */
int rk_runtime_topic_names(
    rk_runtime *rt, char (*names)[RK_ID_MAX + 1], size_t cap, size_t *n);

/* ------------------------------------------------------------ backends */

/** The backends built in, best first ("cuda" before "cpu"): names
 * rk_backend_name(0) .. rk_backend_name(rk_backend_count() - 1); NULL
 * past the end. A built-in backend may still be unusable here. */
size_t rk_backend_count(void);
/** The name of built-in backend i, or NULL past the end (see
 * rk_backend_count()). */
const char *rk_backend_name(size_t i);

/** RK_OK if the backend called name (or "auto") can run kernels here;
 * otherwise RK_ENOTFOUND (not built in) or RK_ENODEV / RK_ENOTSUP with
 * rk_errdetail() naming the reason (no driver, no device, ...). */
int rk_backend_probe(const char *name);

/** Creates a runtime (cfg NULL or zeroed: defaults) and registers every
 * RK_RING_KERNEL definition linked into the program. */
int rk_runtime_create(rk_runtime **out, const rk_runtime_config *cfg);

/**
 * Terminates every kernel gracefully (each with terminate_timeout_ns),
 * then frees everything. Host calls in progress on other threads (sends,
 * receives, requests, publishes, dead-letter receives) are woken and
 * return RK_ECLOSED, RK_ETERMINATED or RK_EFAILED; destroy waits until
 * they have left before it frees anything, and calls made after it began
 * are refused with RK_ECLOSED. (Lifecycle calls, rk_kernel_wait included,
 * must not overlap destroy.) A kernel that still has not ended after its
 * queues were closed and a second timeout is stuck in its own code: its
 * thread is detached, destroy names it in rk_errdetail() and in the log
 * (rk_set_log) and leaves the runtime's memory to it (docs/runtime.md,
 * "Destroy"). On a runtime created before a fork(), in the child: nothing
 * (the child's copy stays allocated). Handles become meaningless. NULL is
 * a no-op.
 */
void rk_runtime_destroy(rk_runtime *rt);

/** Registers a kernel (state CREATED). The definition is copied. RK_EEXIST
 * for a duplicate id, RK_EINVAL for a bad definition. */
int rk_runtime_register(rk_runtime *rt, const rk_kernel_def *def);

/** Static registration, the C form of a \@ring_kernel decorator:
 *
 *     static int echo(rk_ctx *ctx) { ... }
 *     RK_RING_KERNEL(echo, "echo", .input_capacity = 256);
 *
 * defines the kernel "echo" with actor echo and the given config fields;
 * every runtime created afterwards registers it. RK_RING_HANDLER is the
 * same for a handler. */
typedef struct rk_static_kernel {
    const rk_kernel_def *def; /**< the definition registered */
    /** next node of the global list (set by rk_static_kernel_add) */
    struct rk_static_kernel *next;
} rk_static_kernel;

/** Adds a node to the global list (called by the macros at load time). */
void rk_static_kernel_add(rk_static_kernel *node);

#define RK__STATIC_KERNEL(fn, kid, field, ...)                                \
    static const rk_kernel_def rk__def_##fn                                   \
        = { .id = (kid), .field = (fn), .config = { __VA_ARGS__ } };          \
    static rk_static_kernel rk__node_##fn = { &rk__def_##fn, 0 };             \
    __attribute__((constructor)) static void rk__register_##fn(void)          \
    {                                                                         \
        rk_static_kernel_add(&rk__node_##fn);                                 \
    }                                                                         \
    struct rk__static_kernel_semicolon_##fn

/** Defines a static actor kernel: fn is the rk_actor_fn, kid the id, then
 * rk_kernel_config field initialisers (see rk_static_kernel). */
#define RK_RING_KERNEL(fn, kid, ...)                                          \
    RK__STATIC_KERNEL(fn, kid, actor, __VA_ARGS__)
/** RK_RING_KERNEL for a handler: fn is an rk_handler_fn. */
#define RK_RING_HANDLER(fn, kid, ...)                                         \
    RK__STATIC_KERNEL(fn, kid, handler, __VA_ARGS__)

/** Resolves id to a handle. RK_ENOTFOUND with rk_errdetail() listing the
 * ids that exist. */
int rk_kernel_lookup(rk_runtime *rt, const char *id, rk_kernel *out);

/** Lifecycle by id. Invalid transitions return RK_ENOTLAUNCHED, RK_EALREADY,
 * RK_ENOTACTIVE, RK_ETERMINATED or RK_EFAILED (see docs/runtime.md), with
 * a detail naming the state and the operation. */
int rk_kernel_launch(rk_runtime *rt, const char *id);
/** Activates a LAUNCHED or DEACTIVATED kernel: it starts processing its input
 * (same errors as rk_kernel_launch). */
int rk_kernel_activate(rk_runtime *rt, const char *id);
/** Pauses; returns once the kernel has stopped at a safe point (its next
 * receive or rk_should_terminate()), or RK_ETIMEDOUT after
 * control_timeout_ns (it is then DEACTIVATED and pauses when it gets
 * there). */
int rk_kernel_deactivate(rk_runtime *rt, const char *id);
/** Graceful stop: new sends are refused, queued input is still processed,
 * then the actor sees rk_should_terminate() and ends. Input left when the
 * kernel ends goes to the dead-letter queue (reason TERMINATED). Returns
 * RK_ETIMEDOUT if the kernel did not end in timeout_ns; it stays
 * TERMINATING and a later terminate call waits again. */
int rk_kernel_terminate(rk_runtime *rt, const char *id, int64_t timeout_ns);

/** Waits until the kernel's current instance has ended on its own or by
 * terminate (state TERMINATED or FAILED), without asking it to. RK_OK,
 * RK_ETIMEDOUT, RK_ENOTLAUNCHED. */
int rk_kernel_wait(rk_runtime *rt, const char *id, int64_t timeout_ns);

/** The kernel's current lifecycle state, into *out. RK_ENOTFOUND for an
 * unknown id. */
int rk_kernel_state_get(rk_runtime *rt, const char *id, rk_kernel_state *out);

/**
 * Closes kernel id to senders for good: from now on every send, request,
 * publish copy and route delivery into it (from the host or from a
 * kernel) is refused with err, an RK_E* code, and counted in its
 * rejected, with rk_errdetail() "<op> refused by kernel '<id>': <detail>"
 * (detail NULL: rk_strerror(err)). What was queued before stays queued
 * and the kernel runs on. Meant for kernels that stand for something
 * gone, e.g. the cluster's proxies of a rank that died (RK_EUNREACHABLE).
 * The first refusal stays: later calls change nothing and return RK_OK.
 * RK_EINVAL if err is not an RK_E* code, RK_ENOTFOUND for an unknown id.
 */
int rk_kernel_refuse(
    rk_runtime *rt, const char *id, int err, const char *detail);

/** The configuration kernel id was registered with, the runtime's
 * defaults filled in (capacity, payload limit, batch, spin), into *out.
 * Its pointers (user, types, backend) are the registrant's, borrowed.
 * RK_ENOTFOUND for an unknown id, RK_EINVAL for NULL out. */
int rk_kernel_config_get(
    rk_runtime *rt, const char *id, rk_kernel_config *out);

/* ------------------------------------------------------------ messages */

/** A received message as the actor sees it: header, payload and length.
 * Valid until the kernel's next receive. */
typedef struct rk_msg_view {
    const rk_msg_header *hdr; /**< the envelope */
    const void *data; /**< the payload (len bytes) */
    size_t len; /**< payload length in bytes */
} rk_msg_view;

/** Forwarding a message with its identity: as rk_send / rk_publish, but
 * the envelope is the caller's h (message id, correlation id, priority,
 * type id and version, flags are kept; magic, version, payload_len,
 * sender are set, and send_ns is stamped by the kernel's sampling). For
 * relays and bridges (the MPI cluster layer) that pass a message on
 * without changing it, so a reply still correlates with the original
 * request. Same admission, results and counting as rk_send. */
int rk_send_frame(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns);
/** rk_send_frame for a caller that keeps the message when a kernel with
 * policy RK_BP_BLOCK has no room: RK_EFULL (timeout_ns RK_NO_WAIT) or
 * RK_ETIMEDOUT (at the deadline) is returned without counting a refusal
 * in the kernel's rejected, because the message was not lost; the caller
 * delivers it later. Under the other policies, and for every other
 * refusal, it is rk_send_frame, counting included. For relays (the MPI
 * cluster layer tries a direct delivery, then queues the message behind
 * the full kernel, waiting for room in steps). */
int rk_send_frame_try(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns);
/**
 * @brief Runs kernel k's handler on one message on the calling thread, if
 * k is idle; otherwise leaves the message to the caller.
 *
 * For a kernel registered with config.direct_calls (a handler on the cpu
 * backend). Idle means: ACTIVE, its thread waiting for input (spinning or
 * parked) and nothing queued. Then the caller takes the kernel's context
 * for the duration of one handler call (the kernel's thread, should input
 * arrive meanwhile, waits for it), and the message is the kernel's like
 * any other: h's envelope kept as rk_send_frame keeps it, admission rules
 * (type, size, refusals) applied and counted, the call counted in
 * offered and processed, its latency sampled, and what the handler sends
 * or replies goes out through the kernel's output queue and routes. A
 * handler that fails hands the message back to the kernel's own thread,
 * which reports the fault and applies supervision as for a queued one
 * (the call still returns RK_OK: the message was accepted). Nothing is
 * queued and no thread is woken, so a relay (the MPI cluster layer's
 * progress thread) saves the two thread hand-offs of a request.
 *
 * Order: a call runs only while k's input is empty, so it never overtakes
 * a queued message.
 *
 * On the cuda backend (no config.direct_calls needed) the device runs the
 * handler as always: an idle kernel (its relay idle, its input empty, a
 * device lane with room) takes the message straight into a block's input
 * lane from the calling thread, which then polls the kernel's output
 * lanes for the answer itself (at most 100 ms; what it reads goes where
 * the kernel's output goes); rk_send, rk_send_frame, rk_send_batch and
 * rk_request take the same path when they can, all counted in
 * direct_calls (docs/cuda-data-path.md, "The caller's own path").
 * @return RK_OK (handled); RK_EBUSY (not idle now, or not ACTIVE:
 * nothing done, nothing counted; send the message instead, e.g. with
 * rk_send_frame, whose rules then apply); RK_ENOTSUP (k does not take
 * direct calls, or its backend cannot); the refusals of rk_send_frame's
 * admission (RK_ETYPE, RK_EMSGSIZE, a kernel closed by
 * rk_kernel_refuse), counted in rejected; RK_ESTALE, RK_EINVAL.
 */
int rk_kernel_call(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *payload, size_t len);

/** Where rk_kernel_call_reply() puts the handler's reply to the call. */
typedef struct rk_call_reply {
    void *buf;         /**< in: where the reply's payload goes */
    size_t cap;        /**< in: buf's size */
    rk_msg_header hdr; /**< out: the reply's header (when got) */
    size_t len;        /**< out: the reply's payload length (when got) */
    bool got;          /**< out: the handler replied during the call */
    /** in: the rk_now_ns() instant the caller stops waiting for the reply
     * (0: no limit), for a handler that waits for it itself (a forwarding
     * kernel: rk_ctx_call()). rk_request sets it from its timeout. */
    uint64_t deadline_ns;
} rk_call_reply;

/**
 * @brief rk_kernel_call(), handing the handler's reply straight back.
 *
 * While the handler runs on the calling thread, its first output that
 * would go to k's output queue and is a reply to h (its correlation id
 * is h's message id) is copied into reply instead, and reply->got is
 * set: no output queue, no rk_recv. The reply is the kernel's like any
 * other (counted in its sent messages); everything else the handler
 * sends goes where it always goes, and so does the reply when k is
 * connected to another kernel (rk_connect) or when it is bigger than
 * reply->cap (then it waits in the output queue, got stays false, and
 * nothing is lost). A relay answering remote requests (the MPI cluster
 * layer) saves the output queue's round trip and a lookup by id.
 * @return as rk_kernel_call(); RK_EINVAL for a NULL reply, or a NULL
 * reply->buf with a non-zero cap.
 */
int rk_kernel_call_reply(rk_runtime *rt, rk_kernel k, const rk_msg_header *h,
    const void *payload, size_t len, rk_call_reply *reply);
/** rk_publish with the envelope kept: delivers h and its payload to every
 * subscriber of topic (see rk_send_frame). */
int rk_publish_frame(rk_runtime *rt, const char *topic,
    const rk_msg_header *h, const void *payload, size_t len,
    int64_t timeout_ns, size_t *delivered);

/** Host -> kernel input. type_id is the payload's message type (0:
 * untyped); a kernel with an input_type refuses any other with RK_ETYPE.
 * The payload is copied. */
int rk_send(rk_runtime *rt, rk_kernel k, uint32_t type_id, const void *payload,
    size_t len, uint8_t priority, int64_t timeout_ns);

/** The same by id (one lookup per call). */
int rk_send_id(rk_runtime *rt, const char *id, uint32_t type_id,
    const void *payload, size_t len, uint8_t priority, int64_t timeout_ns);

/** Sends n payloads of len bytes each, laid out back to back at base, with
 * one wake-up at the end. *sent is how many went in (also on error). */
int rk_send_batch(rk_runtime *rt, rk_kernel k, uint32_t type_id,
    const void *base, size_t len, size_t n, uint8_t priority,
    int64_t timeout_ns, size_t *sent);

/** Host <- kernel output, oldest first. Copies the payload into buf (cap
 * bytes) and the header into *hdr (may be NULL); *len is the payload's
 * length. RK_ETIMEDOUT when nothing came; RK_EMSGSIZE when the payload is
 * longer than cap (*len says how long; the message stays first in line
 * for the next call); RK_ENOMEM when an output meant for a concurrent
 * rk_request could not be set aside (it stays queued). A plain receive
 * takes any output, including a reply a concurrent rk_request waits for:
 * give requests and plain receives of one kernel to one thread each.
 * Once the kernel's instance has ended (TERMINATED or FAILED) and its
 * output is drained: RK_ETERMINATED at once, also for a caller already
 * blocked (RK_WAIT_FOREVER included). The timeout holds while another
 * receiver has the output. RK_ECLOSED once rk_runtime_destroy has begun;
 * RK_EFORKED on a runtime created before a fork() (every host call). */
int rk_recv(rk_runtime *rt, rk_kernel k, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns);

/** The same by id (one lookup per call). */
int rk_recv_id(rk_runtime *rt, const char *id, rk_msg_header *hdr, void *buf,
    size_t cap, size_t *len, int64_t timeout_ns);

/**
 * @brief Waiting for a kernel's output from an event loop: arms the
 * output's eventfd for one wake-up.
 *
 * For a host that waits in epoll/poll (an asyncio loop's add_reader, say)
 * instead of a thread blocked in rk_recv. The protocol:
 * -# take what is there with rk_recv(..., RK_NO_WAIT) until RK_EEMPTY;
 * -# call rk_kernel_output_arm: RK_OK means armed, wait until *fd is
 *    readable; RK_EALREADY means output came meanwhile (or the output has
 *    ended, when rk_recv reports how): nothing is armed, go back to 1;
 * -# when *fd is readable, read(2) its 8 bytes (that resets it) and go
 *    back to 1.
 *
 * An armed eventfd is written once, by the kernel's first output after
 * the arm (a message entering the output queue) or by the end of its
 * instance, whichever comes first. No wake-up is lost between the check
 * in step 1 and the wait: the arm re-checks the output after arming, and
 * the kernel checks the arm after each output (src/runtime/outq.c says
 * why that suffices). A wake-up may be spurious (the output was taken by
 * another receiver, or it raced with the re-check): step 1 then finds
 * nothing. While nobody is armed the kernel never writes the eventfd: its
 * sends pay one load and a predicted branch.
 *
 * The eventfd belongs to k's current instance (a relaunch makes a new
 * one: compare *fd after each arm) and to the runtime, which closes it in
 * rk_runtime_destroy; the caller only reads it and polls it. Arms of
 * several threads are one arm: give a kernel's output to one event loop.
 *
 * @param fd receives the eventfd (may be NULL)
 * @return RK_OK (armed), RK_EALREADY (output there or ended: receive
 * now), RK_ENOTLAUNCHED, RK_ESTALE, RK_ECLOSED, RK_EFORKED, or
 * RK_ENOMEM/RK_EINTERNAL when eventfd(2) fails.
 */
int rk_kernel_output_arm(rk_runtime *rt, rk_kernel k, int *fd);

/** Sends a request and waits for the output message whose correlation id
 * equals the request's id. Other output that arrives meanwhile is kept for
 * later rk_recv calls. The request goes at RK_MSG_PRIORITY_DEFAULT. To a
 * kernel registered with config.direct_calls that is idle, the request is
 * a direct call (rk_kernel_call_reply() with the caller's buffer and
 * deadline) instead: the handler runs on the calling thread and its reply
 * comes back from the call (counted in the kernel's direct_calls); a
 * reply that does not fit or comes later is received from the output
 * queue as usual. */
int rk_request(rk_runtime *rt, rk_kernel k, uint32_t type_id, const void *req,
    size_t req_len, rk_msg_header *reply_hdr, void *reply, size_t cap,
    size_t *reply_len, int64_t timeout_ns);

/** The options of rk_request_opts. Start from RK_REQUEST_OPTIONS_INIT. */
typedef struct rk_request_options {
    uint32_t type_id;   /**< the request's message type (0: untyped) */
    uint8_t priority;   /**< the request's priority; rk_ctx_reply keeps it */
    int64_t timeout_ns; /**< for the send and the reply together */
} rk_request_options;

/** The default rk_request_options: untyped, default priority, no deadline. */
#define RK_REQUEST_OPTIONS_INIT                                               \
    {                                                                         \
        0, RK_MSG_PRIORITY_DEFAULT, RK_WAIT_FOREVER                           \
    }

/** rk_request with options (NULL: RK_REQUEST_OPTIONS_INIT). */
int rk_request_opts(rk_runtime *rt, rk_kernel k,
    const rk_request_options *opts, const void *req, size_t req_len,
    rk_msg_header *reply_hdr, void *reply, size_t cap, size_t *reply_len);

/* ------------------------------------------------- routing and topics */

/** Routes from's output into to's input: rk_ctx_send in from delivers to to
 * without passing through the host. The route belongs to the kernels (it
 * may be set before launch and survives relaunches). RK_ETYPE when from's
 * output type is not to's input type. rk_disconnect restores the output
 * queue the host reads. */
int rk_connect(rk_runtime *rt, const char *from, const char *to);
/** Removes from's route (rk_connect): its output goes back to the queue the
 * host reads. */
int rk_disconnect(rk_runtime *rt, const char *from);

/** Subscribes kernel kernel_id to topic: every rk_publish to topic delivers a
 * copy to its input. A topic name is 1 to RK_ID_MAX bytes of valid UTF-8
 * (else RK_EINVAL), as a kernel id is. */
int rk_subscribe(rk_runtime *rt, const char *kernel_id, const char *topic);
/** Ends a subscription made by rk_subscribe. */
int rk_unsubscribe(rk_runtime *rt, const char *kernel_id, const char *topic);

/** Delivers a copy to every subscriber; *delivered (may be NULL) counts the
 * copies that went in. RK_OK when every subscriber took it. */
int rk_publish(rk_runtime *rt, const char *topic, uint32_t type_id,
    const void *payload, size_t len, uint8_t priority, int64_t timeout_ns,
    size_t *delivered);

/** Counters of one topic; a caller-owned snapshot. */
typedef struct rk_topic_stats {
    uint64_t published;   /**< publish calls */
    uint64_t delivered;   /**< copies that went into a subscriber */
    uint64_t failed;      /**< copies a subscriber refused */
    uint32_t subscribers; /**< now */
} rk_topic_stats;

/** Fills *out with topic's counters. RK_ENOTFOUND for an unknown topic. */
int rk_topic_stats_get(rk_runtime *rt, const char *topic, rk_topic_stats *out);

/* ----------------------------------------------------- dead letters */

/** Why a message became a dead letter. */
typedef enum rk_dead_reason {
    RK_DEAD_FAILED = 1, /**< the message being handled when the kernel failed */
    RK_DEAD_TERMINATED, /**< still queued when the kernel terminated */
    RK_DEAD_ABANDONED   /**< still queued when supervision gave up */
} rk_dead_reason;

/** A message that could not be handled, as rk_dead_letter_recv returns it (the
 * payload goes to the caller's buffer). */
typedef struct rk_dead_letter {
    char kernel_id[RK_ID_MAX + 1]; /**< the kernel it was meant for */
    rk_dead_reason reason; /**< why it was not handled */
    int error; /**< the actor's or handler's error, else RK_OK */
    rk_msg_header hdr; /**< the message's envelope */
    size_t len; /**< payload length (the copy is cut to cap) */
} rk_dead_letter;

/** Takes the oldest dead letter. RK_ETIMEDOUT when there is none. */
int rk_dead_letter_recv(rk_runtime *rt, rk_dead_letter *out, void *buf,
    size_t cap, int64_t timeout_ns);

/* ----------------------------------------------------------- telemetry */

/** A kernel's statistics; a caller-owned snapshot. */
typedef struct rk_kernel_stats {
    rk_kernel_state state; /**< lifecycle state */
    uint64_t offered;       /**< sends attempted into the input */
    uint64_t processed;     /**< handled to completion */
    uint64_t dropped;       /**< dropped by the backpressure policy */
    uint64_t rejected;      /**< refused (backpressure, state, type) */
    uint64_t dead_lettered; /**< sent to the dead-letter queue */
    uint64_t pending;       /**< in the input queue or being handled */
    uint64_t errors;        /**< actor or handler failures */
    uint64_t restarts; /**< restarts done by supervision */
    uint64_t sent; /**< messages the kernel sent (any target) */
    uint64_t queue_depth; /**< messages in the input queue now */
    uint64_t queue_high_water; /**< largest input queue depth seen */
    uint64_t latency_count;  /**< latency samples (0 with telemetry off) */
    uint64_t latency_p50_ns; /**< send timestamp -> start of processing */
    uint64_t latency_p99_ns; /**< 99th percentile of the same */
    uint64_t latency_p999_ns; /**< 99.9th percentile of the same */
    uint64_t latency_max_ns; /**< largest of the same */
    uint64_t uptime_ns;   /**< since the first activation of the instance */
    double throughput;    /**< processed per second of uptime */
    uint64_t cpu_time_ns; /**< CPU time of the kernel thread (0: n/a) */
    uint64_t direct_calls;    /**< of offered and processed, direct calls
                                 (rk_kernel_call) run by their callers; on
                                 the cuda backend, every send, request and
                                 call the caller wrote into a device lane
                                 itself (the caller's own path) */
    uint64_t queue_capacity;  /**< input_capacity as configured: messages
                                 the input queue holds (per band with
                                 bands), not its ring's size */
    uint64_t output_capacity; /**< output_capacity as configured */
    /** Frames the kernel's host relay moved: one per frame it wrote to a
     * device lane, one per frame it handed from a lane to the runtime
     * (the cuda backend; 0 elsewhere). A send or call that took the
     * caller's own path (counted in direct_calls) and whose answer the
     * caller read from the lanes itself costs none. */
    uint64_t relay_handoffs;
} rk_kernel_stats;

/** A consistent-enough snapshot (counters are read one by one, relaxed). */
int rk_kernel_stats_get(rk_runtime *rt, const char *id, rk_kernel_stats *out);

/** The same figures as a telemetry snapshot (counters under their
 * descriptor names plus the "latency_ns" summary), for rk_stats_print()
 * and rk_stats_format_json(). */
int rk_kernel_telemetry(rk_runtime *rt, const char *id, rk_stats *out);

/* ---------------------------------------------------------- actor side */

/** True once terminate was requested and the input queue is empty. Also a
 * safe point: a deactivated kernel parks here until reactivated. */
bool rk_should_terminate(rk_ctx *ctx);

/** Takes the next input message (spinning briefly, then parking). Actor
 * style only (RK_EINVAL from a handler, whose messages the runtime takes).
 * RK_ETIMEDOUT: nothing came; RK_ECLOSED: terminating and drained. The
 * view is valid until the next rk_ctx_recv. */
int rk_ctx_recv(rk_ctx *ctx, rk_msg_view *out, int64_t timeout_ns);

/** To the kernel's output: its connected kernel if rk_connect routed it,
 * else the output queue the host reads. */
int rk_ctx_send(
    rk_ctx *ctx, uint32_t type_id, const void *payload, size_t len);

/** Like rk_ctx_send, with the correlation id set to req's id and the
 * request's priority. Only req->hdr is read: a kernel may reply later,
 * after further receives, from a copy of the request's header
 * (rk_msg_view later = { .hdr = &copy }). */
int rk_ctx_reply(rk_ctx *ctx, const rk_msg_view *req, uint32_t type_id,
    const void *payload, size_t len);

/** Answers req with an error: a reply of type RK_MSG_TYPE_ERROR whose
 * payload is err (little-endian int32) and detail (NULL: none), so that
 * the rk_request waiting for it returns err with detail as
 * rk_errdetail(); the detail is cut to 256 bytes and to the kernel's
 * max_payload. Allowed whatever the kernel's output_type. RK_EINVAL if
 * err is not an RK_E* code, RK_EMSGSIZE if max_payload is under 4. */
int rk_ctx_reply_error(
    rk_ctx *ctx, const rk_msg_view *req, int err, const char *detail);

/** Kernel-to-kernel: into target's input. */
int rk_ctx_send_to(rk_ctx *ctx, rk_kernel target, uint32_t type_id,
    const void *payload, size_t len);

/** To every subscriber of topic; the fan-out is counted in the topic's
 * stats and in this kernel's messages_sent. */
int rk_ctx_publish(rk_ctx *ctx, const char *topic, uint32_t type_id,
    const void *payload, size_t len);

/**
 * Priority of what this kernel sends from now on (rk_ctx_send, send_to,
 * publish; rk_ctx_reply always answers at the request's priority).
 * RK_CTX_PRIORITY_INHERIT, the default, gives each message the priority of
 * the input message being handled (RK_MSG_PRIORITY_DEFAULT when none is).
 * RK_EINVAL for a value outside 0..255 and RK_CTX_PRIORITY_INHERIT.
 */
#define RK_CTX_PRIORITY_INHERIT (-1)
/** Sets the priority of what this kernel sends from now on (see
 * RK_CTX_PRIORITY_INHERIT). */
int rk_ctx_set_priority(rk_ctx *ctx, int priority);

/** The kernel's rk_kernel_config.user pointer (the caller's; never touched by
 * the runtime). */
void *rk_ctx_user(rk_ctx *ctx);
/** The kernel's id; owned by the runtime, valid while the kernel exists. */
const char *rk_ctx_kernel_id(rk_ctx *ctx);
/** In a handler run by a direct call with a reply buffer (rk_request on a
 * direct_calls kernel, rk_kernel_call_reply): the caller's rk_call_reply,
 * whose cap and deadline_ns a forwarding handler (the MPI cluster's
 * proxies) reads to wait for a reply from elsewhere; NULL otherwise. */
const rk_call_reply *rk_ctx_call(rk_ctx *ctx);
/** The runtime the kernel belongs to (borrowed). */
rk_runtime *rk_ctx_runtime(rk_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RINGKERNEL_RUNTIME_H */
