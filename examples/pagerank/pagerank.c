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
 * The actor iterates push-style over a CSR of out-edges. Every graph is
 * then solved again by four partition actors that exchange rank shares
 * kernel to kernel (see "partitioned actors" below). The host checks both
 * against an independent pull-style power iteration over in-edges (so
 * they sum in different orders) to 1e-9 relative, on two tiny graphs
 * whose ranks are known in closed form and on a generated 10,000-node
 * graph. Exit status 0 means every check passed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagerank.h"

/* ------------------------------------------------------ message types */

RK_MSGTYPE_DEFINE(pr_reset, "PageRankReset", 2001, RESET_FIELDS);
RK_MSGTYPE_DEFINE(pr_edges, "PageRankEdges", 2002, EDGES_FIELDS);
RK_MSGTYPE_DEFINE(pr_solve, "PageRankSolve", 2003, SOLVE_FIELDS);
RK_MSGTYPE_DEFINE(pr_ranks, "PageRankRanks", 2004, RANKS_FIELDS);
RK_MSGTYPE_DEFINE(pr_done, "PageRankDone", 2005, DONE_FIELDS);
RK_MSGTYPE_DEFINE(pt_setup, "PartitionSetup", 2006, SETUP_FIELDS);
RK_MSGTYPE_DEFINE(pt_degrees, "PartitionDegrees", 2007, DEGREES_FIELDS);
RK_MSGTYPE_DEFINE(pt_shares, "PartitionShares", 2008, SHARES_FIELDS);
RK_MSGTYPE_DEFINE(pt_step, "PartitionStep", 2009, STEP_FIELDS);


int
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

void
edges_free(edge_list *e)
{
    free(e->src);
    free(e->dst);
    memset(e, 0, sizeof(*e));
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

/* Sends the edges of e whose destination is in [lo, hi), in batches,
 * all in one rk_send_batch() call with one wake-up: the queue's
 * backpressure paces the host while the kernel catches up. */
static int
send_edges(
    rk_runtime *rt, rk_kernel k, const edge_list *e, uint32_t lo, uint32_t hi)
{
    size_t nb = (e->len + EDGE_BATCH - 1) / EDGE_BATCH, used = 0, sent = 0;
    pr_edges *batches = calloc(nb ? nb : 1, sizeof(*batches));
    int rc;

    if (batches == NULL)
        return RK_ENOMEM;
    for (size_t i = 0; i < e->len; i++) {
        if (e->dst[i] < lo || e->dst[i] >= hi)
            continue;
        pr_edges *b = &batches[used];
        b->src[b->count] = e->src[i];
        b->dst[b->count] = e->dst[i];
        if (++b->count == EDGE_BATCH)
            used++;
    }
    used += used < nb && batches[used].count > 0;
    rc = rk_send_batch(rt, k, pr_edges_msgtype.id, batches, sizeof(*batches),
        used, RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS, &sent);
    free(batches);
    return rc;
}

/* Reads PageRankRanks slices from k's output into rank[0..n) until the
 * PageRankDone, which goes to *done. */
static int
collect_ranks(
    rk_runtime *rt, rk_kernel k, uint32_t n, double *rank, pr_done *done)
{
    uint64_t got = 0;
    int rc;

    for (;;) {
        union {
            pr_ranks r;
            pr_done d;
        } u;
        rk_msg_header h;
        size_t len;
        if ((rc = rk_recv(rt, k, &h, &u, sizeof(u), &len, TIMEOUT_NS))
            != RK_OK)
            return rc;
        if (h.type_id == pr_done_msgtype.id) {
            rc = rk_msg_fixed_read(&pr_done_msgtype, &u, len, done);
            if (rc == RK_OK && done->status == RK_OK && got != done->nodes)
                rc = RK_EINTERNAL; /* ranks missing */
            return rc;
        }
        if (h.type_id != pr_ranks_msgtype.id
            || rk_msg_fixed_read(&pr_ranks_msgtype, &u, len, &u.r) != RK_OK
            || u.r.count > RANK_BATCH || u.r.offset > n
            || u.r.count > n - u.r.offset)
            return RK_EDECODE;
        memcpy(rank + u.r.offset, u.r.rank, u.r.count * sizeof(double));
        got += u.r.count;
    }
}

/* Sends the graph to the single actor, asks for a solve and collects the
 * streamed ranks into rank[0..n). */
static int
actor_pagerank(rk_runtime *rt, rk_kernel k, uint32_t n, const edge_list *e,
    double *rank, pr_done *done)
{
    pr_reset reset = { n };
    pr_solve solve = { DAMPING, TOLERANCE, MAX_ITER };
    int rc;

    rc = rk_send(rt, k, pr_reset_msgtype.id, &reset, sizeof(reset),
        RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    if (rc == RK_OK)
        rc = send_edges(rt, k, e, 0, UINT32_MAX);
    if (rc == RK_OK)
        rc = rk_send(rt, k, pr_solve_msgtype.id, &solve, sizeof(solve),
            RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    if (rc == RK_OK)
        rc = collect_ranks(rt, k, n, rank, done);
    return rc;
}

/* The partitioned solve: node ranges, in-edges and out-degrees to each
 * partition, then Solve to all; each streams back its own ranks. */
static int
partitioned_pagerank(rk_runtime *rt, const rk_kernel *parts, uint32_t n,
    const edge_list *e, double *rank, pr_done *done)
{
    pr_solve solve = { DAMPING, TOLERANCE, MAX_ITER };
    uint32_t *outdeg = calloc(n, sizeof(*outdeg));
    size_t nb = n / DEGREE_BATCH + 1, sent;
    pt_degrees *deg = calloc(nb, sizeof(*deg));
    int rc = RK_OK;

    if (outdeg == NULL || deg == NULL)
        rc = RK_ENOMEM;
    for (size_t i = 0; rc == RK_OK && i < e->len; i++)
        outdeg[e->src[i]]++;
    for (uint32_t q = 0; rc == RK_OK && q < PARTS; q++) {
        uint32_t lo = (uint32_t)((uint64_t)n * q / PARTS);
        uint32_t hi = (uint32_t)((uint64_t)n * (q + 1) / PARTS);
        pt_setup su = { q, PARTS, n, lo, hi };
        size_t used = 0;
        for (uint32_t off = lo; off < hi; off += DEGREE_BATCH, used++) {
            deg[used].offset = off - lo;
            deg[used].count
                = hi - off < DEGREE_BATCH ? hi - off : DEGREE_BATCH;
            memcpy(deg[used].deg, outdeg + off,
                deg[used].count * sizeof(uint32_t));
        }
        rc = rk_send(rt, parts[q], pt_setup_msgtype.id, &su, sizeof(su),
            RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
        if (rc == RK_OK)
            rc = send_edges(rt, parts[q], e, lo, hi);
        if (rc == RK_OK)
            rc = rk_send_batch(rt, parts[q], pt_degrees_msgtype.id, deg,
                sizeof(*deg), used, RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS,
                &sent);
    }
    free(outdeg);
    free(deg);
    /* Only now the solves: every partition already holds its set-up when
     * the first shares from a peer arrive. */
    for (uint32_t q = 0; rc == RK_OK && q < PARTS; q++)
        rc = rk_send(rt, parts[q], pr_solve_msgtype.id, &solve, sizeof(solve),
            RK_MSG_PRIORITY_DEFAULT, TIMEOUT_NS);
    memset(done, 0, sizeof(*done));
    for (uint32_t q = 0; rc == RK_OK && q < PARTS; q++) {
        pr_done d;
        if ((rc = collect_ranks(rt, parts[q], n, rank, &d)) != RK_OK)
            break;
        /* All partitions must have stopped at the same step. */
        if (q > 0 && d.iterations != done->iterations)
            rc = RK_EINTERNAL;
        done->status = done->status ? done->status : d.status;
        done->iterations = d.iterations;
        done->residual = d.residual;
        done->nodes += d.nodes;
        done->edges += d.edges;
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
check_graph(rk_runtime *rt, rk_kernel k, const rk_kernel *parts,
    const char *name, uint32_t n, const edge_list *e, const double *expect)
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
    if (parts != NULL)
        rc = partitioned_pagerank(rt, parts, n, e, got, &done);
    else
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

/* Starts a kernel and returns its handle. */
static int
start_kernel(rk_runtime *rt, const rk_kernel_def *def, rk_kernel *out)
{
    int rc = rk_runtime_register(rt, def);

    if (rc == RK_OK)
        rc = rk_kernel_launch(rt, def->id);
    if (rc == RK_OK)
        rc = rk_kernel_activate(rt, def->id);
    if (rc == RK_OK)
        rc = rk_kernel_lookup(rt, def->id, out);
    return rc;
}

/* One graph through both solvers. */
static int
check_both(rk_runtime *rt, rk_kernel k, const rk_kernel *parts,
    const char *name, uint32_t n, const edge_list *e, const double *expect)
{
    char label[32];
    int fails = check_graph(rt, k, NULL, name, n, e, expect);

    snprintf(label, sizeof(label), "%s/%d", name, PARTS);
    return fails + check_graph(rt, k, parts, label, n, e, expect);
}

int
main(void)
{
    static const char *const part_ids[PARTS]
        = { "part0", "part1", "part2", "part3" };
    rk_kernel_def def = { .id = "pagerank", .actor = pagerank_actor };
    rk_runtime_config rcfg = { .no_static_kernels = true };
    rk_runtime *rt = NULL;
    edge_list e = { 0 };
    rk_kernel k, parts[PARTS];
    int rc, fails = 0;

    def.config.max_payload = MAX_PAYLOAD;
    def.config.input_capacity = 256;
    if ((rc = rk_runtime_create(&rt, &rcfg)) == RK_OK)
        rc = start_kernel(rt, &def, &k);
    for (int q = 0; q < PARTS && rc == RK_OK; q++) {
        rk_kernel_def pd = { .id = part_ids[q], .actor = partition_actor };
        pd.config.max_payload = MAX_PAYLOAD;
        pd.config.input_capacity = 1024;
        rc = start_kernel(rt, &pd, &parts[q]);
    }
    if (rc != RK_OK) {
        fprintf(stderr, "pagerank: start: %s (%s)\n", rk_strerror(rc),
            rk_errdetail());
        rk_runtime_destroy(rt);
        return 2;
    }
    printf("pagerank: damping %.2f, tolerance %.0e (L1), check %.0e "
           "relative; one actor, then %d partition actors (name/%d)\n",
        DAMPING, TOLERANCE, REL_TOL, PARTS, PARTS);

    /* A 4-cycle: by symmetry every node has rank 1/4. */
    {
        static const double quarter[4] = { 0.25, 0.25, 0.25, 0.25 };
        for (uint32_t v = 0; v < 4 && rc == RK_OK; v++)
            rc = edges_push(&e, v, (v + 1) % 4);
        fails += rc != RK_OK
            || check_both(rt, k, parts, "cycle4", 4, &e, quarter);
        edges_free(&e);
    }
    /* 0 -> 1 with node 1 dangling. Solving r0 = (1-d)/2 + d r1/2 and
     * r0 + r1 = 1 gives r0 = 0.5 / 1.425 = 20/57 and r1 = 37/57. */
    {
        static const double pair[2] = { 20.0 / 57.0, 37.0 / 57.0 };
        fails += edges_push(&e, 0, 1) != RK_OK
            || check_both(rt, k, parts, "dangling2", 2, &e, pair);
        edges_free(&e);
    }
    /* A generated graph. */
    fails += generate_graph(10000, UINT64_C(0x5EED5EED), &e) != RK_OK
        || check_both(rt, k, parts, "random10k", 10000, &e, NULL);
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
    for (int q = 0; q < PARTS; q++) {
        rk_kernel_stats ks;
        if (rk_kernel_stats_get(rt, part_ids[q], &ks) == RK_OK)
            printf("%s: processed %" PRIu64 " sent %" PRIu64
                   " (K2K and to the host), queue high water %" PRIu64
                   ", latency p50 %" PRIu64 " ns\n",
                part_ids[q], ks.processed, ks.sent, ks.queue_high_water,
                ks.latency_p50_ns);
    }
    if ((rc = rk_kernel_terminate(rt, "pagerank", TIMEOUT_NS)) != RK_OK) {
        printf("terminate: %s\n", rk_strerror(rc));
        fails++;
    }
    for (int q = 0; q < PARTS; q++)
        fails += rk_kernel_terminate(rt, part_ids[q], TIMEOUT_NS) != RK_OK;
    rk_runtime_destroy(rt);
    printf(
        "pagerank: %s (%d failed checks)\n", fails ? "FAILED" : "OK", fails);
    return fails ? 1 : 0;
}
