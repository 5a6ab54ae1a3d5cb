/*
 * src/backend/cpu/cpu.h - the CPU backend's private parts, shared by its
 * table (cpu.c) and the body its threads run (body.c).
 *
 * One thread per instance. The thread runs the body from launch to exit:
 * acknowledge HELD, wait for RUN, run the actor (or the handler loop) at
 * safe points, report faults and wait for the runtime's verdict, drain on
 * STOP, report EXITED. Every wait is on an eventcount (common/ec.h), so a
 * parked kernel costs no CPU.
 */
#ifndef RK_SRC_BACKEND_CPU_H
#define RK_SRC_BACKEND_CPU_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "backend/backend.h"

struct rk__inst;

/* The actor's context: lives in the backend instance, used only by its
 * thread. */
struct rk_ctx {
    struct rk__inst *inst;
    rk__backend_inst *bi;
    rk_ctl *ctl;
    rk__ec *wake;
    /* Prefetched input: n frames, frame i at frames + i * stride; pos is
     * the next to hand out, cur the one in flight (-1: none). A general
     * queue copies them into buf (lengths in lens); a lane lends its own
     * slots (in_place, lengths in the headers), held until the next
     * batch is taken. */
    unsigned char *buf;
    size_t *lens;
    const unsigned char *frames;
    size_t stride;
    size_t n, pos;
    size_t held; /* lane slots to release before the next take */
    bool in_place;
    long cur;
    uint64_t fetch_ns;     /* when the batch was taken; 0: not sampled */
    uint64_t run_v, run_n; /* a run of equal latencies not yet recorded */
    bool in_handler;       /* the runtime owns the receive loop */
    uint32_t batch;
    int priority; /* rk_ctx_set_priority; RK_CTX_PRIORITY_INHERIT */
    void *user;   /* def.config.user, for rk_ctx_user */
    /* The receive spin's budget, adapted between RK__SPIN_FLOOR and
     * config.spin (fetch in body.c); the kernel thread's own. */
    uint32_t spin_budget;
    /* Direct calls (config.direct_calls): a handler failure a caller
     * handed back (an RK_E* code, 0: none); the failed message is frame
     * 0 of buf, in flight (cur 0). Written by the caller holding the
     * context, read by the kernel thread before it takes it back. */
    _Atomic int handback;
    bool direct; /* config.direct_calls: the context is shared via owner */
    /* During a direct call with a reply buffer (rk_kernel_call_reply):
     * where the reply to the message with id capture_id goes (ctx_emit);
     * NULL otherwise. Only the thread holding the context touches it. */
    struct rk_call_reply *capture;
    rk_uuid capture_id;
};

struct rk__backend_inst {
    pthread_t thread;
    rk_ctl *ctl;
    rk__ec *wake;   /* input and commands: the body parks here */
    rk__ec *events; /* the runtime's supervisor */
    rk__ec ack;     /* hosts waiting for an acknowledgement park here */
    struct rk__inst *inst;
    clockid_t cpu_clock;
    bool have_cpu_clock;
    /* Who holds ctx (direct calls only): OWN_KERNEL while the thread
     * runs, OWN_FREE while it waits for input (a caller may take it,
     * rk__cpu_call), OWN_CALLER during a direct call. Acquire on taking
     * and release on giving back order every use of ctx between them.
     * Its own line: callers write it. */
    _Alignas(64) _Atomic uint32_t owner;
    _Alignas(64) struct rk_ctx ctx;
};

enum { RK__OWN_KERNEL = 0, RK__OWN_FREE, RK__OWN_CALLER };

/* The backend's call entry (body.c). */
int rk__cpu_call(rk__backend_inst *bi, const rk_msg_header *h,
    const void *payload, size_t len, struct rk_call_reply *reply);

/* The thread's main: the whole life of an instance. */
void *rk__cpu_body(void *arg);

/* Publishes an acknowledgement and wakes whoever waits for one (and the
 * supervisor for FAULTED and EXITED). */
void rk__cpu_ack(rk__backend_inst *bi, uint32_t ack);

int rk__cpu_ctx_init(rk__backend_inst *bi);
void rk__cpu_ctx_fini(rk__backend_inst *bi);

#endif /* RK_SRC_BACKEND_CPU_H */
