/*
 * tools/ringkernel/bench.c - `ringkernel bench [SUITE...]`: the seeds'
 * headline benchmarks reproduced on this runtime.
 *
 *   pagerank  synthetic power-law graphs over a sweep of edge counts (and
 *             any SNAP file given with --graph): one actor, partition
 *             actors with a reducer (K2K), the plain host loop, and the
 *             device kernel (pr_dev.h) when the cuda backend is usable;
 *             edges per second per iteration and counting the graph
 *             build, each checked against the host loop to 1e-12, and the
 *             CPU/GPU crossover when a real GPU ran (the stand-in
 *             driver's "cuda_sim" rows never count as GPU figures).
 *   anomaly   the streaming pipeline (anomaly.c): per-reading latency
 *             (generated -> verdict, generated -> alert) and throughput,
 *             against batch processing of the same stream in fixed
 *             windows; recall and precision on the injected anomalies;
 *             with cuda usable, the pipeline again with its detector on
 *             the device (transfer against compute, the same verdicts).
 *             In bench_anomaly.c.
 *
 * Output: a readable table on stdout, one JSON object per result line in
 * the --json file, and with --plot DIR PNG charts drawn by gnuplot.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/* ------------------------------------------------------------ pagerank */

/* The cuda row's per-iteration times (cu: NULL for the CPU rows): a
 * table line and the JSON fields, which close the row's object. */
static void
pr_row_cuda(bench_sink *s, const cli_graph *g, const cli_pr_cuda_info *cu)
{
    const cli_pr_iter_times *d = &cu->dev;
    double ratio = d->median_s > 0 ? d->max_s / d->median_s : 0;
    double eps = d->median_s > 0 ? (double)g->m / d->median_s : 0;

    fprintf(s->out,
        "  %s per iteration (device clock, %u lanes a block): median "
        "%.4g s, slowest %.4g s (iteration %u, %.2fx median), %.4g edges/s;"
        "\n  slowest block median %.4g s max %.4g s; host round median "
        "%.4g s max %.4g s\n",
        cli_cuda_label(cu->simulated), cu->lanes, d->median_s, d->max_s,
        d->max_at, ratio, eps, cu->busy.median_s, cu->busy.max_s,
        cu->host.median_s, cu->host.max_s);
    fprintf(s->json,
        ",\"lanes\":%u,\"iter_dev_median_s\":%.6g,\"iter_dev_max_s\":%.6g,"
        "\"iter_dev_max_at\":%u,\"iter_dev_max_over_median\":%.4f,"
        "\"edges_per_s_iter_dev\":%.6g,\"block_busy_median_s\":%.6g,"
        "\"block_busy_max_s\":%.6g,\"iter_host_median_s\":%.6g,"
        "\"iter_host_max_s\":%.6g}\n",
        cu->lanes, d->median_s, d->max_s, d->max_at, ratio, eps,
        cu->busy.median_s, cu->busy.max_s, cu->host.median_s, cu->host.max_s);
}

static void
pr_row(bench_sink *s, const char *graph, const cli_graph *g,
    const char *config, uint32_t parts, const cli_pr_result *r, double build_s,
    double maxdiff, bool ok, const cli_pr_cuda_info *cu)
{
    double it
        = r->iter_s > 0 ? (double)g->m * (double)r->iterations / r->iter_s : 0;
    double all = (double)g->m * (double)r->iterations
        / (r->iter_s + r->setup_s + build_s);

    fprintf(s->out,
        "%-12s %10" PRIu64 " %9u %-18s %5u %10.4f %10.4f %12.4g "
        "%12.4g %9.2g %s\n",
        graph, g->m, g->n, config, r->iterations, build_s, r->iter_s, it, all,
        maxdiff, ok ? "ok" : "MISMATCH");
    fprintf(s->json,
        "{\"bench\":\"pagerank\",\"graph\":\"%s\",\"edges\":%" PRIu64
        ",\"nodes\":%u,\"config\":\"%s\",\"parts\":%u,\"iterations\":%u,"
        "\"build_s\":%.6f,\"setup_s\":%.6f,\"iter_s\":%.6f,"
        "\"edges_per_s_iter\":%.6g,\"edges_per_s_with_build\":%.6g,"
        "\"max_abs_diff\":%.3g,\"ok\":%s",
        graph, g->m, g->n, config, parts, r->iterations, build_s, r->setup_s,
        r->iter_s, it, all, maxdiff, ok ? "true" : "false");
    if (cu != NULL)
        pr_row_cuda(s, g, cu);
    else
        fprintf(s->json, "}\n");
    /* The stand-in's rows are CPU threads: they stay out of the chart. */
    if (s->pr_dat && strcmp(config, "cuda_sim") != 0)
        fprintf(s->pr_dat, "%s %" PRIu64 " %.6g\n", config, g->m, it);
    s->failed += !ok;
}

/* What one graph's runs gave, for the CPU/GPU crossover. */
typedef struct pr_best {
    double cpu;  /* best per-iteration edges/s over the CPU configurations */
    double cuda; /* the cuda configuration's (0: not run) */
} pr_best;

static double
per_iter(const cli_graph *g, const cli_pr_result *r)
{
    return r->iter_s > 0 ? (double)g->m * (double)r->iterations / r->iter_s
                         : 0;
}

/* The cuda configuration on one graph, checked like the others. */
static int
pr_cuda(bench_sink *s, const char *name, const cli_graph *g, double build_s,
    uint32_t iters, const cli_pr_result *ref, cli_pr_cuda_info *info,
    pr_best *best)
{
    cli_pr_result act;
    double maxdiff = 0;
    int rc = cli_pagerank_cuda(g, 0.85, 0, iters, info, &act);

    if (rc != RK_OK) {
        cli_report_error("bench", "pagerank on cuda", rc);
        s->failed++;
        return RK_OK; /* the CPU sweep goes on */
    }
    for (uint32_t v = 0; v < g->n; v++)
        maxdiff = fmax(maxdiff, fabs(act.rank[v] - ref->rank[v]));
    pr_row(s, name, g, cli_cuda_label(info->simulated), info->blocks, &act,
        build_s, maxdiff,
        maxdiff <= 1e-12 && act.iterations == ref->iterations, info);
    best->cuda = per_iter(g, &act);
    s->cuda_plotted |= !info->simulated;
    s->cuda_runs++;
    cli_pr_result_free(&act);
    return RK_OK;
}

static int
pr_graph(bench_sink *s, const bench_opts *o, const char *name, cli_graph *g,
    double build_s, cli_pr_cuda_info *cuda, pr_best *best)
{
    cli_pr_result ref, act;
    uint32_t iters = (uint32_t)o->iters;
    const uint32_t parts_list[2] = { 1, (uint32_t)o->parts };

    best->cpu = best->cuda = 0;
    cli_pagerank_reference(g, 0.85, 0, iters, &ref);
    if (ref.rank == NULL)
        return RK_ENOMEM;
    pr_row(s, name, g, "cpu-host-loop", 0, &ref, build_s, 0, true, NULL);
    best->cpu = per_iter(g, &ref);
    for (int i = 0; i < 2; i++) {
        char config[32];
        double maxdiff = 0;
        int rc;
        if (i == 1 && parts_list[1] <= 1)
            break;
        rc = cli_pagerank_actors(g, parts_list[i], 0.85, 0, iters, &act);
        if (rc != RK_OK) {
            cli_pr_result_free(&ref);
            return rc;
        }
        for (uint32_t v = 0; v < g->n; v++)
            maxdiff = fmax(maxdiff, fabs(act.rank[v] - ref.rank[v]));
        if (i == 0)
            snprintf(config, sizeof(config), "cpu-1-actor");
        else
            snprintf(
                config, sizeof(config), "cpu-%u-actors-k2k", parts_list[i]);
        pr_row(s, name, g, config, parts_list[i], &act, build_s, maxdiff,
            maxdiff <= 1e-12 && act.iterations == ref.iterations, NULL);
        best->cpu = fmax(best->cpu, per_iter(g, &act));
        cli_pr_result_free(&act);
    }
    if (cuda != NULL)
        pr_cuda(s, name, g, build_s, iters, &ref, cuda, best);
    cli_pr_result_free(&ref);
    return RK_OK;
}

/* The CPU/GPU crossover over the synthetic sweep: the smallest size at
 * which the GPU's per-iteration edges/s beat the best CPU configuration's.
 * Only a real GPU's figures count: the stand-in's are CPU threads. */
static void
pr_crossover(bench_sink *s, const cli_pr_cuda_info *info, bool ran,
    uint64_t cross, const char *why)
{
    if (!ran) {
        fprintf(s->out, "cuda: not run (%s); no CPU/GPU crossover to report\n",
            why);
        fprintf(s->json,
            "{\"bench\":\"pagerank\",\"config\":\"cuda\",\"ran\":false}\n");
    } else if (s->cuda_runs == 0) {
        fprintf(s->out,
            "cuda: every run failed (the errors are above); no CPU/GPU "
            "crossover to report\n");
        fprintf(s->json,
            "{\"bench\":\"pagerank\",\"config\":\"cuda\",\"ran\":false,"
            "\"failed\":true}\n");
    } else if (info->simulated) {
        fprintf(s->out, "%s;\n  no CPU/GPU crossover is reported\n",
            CLI_CUDA_SIM_NOTE);
        fprintf(s->json,
            "{\"bench\":\"pagerank\",\"config\":\"cuda_sim\",\"ran\":"
            "true,\"simulated\":true,\"crossover_edges\":null}\n");
    } else if (cross != 0) {
        fprintf(s->out,
            "CPU/GPU crossover: %" PRIu64 " edges, the smallest size at "
            "which the GPU (%s, %u threads a block) beat the best CPU "
            "configuration per iteration\n",
            cross, info->device, info->threads);
        fprintf(s->json,
            "{\"bench\":\"pagerank\",\"config\":\"cuda\",\"ran\":true,"
            "\"gpu\":\"%s\",\"crossover_edges\":%" PRIu64 "}\n",
            info->device, cross);
    } else {
        fprintf(s->out,
            "CPU/GPU crossover: none in this sweep; the best CPU "
            "configuration was faster per iteration at every size\n");
        fprintf(s->json,
            "{\"bench\":\"pagerank\",\"config\":\"cuda\",\"ran\":true,"
            "\"gpu\":\"%s\",\"crossover_edges\":null}\n",
            info->device);
    }
}

static int
bench_pagerank(bench_sink *s, const bench_opts *o)
{
    cli_pr_cuda_info info = { .blocks = 0 };
    bool cuda = o->cuda;
    const char *why = o->cuda_why; /* why cuda does not run */
    uint64_t cross = 0;
    pr_best best;
    char file_why[512];
    int rc = RK_OK;

    fprintf(s->out,
        "\npagerank: %" PRIu64 " iterations, damping 0.85; edges/s per "
        "iteration, and counting graph build + kernel setup\n",
        o->iters);
    fprintf(s->out, "%-12s %10s %9s %-18s %5s %10s %10s %12s %12s %9s\n",
        "graph", "edges", "nodes", "config", "iters", "build s", "iter s",
        "edges/s", "w/ build", "max diff");
    for (size_t i = 0; i < o->nsizes && rc == RK_OK; i++) {
        cli_graph g;
        uint64_t t0 = rk_now_ns();
        if ((rc = cli_graph_synthetic(o->sizes[i], 42, &g)) != RK_OK)
            break;
        rc = pr_graph(s, o, "synthetic", &g, (double)(rk_now_ns() - t0) / 1e9,
            cuda ? &info : NULL, &best);
        if (best.cuda > best.cpu && (cross == 0 || g.m < cross))
            cross = g.m;
        cli_graph_free(&g);
    }
    if (rc == RK_OK && o->graph_file) {
        cli_graph g;
        uint64_t t0 = rk_now_ns();
        if (cli_graph_load(o->graph_file, &g, file_why, sizeof(file_why))
            != RK_OK) {
            fprintf(stderr, "ringkernel bench: %s\n", file_why);
            s->failed++;
        } else {
            const char *base = strrchr(o->graph_file, '/');
            rc = pr_graph(s, o, base ? base + 1 : o->graph_file, &g,
                (double)(rk_now_ns() - t0) / 1e9, cuda ? &info : NULL, &best);
            cli_graph_free(&g);
        }
    }
    pr_crossover(s, &info, cuda, cross, why);
    return rc;
}

/* --------------------------------------------------------------- plots */

static int
plot(const char *dir, bool have_pr, bool have_cdf, uint64_t parts, bool cuda)
{
    char configs[96];

    char path[4096], cmd[4200];
    FILE *gp;
    int rc;

    snprintf(path, sizeof(path), "%s/plots.gp", dir);
    if ((gp = fopen(path, "w")) == NULL) {
        perror(path);
        return CLI_FAILED;
    }
    fprintf(gp,
        "set terminal pngcairo size 900,560\nset grid\n"
        "set key left top\n");
    snprintf(configs, sizeof(configs), "cpu-host-loop cpu-1-actor");
    if (parts > 1)
        snprintf(configs + strlen(configs), sizeof(configs) - strlen(configs),
            " cpu-%" PRIu64 "-actors-k2k", parts);
    if (cuda)
        snprintf(configs + strlen(configs), sizeof(configs) - strlen(configs),
            " cuda");
    if (have_pr)
        fprintf(gp,
            "set output '%s/pagerank_edges_per_s.png'\n"
            "set title 'PageRank: edges/s per iteration'\n"
            "set logscale xy\nset xlabel 'edges'\nset ylabel 'edges/s'\n"
            /* One line per configuration: grep picks its rows (a NaN
             * filter would break the lines between points). */
            "plot for [c in '%s'] '< grep \"^'.c.' \" %s/pagerank.dat' "
            "using 2:3 with linespoints title c\n"
            "unset logscale\n",
            dir, configs, dir);
    if (have_cdf)
        fprintf(gp,
            "set output '%s/anomaly_latency_cdf.png'\n"
            "set title 'Anomaly detection: reading -> verdict latency CDF'\n"
            "set logscale x\nset xlabel 'latency (us)'\n"
            "set ylabel 'fraction of readings'\nset key right bottom\n"
            "plot '%s/latency_cdf.dat' index 0 with linespoints title "
            "'streaming (ring kernels), paced', '' index 1 with "
            "linespoints title 'batch (fixed windows), paced'\n",
            dir, dir);
    fclose(gp);
    snprintf(cmd, sizeof(cmd), "gnuplot '%s' 2>&1", path);
    rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr,
            "ringkernel bench: gnuplot failed (exit %d); install gnuplot-nox "
            "(tools/deps.sh does)\n",
            rc);
        return rc == 127 << 8 ? CLI_UNAVAILABLE : CLI_FAILED;
    }
    printf("plots: %s/*.png (data and script beside them)\n", dir);
    return CLI_OK;
}

static void
help(FILE *f)
{
    fprintf(f,
        "usage: ringkernel bench [OPTIONS] [pagerank] [anomaly]\n\n"
        "Runs the named suites (default: both), prints a table and writes\n"
        "one JSON object per result line.\n\n"
        "  --json FILE       JSON lines here (default bench-results.jsonl; "
        "- for stdout,\n"
        "                    which moves the table to stderr)\n"
        "  --plot DIR        also draw PNG charts with gnuplot into DIR\n"
        "  --quick           small sizes (smoke test)\n"
        "  --sizes LIST      PageRank edge counts, e.g. 1k,10k,1M (default\n"
        "                    1k,10k,100k,1M,10M)\n"
        "  --graph FILE      also a SNAP edge list\n"
        "  --iters N         PageRank iterations per run (default 20)\n"
        "  --parts N         partition actors (default 2)\n"
        "  --readings N      anomaly stream length (default 2M)\n"
        "  --sensors N       anomaly sensors (default 16)\n"
        "  --window N        batch window, readings (default 1000)\n"
        "  --rate R          paced round: readings/s offered (default 100k)\n"
        "  --paced-seconds S paced round length (default 2; quick 0.5)\n"
        "  --backend NAME    cpu, cuda or auto (default auto): with cuda "
        "usable (auto,\n                    cuda), PageRank also runs its "
        "device kernel and reports\n                    the CPU/GPU "
        "crossover, and the anomaly pipeline runs again\n                    "
        "with its detector on the device (transfer against\n"
        "                    compute, the same verdicts as the CPU run); "
        "cuda exits 3\n                    where it is not usable\n\n"
        "exit status: 0 ok, 1 a run failed or results disagreed with the\n"
        "reference, 2 bad command line, 3 backend or gnuplot unavailable.\n");
}

static bool
parse_sizes(const char *s, bench_opts *o)
{
    char buf[256], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", s);
    o->nsizes = 0;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == 16 || !cli_parse_count(t, &o->sizes[o->nsizes])
            || o->sizes[o->nsizes] > 2000000000)
            return false;
        o->nsizes++;
    }
    return o->nsizes > 0;
}

int
cli_bench(int argc, char **argv)
{
    static const struct option lo[] = { { "json", required_argument, 0, 'j' },
        { "plot", required_argument, 0, 'p' },
        { "quick", no_argument, 0, 'q' },
        { "sizes", required_argument, 0, 's' },
        { "graph", required_argument, 0, 'g' },
        { "iters", required_argument, 0, 'i' },
        { "parts", required_argument, 0, 'P' },
        { "readings", required_argument, 0, 'r' },
        { "sensors", required_argument, 0, 'S' },
        { "window", required_argument, 0, 'w' },
        { "rate", required_argument, 0, 'R' },
        { "paced-seconds", required_argument, 0, 'T' },
        { "backend", required_argument, 0, 'b' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    cli_opts p = { "bench", lo, help, 1, 0 };
    bench_opts o = { .sizes = { 1000, 10000, 100000, 1000000, 10000000 },
        .nsizes = 5,
        .iters = 20,
        .parts = 2,
        .readings = 2000000,
        .sensors = 16,
        .window = 1000,
        .rate = 100000,
        .paced_s = 2,
        .json_path = "bench-results.jsonl",
        .backend = "auto" };
    bool sizes_given = false, readings_given = false, paced_given = false,
         run_pr = false, run_an = false;
    bench_sink s = { .out = stdout };
    char why[512], path[4096];
    int c, rc = RK_OK, status, go;

    while ((c = cli_opt_next(&p, argc, argv, &go)) != 0) {
        bool ok = true;
        switch (c) {
        case 'j':
            o.json_path = optarg;
            break;
        case 'p':
            o.plot_dir = optarg;
            break;
        case 'q':
            o.quick = true;
            break;
        case 's':
            ok = parse_sizes(optarg, &o);
            sizes_given = true;
            break;
        case 'g':
            o.graph_file = optarg;
            break;
        case 'i':
            ok = cli_parse_count(optarg, &o.iters) && o.iters < 100000;
            break;
        case 'P':
            ok = cli_parse_count(optarg, &o.parts) && o.parts <= 64;
            break;
        case 'r':
            ok = cli_parse_count(optarg, &o.readings);
            readings_given = true;
            break;
        case 'S':
            ok = cli_parse_count(optarg, &o.sensors)
                && o.sensors <= CLI_MAX_SENSORS;
            break;
        case 'w':
            ok = cli_parse_count(optarg, &o.window) && o.window <= 10000000;
            break;
        case 'b':
            o.backend = optarg;
            break;
        case 'R': {
            uint64_t r;
            ok = cli_parse_count(optarg, &r) && r <= 1000000000;
            o.rate = (double)r;
            break;
        }
        case 'T':
            ok = cli_parse_seconds(optarg, &o.paced_s);
            paced_given = true;
            break;
        }
        if (!ok)
            return cli_opt_bad(&p, NULL);
    }
    if (go != CLI_GO_ON)
        return go;
    for (int i = optind; i < argc; i++) {
        if (strcmp(argv[i], "pagerank") == 0)
            run_pr = true;
        else if (strcmp(argv[i], "anomaly") == 0)
            run_an = true;
        else {
            fprintf(stderr,
                "ringkernel bench: unknown suite '%s' (pagerank, anomaly)\n",
                argv[i]);
            return CLI_USAGE;
        }
    }
    if (!run_pr && !run_an)
        run_pr = run_an = true;
    if (o.quick && !sizes_given)
        o.nsizes = 3;
    if (o.quick && !readings_given)
        o.readings = 100000;
    if (o.quick && !paced_given)
        o.paced_s = 0.5;
    /* Each suite says why cuda did not run (no fallback note here). */
    if ((status = cli_backend_pick(
             "bench", o.backend, NULL, &o.cuda, why, sizeof(why)))
        != CLI_OK)
        return status;
    snprintf(o.cuda_why, sizeof(o.cuda_why), "%s",
        o.cuda || why[0] != '\0' ? why : "--backend cpu");
    if (strcmp(o.json_path, "-") == 0) {
        s.json = stdout;
        s.out = stderr;
    } else if ((s.json = fopen(o.json_path, "w")) == NULL) {
        perror(o.json_path);
        return CLI_FAILED;
    }
    if (o.plot_dir) {
        mkdir(o.plot_dir, 0777);
        snprintf(path, sizeof(path), "%s/pagerank.dat", o.plot_dir);
        if (run_pr && (s.pr_dat = fopen(path, "w")) == NULL)
            perror(path);
        snprintf(path, sizeof(path), "%s/latency_cdf.dat", o.plot_dir);
        if (run_an && (s.cdf_dat = fopen(path, "w")) == NULL)
            perror(path);
    }
    fprintf(s.out, "ringkernel %s bench on the %s backend (%ld CPUs online)\n",
        rk_version(), o.cuda ? "cpu and cuda" : "cpu",
        sysconf(_SC_NPROCESSORS_ONLN));
    if (run_pr)
        rc = bench_pagerank(&s, &o);
    if (rc == RK_OK && run_an)
        rc = cli_bench_anomaly(&s, &o);
    if (s.pr_dat)
        fclose(s.pr_dat);
    if (s.cdf_dat)
        fclose(s.cdf_dat);
    if (s.json != stdout) {
        fclose(s.json);
        fprintf(s.out, "\nJSON lines: %s\n", o.json_path);
    }
    if (rc != RK_OK) {
        cli_report_error("bench", "run", rc);
        return CLI_FAILED;
    }
    status = s.failed ? CLI_FAILED : CLI_OK;
    if (o.plot_dir && (s.pr_dat || s.cdf_dat)) {
        int prc = plot(o.plot_dir, run_pr, run_an, o.parts, s.cuda_plotted);
        if (status == CLI_OK)
            status = prc;
    }
    return status;
}
