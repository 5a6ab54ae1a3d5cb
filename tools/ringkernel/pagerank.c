/*
 * tools/ringkernel/pagerank.c - `ringkernel pagerank FILE`: PageRank of a
 * SNAP edge list by ring kernels (pr.c), checked against the plain power
 * iteration, with the top ranks and edges per second.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void
help(FILE *f)
{
    fprintf(f,
        "usage: ringkernel pagerank [--parts N] [--damping D] [--tol T]\n"
        "                           [--max-iter N] [--top K] [--backend B] "
        "FILE\n\n"
        "Loads a SNAP edge list (# comments, then one \"src dst\" pair a "
        "line),\nruns PageRank on ring kernels (1 part: one actor; more: "
        "partition\nactors reporting to a reducer kernel-to-kernel), "
        "checks the ranks\nagainst a plain power iteration to 1e-12, and "
        "prints the top ranks\nand edges per second.\n\n"
        "  --parts N      partition actors (default 1)\n"
        "  --damping D    damping factor (default 0.85)\n"
        "  --tol T        stop when the L1 change is below T (default "
        "1e-10)\n"
        "  --max-iter N   at most N iterations (default 100)\n"
        "  --top K        ranks to print (default 10)\n"
        "  --backend B    cpu (default): the ring kernels above; cuda: the "
        "device\n                 kernel, one actor per thread block "
        "(docs/cuda.md); auto:\n                 cuda when usable, else "
        "cpu\n\n"
        "exit status: 0 ok, 1 the file could not be read or the check "
        "failed,\n2 bad command line, 3 --backend cuda is not usable "
        "here.\n");
}

typedef struct ranked {
    double r;
    uint32_t v;
} ranked;

static int
by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;

    if (x->r != y->r)
        return x->r < y->r ? 1 : -1;
    return (x->v > y->v) - (x->v < y->v);
}

int
cli_pagerank(int argc, char **argv)
{
    static const struct option opts[]
        = { { "parts", required_argument, 0, 'p' },
              { "damping", required_argument, 0, 'd' },
              { "tol", required_argument, 0, 't' },
              { "max-iter", required_argument, 0, 'i' },
              { "top", required_argument, 0, 'k' },
              { "backend", required_argument, 0, 'b' },
              { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    cli_opts p = { "pagerank", opts, help, 1, 0 };
    uint64_t parts = 1, max_iter = 100, top = 10;
    double damping = 0.85, tol = 1e-10, maxdiff = 0;
    const char *backend = "cpu";
    bool use_cuda = false;
    cli_pr_cuda_info info;
    cli_graph g;
    cli_pr_result act, ref;
    char why[512], *end;
    uint64_t t0;
    double load_s;
    int c, rc, go;

    while ((c = cli_opt_next(&p, argc, argv, &go)) != 0) {
        bool ok = true;
        switch (c) {
        case 'p':
            ok = cli_parse_count(optarg, &parts) && parts <= 64;
            break;
        case 'd':
            damping = strtod(optarg, &end);
            ok = *end == '\0' && damping > 0 && damping < 1;
            break;
        case 't':
            tol = strtod(optarg, &end);
            ok = *end == '\0' && tol >= 0;
            break;
        case 'i':
            ok = cli_parse_count(optarg, &max_iter) && max_iter < 1000000;
            break;
        case 'k':
            ok = cli_parse_count(optarg, &top);
            break;
        case 'b':
            backend = optarg;
            break;
        }
        if (!ok)
            return cli_opt_bad(&p, NULL);
    }
    if (go != CLI_GO_ON)
        return go;
    if (optind != argc - 1) {
        fprintf(stderr, "ringkernel pagerank: give exactly one FILE\n");
        help(stderr);
        return CLI_USAGE;
    }
    if ((rc = cli_backend_pick(
             "pagerank", backend, stdout, &use_cuda, why, sizeof(why)))
        != CLI_OK)
        return rc;
    t0 = rk_now_ns();
    if ((rc = cli_graph_load(argv[optind], &g, why, sizeof(why))) != RK_OK) {
        fprintf(stderr, "ringkernel pagerank: %s\n", why);
        return CLI_FAILED;
    }
    load_s = (double)(rk_now_ns() - t0) / 1e9;
    printf("graph: %u nodes, %" PRIu64 " edges, loaded in %.3f s\n", g.n, g.m,
        load_s);
    if (use_cuda)
        rc = cli_pagerank_cuda(
            &g, damping, tol, (uint32_t)max_iter, &info, &act);
    else
        rc = cli_pagerank_actors(
            &g, (uint32_t)parts, damping, tol, (uint32_t)max_iter, &act);
    if (rc != RK_OK) {
        cli_report_error("pagerank", use_cuda ? "cuda" : "actors", rc);
        cli_graph_free(&g);
        return CLI_FAILED;
    }
    cli_pagerank_reference(&g, damping, tol, (uint32_t)max_iter, &ref);
    if (ref.rank == NULL) {
        fprintf(stderr, "ringkernel pagerank: out of memory\n");
        cli_pr_result_free(&act);
        cli_graph_free(&g);
        return CLI_FAILED;
    }
    for (uint32_t v = 0; v < g.n; v++)
        maxdiff = fmax(maxdiff, fabs(act.rank[v] - ref.rank[v]));
    if (use_cuda)
        printf("%s on %s, %u blocks x %u threads (one actor per block, "
               "the host reduces): ",
            cli_cuda_label(info.simulated), info.device, info.blocks,
            info.threads);
    else
        printf("%" PRIu64 " actor%s: ", parts, parts > 1 ? "s + reducer" : "");
    printf("%u iterations (residual %.3g) in %.3f s: "
           "%.3g edges/s per iteration; %.3g edges/s counting the load\n",
        act.iterations, act.residual, act.iter_s,
        act.iter_s > 0 ? (double)g.m * act.iterations / act.iter_s : 0.0,
        (double)g.m * act.iterations / (act.iter_s + load_s + act.setup_s));
    if (use_cuda)
        printf("per iteration on the device clock (%u merge-path lanes a "
               "block): median %.3g s, slowest %.3g s (iteration %u)\n",
            info.lanes, info.dev.median_s, info.dev.max_s, info.dev.max_at);
    if (use_cuda && info.simulated)
        printf("%s\n", CLI_CUDA_SIM_NOTE);
    printf("reference power iteration: %u iterations, max |difference| "
           "%.3g\n",
        ref.iterations, maxdiff);

    ranked *rk = malloc(g.n * sizeof(*rk));
    if (rk) {
        for (uint32_t v = 0; v < g.n; v++)
            rk[v] = (ranked) { act.rank[v], v };
        qsort(rk, g.n, sizeof(*rk), by_rank);
        printf("%6s %14s %14s\n", "rank", "node", "score");
        for (uint64_t i = 0; i < top && i < g.n; i++)
            printf("%6" PRIu64 " %14" PRIu64 " %14.10f\n", i + 1,
                g.orig[rk[i].v], rk[i].r);
        free(rk);
    }
    rc = act.iterations == ref.iterations && maxdiff <= 1e-12 ? CLI_OK
                                                              : CLI_FAILED;
    if (rc != CLI_OK)
        fprintf(stderr,
            "ringkernel pagerank: the actors' ranks differ "
            "from the reference\n");
    cli_pr_result_free(&act);
    cli_pr_result_free(&ref);
    cli_graph_free(&g);
    return rc;
}
