/*
 * pagerank - a PageRank actor: a persistent kernel that keeps a graph as
 * state, receives it edge batch by edge batch, iterates to convergence on
 * request and streams the ranks back.
 *
 * Protocol (fixed-layout messages, so a GPU kernel could read them in
 * place):
 *
 *   host -> actor   PageRankReset {nodes}          forget the old graph
 *                   PageRankEdges {count, src[], dst[]}  (many)
 *                   PageRankSolve {damping, tolerance, max_iter}
 *   actor -> host   PageRankRanks {offset, count, rank[]}  (many)
 *                   PageRankDone  {status, iterations, residual, ...}
 *
 * The actor iterates push-style over a CSR of out-edges; the host checks
 * the ranks against an independent pull-style power iteration over
 * in-edges (so the two sum in different orders) to 1e-9 relative, on two
 * tiny graphs whose ranks are known in closed form and on a generated
 * 10,000-node graph. Exit status 0 means every check passed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkernel/ringkernel.h"

#define EDGE_BATCH  56
#define RANK_BATCH  48
#define MAX_PAYLOAD 512
#define TIMEOUT_NS  (30 * INT64_C(1000000000))
#define DAMPING     0.85
#define TOLERANCE   1e-13 /* L1 change between iterations */
#define MAX_ITER    1000
#define REL_TOL     1e-9 /* actor vs host, per node */

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
RK_MSGTYPE_DEFINE(pr_reset, "PageRankReset", 2001, RESET_FIELDS);
RK_MSGTYPE_DECLARE(pr_edges, EDGES_FIELDS);
RK_MSGTYPE_DEFINE(pr_edges, "PageRankEdges", 2002, EDGES_FIELDS);
RK_MSGTYPE_DECLARE(pr_solve, SOLVE_FIELDS);
RK_MSGTYPE_DEFINE(pr_solve, "PageRankSolve", 2003, SOLVE_FIELDS);
RK_MSGTYPE_DECLARE(pr_ranks, RANKS_FIELDS);
RK_MSGTYPE_DEFINE(pr_ranks, "PageRankRanks", 2004, RANKS_FIELDS);
RK_MSGTYPE_DECLARE(pr_done, DONE_FIELDS);
RK_MSGTYPE_DEFINE(pr_done, "PageRankDone", 2005, DONE_FIELDS);

/* An edge list that grows as batches arrive. */
typedef struct edge_list {
    uint32_t *src, *dst;
    size_t len, cap;
} edge_list;

static int
edges_push(edge_list *e, uint32_t s, uint32_t d)
{
    if (e->len == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 1024;
        uint32_t *ns = realloc(e->src, cap * sizeof(*ns));
        if (ns == NULL)
            return RK_ENOMEM;
        e->src = ns;
        uint32_t *nd = realloc(e->dst, cap * sizeof(*nd));
        if (nd == NULL)
            return RK_ENOMEM;
        e->dst = nd;
        e->cap = cap;
    }
    e->src[e->len] = s;
    e->dst[e->len] = d;
    e->len++;
    return RK_OK;
}

static void
edges_free(edge_list *e)
{
    free(e->src);
    free(e->dst);
    memset(e, 0, sizeof(*e));
}

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

static int
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

/* ------------------------------------------------------------- the host */

/* The reference: pull-style power iteration over in-edges, written
 * independently of the actor's. */
static double *
host_pagerank(uint32_t n, const edge_list *e, uint32_t *iterations)
{
    uint32_t *outdeg = calloc(n, sizeof(*outdeg));
    size_t *in_start = calloc((size_t)n + 1, sizeof(*in_start));
    uint32_t *in_src = malloc((e->len ? e->len : 1) * sizeof(*in_src));
    double *rank = malloc((size_t)n * sizeof(*rank));
    double *next = malloc((size_t)n * sizeof(*next));
    double residual = INFINITY;

    if (!outdeg || !in_start || !in_src || !rank || !next) {
        free(rank);
        rank = NULL;
        goto out;
    }
    for (size_t i = 0; i < e->len; i++) {
        outdeg[e->src[i]]++;
        in_start[e->dst[i] + 1]++;
    }
    for (uint32_t v = 0; v < n; v++)
        in_start[v + 1] += in_start[v];
    /* Stable placement: in-edges of v in edge-list order. */
    for (size_t i = 0; i < e->len; i++)
        in_src[in_start[e->dst[i]]++] = e->src[i];
    for (uint32_t v = n; v > 0; v--)
        in_start[v] = in_start[v - 1];
    in_start[0] = 0;

    for (uint32_t v = 0; v < n; v++)
        rank[v] = 1.0 / n;
    for (*iterations = 0; *iterations < MAX_ITER && !(residual < TOLERANCE);
         ++*iterations) {
        double dangling = 0.0;
        for (uint32_t v = 0; v < n; v++)
            if (outdeg[v] == 0)
                dangling += rank[v];
        for (uint32_t v = 0; v < n; v++) {
            double sum = 0.0;
            for (size_t j = in_start[v]; j < in_start[v + 1]; j++)
                sum += rank[in_src[j]] / outdeg[in_src[j]];
            next[v] = (1.0 - DAMPING) / n + DAMPING * (sum + dangling / n);
        }
        residual = 0.0;
        for (uint32_t v = 0; v < n; v++) {
            residual += fabs(next[v] - rank[v]);
            rank[v] = next[v];
        }
    }
out:
    free(outdeg);
    free(in_start);
    free(in_src);
    free(next);
    return rank;
}

/* Sends the graph, asks for a solve and collects the streamed ranks into
 * rank[0..n). Returns RK_OK with *done filled, or an error. */
static int
actor_pagerank(rk_runtime *rt, rk_kernel k, uint32_t n, const edge_list *e,
    double *rank, pr_done *done)
{
    pr_reset reset = { n };
    pr_solve solve = { DAMPING, TOLERANCE, MAX_ITER };
    size_t nb = (e->len + EDGE_BATCH - 1) / EDGE_BATCH, sent = 0, got = 0;
    pr_edges *batches = calloc(nb ? nb : 1, sizeof(*batches));
    int rc;

    if (batches == NULL)
        return RK_ENOMEM;
    for (size_t i = 0; i < e->len; i++) {
        pr_edges *b = &batches[i / EDGE_BATCH];
        b->src[b->count] = e->src[i];
        b->dst[b->count] = e->dst[i];
        b->count++;
    }
    rc = rk_send(rt, k, pr_reset_msgtype.id, &reset, sizeof(reset),
        RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    /* All edge batches in one call, with one wake-up: the queue's
     * backpressure paces us while the actor catches up. */
    if (rc == RK_OK)
        rc = rk_send_batch(rt, k, pr_edges_msgtype.id, batches,
            sizeof(*batches), nb, RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS, &sent);
    free(batches);
    if (rc == RK_OK)
        rc = rk_send(rt, k, pr_solve_msgtype.id, &solve, sizeof(solve),
            RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    while (rc == RK_OK) {
        union {
            pr_ranks r;
            pr_done d;
        } u;
        rk_msg_header h;
        size_t len;
        if ((rc = rk_recv(rt, k, &h, &u, sizeof(u), &len, TIMEOUT_NS))
            != RK_OK)
            break;
        if (h.type_id == pr_done_msgtype.id) {
            rc = rk_msg_fixed_read(&pr_done_msgtype, &u, len, done);
            if (rc == RK_OK && done->status == RK_OK && got != n)
                rc = RK_EINTERNAL; /* ranks missing */
            break;
        }
        if (h.type_id != pr_ranks_msgtype.id
            || (rc = rk_msg_fixed_read(&pr_ranks_msgtype, &u, len, &u.r))
                != RK_OK)
            return RK_EDECODE;
        if (u.r.count > RANK_BATCH || u.r.offset > n
            || u.r.count > n - u.r.offset)
            return RK_EDECODE;
        memcpy(rank + u.r.offset, u.r.rank, u.r.count * sizeof(double));
        got += u.r.count;
    }
    return rc;
}

/* Deterministic PRNG (xorshift64*) and a skewed random graph: out-degree
 * 0..15 (about 6 % dangling nodes), targets biased towards low ids so the
 * in-degrees follow a long tail. */
static uint64_t
xorshift64s(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(0x2545F4914F6CDD1D);
}

static int
generate_graph(uint32_t n, uint64_t seed, edge_list *e)
{
    for (uint32_t u = 0; u < n; u++) {
        uint32_t deg = (uint32_t)(xorshift64s(&seed) >> 60);
        for (uint32_t j = 0; j < deg; j++) {
            double x = (double)(xorshift64s(&seed) >> 11) * 0x1.0p-53;
            uint32_t v = (uint32_t)(x * x * n);
            if (edges_push(e, u, v) != RK_OK)
                return RK_ENOMEM;
        }
    }
    return RK_OK;
}

/* Runs one graph through the actor and the host; expect (may be NULL)
 * holds closed-form ranks. Returns the number of failed checks. */
static int
check_graph(rk_runtime *rt, rk_kernel k, const char *name, uint32_t n,
    const edge_list *e, const double *expect)
{
    double *got = calloc(n, sizeof(*got)), *ref;
    pr_done done = { 0 };
    uint32_t ref_iter = 0, top[3] = { 0, 0, 0 }, ntop = 0;
    double worst = 0.0, worst_expect = 0.0, sum = 0.0;
    int rc, fails = 0;

    if (got == NULL || (ref = host_pagerank(n, e, &ref_iter)) == NULL) {
        printf("  %s: out of memory\n", name);
        free(got);
        return 1;
    }
    rc = actor_pagerank(rt, k, n, e, got, &done);
    if (rc == RK_OK)
        rc = done.status;
    if (rc != RK_OK) {
        printf("  %s: actor failed: %s\n", name, rk_strerror(rc));
        free(got);
        free(ref);
        return 1;
    }
    for (uint32_t v = 0; v < n; v++) {
        double rel = fabs(got[v] - ref[v]) / fabs(ref[v]);
        if (!(rel <= worst)) /* also catches NaN */
            worst = rel;
        if (expect != NULL) {
            rel = fabs(got[v] - expect[v]) / expect[v];
            if (!(rel <= worst_expect))
                worst_expect = rel;
        }
        sum += got[v];
        /* Keep the three highest ranks, highest first. */
        uint32_t t = ntop;
        for (; t > 0 && got[v] > got[top[t - 1]]; t--)
            if (t < 3)
                top[t] = top[t - 1];
        if (t < 3) {
            top[t] = v;
            ntop += ntop < 3;
        }
    }
    printf("  %-10s %6u nodes %7" PRIu64 " edges  %3u iterations (host %3u) "
           "residual %.1e  sum %.15f\n",
        name, n, done.edges, done.iterations, ref_iter, done.residual, sum);
    printf("             max relative diff vs host %.2e", worst);
    if (expect != NULL)
        printf(", vs closed form %.2e", worst_expect);
    printf("\n             top: ");
    for (uint32_t t = 0; t < ntop; t++)
        printf("node %u = %.6f  ", top[t], got[top[t]]);
    printf("\n");
    fails += !(worst <= REL_TOL);
    fails += expect != NULL && !(worst_expect <= REL_TOL);
    fails += done.edges != e->len || done.nodes != n;
    fails += !(fabs(sum - 1.0) < 1e-9);
    free(got);
    free(ref);
    return fails;
}

int
main(void)
{
    rk_kernel_def def = { .id = "pagerank", .actor = pagerank_actor };
    rk_runtime_config rcfg = { .no_static_kernels = true };
    rk_runtime *rt = NULL;
    edge_list e = { 0 };
    rk_kernel k;
    int rc, fails = 0;

    def.config.max_payload = MAX_PAYLOAD;
    def.config.input_capacity = 256;
    if ((rc = rk_runtime_create(&rt, &rcfg)) != RK_OK
        || (rc = rk_runtime_register(rt, &def)) != RK_OK
        || (rc = rk_kernel_launch(rt, "pagerank")) != RK_OK
        || (rc = rk_kernel_activate(rt, "pagerank")) != RK_OK
        || (rc = rk_kernel_lookup(rt, "pagerank", &k)) != RK_OK) {
        fprintf(stderr, "pagerank: start: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        rk_runtime_destroy(rt);
        return 2;
    }
    printf("pagerank: damping %.2f, tolerance %.0e (L1), check %.0e "
           "relative\n",
        DAMPING, TOLERANCE, REL_TOL);

    /* A 4-cycle: by symmetry every node has rank 1/4. */
    {
        static const double quarter[4] = { 0.25, 0.25, 0.25, 0.25 };
        for (uint32_t v = 0; v < 4 && rc == RK_OK; v++)
            rc = edges_push(&e, v, (v + 1) % 4);
        fails += rc != RK_OK || check_graph(rt, k, "cycle4", 4, &e, quarter);
        edges_free(&e);
    }
    /* 0 -> 1 with node 1 dangling. Solving r0 = (1-d)/2 + d r1/2 and
     * r0 + r1 = 1 gives r0 = 0.5 / 1.425 = 20/57 and r1 = 37/57. */
    {
        static const double pair[2] = { 20.0 / 57.0, 37.0 / 57.0 };
        fails += edges_push(&e, 0, 1) != RK_OK
            || check_graph(rt, k, "dangling2", 2, &e, pair);
        edges_free(&e);
    }
    /* A generated graph. */
    fails += generate_graph(10000, UINT64_C(0x5EED5EED), &e) != RK_OK
        || check_graph(rt, k, "random10k", 10000, &e, NULL);
    edges_free(&e);
    /* A bad edge (endpoint out of range) must come back as an error. */
    {
        pr_done done;
        double r[2];
        fails += edges_push(&e, 0, 7) != RK_OK;
        rc = actor_pagerank(rt, k, 2, &e, r, &done);
        printf("  bad edge   status %s\n",
            rc == RK_OK ? rk_err_name(done.status) : rk_strerror(rc));
        fails += rc != RK_OK || done.status != RK_EINVAL;
        edges_free(&e);
    }

    printf("telemetry:\n");
    {
        /* The runtime's telemetry snapshot, in the telemetry layer's
         * text form. */
        rk_stats st;
        if (rk_kernel_telemetry(rt, "pagerank", &st) == RK_OK)
            rk_stats_print(stdout, &st, 0);
    }
    if ((rc = rk_kernel_terminate(rt, "pagerank", TIMEOUT_NS)) != RK_OK) {
        printf("terminate: %s\n", rk_strerror(rc));
        fails++;
    }
    rk_runtime_destroy(rt);
    printf(
        "pagerank: %s (%d failed checks)\n", fails ? "FAILED" : "OK", fails);
    return fails ? 1 : 0;
}
