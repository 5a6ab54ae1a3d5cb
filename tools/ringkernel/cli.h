/*
 * tools/ringkernel/cli.h - what the `ringkernel` command's files share.
 *
 * The command uses only the public API (include/ringkernel/). Each
 * subcommand is one function taking its own argv (argv[0] is the
 * subcommand's name) and returning the process exit status below.
 */
#ifndef RK_CLI_H
#define RK_CLI_H

#include <getopt.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ringkernel/ringkernel.h"

/* Exit statuses, the same for every subcommand (docs/cli.md). */
enum {
    CLI_OK = 0,         /* did what was asked; every check held */
    CLI_FAILED = 1,     /* ran, but a run or a check failed */
    CLI_USAGE = 2,      /* bad command line */
    CLI_UNAVAILABLE = 3 /* asked for something this machine or build lacks
                           (a backend, the metrics endpoint) */
};

int cli_info(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_top(int argc, char **argv);
int cli_pagerank(int argc, char **argv);

/* ------------------------------------------------------------ backends */

/*
 * Resolves a --backend argument ("cpu", "cuda", "auto") to the backend the
 * run will use. On success *chosen is "cpu" (the command's kernels are host
 * C actors) and the result is CLI_OK; a name the runtime does not know
 * gives CLI_USAGE and an unusable one (rk_backend_probe's reason) or one
 * these kernels cannot run on CLI_UNAVAILABLE, with a sentence in why.
 */
int cli_backend_pick(
    const char *name, const char **chosen, char *why, size_t whylen);

/* ------------------------------------------------------------ options */

/*
 * A subcommand's command line, parsed the same way everywhere: long
 * options only (getopt_long), plus -h and --help, which print the help to
 * stdout. The subcommand handles its own options in a loop:
 *
 *     cli_opts p = { "demo", opts, help, 0 };
 *     while ((c = cli_opt_next(&p, argc, argv, &rc)) != 0) {
 *         switch (c) { case 'd': ok = ...; break; ... }
 *         if (!ok)
 *             return cli_opt_bad(&p, NULL);
 *     }
 *     if (rc != CLI_GO_ON)
 *         return rc;
 *
 * after which argv[optind..] are its operands.
 */
#define CLI_GO_ON   (-1) /* not an exit status: the command line was good */
#define CLI_STR(x)  CLI_STR_(x) /* a macro's value as a string literal */
#define CLI_STR_(x) #x

typedef struct cli_opts {
    const char *sub;           /* the subcommand's name, for messages */
    const struct option *opts; /* getopt_long's table, "help" -> 'h' */
    void (*help)(FILE *f);     /* prints the subcommand's usage */
    int operands;              /* 0: none taken, else any number */
    int last;                  /* the option cli_opt_next returned last */
} cli_opts;

/* The next option's character for the caller to handle (optarg holds its
 * value), or 0 when none is left: then *rc is CLI_GO_ON, or the exit
 * status to return (CLI_OK after --help; CLI_USAGE, with the usage on
 * stderr, for an unknown option or an operand where none is taken). */
int cli_opt_next(cli_opts *p, int argc, char **argv, int *rc);

/* Reports the bad value of the option cli_opt_next returned last
 * ("ringkernel SUB: bad --NAME 'VALUE'", then " (wants WANTS)" when wants
 * is not NULL) and returns CLI_USAGE. */
int cli_opt_bad(const cli_opts *p, const char *wants);

/* ------------------------------------------------------------ helpers */

/* Parses a positive number with an optional k/M/G suffix (x1000). */
bool cli_parse_count(const char *s, uint64_t *out);
/* Parses seconds ("2", "0.5"); > 0. */
bool cli_parse_seconds(const char *s, double *out);

/* A tiny deterministic PRNG shared by the workloads. */
static inline uint64_t
cli_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform double in (0, 1]. */
static inline double
cli_uniform(uint64_t *s)
{
    return ((double)(cli_splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
}

/* Prints "ringkernel SUB: <what>: <rk_strerror> (<detail>)" to stderr. */
void cli_report_error(const char *sub, const char *what, int rc);

/* Prints the per-kernel telemetry table for ids (n of them). */
void cli_print_kernel_table(
    FILE *f, rk_runtime *rt, const char *const *ids, size_t n);

/* ---------------------------------------------------- anomaly pipeline */

/* Most sensors a stream may have: each keeps a 64-reading window (about
 * 540 bytes), so this bounds the detector's state near 54 MB. */
#define CLI_MAX_SENSORS 100000

/* One run of the streaming anomaly-detection pipeline (anomaly.c). */
typedef struct cli_anomaly_cfg {
    uint32_t sensors;  /* > 0 */
    uint64_t readings; /* stop after this many (0: until *stop) */
    atomic_int *stop;  /* set (any thread, or a signal handler) to end
                          the stream early; relaxed: it carries no data */
    uint64_t seed;
    double rate; /* readings per second (0: as fast as the pipeline takes
                    them); paced in bursts of CLI_PACE_BURST */
    const char *metrics_addr; /* serve metrics while running, or NULL */
    /* Called about every progress_ms while the stream runs (may be NULL). */
    void (*progress)(
        void *arg, uint64_t readings, uint64_t alerts, double elapsed_s);
    void *progress_arg;
    uint32_t progress_ms;
    bool table; /* print the per-kernel telemetry table at the end */
} cli_anomaly_cfg;

typedef struct cli_anomaly_result {
    uint64_t readings, injected, alerts, true_alerts;
    double elapsed_s;
    rk_latency_summary verdict; /* reading generated -> detector decided */
    rk_latency_summary alert;   /* reading generated -> alert at the sink */
    rk_histogram *verdict_hist; /* owned by the result; may be NULL */
    uint16_t metrics_port;
} cli_anomaly_result;

int cli_anomaly_run(const cli_anomaly_cfg *cfg, cli_anomaly_result *out);
void cli_anomaly_result_free(cli_anomaly_result *r);

/* The same stream processed in fixed windows on the calling thread. */
typedef struct cli_batch_result {
    uint64_t readings, alerts, true_alerts, injected;
    double elapsed_s;
    rk_latency_summary latency; /* reading generated -> its window done */
    rk_histogram *hist;
} cli_batch_result;

int cli_anomaly_batch(uint32_t sensors, uint64_t readings, uint64_t seed,
    uint32_t window, double rate, cli_batch_result *out);

/* Paced streams generate this many readings at a time, then sleep until
 * the next burst is due. */
#define CLI_PACE_BURST 32

/* ------------------------------------------------------------ pagerank */

/* Edges ahead that an iteration prefetches contrib for; in_src has this
 * many zeroed slots of padding past its m edges. */
#define CLI_PR_PREFETCH 16

typedef struct cli_graph {
    uint32_t n;       /* nodes */
    uint64_t m;       /* edges */
    uint64_t *in_off; /* n + 1 offsets into in_src (CSC by destination) */
    uint32_t *in_src;
    uint32_t *outdeg;
    uint64_t *orig; /* node i's id in the file (NULL: synthetic, id i) */
} cli_graph;

/* Reads a SNAP edge list (# comments, "src dst" per line); node ids are
 * compacted to 0..n-1 in order of first appearance. */
int cli_graph_load(const char *path, cli_graph *g, char *why, size_t wl);
/* A power-law graph with m edges on m / 10 nodes (at least 16), fixed
 * seed. */
int cli_graph_synthetic(uint64_t m, uint64_t seed, cli_graph *g);
void cli_graph_free(cli_graph *g);
/* malloc for big arrays: 2 MiB aligned and advised for huge pages from
 * 2 MiB up, zeroed if asked; the caller frees it with free(). */
void *cli_big_alloc(size_t bytes, bool zero);

typedef struct cli_pr_result {
    double *rank; /* n ranks, owned by the result */
    uint32_t iterations;
    double residual; /* L1 change of the last iteration */
    double iter_s;   /* total time in iterations */
    double setup_s;  /* kernels created and launched */
} cli_pr_result;

/* PageRank by `parts` ring kernels (1: one actor; > 1: partition actors
 * that report to a reducer kernel kernel-to-kernel). max_iter iterations or
 * until the L1 change is below tol (tol 0: exactly max_iter). */
int cli_pagerank_actors(const cli_graph *g, uint32_t parts, double damping,
    double tol, uint32_t max_iter, cli_pr_result *out);
/* The plain power iteration on the calling thread, same formula. */
void cli_pagerank_reference(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_result *out);
void cli_pr_result_free(cli_pr_result *r);
/* Range bounds lo[0..parts] with about (edges + nodes) / parts work each. */
void cli_pr_split(const cli_graph *g, uint32_t parts, uint32_t *lo);
/* rank = 1/n, contrib = rank/outdeg (0 if dangling); *dang = their D. */
void cli_pr_init_ranks(
    const cli_graph *g, double *rank, double *contrib, double *dang);

/* One per-iteration time over a run's iterations. */
typedef struct cli_pr_iter_times {
    double median_s, max_s;
    uint32_t max_at; /* the slowest iteration, from 0 */
} cli_pr_iter_times;

/* The cuda configuration (pr_cuda.c, device kernel pr_dev.h). */
typedef struct cli_pr_cuda_info {
    char device[128]; /* the CUDA device's name */
    bool simulated;   /* the test-only stand-in driver ran the device code
                         on CPU threads: never a GPU figure */
    uint32_t blocks;  /* actors (thread blocks) = node ranges */
    uint32_t threads; /* threads per block */
    uint32_t lanes;   /* merge-path work shares per range */
    /* Per iteration, from the blocks' own clocks (rk_dev_now_ns:
     * %globaltimer on a GPU, the host's clock under the stand-in): dev
     * from the first block's start to the last block's end, busy the
     * slowest block's own time; host: the host's round, first step sent
     * to last reply read (adds the relay). */
    cli_pr_iter_times dev, busy, host;
} cli_pr_cuda_info;

/* True when the cuda backend could run here (driver, device, NVRTC);
 * otherwise false with the probe's reason in why. */
bool cli_cuda_usable(char *why, size_t whylen);
/* Label of a cuda result: "cuda", or "cuda_sim" under the stand-in. */
const char *cli_pr_cuda_config(const cli_pr_cuda_info *info);
/* PageRank by the device kernel of pr_dev.h on the cuda backend: the
 * graph and ranks in device memory (rk_buffer), one actor per thread
 * block, the host adding the blocks' partial sums each iteration.
 * setup_s counts the upload and the kernel's compile and launch. On
 * failure the error's detail is in rk_errdetail(). */
int cli_pagerank_cuda(const cli_graph *g, double damping, double tol,
    uint32_t max_iter, cli_pr_cuda_info *info, cli_pr_result *out);

/* ------------------------------------------------------------------ top */

#define CLI_TOP_MAX_KERNELS 256

/* One kernel's row in `ringkernel top`, as read from /metrics. */
typedef struct cli_top_row {
    char id[RK_ID_MAX + 1];
    char state[32];
    double processed, dropped, depth, hwm, p50, p99, restarts;
} cli_top_row;

typedef struct cli_top_frame {
    cli_top_row k[CLI_TOP_MAX_KERNELS];
    size_t n;
    uint64_t taken_ns;
} cli_top_frame;

/* Reads the ringkernel_* series of a /metrics body (modified in place)
 * into f, one row per kernel label (at most CLI_TOP_MAX_KERNELS). */
void cli_prom_parse(char *body, cli_top_frame *f);

/* Parses a SNAP edge list from f (name is used in messages); see
 * cli_graph_load. */
int cli_graph_parse(
    FILE *f, const char *name, cli_graph *g, char *why, size_t wl);

#endif /* RK_CLI_H */
