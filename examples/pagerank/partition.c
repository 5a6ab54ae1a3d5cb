/*
 * partition.c - the pagerank example's partition actors: the same solve
 * split over PARTS actors exchanging rank shares kernel to kernel.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagerank.h"

/* ------------------------------------------------- partitioned actors */

/*
 * The same computation split over PARTS actors "part0".."part3", each
 * owning the node range [lo, hi) and the in-edges of those nodes. They
 * talk to each other directly (rk_ctx_send_to, kernel to kernel), in
 * bulk-synchronous steps: in step k every partition broadcasts
 *
 *   PartitionShares  the share rank[u] / outdeg[u] of each of its nodes
 *                    (0 for dangling nodes), in slices, then
 *   PartitionStep    its part of the step-k residual and dangling rank.
 *
 * Messages from one sender arrive in order, so a partition has all of
 * step k once it holds a PartitionStep k from every other partition. It
 * then knows the global residual (summed in partition order, so every
 * partition takes the same decision to stop) and computes its ranks of
 * step k + 1 by pulling over its in-edges. A partition can be at most one
 * step ahead of another (step k + 1 needs everyone's step k), so two share
 * vectors, by step parity, are enough, and the queues never hold more than
 * two steps of messages: nobody blocks on a full queue, so the
 * all-to-all sends cannot deadlock (capacity is checked at set-up).
 */
typedef struct part {
    uint32_t id, parts, n, lo, hi;
    int error;
    edge_list in;     /* in-edges of [lo, hi) */
    uint32_t *deg;    /* out-degrees of [lo, hi) */
    double *rank;     /* ranks of [lo, hi) at step cur */
    double *share[2]; /* all n shares, by step parity */
    double resid[2][PARTS], dang[2][PARTS];
    uint32_t steps_in[2]; /* PartitionStep messages held, by parity */
    size_t *in_start;     /* CSR of in, by destination - lo */
    uint32_t *in_src;
    pr_solve solve;
    bool running;
    uint32_t cur;
    rk_kernel peer[PARTS];
} part;

static void
part_free(part *p)
{
    edges_free(&p->in);
    free(p->deg);
    free(p->rank);
    free(p->share[0]);
    free(p->share[1]);
    free(p->in_start);
    free(p->in_src);
    memset(p, 0, sizeof(*p));
}

static int
part_setup(rk_ctx *ctx, part *p, const rk_msg_view *m)
{
    pt_setup su;
    uint32_t per_step;
    int rc;

    part_free(p);
    if ((rc = rk_msg_fixed_read(&pt_setup_msgtype, m->data, m->len, &su))
        != RK_OK)
        return rc;
    if (su.parts != PARTS || su.part >= PARTS || su.lo > su.hi
        || su.hi > su.nodes || su.nodes == 0)
        return RK_EINVAL;
    /* Two steps of shares and step messages from every peer must fit in
     * our input queue (see above). */
    per_step = (su.nodes / PARTS + RANK_BATCH) / RANK_BATCH + 1;
    if (2 * (PARTS - 1) * per_step > 1024)
        return RK_ETOOBIG;
    p->id = su.part;
    p->parts = su.parts;
    p->n = su.nodes;
    p->lo = su.lo;
    p->hi = su.hi;
    p->deg = calloc((size_t)(su.hi - su.lo) + 1, sizeof(*p->deg));
    p->rank = calloc((size_t)(su.hi - su.lo) + 1, sizeof(*p->rank));
    p->share[0] = calloc(su.nodes, sizeof(double));
    p->share[1] = calloc(su.nodes, sizeof(double));
    if (!p->deg || !p->rank || !p->share[0] || !p->share[1])
        return RK_ENOMEM;
    for (uint32_t i = 0; i < PARTS; i++) {
        char id[16];
        snprintf(id, sizeof(id), "part%u", i);
        if ((rc = rk_kernel_lookup(rk_ctx_runtime(ctx), id, &p->peer[i]))
            != RK_OK)
            return rc;
    }
    return RK_OK;
}

static void
part_edges(part *p, const rk_msg_view *m)
{
    pr_edges b;
    int rc;

    if ((rc = rk_msg_fixed_read(&pr_edges_msgtype, m->data, m->len, &b))
            != RK_OK
        || b.count > EDGE_BATCH) {
        p->error = rc != RK_OK ? rc : RK_EINVAL;
        return;
    }
    for (uint32_t i = 0; i < b.count && p->error == RK_OK; i++)
        if (b.src[i] >= p->n || b.dst[i] < p->lo || b.dst[i] >= p->hi)
            p->error = RK_EINVAL;
        else
            p->error = edges_push(&p->in, b.src[i], b.dst[i]);
}

static void
part_degrees(part *p, const rk_msg_view *m)
{
    pt_degrees d;

    if (rk_msg_fixed_read(&pt_degrees_msgtype, m->data, m->len, &d) != RK_OK
        || d.count > DEGREE_BATCH || d.offset > p->hi - p->lo
        || d.count > p->hi - p->lo - d.offset) {
        p->error = RK_EINVAL;
        return;
    }
    memcpy(p->deg + d.offset, d.deg, d.count * sizeof(uint32_t));
}

/* Sets our shares of the current step and broadcasts them with our
 * residual part. */
static int
part_broadcast(rk_ctx *ctx, part *p, double residual)
{
    double *share = p->share[p->cur % 2], dangling = 0.0;
    pt_step st;
    int rc;

    for (uint32_t v = p->lo; v < p->hi; v++) {
        uint32_t d = p->deg[v - p->lo];
        share[v] = d ? p->rank[v - p->lo] / d : 0.0;
        dangling += d ? 0.0 : p->rank[v - p->lo];
    }
    p->resid[p->cur % 2][p->id] = residual;
    p->dang[p->cur % 2][p->id] = dangling;
    st = (pt_step) { p->cur, p->id, residual, dangling };
    for (uint32_t q = 0; q < PARTS; q++) {
        if (q == p->id)
            continue;
        for (uint32_t off = p->lo; off < p->hi; off += RANK_BATCH) {
            pt_shares sh = { .iter = p->cur, .offset = off };
            sh.count = p->hi - off < RANK_BATCH ? p->hi - off : RANK_BATCH;
            memcpy(sh.share, share + off, sh.count * sizeof(double));
            if ((rc = rk_ctx_send_to(
                     ctx, p->peer[q], pt_shares_msgtype.id, &sh, sizeof(sh)))
                != RK_OK)
                return rc;
        }
        if ((rc = rk_ctx_send_to(
                 ctx, p->peer[q], pt_step_msgtype.id, &st, sizeof(st)))
            != RK_OK)
            return rc;
    }
    return RK_OK;
}

/* Our ranks and a PageRankDone to the host (our output queue). */
static int
part_report(rk_ctx *ctx, part *p, double residual)
{
    pr_done done = { p->error, p->cur, p->hi - p->lo, p->in.len, residual };
    int rc;

    for (uint32_t off = p->lo; off < p->hi; off += RANK_BATCH) {
        pr_ranks r = { .offset = off };
        r.count = p->hi - off < RANK_BATCH ? p->hi - off : RANK_BATCH;
        memcpy(r.rank, p->rank + (off - p->lo), r.count * sizeof(double));
        if ((rc = rk_ctx_send(ctx, pr_ranks_msgtype.id, &r, sizeof(r)))
            != RK_OK)
            return rc;
    }
    return rk_ctx_send(ctx, pr_done_msgtype.id, &done, sizeof(done));
}

/* Runs as many steps as the messages held allow. */
static int
part_advance(rk_ctx *ctx, part *p)
{
    while (p->running && p->steps_in[p->cur % 2] == PARTS - 1) {
        uint32_t k = p->cur % 2, nown = p->hi - p->lo;
        double residual = 0.0, dangling = 0.0, delta = 0.0;
        for (uint32_t q = 0; q < PARTS; q++) {
            residual += p->resid[k][q];
            dangling += p->dang[k][q];
        }
        p->steps_in[k] = 0;
        if (p->cur > 0
            && (residual < p->solve.tolerance
                || p->cur >= p->solve.max_iter)) {
            p->running = false;
            return part_report(ctx, p, residual);
        }
        /* Step cur + 1 for our nodes, pulling over in-edges. */
        double base = (1.0 - p->solve.damping) / p->n
            + p->solve.damping * dangling / p->n;
        for (uint32_t v = 0; v < nown; v++) {
            double sum = 0.0;
            for (size_t j = p->in_start[v]; j < p->in_start[v + 1]; j++)
                sum += p->share[k][p->in_src[j]];
            double r = base + p->solve.damping * sum;
            delta += fabs(r - p->rank[v]);
            p->rank[v] = r;
        }
        p->cur++;
        int rc = part_broadcast(ctx, p, delta);
        if (rc != RK_OK)
            return rc;
    }
    return RK_OK;
}

static int
part_start(rk_ctx *ctx, part *p, const rk_msg_view *m)
{
    uint32_t nown = p->hi - p->lo;
    int rc;

    if ((rc = rk_msg_fixed_read(&pr_solve_msgtype, m->data, m->len, &p->solve))
        != RK_OK)
        return rc;
    if (p->share[0] == NULL) /* no (valid) set-up: report, take no part */
        return part_report(ctx, p, INFINITY);
    p->in_start = calloc((size_t)nown + 1, sizeof(*p->in_start));
    p->in_src = malloc((p->in.len ? p->in.len : 1) * sizeof(*p->in_src));
    if (p->in_start == NULL || p->in_src == NULL)
        return RK_ENOMEM;
    for (size_t i = 0; i < p->in.len; i++)
        p->in_start[p->in.dst[i] - p->lo + 1]++;
    for (uint32_t v = 0; v < nown; v++)
        p->in_start[v + 1] += p->in_start[v];
    for (size_t i = 0; i < p->in.len; i++)
        p->in_src[p->in_start[p->in.dst[i] - p->lo]++] = p->in.src[i];
    for (uint32_t v = nown; v > 0; v--)
        p->in_start[v] = p->in_start[v - 1];
    p->in_start[0] = 0;
    for (uint32_t v = 0; v < nown; v++)
        p->rank[v] = 1.0 / p->n;
    p->cur = 0;
    p->running = true;
    /* Step 0 has no residual yet; INFINITY keeps anyone from stopping. */
    if ((rc = part_broadcast(ctx, p, INFINITY)) != RK_OK)
        return rc;
    return part_advance(ctx, p);
}

int
partition_actor(rk_ctx *ctx)
{
    part p = { 0 };
    rk_msg_view m;
    int rc;

    while ((rc = rk_ctx_recv(ctx, &m, RK_WAIT_FOREVER)) == RK_OK) {
        uint32_t type = m.hdr->type_id;
        if (type == pt_setup_msgtype.id) {
            p.error = part_setup(ctx, &p, &m);
        } else if (type == pr_edges_msgtype.id) {
            part_edges(&p, &m);
        } else if (type == pt_degrees_msgtype.id) {
            part_degrees(&p, &m);
        } else if (type == pr_solve_msgtype.id) {
            rc = part_start(ctx, &p, &m);
        } else if (type == pt_shares_msgtype.id && p.share[0] != NULL) {
            /* Shares may come before our own Solve: peers can start
             * first. They are stored by step parity. */
            pt_shares sh;
            if (rk_msg_fixed_read(&pt_shares_msgtype, m.data, m.len, &sh)
                    == RK_OK
                && sh.count <= RANK_BATCH && sh.offset <= p.n
                && sh.count <= p.n - sh.offset)
                memcpy(p.share[sh.iter % 2] + sh.offset, sh.share,
                    sh.count * sizeof(double));
        } else if (type == pt_step_msgtype.id) {
            pt_step st;
            if (rk_msg_fixed_read(&pt_step_msgtype, m.data, m.len, &st)
                    == RK_OK
                && st.from < PARTS) {
                p.resid[st.iter % 2][st.from] = st.residual;
                p.dang[st.iter % 2][st.from] = st.dangling;
                p.steps_in[st.iter % 2]++;
                rc = part_advance(ctx, &p);
            }
        }
        if (rc != RK_OK)
            break;
    }
    part_free(&p);
    return rc == RK_ECLOSED ? RK_OK : rc;
}
