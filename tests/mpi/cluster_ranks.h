/*
 * tests/mpi/cluster_ranks.h - what the files of the cluster_ranks test
 * program share: the message the tests send, the kernels every mode
 * registers, and the helpers (all in cluster_ranks.c), and one test
 * function a mode (each in the file of its theme; cluster_ranks.c lists
 * them). Only this program includes it.
 */
#ifndef RK_TESTS_MPI_CLUSTER_RANKS_H
#define RK_TESTS_MPI_CLUSTER_RANKS_H

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <mpi.h>

#include "ringkernel/ringkernel.h"

#define SEC 1000000000LL

/* The mode this run was started with (argv[1]). */
extern const char *mode;

typedef struct msg {
    int32_t rank;     /* sender's rank */
    int32_t producer; /* producer thread, or -1 */
    int64_t seq;
} msg;

enum { T_SEND = 1, T_ROUTE, T_NEWS, T_DONE, T_REQ, T_FINAL };

/* ---------------------------------------------------------- kernels */

/* echo: replies with the request's payload and this rank in .producer
 * (my_rank, which each test sets before its join). */
extern int my_rank;
int echo_h(rk_ctx *ctx, const rk_msg_view *m);

/* sink: puts out every input unchanged, with its type and priority. */
int sink_h(rk_ctx *ctx, const rk_msg_view *m);

/* fwd: the upstream of a route; forwards its input as T_ROUTE. */
int fwd_h(rk_ctx *ctx, const rk_msg_view *m);

/* count: checks per-(rank, producer) order in the counter its kernel
 * config's user points at; T_DONE and T_FINAL go out. */
#define MAXR  8
#define NPROD 2
typedef struct counter {
    int64_t next[MAXR][NPROD];
    _Atomic uint64_t got;
    _Atomic uint64_t bad;
    useconds_t delay_us;
} counter;
int count_h(rk_ctx *ctx, const rk_msg_view *m);

/* ----------------------------------------------------------- helpers */

/* A runtime without the static kernels (asserts it was created). */
rk_runtime *runtime(void);
/* Registers and launches kernel id, and activates it if asked. */
void handler(rk_runtime *rt, const char *id, rk_handler_fn h,
    rk_kernel_config c, bool activate);
/* out = "rank/id". */
void id_of(char *out, size_t cap, int rank, const char *id);
/* This rank as mpirun numbers it, before the join. */
int launcher_rank(void);
/* One output of local kernel id into *v (asserted to come in time); its
 * length. */
size_t recv_msg(rk_cluster *cl, const char *id, rk_msg_header *h, msg *v,
    int64_t timeout_ns);
/* Waits (bounded) until local proxy id has forwarded all it was offered. */
void wait_forwarded(rk_runtime *rt, const char *id);

/* ------------------------------------------------------------- modes */

void test_basic(void **state);     /* cluster_ranks_flow.c */
void test_stress(void **state);    /* cluster_ranks_flow.c: and streamd */
void test_policy(void **state);    /* cluster_ranks_policy.c */
void test_badjoin(void **state);   /* cluster_ranks_policy.c */
void test_kill(void **state);      /* cluster_ranks_policy.c */
void test_exportall(void **state); /* cluster_ranks_names.c */
void test_late(void **state);      /* cluster_ranks_names.c */
void test_direct(void **state);    /* cluster_ranks_request.c */
void test_call(void **state);      /* cluster_ranks_request.c */

#endif
