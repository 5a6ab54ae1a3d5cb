/*
 * actor.c - the pagerank example's single actor: keeps the graph as state
 * and solves it push-style on request (protocol in pagerank.c).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagerank.h"

/* ------------------------------------------------------------ the actor */

/* The graph as the actor keeps it. */
typedef struct graph {
    uint32_t nodes;
    edge_list edges;
    int error; /* sticky: a bad batch since the last reset */
} graph;

/*
 * Push-style power iteration: every node spreads its rank over its
 * out-edges (CSR by source); the rank of dangling nodes is spread over all
 * nodes. rank must hold g->nodes doubles. Returns RK_OK or RK_ENOMEM.
 */
static int
solve_push(const graph *g, const pr_solve *p, double *rank, pr_done *done)
{
    uint32_t n = g->nodes;
    size_t m = g->edges.len;
    size_t *start = calloc((size_t)n + 1, sizeof(*start));
    size_t *cur = malloc(((size_t)n + 1) * sizeof(*cur));
    uint32_t *adj = malloc((m ? m : 1) * sizeof(*adj));
    double *next = malloc((size_t)n * sizeof(*next));

    if (start == NULL || cur == NULL || adj == NULL || next == NULL) {
        free(start);
        free(cur);
        free(adj);
        free(next);
        return RK_ENOMEM;
    }
    /* CSR: count out-degrees, prefix-sum, then place each edge with a
     * moving cursor per source. */
    for (size_t i = 0; i < m; i++)
        start[g->edges.src[i] + 1]++;
    for (uint32_t v = 0; v < n; v++)
        start[v + 1] += start[v];
    memcpy(cur, start, ((size_t)n + 1) * sizeof(*cur));
    for (size_t i = 0; i < m; i++)
        adj[cur[g->edges.src[i]]++] = g->edges.dst[i];
    free(cur);

    for (uint32_t v = 0; v < n; v++)
        rank[v] = 1.0 / n;
    done->residual = INFINITY;
    done->iterations = 0;
    while (
        done->iterations < p->max_iter && !(done->residual < p->tolerance)) {
        double dangling = 0.0, delta = 0.0;
        for (uint32_t u = 0; u < n; u++)
            if (start[u + 1] == start[u])
                dangling += rank[u];
        double base = (1.0 - p->damping) / n + p->damping * dangling / n;
        for (uint32_t v = 0; v < n; v++)
            next[v] = 0.0;
        for (uint32_t u = 0; u < n; u++) {
            size_t deg = start[u + 1] - start[u];
            if (deg == 0)
                continue;
            double share = rank[u] / (double)deg;
            for (size_t e = start[u]; e < start[u + 1]; e++)
                next[adj[e]] += share;
        }
        for (uint32_t v = 0; v < n; v++) {
            double r = base + p->damping * next[v];
            delta += fabs(r - rank[v]);
            rank[v] = r;
        }
        done->residual = delta;
        done->iterations++;
    }
    free(start);
    free(adj);
    free(next);
    return RK_OK;
}

/* Solves and streams the ranks, then the summary, each a reply to m. */
static int
answer_solve(rk_ctx *ctx, const rk_msg_view *m, const graph *g)
{
    pr_solve p;
    pr_done done = { 0 };
    double *rank = NULL;
    int rc;

    done.nodes = g->nodes;
    done.edges = g->edges.len;
    done.status = rk_msg_fixed_read(&pr_solve_msgtype, m->data, m->len, &p);
    if (done.status == RK_OK && g->error != RK_OK)
        done.status = g->error;
    if (done.status == RK_OK
        && (g->nodes == 0 || !(p.damping > 0.0 && p.damping < 1.0)))
        done.status = RK_EINVAL;
    if (done.status == RK_OK
        && (rank = malloc((size_t)g->nodes * sizeof(*rank))) == NULL)
        done.status = RK_ENOMEM;
    if (done.status == RK_OK)
        done.status = solve_push(g, &p, rank, &done);
    for (uint32_t off = 0; done.status == RK_OK && off < g->nodes;
         off += RANK_BATCH) {
        pr_ranks r = { .offset = off };
        r.count = g->nodes - off < RANK_BATCH ? g->nodes - off : RANK_BATCH;
        memcpy(r.rank, rank + off, r.count * sizeof(double));
        if ((rc = rk_ctx_reply(ctx, m, pr_ranks_msgtype.id, &r, sizeof(r)))
            != RK_OK) {
            free(rank);
            return rc;
        }
    }
    free(rank);
    return rk_ctx_reply(ctx, m, pr_done_msgtype.id, &done, sizeof(done));
}

static void
take_edges(graph *g, const rk_msg_view *m)
{
    pr_edges b;
    int rc;

    if (g->error != RK_OK)
        return;
    if ((rc = rk_msg_fixed_read(&pr_edges_msgtype, m->data, m->len, &b))
        != RK_OK) {
        g->error = rc;
        return;
    }
    if (b.count > EDGE_BATCH) {
        g->error = RK_EINVAL;
        return;
    }
    for (uint32_t i = 0; i < b.count && g->error == RK_OK; i++) {
        if (b.src[i] >= g->nodes || b.dst[i] >= g->nodes)
            g->error = RK_EINVAL; /* endpoint outside 0..nodes-1 */
        else
            g->error = edges_push(&g->edges, b.src[i], b.dst[i]);
    }
}

int
pagerank_actor(rk_ctx *ctx)
{
    graph g = { 0 };
    rk_msg_view m;
    int rc;

    /* The graph lives in the actor's own frame for as long as it runs:
     * nothing is shared with the host except messages. */
    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint32_t type = m.hdr->type_id;
        if (type == pr_reset_msgtype.id) {
            pr_reset r;
            edges_free(&g.edges);
            g.error = rk_msg_fixed_read(&pr_reset_msgtype, m.data, m.len, &r);
            g.nodes = g.error == RK_OK ? r.nodes : 0;
        } else if (type == pr_edges_msgtype.id) {
            take_edges(&g, &m);
        } else if (type == pr_solve_msgtype.id) {
            if ((rc = answer_solve(ctx, &m, &g)) != RK_OK)
                break;
        }
        /* Anything else is ignored. */
    }
    edges_free(&g.edges);
    return rc == RK_ECLOSED ? RK_OK : rc;
}
