/*
 * src/runtime/internal.h - the runtime's private structures.
 *
 * Object graph: an rk_runtime owns a fixed table of kernel slots
 * (rk__kernel, never freed before the runtime), each kernel owns its
 * current instance (rk__inst: control block, queues, backend instance,
 * counters) and the instances it ran before (kept until the runtime is
 * destroyed, so a thread still holding a stale pointer touches closed
 * queues, never freed memory). The runtime also owns the topic table and
 * the dead-letter queue.
 *
 * Locks, outermost first: rt->topics_lock (rwlock), k->lock (lifecycle of
 * one kernel), inst->out_lock (the output queue's single consumer),
 * rt->dlq_lock. No lock is held while calling an actor or handler.
 */
#ifndef RK_SRC_RUNTIME_INTERNAL_H
#define RK_SRC_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "backend/backend.h"
#include "common/common.h"
#include "ringkernel/message.h"
#include "ringkernel/queue.h"
#include "ringkernel/runtime.h"
#include "runtime/inq.h"
#include "runtime/outq.h"
#include "telemetry/histogram.h"
#include "telemetry/stats.h"

typedef struct rk__stash_item {
    struct rk__stash_item *next;
    size_t len;
    unsigned char frame[]; /* header + payload */
} rk__stash_item;

/*
 * One run of a kernel: its queues, its control block and the backend's
 * instance. The control block and the spill area are placed by the
 * backend (rk__backend.alloc); the rest is host memory.
 */
typedef struct rk__inst {
    struct rk__kernel *k;
    const rk__backend *be;
    rk__backend_inst *bi; /* be->inst_size bytes, runtime-allocated */
    rk_ctl *ctl;          /* ctl_mem.host */
    rk__placed ctl_mem;
    /* batch + 1 frames of stride bytes: frames the instance left
     * unprocessed at its exit (first left_n), then the fail slot. */
    rk__placed spill_mem;
    rk__inq in;
    rk__outq out;
    size_t slot_size; /* RK_MSG_HEADER_SIZE + max_payload */
    size_t stride;    /* slot_size rounded up to 64 */
    bool telemetry;

    _Atomic uint64_t start_ns; /* first activation, 0 before */

    /* The instance's wake-up: senders notify it after queueing, commands
     * through the backend's signal(). Its own line: read per send. */
    _Alignas(64) rk__ec wake;

    /* Counters written by senders and by the runtime (any thread). */
    _Alignas(64) rk__counter rejected; /* refused before the queue */
    rk__counter dead_lettered;
    rk__counter restarts;

    /* Latency (send -> start of processing), written by a CPU instance's
     * thread; a device backend's relay fills it from timestamps. */
    rk__hist latency;

    /* Supervision. faults_handled: faults whose failed frame was
     * dead-lettered (CAS: the supervisor and the reaper may race). The
     * rest belongs to the supervisor thread alone. */
    _Atomic uint32_t faults_handled;
    _Atomic uint32_t reaped; /* 1 once the ended instance was accounted */
    uint32_t restarts_done;
    int64_t backoff_ns;
    uint64_t restart_at; /* 0: no restart pending */
    uint32_t restart_fault;
    bool detached; /* never exited: its memory is left to its thread */

    /* Host side of the output queue (one consumer at a time). On its own
     * lines: the host writes them per receive, the kernel never. */
    _Alignas(64) pthread_mutex_t out_lock;
    _Atomic uint32_t out_waiters;
    rk__stash_item *stash_head, *stash_tail; /* under out_lock */

    _Alignas(64) struct rk__inst *retired_next;
} rk__inst;

typedef struct rk__kernel {
    char id[RK_ID_MAX + 1];
    uint32_t slot;
    rk_kernel_def def; /* def.id points at id */
    rk_runtime *rt;
    const rk__backend *be;  /* chosen at register */
    pthread_mutex_t lock;   /* serialises lifecycle operations */
    _Atomic uint32_t state; /* rk_kernel_state; changed only by CAS */
    _Atomic uint32_t gen;   /* bumped when an instance ends */
    _Atomic(rk__inst *) inst;
    _Atomic(struct rk__kernel *) route; /* rk_connect target or NULL */
    rk__inst *retired;                  /* earlier instances, under lock */
} rk__kernel;

typedef struct rk__topic {
    char name[RK_ID_MAX + 1];
    rk__kernel **subs;
    uint32_t nsubs, cap;
    rk__counter published, delivered, failed;
} rk__topic;

typedef struct rk__dead {
    rk_dead_letter dl;
    unsigned char *payload;
} rk__dead;

struct rk_runtime {
    rk_runtime_config cfg;
    const rk__backend *be; /* the default for kernels that name none */

    /* The supervisor thread (supervisor.c) waits on events; backends
     * notify it when an instance faults or exits. */
    rk__ec events;
    pthread_t supervisor;
    bool supervisor_started;
    _Atomic uint32_t stopping;

    pthread_mutex_t reg_lock; /* registration (slot allocation) */
    uint32_t nkernels;
    _Atomic(rk__kernel *) *slots;

    pthread_rwlock_t topics_lock;
    rk__topic *topics;
    uint32_t ntopics, topics_cap;

    pthread_mutex_t dlq_lock;
    pthread_cond_t dlq_cond;
    rk__dead *dlq; /* ring of dead_letter_capacity */
    uint32_t dlq_head, dlq_count;
    uint64_t dlq_overflow;
};

/* ---- registry.c */
rk__kernel *rk__kernel_by_id(rk_runtime *rt, const char *id);
int rk__not_found(rk_runtime *rt, const char *id);
/* The kernel and instance a handle names, or RK_ESTALE. */
int rk__resolve(rk_runtime *rt, rk_kernel h, rk__kernel **kp);
/* The kernel called id for a host operation, or NULL with *rc set. */
rk__kernel *rk__kernel_for_op(rk_runtime *rt, const char *id, int *rc);

static inline uint32_t
rk__state_of(rk__kernel *k)
{
    /* Acquire pairs with the CAS (acq_rel) of whoever changed it. */
    return atomic_load_explicit(&k->state, memory_order_acquire);
}

static inline bool
rk__cas_state(rk__kernel *k, uint32_t *from, uint32_t to)
{
    /* acq_rel: publishes the instance set up before the change and sees
     * the writes of whoever changed it before. */
    return atomic_compare_exchange_strong_explicit(
        &k->state, from, to, memory_order_acq_rel, memory_order_acquire);
}

/* ---- lifecycle.c */
/* Accounts for an instance that has EXITED: dead-letters its failed frame
 * and what it left, drains its input to the dead-letter queue, closes its
 * output, and moves the kernel to TERMINATED or FAILED with a new
 * generation. Idempotent; caller holds k->lock. */
void rk__reap(rk__kernel *k, rk__inst *inst);
/* Dead-letters the frame in inst's fail slot if fault number faults has
 * not been (CAS on faults_handled). */
void rk__fault_dead_letter(rk__inst *inst, uint32_t faults);
/* Frees an instance that has exited (or leaks a detached one on purpose,
 * see rk_runtime_destroy). */
void rk__inst_free(rk__inst *inst);

/* ---- supervisor.c */
int rk__supervisor_start(rk_runtime *rt);
void rk__supervisor_stop(rk_runtime *rt);

/* ---- deliver.c */
/* Puts one message (header h, payload) into k's input, applying the
 * state, type and backpressure rules. Updates k's counters. */
int rk__deliver(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns);

/* Whether sends to k carry a timestamp. */
static inline bool
rk__stamp(const rk__kernel *k)
{
    return !k->def.config.telemetry_off;
}

/* ---- ids.c */
/* Reserves up to want (>= 1) consecutive ids of this thread and returns
 * how many. They share *first but for its last 4 bytes, a big-endian
 * counter that is *seq for the first: id i of the run is *first with
 * rk__id_put(&id.b[12], *seq + i). Batch senders stamp a run per copy. */
uint32_t rk__id_run(uint32_t want, rk_uuid *first, uint32_t *seq);

/* Writes n frames at dst, stride bytes apart: *h with a fresh id each
 * (h->message_id is left as the last one's), then payload i, len bytes at
 * src + i * len. */
void rk__fill_frames(unsigned char *dst, size_t stride, rk_msg_header *h,
    const unsigned char *src, size_t len, size_t n);

static inline void
rk__id_put(uint8_t *low4, uint32_t n)
{
    low4[0] = (uint8_t)(n >> 24);
    low4[1] = (uint8_t)(n >> 16);
    low4[2] = (uint8_t)(n >> 8);
    low4[3] = (uint8_t)n;
}
/*
 * Message ids. rk_uuid_v7() costs a clock read and a random draw; the
 * runtime takes one every RK__ID_BLOCK ids per thread and numbers the
 * block in its low 32 (random) bits. The (time, counter) prefix of every
 * base is unique on its thread, so ids stay unique and increase on each
 * thread; across threads they are as unique as v7 counters seeded at
 * random. The state is per thread (no lock, no atomic); the common case
 * is inline, on every send's path.
 */
#define RK__ID_BLOCK 4096u

typedef struct rk__idgen {
    rk_uuid base;
    uint32_t next;
} rk__idgen;

/* Hidden: not part of the library's ABI, and a hidden TLS variable is
 * reached without a symbol lookup from inside the shared library. */
extern _Thread_local rk__idgen rk__id_gen
    __attribute__((visibility("hidden")));

/* Starts this thread's next block (out of line: once per RK__ID_BLOCK). */
void rk__id_refill(void);

/* A fresh message id. */
static inline rk_uuid
rk__next_id(void)
{
    rk_uuid u;

    if (rk__unlikely(rk__id_gen.next == RK__ID_BLOCK))
        rk__id_refill();
    u = rk__id_gen.base;
    rk__id_put(&u.b[12], rk__id_gen.next++);
    return u;
}

/* Fills a header for a new message. send_ns 0 leaves no timestamp. */
static inline void
rk__header(rk_msg_header *h, uint32_t type_id, uint8_t prio, uint64_t send_ns,
    uint32_t sender)
{
    memset(h, 0, sizeof(*h));
    h->magic = RK_MSG_MAGIC;
    h->version = RK_MSG_VERSION;
    h->priority = prio;
    h->type_id = type_id;
    h->message_id = rk__next_id();
    h->send_ns = send_ns;
    h->sender = sender;
}
void rk__dead_letter(rk_runtime *rt, rk__inst *inst, rk_dead_reason reason,
    int error, const void *frame, size_t len);
void rk__topics_remove_kernel(rk_runtime *rt, rk__kernel *k);
int rk__publish(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered);

#endif /* RK_SRC_RUNTIME_INTERNAL_H */
