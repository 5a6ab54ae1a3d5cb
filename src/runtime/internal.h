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
 * one kernel; the supervisor only try-locks it), inst->out_busy (the
 * output queue's single consumer: a flag with an eventcount, so a waiter
 * keeps its own deadline), rt->dlq_lock. No lock is held while calling an
 * actor or handler.
 *
 * Host calls that may block (sends, receives, requests, publishes,
 * dead-letter receives, rk_kernel_wait) run between rk__call_enter and
 * rk__call_leave, so that rk_runtime_destroy can refuse new ones, wake
 * the blocked ones and wait until every one has left before it frees.
 */
#ifndef RK_SRC_RUNTIME_INTERNAL_H
#define RK_SRC_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "backend/backend.h"
#include "common/common.h"
#include "queue/inbox.h"
#include "ringkernel/message.h"
#include "ringkernel/queue.h"
#include "ringkernel/runtime.h"
#include "runtime/ids.h"
#include "runtime/outq.h"
#include "runtime/stamp.h"
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
    rk__placed in_mem;  /* the inbox's placed part (none: DROP_OLDEST) */
    rk__placed out_mem; /* the output ring */
    rk__inbox *in; /* the input queue (queue/inbox.h) */
    rk__outq out;
    size_t slot_size; /* RK_MSG_HEADER_SIZE + max_payload */
    size_t stride;    /* slot_size rounded up to 64 */
    bool telemetry;

    _Atomic uint64_t start_ns; /* first activation, 0 before */

    /* What the backend is handed at launch (actor.c, rk__io_init): the
     * instance's input, output and sizes. Constant while it runs. */
    rk__backend_io io;

    /* The instance's wake-up: senders notify it after queueing, the
     * runtime after posting a command or verdict. Its own line: read per
     * send. */
    _Alignas(64) rk__ec wake;
    /* Notified by the instance after every acknowledgement it stores:
     * lifecycle calls and the supervisor wait here (rk__ack_wait). */
    _Alignas(64) rk__ec ack;

    /* The actor's context, for host-code backends: the kernel's thread
     * (or a direct call's caller) writes it per message. */
    _Alignas(64) rk_ctx ctx;

    /* Counters written by senders and by the runtime (any thread). */
    _Alignas(64) rk__counter rejected; /* refused before the queue */
    rk__counter dead_lettered;
    rk__counter direct; /* direct calls handled (rk_kernel_call) */
    rk__counter restarts;
    /* Publishes dropped for this kernel on a device topic lane (its
     * policy is not BLOCK and the lane was full): counted in dropped. */
    rk__counter lane_dropped;

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
    uint32_t answered; /* the last fault a verdict was posted for */
    /* Never exited: its memory is left to its thread. Atomic: destroy
     * sets it while the supervisor thread may be looking at it. */
    atomic_bool detached;

    /* Host side of the output queue (one consumer at a time). On its own
     * lines: the host writes them per receive, the kernel never.
     * out_busy is the consumer's lock (1: held); out_free is notified
     * when it is let go; out_waiters counts receivers waiting for it, so
     * the holder waits in slices while others want to look. */
    _Alignas(64) _Atomic uint32_t out_busy;
    _Atomic uint32_t out_waiters;
    rk__ec out_free;
    rk__stash_item *stash_head, *stash_tail; /* under out_busy */

    /* Device topics: the subscribers handed to the backend at launch
     * (rk__backend_launch.topic_out), bit j of a device publish's masks
     * naming topic_out[j]. Constant while the instance runs. */
    struct rk__kernel *topic_out[RK__TOPIC_OUT_MAX];
    uint32_t topic_out_index[RK__TOPIC_OUT_MAX]; /* its device topic */
    uint32_t ntopic_out;

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
    /* rk_kernel_refuse: 0, or the RK_E* code admission refuses every send
     * with. Set once, under lock; refuse_detail is written before the
     * release store and never after. */
    _Atomic int32_t refuse_err;
    char refuse_detail[160];
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

/* Host calls in flight. The first RK__CALL_SLOTS threads that call into
 * any runtime get a slot of their own in each runtime (one writer: plain
 * load and store, no read-modify-write on the hot path); later threads
 * share RK__CALL_SHARDS counters with atomic adds. See rk__call_enter. */
#define RK__CALL_SLOTS  128
#define RK__CALL_SHARDS 16

typedef struct rk__call_shard {
    _Alignas(64) _Atomic uint64_t n;
} rk__call_shard;

struct rk_runtime {
    rk_runtime_config cfg;
    /* Process fork generation at create: a forked child (another
     * generation) gets RK_EFORKED from every host call. */
    uint32_t fork_gen;
    /* rk_runtime_destroy has begun: new host calls are refused. */
    _Atomic uint32_t closing;
    rk__call_shard call_slots[RK__CALL_SLOTS]; /* one writer each */
    rk__call_shard calls[RK__CALL_SHARDS];     /* shared: atomic adds */
    rk__ec calls_ec; /* notified when a host call leaves */
    const rk__backend *be; /* cfg.backend, checked at create (kernels pick
                              theirs at register: rk__backend_find_for) */

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

/* ---- calls.c */
/* Enters a host call op of rt: RK_OK, or RK_EINVAL (rt NULL), RK_EFORKED
 * (a forked child's copy), RK_ECLOSED (destroy has begun) with a detail
 * naming op. A call that entered calls rk__call_leave exactly once, after
 * its last use of the runtime's memory. */
int rk__call_enter(rk_runtime *rt, const char *op);
void rk__call_leave(rk_runtime *rt);
/* RK_EFORKED (with a detail naming op) if rt was created by the parent of
 * this forked process, else RK_OK. */
int rk__fork_check(const rk_runtime *rt, const char *op);
/* The checks of a host call op that does not enter the runtime
 * (rk__call_enter): RK_EINVAL ("op: NULL argument") when rt is NULL or
 * args_ok (the caller's check of its other arguments) is false, else
 * rk__fork_check. */
int rk__host_check(const rk_runtime *rt, bool args_ok, const char *op);
/* The process's fork generation (registers the atfork handler once). */
uint32_t rk__fork_gen(void);
/* Waits until every host call has left (destroy, after closing). */
void rk__calls_wait(rk_runtime *rt);

/* ---- registry.c */
/* How many slots are registered now. Slots below it stay set for the
 * runtime's life (registration only appends), so a reader walks them
 * with rk__kernel_at and no lock. */
uint32_t rk__kernel_count(rk_runtime *rt);

static inline rk__kernel *
rk__kernel_at(rk_runtime *rt, uint32_t slot)
{
    /* Acquire pairs with the release store in rk_runtime_register. */
    return atomic_load_explicit(&rt->slots[slot], memory_order_acquire);
}

rk__kernel *rk__kernel_by_id(rk_runtime *rt, const char *id);
int rk__not_found(rk_runtime *rt, const char *id);
/* The kernel and instance a handle names, or RK_ESTALE. */
int rk__resolve(rk_runtime *rt, rk_kernel h, rk__kernel **kp);
/* The kernel called id for a host operation (*rc RK_OK), or NULL with
 * *rc the error. */
rk__kernel *rk__kernel_for_op(rk_runtime *rt, const char *id, int *rc);

/* routes.c: fills spec's route_to and routes_in for k's launch. */
void rk__routes_for_launch(rk__kernel *k, rk__backend_launch *spec);
/* topics.c: fills spec's device topics (topic_out, topic_relay,
 * topic_in) for k's launch and keeps topic_out's kernels in inst. */
void rk__topics_for_launch(
    rk__kernel *k, rk__backend_launch *spec, rk__inst *inst);
/* topics.c: io->topic_device for inst (n publishes carried wholly on
 * the device on the lane of its topic_out[bit]). */
void rk__topic_device_count(rk__inst *inst, uint32_t bit, uint64_t n);
/* topics.c: io->publish_device for inst. */
int rk__publish_device(rk__inst *inst, uint32_t index, const rk_msg_header *h,
    const void *payload, size_t len, uint32_t carried, uint32_t dropped);
/* The same for a getter op (named in the detail) that fills *out:
 * RK_EINVAL ("op: out is NULL") first when out is NULL. */
rk__kernel *rk__kernel_for_get(
    rk_runtime *rt, const char *id, const void *out, const char *op, int *rc);

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
/* Makes the instance see a command or verdict just stored in its control
 * block: notifies its wake, then the backend's signal if it has one. */
void rk__inst_signal(rk__inst *inst);
/* Waits until inst's ack is in mask (bit 1u << RK_CTL_ACK_*; EXITED
 * always counts) or the absolute deadline (UINT64_MAX: none). RK_OK or
 * RK_ETIMEDOUT. */
int rk__ack_wait(rk__inst *inst, uint32_t mask, uint64_t deadline);

/* ---- actor.c */
/* Fills inst->io and inst->ctx for a launch (inst's queues, spill area and
 * telemetry set up). */
void rk__io_init(rk__inst *inst);

/* ---- supervisor.c */
int rk__supervisor_start(rk_runtime *rt);
void rk__supervisor_stop(rk_runtime *rt);

/* ---- deliver.c */
/* Puts one message (header h, payload) into k's input, applying the
 * state, type and backpressure rules. Updates k's counters. op names the
 * operation in a refusal's detail ("send", "request", "publish"). */
int rk__deliver(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, int64_t timeout_ns, const char *op);
/* The same for a sender that keeps the message when BLOCK finds no room
 * in time (RK_EFULL, RK_ETIMEDOUT) and tries again later: that refusal is
 * not counted as rejected. */
int rk__deliver_try(rk__kernel *k, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, const char *op);

/* A direct call on k (rk_kernel_call's body), for a caller that already
 * entered the runtime (rk__call_enter) and resolved k: RK_OK, RK_EBUSY
 * (not idle: deliver instead), or a refusal (op: "call", "request"). */
int rk__kernel_call(rk__kernel *k, const rk_msg_header *h, const void *payload,
    size_t len, rk_call_reply *reply, const char *op);

/* The send timestamp for a message to k: now, or 0 (not sampled, or
 * telemetry off). Sampling by count and time: runtime/stamp.h. */
static inline uint64_t
rk__send_stamp(const rk__kernel *k)
{
    if (k->def.config.telemetry_off)
        return 0;
    return rk__stamp(k->def.config.latency_sample);
}

/* ---- deadletter.c, topics.c */
void rk__dead_letter(rk_runtime *rt, rk__inst *inst, rk_dead_reason reason,
    int error, const void *frame, size_t len);
int rk__publish(rk_runtime *rt, const char *topic, const rk_msg_header *h,
    const void *payload, size_t len, int64_t timeout_ns, size_t *delivered);

#endif /* RK_SRC_RUNTIME_INTERNAL_H */
