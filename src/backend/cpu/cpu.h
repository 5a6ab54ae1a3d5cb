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

/* The thread's receive loop state, behind the actor's context (rk_ctx,
 * the runtime's; its be points here). Used only by the thread holding
 * the context: the kernel's, or a direct call's caller. */
typedef struct rk__cpu_loop {
    rk_ctx *pub;               /* the actor's context (launch spec) */
    const rk__backend_io *io; /* the runtime's side (launch spec) */
    rk__backend_inst *bi;
    rk_ctl *ctl;
    rk__ec *wake;
    /* Prefetched input: n frames, frame i at frames + i * stride; pos is
     * the next to hand out, cur the one in flight (-1: none; pub->cur is
     * its header). The inbox lends its own slots (in_place, lengths in
     * the headers), held until the next batch is taken; a direct call's
     * one frame is a copy in buf (its length in lens[0]). */
    unsigned char *buf;
    size_t lens[1];
    const unsigned char *frames;
    size_t stride;
    size_t n, pos;
    size_t held; /* lane slots to release before the next take */
    bool in_place;
    long cur;
    uint64_t fetch_ns;     /* when the batch was taken; 0: not sampled */
    uint64_t run_v, run_n; /* a run of equal latencies not yet recorded */
    uint32_t batch;
    /* The receive spin's budget, adapted between RK__SPIN_FLOOR and
     * config.spin (fetch in body.c); the kernel thread's own. */
    uint32_t spin_budget;
    /* Direct calls (config.direct_calls): a handler failure a caller
     * handed back (an RK_E* code, 0: none); the failed message is frame
     * 0 of buf, in flight (cur 0). Written by the caller holding the
     * context, read by the kernel thread before it takes it back. */
    _Atomic int handback;
    bool direct; /* config.direct_calls: the context is shared via owner */
} rk__cpu_loop;

struct rk__backend_inst {
    pthread_t thread;
    rk_ctl *ctl;
    rk__ec *wake;   /* input and commands: the body parks here */
    rk__ec *events; /* the runtime's supervisor */
    rk__ec *ack;    /* hosts waiting for an acknowledgement park here */
    const rk__backend_io *io;
    clockid_t cpu_clock;
    bool have_cpu_clock;
    /* Who holds the context (direct calls only): OWN_KERNEL while the
     * thread runs, OWN_FREE while it waits for input (a caller may take
     * it, rk__cpu_call), OWN_CALLER during a direct call. Acquire on
     * taking and release on giving back order every use of the context
     * between them. Its own line: callers write it. */
    _Alignas(64) _Atomic uint32_t owner;
    /* The thread waits for a caller to give the context back (own()):
     * callers then refuse new calls (RK_EBUSY) and the one that holds it
     * wakes the thread as it lets go, so the thread parks instead of
     * spinning through back-to-back calls. */
    _Atomic uint32_t want;
    _Alignas(64) rk__cpu_loop loop;
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

/* Sets up the receive loop and the context's backend part for spec;
 * RK_ENOMEM with nothing allocated. */
int rk__cpu_ctx_init(rk__backend_inst *bi, const rk__backend_launch *spec);
void rk__cpu_ctx_fini(rk__backend_inst *bi);

/* exec.c: a one-shot kernel's launch on the calling thread (its host
 * fallback), the table's exec entry. */
struct rk_oneshot_launch;
int rk__cpu_exec(rk__exec_kernel *k, const struct rk_oneshot_launch *l);

#endif /* RK_SRC_BACKEND_CPU_H */
