/*
 * src/cluster/mpi_trace.h - a per-stage time breakdown of the direct
 * request path (rk_cluster_request by the caller's own MPI calls, and
 * the owning rank's progress thread answering it), for finding where a
 * round trip's time goes (docs/cluster.md, "Performance"). Built only
 * with -DRK_CLUSTER_TRACE (cmake -DRK_CLUSTER_TRACE=ON, a bench-only
 * build): otherwise every macro is empty and the path has no clock read
 * more than it needs. A traced process prints each stage's mean on
 * stderr when its cluster leaves.
 *
 * Stamps are the TSC (one rdtsc, ~10-20 ns); both ranks of the bench
 * share a host and its TSC, so the request's and the reply's transit
 * (the sender's stamp travels in the frame's send_ns field) are
 * measured across processes too. Each stage has one writer (the
 * requesting thread or the progress thread): relaxed adds, no lock.
 */
#ifndef RK_SRC_CLUSTER_MPI_TRACE_H
#define RK_SRC_CLUSTER_MPI_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

enum {
    /* requesting thread */
    CL_TR_C_PREP,   /* entry -> request encoded (lookup, slot, id) */
    CL_TR_C_ISEND,  /* MPI_Isend of the request */
    CL_TR_C_IRECV,  /* MPI_Irecv of the answer, and the wait set up */
    CL_TR_REQ_WIRE, /* stamp before MPI_Isend -> peer's test saw it */
    CL_TR_P_PARSE,  /* seen -> the kernel's handler called */
    CL_TR_P_CALL,   /* rk_kernel_call_reply */
    CL_TR_P_ENCODE, /* after the call -> before the reply's MPI_Isend */
    CL_TR_P_ISEND,  /* MPI_Isend of the reply */
    CL_TR_P_AFTER,  /* after the reply's send -> receive posted again */
    CL_TR_REP_WIRE, /* stamp before the reply's MPI_Isend -> seen */
    CL_TR_C_DECODE, /* seen -> the slot answered */
    CL_TR_C_DONE,   /* answered -> rk_cluster_request returns */
    CL_TR_C_TOTAL,  /* entry -> return */
    CL_TR_C_TESTS,  /* MPI_Test rounds of the caller's wait (count) */
    CL_TR_N
};

#ifdef RK_CLUSTER_TRACE
#include <x86intrin.h>

/* Each stage keeps its last CL_TR_KEEP samples (TSC ticks), for
 * percentiles at the dump. */
#define CL_TR_KEEP 65536u

typedef struct rk__cl_trace {
    uint32_t v[CL_TR_N][CL_TR_KEEP];
    _Atomic uint64_t n[CL_TR_N];
    /* The progress thread's stamps of the request it is answering. */
    uint64_t seen, called, answered;
} rk__cl_trace;

extern rk__cl_trace rk__cl_tr;

static inline uint64_t
rk__cl_tsc(void)
{
    return __rdtsc();
}

static inline void
rk__cl_tr_add(int stage, uint64_t from, uint64_t to)
{
    uint64_t i;

    if (from == 0 || to < from)
        return;
    i = atomic_fetch_add_explicit(
        &rk__cl_tr.n[stage], 1, memory_order_relaxed);
    rk__cl_tr.v[stage][i % CL_TR_KEEP]
        = to - from > UINT32_MAX ? UINT32_MAX : (uint32_t)(to - from);
}

void rk__cl_trace_dump(int rank);

#define CL_TR_STAMP(v)     uint64_t v = rk__cl_tsc()
#define CL_TR_SET(lv)      ((lv) = rk__cl_tsc())
#define CL_TR_ADD(s, a, b) rk__cl_tr_add((s), (a), (b))
#define CL_TR_COUNT(s, k)  rk__cl_tr_add((s), 1, 1 + (uint64_t)(k))
#define CL_TR_DUMP(rank)   rk__cl_trace_dump(rank)
#else
#define CL_TR_STAMP(v)     ((void)0)
#define CL_TR_SET(lv)      ((void)0)
#define CL_TR_ADD(s, a, b) ((void)0)
#define CL_TR_COUNT(s, k)  ((void)0)
#define CL_TR_DUMP(rank)   ((void)0)
#endif

#endif /* RK_SRC_CLUSTER_MPI_TRACE_H */
