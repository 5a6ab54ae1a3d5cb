/*
 * The `ringkernel` command's PageRank device kernel (tools/ringkernel/
 * pr_dev.h), written once:
 *
 *   - NVRTC compiles the file's text exactly as the cuda backend does
 *     (after ringkernel/dev_kernel.h), and the PTX has the entry, the
 *     block reduction in shared memory, IEEE double division, and neither
 *     an atomic read-modify-write (atom./red.) nor a non-coherent load
 *     (ld.global.nc) of the arrays, which change between the iterations
 *     of one resident kernel;
 *   - the host-C build of the same file runs on CPU threads (one per
 *     block, real ring_proto.h lanes, tests/support/dev_host.h), the test
 *     acting as the host reducer, and its ranks equal an independent plain
 *     power iteration (push over the edge list) to 1e-12, on skewed,
 *     power-law and one-hub graphs with 1 to 512 merge-path lanes (one
 *     lane: bit for bit the in-order pull); each reply's clock stamps
 *     fall inside the test's own round;
 *   - the merge-path partition itself: every edge taken exactly once with
 *     its own row, every row finished once, shares within one item;
 *   - a malformed step faults the block with RK_EINVAL.
 *
 * The backend's real host code runs the same kernel through the stand-in
 * driver in the ctest entries cli_pagerank_cuda_sim* (tests/CMakeLists.txt).
 * Nothing here runs on a GPU; docs/cuda-robustness.md says what only a GPU can show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/devhost.h"
#include "backend/cuda/nvrtc.h"
#include "cuda_helpers.h"
#include "ringkernel/ringkernel.h"

/* The kernel, as host C. */
#include "../tools/ringkernel/pr_dev.h"

#include "dev_host.h"

_Static_assert(sizeof(cli_prd_step) == 96, "step layout");
_Static_assert(sizeof(cli_prd_part) == 48, "part layout");

/* ------------------------------------------------------------ the graph */

typedef struct graph {
    uint32_t n;
    uint64_t m;
    uint32_t *esrc, *edst; /* the edge list, in generation order */
    uint64_t *in_off;      /* CSC by destination, stable in edge order */
    uint32_t *in_src;
    uint32_t *outdeg;
} graph;

static uint64_t
lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* How graph_make draws an edge's destination. */
typedef enum graph_kind {
    GRAPH_SKEWED,    /* min of two uniform ids: a few light hubs */
    GRAPH_POWER_LAW, /* n u^3, as cli_graph_synthetic: node 0 holds about
                        n^(-1/3) of the in-edges, the next ones less */
    GRAPH_HUB,       /* as SKEWED, but 40 % of the edges go to node 1 */
} graph_kind;

static double
unit(uint64_t *s)
{
    return (double)(lcg(s) >> 7) / (double)(1ull << 24);
}

/* A graph of n nodes and m edges: sources uniform over the first 7/8 of
 * the nodes, so the last 1/8 have no out-edges (dangling); destinations
 * by kind, so many nodes have no in-edges. */
static void
graph_make(graph *g, uint32_t n, uint64_t m, uint64_t seed, graph_kind kind)
{
    uint64_t s = seed, *fill;

    g->n = n;
    g->m = m;
    g->esrc = calloc(m, sizeof(*g->esrc));
    g->edst = calloc(m, sizeof(*g->edst));
    g->in_off = calloc((size_t)n + 1, sizeof(*g->in_off));
    g->in_src = calloc(m ? m : 1, sizeof(*g->in_src));
    g->outdeg = calloc(n, sizeof(*g->outdeg));
    fill = calloc((size_t)n + 1, sizeof(*fill));
    assert_true(
        g->esrc && g->edst && g->in_off && g->in_src && g->outdeg && fill);
    for (uint64_t e = 0; e < m; e++) {
        uint64_t a = lcg(&s) % n, b = lcg(&s) % n;
        double u = unit(&s);
        g->esrc[e] = (uint32_t)(lcg(&s) % (n - n / 8));
        g->edst[e] = (uint32_t)(a < b ? a : b);
        if (kind == GRAPH_POWER_LAW)
            g->edst[e] = (uint32_t)((double)n * u * u * u);
        else if (kind == GRAPH_HUB && u < 0.4)
            g->edst[e] = 1;
        g->outdeg[g->esrc[e]]++;
        g->in_off[g->edst[e] + 1]++;
    }
    for (uint32_t v = 0; v < n; v++)
        g->in_off[v + 1] += g->in_off[v];
    memcpy(fill, g->in_off, ((size_t)n + 1) * sizeof(*fill));
    for (uint64_t e = 0; e < m; e++)
        g->in_src[fill[g->edst[e]]++] = g->esrc[e];
    free(fill);
}

static void
graph_free(graph *g)
{
    free(g->esrc);
    free(g->edst);
    free(g->in_off);
    free(g->in_src);
    free(g->outdeg);
}

static uint64_t
max_in_degree(const graph *g)
{
    uint64_t most = 0;
    for (uint32_t v = 0; v < g->n; v++)
        if (g->in_off[v + 1] - g->in_off[v] > most)
            most = g->in_off[v + 1] - g->in_off[v];
    return most;
}

/* The plain power iteration, pushing rank along the edge list: a
 * formulation independent of the kernel's pull over the CSC. */
static double *
reference(const graph *g, double d, uint32_t iters)
{
    double *rank = malloc(g->n * sizeof(double));
    double *acc = malloc(g->n * sizeof(double));
    assert_true(rank && acc);
    for (uint32_t v = 0; v < g->n; v++)
        rank[v] = 1.0 / g->n;
    for (uint32_t it = 0; it < iters; it++) {
        double dangling = 0;
        for (uint32_t v = 0; v < g->n; v++) {
            acc[v] = 0;
            if (g->outdeg[v] == 0)
                dangling += rank[v];
        }
        for (uint64_t e = 0; e < g->m; e++)
            acc[g->edst[e]] += rank[g->esrc[e]] / g->outdeg[g->esrc[e]];
        for (uint32_t v = 0; v < g->n; v++)
            rank[v] = (1.0 - d) / g->n + d * (acc[v] + dangling / g->n);
    }
    free(acc);
    return rank;
}

/* ------------------------------------------------------------ the host */

static void
send_step(inst *in, uint32_t b, const cli_prd_step *st, size_t len)
{
    send_bytes(in, b, CLI_PRD_STEP_TYPE, st, len);
}

/* Ranges [lo[p], lo[p+1]) of about equal node counts. */
static void
ranges(uint32_t n, uint32_t parts, uint32_t *lo)
{
    for (uint32_t p = 0; p <= parts; p++)
        lo[p] = (uint32_t)((uint64_t)n * p / parts);
}

/* The pull over the CSC in one thread, each node's in-edges added in CSC
 * order: what the kernel computes with one lane (bit for bit). */
static double *
pull_in_order(const graph *g, double d, uint32_t iters)
{
    double *rank = malloc(g->n * sizeof(double));
    double *next = malloc(g->n * sizeof(double));
    double *contrib = malloc(g->n * sizeof(double));
    assert_true(rank && next && contrib);
    for (uint32_t v = 0; v < g->n; v++)
        rank[v] = 1.0 / g->n;
    for (uint32_t it = 0; it < iters; it++) {
        double dangling = 0, base;
        for (uint32_t v = 0; v < g->n; v++) {
            contrib[v] = g->outdeg[v] ? rank[v] / g->outdeg[v] : 0;
            if (g->outdeg[v] == 0)
                dangling += rank[v];
        }
        base = (1.0 - d) / g->n + d * dangling / g->n;
        for (uint32_t v = 0; v < g->n; v++) {
            double sum = 0;
            for (uint64_t e = g->in_off[v]; e < g->in_off[v + 1]; e++)
                sum += contrib[g->in_src[e]];
            next[v] = base + d * sum;
        }
        memcpy(rank, next, g->n * sizeof(double));
    }
    free(next);
    free(contrib);
    return rank;
}

typedef struct pr_case {
    uint32_t blocks, parts; /* CPU threads; ranges per iteration */
    uint32_t n;
    uint64_t m;
    uint32_t iters;
    graph_kind kind;
    uint32_t lanes; /* merge-path shares per range */
} pr_case;

/* The kernel on `blocks` CPU threads, `parts` ranges per iteration (more
 * ranges than blocks: any block computes any range), the test adding the
 * replies in range order as the command's host does. The ranks must equal
 * the independent push iteration to 1e-12; with one lane they also equal
 * the in-order pull bit for bit. */
static void
run_pagerank(const pr_case *c)
{
    const double d = 0.85;
    uint32_t blocks = c->blocks, parts = c->parts, n = c->n, iters = c->iters;
    graph g;
    inst in;
    uint32_t lo[17];
    double *rank[2], *contrib[2], dangling = 0, *ref, maxdiff = 0;
    unsigned char buf[256];
    rk__dh_status st;

    assert_true(parts <= 16);
    graph_make(&g, n, c->m, 42 + n, c->kind);
    for (int i = 0; i < 2; i++) {
        rank[i] = calloc(n, sizeof(double));
        contrib[i] = calloc(n, sizeof(double));
        assert_true(rank[i] && contrib[i]);
    }
    for (uint32_t v = 0; v < n; v++) {
        rank[0][v] = 1.0 / n;
        contrib[0][v] = g.outdeg[v] ? rank[0][v] / g.outdeg[v] : 0;
        if (!g.outdeg[v])
            dangling += rank[0][v];
    }
    ranges(n, parts, lo);

    inst_make(&in, &rk_dev_host_kernel_cli_prd_kernel, blocks, 1, 0, 8, 4);
    inst_start(&in, blocks);
    assert_int_equal(
        rk__dh_wait_ack(&in.d, RK_DEV_ACK_HELD, deadline()), RK_OK);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    for (uint32_t it = 0; it < iters; it++) {
        unsigned cur = it & 1, nxt = cur ^ 1;
        cli_prd_part got[16];
        uint8_t seen[16] = { 0 };
        double dang = 0, delta = 0, want_delta = 0;
        uint64_t sent = rk_now_ns();
        for (uint32_t p = 0; p < parts; p++) {
            cli_prd_step s = { .in_off = (uintptr_t)g.in_off,
                .in_src = (uintptr_t)g.in_src,
                .outdeg = (uintptr_t)g.outdeg,
                .rank = (uintptr_t)rank[cur],
                .contrib = (uintptr_t)contrib[cur],
                .next_rank = (uintptr_t)rank[nxt],
                .next_contrib = (uintptr_t)contrib[nxt],
                .damping = d,
                .dangling = dangling,
                .n = n,
                .lo = lo[p],
                .hi = lo[p + 1],
                .part = p,
                .iter = it,
                .lanes = c->lanes };
            send_step(&in, p % blocks, &s, sizeof(s));
        }
        for (uint32_t p = 0; p < parts; p++) {
            cli_prd_part r;
            rk_msg_header h;
            assert_int_equal(
                recv_frame(&in, p % blocks, buf, sizeof(buf)), 64 + sizeof(r));
            memcpy(&h, buf, sizeof(h));
            memcpy(&r, buf + 64, sizeof(r));
            assert_int_equal(h.type_id, CLI_PRD_PART_TYPE);
            assert_int_equal(r.iter, it);
            assert_true(r.part < parts);
            assert_false(seen[r.part]);
            assert_int_equal(r.lo, lo[r.part]);
            assert_int_equal(r.hi, lo[r.part + 1]);
            /* The block's clock (the host's here): it took the step after
             * the test sent it, and finished no earlier than it began. */
            assert_true(r.t_start >= sent);
            assert_true(r.t_end >= r.t_start);
            assert_true(r.t_end <= rk_now_ns());
            seen[r.part] = 1;
            got[r.part] = r;
        }
        for (uint32_t p = 0; p < parts; p++) {
            delta += got[p].delta;
            dang += got[p].dangling;
        }
        /* The replies' sums describe what the kernel wrote. */
        for (uint32_t v = 0; v < n; v++) {
            want_delta += fabs(rank[nxt][v] - rank[cur][v]);
            assert_true(g.outdeg[v] || contrib[nxt][v] == 0);
        }
        assert_true(fabs(delta - want_delta) <= 1e-12);
        dangling = dang;
    }
    inst_stop(&in);
    rk__dh_status_get(&in.d, &st);
    assert_int_equal(st.exit_code, RK_OK);
    assert_int_equal(st.processed, (uint64_t)iters * parts);
    assert_int_equal(st.errors, 0);
    inst_join(&in);

    ref = reference(&g, d, iters);
    for (uint32_t v = 0; v < n; v++) {
        double dv = fabs(rank[iters & 1][v] - ref[v]);
        maxdiff = dv > maxdiff ? dv : maxdiff;
    }
    print_message("%u blocks, %u ranges, %u lanes, %u nodes, %llu edges "
                  "(in-degree up to %llu), %u iterations: max |difference| "
                  "%.3g\n",
        blocks, parts, c->lanes, n, (unsigned long long)c->m,
        (unsigned long long)max_in_degree(&g), iters, maxdiff);
    assert_true(maxdiff <= 1e-12);
    /* Not a trivial fixed point: the ranks moved away from 1/n. */
    assert_true(fabs(ref[0] - 1.0 / n) > 1e-6);
    free(ref);
    if (c->lanes == 1) {
        ref = pull_in_order(&g, d, iters);
        for (uint32_t v = 0; v < n; v++)
            assert_true(rank[iters & 1][v] == ref[v]);
        free(ref);
    }
    for (int i = 0; i < 2; i++) {
        free(rank[i]);
        free(contrib[i]);
    }
    graph_free(&g);
}

/* The runs, by name: one cmocka test each (the case is its state).
 * - one block, one range, one lane: bit for bit the in-order pull;
 * - hub: one node holds 40 % of the in-edges, so in its range it spans
 *   most of the lanes and the segmented scan carries its parts over many
 *   shares (256 and 37 lanes; 1 lane: the in-order pull bit for bit);
 * - power law: the sweep's shape (n u^3), heavy nodes next to each other,
 *   the command's 512 lanes and a 2-lane split of every heavy node. */
static const pr_case case_one_block = { 1, 1, 500, 5000, 30, GRAPH_SKEWED, 1 };
static const pr_case case_partitioned
    = { 3, 7, 20000, 200000, 25, GRAPH_SKEWED, 256 };
static const pr_case case_hub = { 2, 3, 20000, 200000, 25, GRAPH_HUB, 256 };
static const pr_case case_hub_odd = { 2, 5, 3000, 60000, 20, GRAPH_HUB, 37 };
static const pr_case case_hub_one_lane
    = { 1, 1, 3000, 60000, 20, GRAPH_HUB, 1 };
static const pr_case case_power_law
    = { 3, 7, 20000, 200000, 25, GRAPH_POWER_LAW, 512 };
static const pr_case case_power_law_two_lanes
    = { 2, 4, 5000, 80000, 20, GRAPH_POWER_LAW, 2 };

static void
test_host_loop(void **state)
{
    run_pagerank((const pr_case *)*state);
}

/* --------------------------------------------------------- merge path */

/* Checks the partition of [lo, hi) into `lanes` shares: shares of floor
 * or ceil(total / lanes) items; coordinates on the merge path; walking
 * each share as the kernel does (rows it finishes, then the part of the
 * row it leaves) takes every edge exactly once, each with its own row,
 * and finishes every row exactly once. */
static void
check_partition(const graph *g, uint32_t lo, uint32_t hi, uint32_t lanes)
{
    const uint64_t *off = g->in_off;
    uint64_t e0 = off[lo], ne = off[hi] - e0, nr = hi - lo, total = nr + ne;
    uint64_t small = total / lanes, prev_i = 0;
    uint32_t *taken = calloc(ne ? ne : 1, sizeof(*taken));
    uint32_t *finished = calloc(nr ? nr : 1, sizeof(*finished));
    assert_true(taken && finished);

    assert_int_equal(cli_prd_diag(total, lanes, 0), 0);
    assert_int_equal(cli_prd_diag(total, lanes, lanes), total);
    for (uint32_t l = 0; l < lanes; l++) {
        uint64_t k0 = cli_prd_diag(total, lanes, l);
        uint64_t k1 = cli_prd_diag(total, lanes, l + 1);
        uint32_t i0 = cli_prd_path(off, lo, hi, k0);
        uint32_t i1
            = l + 1 == lanes ? (uint32_t)nr : cli_prd_path(off, lo, hi, k1);
        uint64_t j = k0 - i0, j1 = k1 - i1;
        /* Balanced within one item. */
        assert_true(k1 - k0 == small || k1 - k0 == small + 1);
        /* On the path: i rows done means their edges are taken and no
         * edge of a later row is. */
        assert_true(i0 >= prev_i && i1 >= i0 && i1 <= nr);
        assert_true(off[lo + i0] - e0 <= j);
        assert_true(i0 == nr || j <= off[lo + i0 + 1] - e0);
        assert_true(off[lo + i1] - e0 <= j1 && j1 <= ne);
        prev_i = i1;
        /* The kernel's walk of the share. */
        for (uint32_t i = i0; i < i1; i++) {
            uint64_t end = off[lo + i + 1] - e0;
            for (; j < end; j++) {
                assert_true(j >= off[lo + i] - e0);
                taken[j]++;
            }
            finished[i]++;
        }
        for (; i1 < nr && j < j1; j++) {
            assert_true(j >= off[lo + i1] - e0 && j < off[lo + i1 + 1] - e0);
            taken[j]++;
        }
        assert_int_equal(j, j1);
    }
    for (uint64_t e = 0; e < ne; e++)
        assert_int_equal(taken[e], 1);
    for (uint64_t r = 0; r < nr; r++)
        assert_int_equal(finished[r], 1);
    free(taken);
    free(finished);
}

static void
test_merge_path_partition(void **state)
{
    static const uint32_t lanes[] = { 1, 2, 3, 7, 37, 256, 511, 512 };
    static const graph_kind kinds[]
        = { GRAPH_SKEWED, GRAPH_POWER_LAW, GRAPH_HUB };
    (void)state;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++) {
        graph g;
        graph_make(&g, 3000, 40000, 5 + k, kinds[k]);
        for (size_t i = 0; i < sizeof(lanes) / sizeof(*lanes); i++) {
            check_partition(&g, 0, g.n, lanes[i]);
            check_partition(&g, 0, 1, lanes[i]);       /* the top hub */
            check_partition(&g, 1, 2, lanes[i]);       /* the next */
            check_partition(&g, 2900, 3000, lanes[i]); /* no in-edges */
            check_partition(&g, 700, 700, lanes[i]);   /* empty range */
            check_partition(&g, 1, 1000, lanes[i]);
        }
        graph_free(&g);
    }
}

/* A step of the wrong length, a range outside [0, n] or more lanes than
 * the kernel holds faults the block with RK_EINVAL (supervision decides);
 * a restart goes on with the next step, which is handled. */
static void
test_bad_steps_fault(void **state)
{
    graph g;
    inst in;
    double rank[2][64], contrib[2][64];
    unsigned char buf[256];
    cli_prd_step s;
    (void)state;

    graph_make(&g, 64, 256, 7, GRAPH_SKEWED);
    memset(rank, 0, sizeof(rank));
    memset(contrib, 0, sizeof(contrib));
    s = (cli_prd_step) { .in_off = (uintptr_t)g.in_off,
        .in_src = (uintptr_t)g.in_src,
        .outdeg = (uintptr_t)g.outdeg,
        .rank = (uintptr_t)rank[0],
        .contrib = (uintptr_t)contrib[0],
        .next_rank = (uintptr_t)rank[1],
        .next_contrib = (uintptr_t)contrib[1],
        .damping = 0.85,
        .n = 64,
        .lo = 0,
        .hi = 65 }; /* past n */
    inst_make(&in, &rk_dev_host_kernel_cli_prd_kernel, 1, 1, 0, 8, 1);
    send_step(&in, 0, &s, sizeof(s));
    inst_start(&in, 1);
    rk__dh_post(&in.d, RK_DEV_CMD_RUN);
    assert_int_equal(inst_wait_fault(&in, 1), RK_EINVAL);
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, 1)); /* restart */

    send_step(&in, 0, &s, sizeof(s) - 8); /* short */
    assert_int_equal(inst_wait_fault(&in, 2), RK_EINVAL);
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, 2));

    s.hi = 64;
    s.lanes = CLI_PRD_MAX_LANES + 1;
    send_step(&in, 0, &s, sizeof(s));
    assert_int_equal(inst_wait_fault(&in, 3), RK_EINVAL);
    rk__dh_verdict(&in.d, RK_DEV_VERDICT(0, 3));

    s.lanes = 0; /* now valid: one lane per thread */
    send_step(&in, 0, &s, sizeof(s));
    assert_int_equal(
        recv_frame(&in, 0, buf, sizeof(buf)), 64 + sizeof(cli_prd_part));
    inst_stop(&in);
    inst_join(&in);
    graph_free(&g);
}

/* ------------------------------------------------------------ NVRTC */

static void
test_nvrtc_ptx(void **state)
{
    rk__nvrtc_image img;
    /* The sm_90 cubin names the entry, and the PTX: */
    const char *ptx = cuda_tree_ptx("tools/ringkernel/pr_dev.h", "cli_prd_kernel", &img);

    (void)state;
    /* The gather and the writes of the ranks: the addresses come in the
     * message as integers, so NVRTC emits generic (or global) accesses. */
    assert_true(cuda_count_op(ptx, "ld.f64") + cuda_count_op(ptx, "ld.global.f64") > 0);
    assert_true(cuda_count_op(ptx, "st.f64") + cuda_count_op(ptx, "st.global.f64") > 0);
    /* The block reduction: shared memory and barriers. */
    assert_true(cuda_count_op(ptx, "st.shared.f64") > 0);
    assert_true(
        cuda_count_op(ptx, "bar.sync") > 0 || cuda_count_op(ptx, "barrier.sync") > 0);
    /* next_contrib = r / outdeg: IEEE division, as on the host. */
    assert_true(cuda_count_op(ptx, "div.rn.f64") > 0);
    /* The lanes' protocol; and the ranks change between iterations of one
     * resident kernel: never read through the non-coherent path. */
    cuda_assert_lane_ptx(ptx);
    rk__nvrtc_image_free(&img);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define HOST_LOOP(c)                                                          \
    { "test_host_loop_" #c, test_host_loop, NULL, NULL, (void *)&case_##c }
        HOST_LOOP(one_block),
        HOST_LOOP(partitioned),
        HOST_LOOP(hub),
        HOST_LOOP(hub_odd),
        HOST_LOOP(hub_one_lane),
        HOST_LOOP(power_law),
        HOST_LOOP(power_law_two_lanes),
        cmocka_unit_test(test_merge_path_partition),
        cmocka_unit_test(test_bad_steps_fault),
        cmocka_unit_test(test_nvrtc_ptx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
