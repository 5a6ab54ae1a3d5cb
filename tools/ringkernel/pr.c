/*
 * tools/ringkernel/pr.c - PageRank by ring kernels, and the plain power
 * iteration it is checked against.
 *
 * Every iteration computes, for each node v,
 *
 *   next[v] = (1 - d) / n + d * (sum over u -> v of contrib[u] + D / n)
 *
 * where contrib[u] = rank[u] / outdeg[u] and D is the rank held by nodes
 * without out-edges. The graph (CSC, graph.c) and the rank arrays are
 * shared memory: the host allocates them, and the kernels read the graph
 * and write only their own node range.
 *
 *   parts == 1   one handler kernel "pr.0" runs every iteration of a
 *                "solve" message in a row and answers the host once.
 *   parts  > 1   partition kernels "pr.0".."pr.{P-1}" subscribe to the
 *                topic "pr.step"; each computes its node range (ranges
 *                hold about equal numbers of edges) and sends its partial
 *                L1 change and dangling rank kernel-to-kernel (rk_connect)
 *                to "pr.reduce", which adds the partials in partition order
 *                and either publishes the next step on "pr.step" itself or,
 *                once converged or at max_iter, answers the host. The host
 *                sends the first step and reads the answer: no iteration
 *                passes through it.
 *
 * A partition also writes contrib for its own range for the next
 * iteration (two buffers, by iteration parity), so one message round per
 * iteration suffices. The reducer publishes step i + 1 only after every
 * partition's partial of step i has arrived; that message passing (release
 * on send, acquire on receive, in the runtime's queues) orders every
 * kernel's writes of step i before every read in step i + 1, and the
 * answer orders them before the host reads the ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define TIMEOUT_NS (120 * INT64_C(1000000000))

typedef struct step_msg {
    uint32_t iter;
    uint32_t pad;
    double dangling; /* D of the ranks this step reads */
} step_msg;

typedef struct part_msg {
    uint32_t part, iter;
    double delta;    /* L1 change over the range */
    double dangling; /* rank of dangling nodes in the range, after */
} part_msg;

typedef struct shared {
    const cli_graph *g;
    double damping, tol;          /* tol 0: exactly max_iter iterations */
    uint32_t max_iter;            /* set before launch, read-only afterwards */
    double *rank[2], *contrib[2]; /* by iteration parity */
    uint32_t parts;
    uint32_t *lo; /* parts + 1 range bounds */
    /* reducer state: its thread only */
    part_msg *got;
    uint32_t ngot;
} shared;

typedef struct part_ctx {
    shared *s;
    uint32_t part;
} part_ctx;

/* One iteration over nodes [lo, hi): reads rank[cur], contrib[cur], writes
 * rank[nxt], contrib[nxt]. Returns the L1 change; *dangling the rank of
 * dangling nodes in the range after it.
 *
 * Every configuration (host loop, one actor, partitions) runs this same
 * function, and a node's sum adds its in-edges' contribs one at a time in
 * CSC order, so the ranks come out bit for bit the same however the nodes
 * are split. */
static double
iterate_range(const cli_graph *g, double d, double dangling,
    const double *restrict rank, const double *restrict contrib,
    double *restrict next, double *restrict next_contrib, uint32_t lo,
    uint32_t hi, double *dang_out)
{
    const uint64_t *restrict off = g->in_off;
    const uint32_t *restrict src = g->in_src;
    const uint32_t *restrict outdeg = g->outdeg;
    double base = (1.0 - d) / g->n + d * dangling / g->n, delta = 0, dang = 0;
    uint64_t e = off[lo];

    for (uint32_t v = lo; v < hi; v++) {
        double sum = 0;
        uint64_t end = off[v + 1];
        for (; e < end; e++) {
            /* The gathers from contrib are random over the whole array
             * (megabytes at 10M edges); fetching CLI_PR_PREFETCH edges
             * ahead hides most of their cache misses. It changes no
             * arithmetic. */
            __builtin_prefetch(&contrib[src[e + CLI_PR_PREFETCH]]);
            sum += contrib[src[e]];
        }
        double r = base + d * sum;
        delta += fabs(r - rank[v]);
        next[v] = r;
        if (outdeg[v]) {
            next_contrib[v] = r / outdeg[v];
        } else {
            next_contrib[v] = 0;
            dang += r;
        }
    }
    *dang_out = dang;
    return delta;
}

static int
part_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    part_ctx *pc = rk_ctx_user(ctx);
    shared *s = pc->s;
    step_msg st;
    part_msg out = { .part = pc->part };

    if (m->len != sizeof(st))
        return RK_EDECODE;
    memcpy(&st, m->data, sizeof(st));
    /* One partition: every iteration here, in a row. Several: one step. */
    for (uint32_t it = st.iter;; it++) {
        unsigned cur = it & 1, nxt = cur ^ 1;
        out.iter = it;
        out.delta = iterate_range(s->g, s->damping, st.dangling, s->rank[cur],
            s->contrib[cur], s->rank[nxt], s->contrib[nxt], s->lo[pc->part],
            s->lo[pc->part + 1], &out.dangling);
        st.dangling = out.dangling;
        if (s->parts > 1 || it + 1 >= s->max_iter
            || (s->tol > 0 && out.delta < s->tol))
            break;
    }
    return rk_ctx_send(ctx, 0, &out, sizeof(out));
}

static int
reduce_handler(rk_ctx *ctx, const rk_msg_view *m)
{
    shared *s = rk_ctx_user(ctx);
    part_msg p, sum = { 0 };

    if (m->len != sizeof(p))
        return RK_EDECODE;
    memcpy(&p, m->data, sizeof(p));
    if (p.part >= s->parts)
        return RK_EINVAL;
    s->got[p.part] = p;
    if (++s->ngot < s->parts)
        return RK_OK;
    /* In partition order, so a run is deterministic. */
    for (uint32_t i = 0; i < s->parts; i++) {
        sum.delta += s->got[i].delta;
        sum.dangling += s->got[i].dangling;
    }
    sum.iter = p.iter;
    s->ngot = 0;
    if (p.iter + 1 >= s->max_iter || (s->tol > 0 && sum.delta < s->tol))
        return rk_ctx_send(ctx, 0, &sum, sizeof(sum)); /* to the host */
    step_msg next = { .iter = p.iter + 1, .dangling = sum.dangling };
    return rk_ctx_publish(ctx, "pr.step", 0, &next, sizeof(next));
}

/* Range bounds with about (edges + nodes) / parts work each. */
void
cli_pr_split(const cli_graph *g, uint32_t parts, uint32_t *lo)
{
    uint64_t total = g->m + g->n;
    uint32_t v = 0;

    lo[0] = 0;
    for (uint32_t p = 1; p < parts; p++) {
        uint64_t want = total * p / parts;
        while (v < g->n && g->in_off[v] + v < want)
            v++;
        lo[p] = v;
    }
    lo[parts] = g->n;
}

void
cli_pr_init_ranks(
    const cli_graph *g, double *rank, double *contrib, double *dang)
{
    *dang = 0;
    for (uint32_t v = 0; v < g->n; v++) {
        rank[v] = 1.0 / g->n;
        contrib[v] = g->outdeg[v] ? rank[v] / g->outdeg[v] : 0;
        if (!g->outdeg[v])
            *dang += rank[v];
    }
}

static int
setup(rk_runtime *rt, shared *s, part_ctx *pcs)
{
    char id[RK_ID_MAX + 1];
    int rc = RK_OK;

    if (s->parts > 1) {
        rk_kernel_def red = { .id = "pr.reduce", .handler = reduce_handler };
        red.config.user = s;
        if ((rc = rk_runtime_register(rt, &red)) == RK_OK)
            rc = rk_kernel_launch(rt, "pr.reduce");
        if (rc == RK_OK)
            rc = rk_kernel_activate(rt, "pr.reduce");
    }
    for (uint32_t p = 0; p < s->parts && rc == RK_OK; p++) {
        rk_kernel_def def = { .id = id, .handler = part_handler };
        snprintf(id, sizeof(id), "pr.%u", p);
        pcs[p] = (part_ctx) { s, p };
        def.config.user = &pcs[p];
        def.config.input_capacity = 16;
        if ((rc = rk_runtime_register(rt, &def)) == RK_OK)
            rc = rk_kernel_launch(rt, id);
        if (rc == RK_OK && s->parts > 1
            && (rc = rk_connect(rt, id, "pr.reduce")) == RK_OK)
            rc = rk_subscribe(rt, id, "pr.step");
        if (rc == RK_OK)
            rc = rk_kernel_activate(rt, id);
    }
    return rc;
}

int
cli_pagerank_actors(const cli_graph *g, uint32_t parts, double damping,
    double tol, uint32_t max_iter, cli_pr_result *out)
{
    rk_runtime_config rcfg = { .no_static_kernels = true, .backend = "cpu" };
    rk_runtime *rt = NULL;
    shared s = { .g = g,
        .damping = damping,
        .tol = tol,
        .max_iter = max_iter,
        .parts = parts };
    part_ctx *pcs = calloc(parts, sizeof(*pcs));
    double dangling;
    rk_kernel answer;
    uint64_t t0;
    int rc = RK_ENOMEM;

    memset(out, 0, sizeof(*out));
    s.lo = calloc((size_t)parts + 1, sizeof(*s.lo));
    s.got = calloc(parts, sizeof(*s.got));
    for (int i = 0; i < 2; i++) {
        s.rank[i] = cli_big_alloc(g->n * sizeof(double), true);
        s.contrib[i] = cli_big_alloc(g->n * sizeof(double), true);
    }
    if (!pcs || !s.lo || !s.got || !s.rank[0] || !s.rank[1] || !s.contrib[0]
        || !s.contrib[1])
        goto out;
    cli_pr_split(g, parts, s.lo);
    cli_pr_init_ranks(g, s.rank[0], s.contrib[0], &dangling);

    t0 = rk_now_ns();
    if ((rc = rk_runtime_create(&rt, &rcfg)) != RK_OK
        || (rc = setup(rt, &s, pcs)) != RK_OK
        || (rc = rk_kernel_lookup(
                rt, parts > 1 ? "pr.reduce" : "pr.0", &answer))
            != RK_OK)
        goto out;
    out->setup_s = (double)(rk_now_ns() - t0) / 1e9;
    t0 = rk_now_ns();
    if (max_iter > 0) {
        step_msg st = { .iter = 0, .dangling = dangling };
        part_msg res;
        size_t len;
        if (parts > 1)
            rc = rk_publish(
                rt, "pr.step", 0, &st, sizeof(st), 128, TIMEOUT_NS, NULL);
        else
            rc = rk_send(rt, answer, 0, &st, sizeof(st), 128, TIMEOUT_NS);
        if (rc == RK_OK)
            rc = rk_recv(
                rt, answer, NULL, &res, sizeof(res), &len, TIMEOUT_NS);
        if (rc != RK_OK)
            goto out;
        out->iterations = res.iter + 1;
        out->residual = res.delta;
    }
    out->iter_s = (double)(rk_now_ns() - t0) / 1e9;
    /* The last step wrote rank[iterations & 1]. */
    out->rank = s.rank[out->iterations & 1];
    s.rank[out->iterations & 1] = NULL;
out:
    rk_runtime_destroy(rt);
    for (int i = 0; i < 2; i++) {
        free(s.rank[i]);
        free(s.contrib[i]);
    }
    free(s.lo);
    free(s.got);
    free(pcs);
    return rc;
}

void
cli_pagerank_reference(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_result *out)
{
    double *rank[2], *contrib[2], dangling;
    uint64_t t0;

    memset(out, 0, sizeof(*out));
    for (int i = 0; i < 2; i++) {
        rank[i] = cli_big_alloc(g->n * sizeof(double), true);
        contrib[i] = cli_big_alloc(g->n * sizeof(double), true);
    }
    if (!rank[0] || !rank[1] || !contrib[0] || !contrib[1])
        goto out;
    cli_pr_init_ranks(g, rank[0], contrib[0], &dangling);
    t0 = rk_now_ns();
    for (uint32_t it = 0; it < max_iter; it++) {
        unsigned cur = it & 1;
        out->residual = iterate_range(g, damping, dangling, rank[cur],
            contrib[cur], rank[cur ^ 1], contrib[cur ^ 1], 0, g->n, &dangling);
        out->iterations = it + 1;
        if (tol > 0 && out->residual < tol)
            break;
    }
    out->iter_s = (double)(rk_now_ns() - t0) / 1e9;
    out->rank = rank[out->iterations & 1];
    rank[out->iterations & 1] = NULL;
out:
    for (int i = 0; i < 2; i++) {
        free(rank[i]);
        free(contrib[i]);
    }
}

void
cli_pr_result_free(cli_pr_result *r)
{
    free(r->rank);
    r->rank = NULL;
}
