/*
 * tools/ringkernel/bench.h - what the suites of `ringkernel bench` share:
 * the options and where results go (bench.c parses and opens them; the
 * anomaly suite lives in bench_anomaly.c).
 */
#ifndef RK_CLI_BENCH_H
#define RK_CLI_BENCH_H

#include "cli.h"

typedef struct bench_opts {
    uint64_t sizes[16];
    size_t nsizes;
    const char *graph_file;
    uint64_t iters, parts, readings, sensors, window;
    double rate, paced_s;
    const char *json_path, *plot_dir;
    bool quick;
    const char *backend;
    bool cuda;          /* the device versions run (cli_backend_pick) */
    char cuda_why[512]; /* when not: why (the probe's reason, or
                           "--backend cpu") */
} bench_opts;

typedef struct bench_sink {
    FILE *json;             /* JSON lines */
    FILE *out;              /* the table */
    FILE *pr_dat, *cdf_dat; /* plot data, or NULL */
    bool cuda_plotted;      /* pr_dat has real GPU rows (never cuda_sim) */
    unsigned cuda_runs;     /* cuda configurations that ran and answered */
    int failed;
} bench_sink;

/* The anomaly suite (bench_anomaly.c): an RK_* error stops the run;
 * results that disagree count in s->failed. */
int cli_bench_anomaly(bench_sink *s, const bench_opts *o);

#endif /* RK_CLI_BENCH_H */
