/*
 * pagerank.h - what the pagerank example's files share: its constants,
 * message types and edge list, and the two actors (actor.c: the single
 * PageRank actor; partition.c: the partition actors; pagerank.c: the
 * message types' definitions, the host side and main).
 */
#ifndef PAGERANK_H
#define PAGERANK_H

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define EDGE_BATCH   56
#define RANK_BATCH   48
#define DEGREE_BATCH 112
#define PARTS        4 /* partition actors in the partitioned solver */
#define MAX_PAYLOAD  512
#define TIMEOUT_NS   (30 * INT64_C(1000000000))
#define DAMPING      0.85
#define TOLERANCE    1e-13 /* L1 change between iterations */
#define MAX_ITER     1000
#define REL_TOL      1e-9 /* actor vs host, per node */

/* ------------------------------------------------------ message types */

#define RESET_FIELDS(X) X(nodes, RK_UINT32)
#define EDGES_FIELDS(X)                                                       \
    X(count, RK_UINT32)                                                       \
    X(src, RK_ARRAY(RK_UINT32, EDGE_BATCH))                                   \
    X(dst, RK_ARRAY(RK_UINT32, EDGE_BATCH))
#define SOLVE_FIELDS(X)                                                       \
    X(damping, RK_DOUBLE)                                                     \
    X(tolerance, RK_DOUBLE)                                                   \
    X(max_iter, RK_UINT32)
#define RANKS_FIELDS(X)                                                       \
    X(offset, RK_UINT32)                                                      \
    X(count, RK_UINT32)                                                       \
    X(rank, RK_ARRAY(RK_DOUBLE, RANK_BATCH))
#define DONE_FIELDS(X)                                                        \
    X(status, RK_INT32)                                                       \
    X(iterations, RK_UINT32)                                                  \
    X(nodes, RK_UINT32)                                                       \
    X(edges, RK_UINT64)                                                       \
    X(residual, RK_DOUBLE)

RK_MSGTYPE_DECLARE(pr_reset, RESET_FIELDS);
RK_MSGTYPE_DECLARE(pr_edges, EDGES_FIELDS);
RK_MSGTYPE_DECLARE(pr_solve, SOLVE_FIELDS);
RK_MSGTYPE_DECLARE(pr_ranks, RANKS_FIELDS);
RK_MSGTYPE_DECLARE(pr_done, DONE_FIELDS);

/* The partitioned solver's own messages. */
#define SETUP_FIELDS(X)                                                       \
    X(part, RK_UINT32)                                                        \
    X(parts, RK_UINT32)                                                       \
    X(nodes, RK_UINT32)                                                       \
    X(lo, RK_UINT32)                                                          \
    X(hi, RK_UINT32)
#define DEGREES_FIELDS(X)                                                     \
    X(offset, RK_UINT32)                                                      \
    X(count, RK_UINT32)                                                       \
    X(deg, RK_ARRAY(RK_UINT32, DEGREE_BATCH))
#define SHARES_FIELDS(X)                                                      \
    X(iter, RK_UINT32)                                                        \
    X(offset, RK_UINT32)                                                      \
    X(count, RK_UINT32)                                                       \
    X(share, RK_ARRAY(RK_DOUBLE, RANK_BATCH))
#define STEP_FIELDS(X)                                                        \
    X(iter, RK_UINT32)                                                        \
    X(from, RK_UINT32)                                                        \
    X(residual, RK_DOUBLE)                                                    \
    X(dangling, RK_DOUBLE)

RK_MSGTYPE_DECLARE(pt_setup, SETUP_FIELDS);
RK_MSGTYPE_DECLARE(pt_degrees, DEGREES_FIELDS);
RK_MSGTYPE_DECLARE(pt_shares, SHARES_FIELDS);
RK_MSGTYPE_DECLARE(pt_step, STEP_FIELDS);

/* An edge list that grows as batches arrive. */
typedef struct edge_list {
    uint32_t *src, *dst;
    size_t len, cap;
} edge_list;

/* Appends edge (s, d); RK_OK or RK_ENOMEM. */
int edges_push(edge_list *e, uint32_t s, uint32_t d);
void edges_free(edge_list *e);

/* The single actor (actor.c) and a partition actor (partition.c). */
int pagerank_actor(rk_ctx *ctx);
int partition_actor(rk_ctx *ctx);

#endif /* PAGERANK_H */
